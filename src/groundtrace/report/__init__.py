"""The HTML report of scored records: ``groundtrace report scores.jsonl -o report.html``."""

from groundtrace.report.render import Written, render_report, write_report

__all__ = ["Written", "render_report", "write_report"]
