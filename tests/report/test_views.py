"""The shared views' numbers on the hand-made records of samples.py, every expected value worked out
by hand: grounding (higher = hallucinated, threshold 0.5) is 0.9, 0.7, failed, 0.1 and lexical
(higher = grounded, threshold 0.4) is 0.2, 0.45, 0.8, 0.95 for ru-1, zh-1, en-xss, en-ok, labelled
1, 1, 0, 0."""

import pytest

from groundtrace.report.views import breakdown, compare, confusion_at, trace_link, views_data
from tests.report.samples import XSS, rows, score

LABELS = {"ru-1": 1, "zh-1": 1, f"en-xss {XSS}": 0, "en-ok": 0}


def figures(result, *keys):
    return {key: result[key] for key in keys}


def test_at_the_scores_own_threshold_the_figures_are_the_verdicts_they_carry():
    g = confusion_at(rows(), "grounding", labels=LABELS)
    assert figures(g, "threshold", "records", "errors", "scored", "flagged", "labelled", "positives") == \
        {"threshold": 0.5, "records": 4, "errors": 1, "scored": 3, "flagged": 2, "labelled": 3, "positives": 2}
    assert g["flagged_share"] == 2 / 3
    assert figures(g, "tp", "fp", "fn", "tn", "precision", "recall", "f1", "balanced_accuracy", "auc") == \
        {"tp": 2, "fp": 0, "fn": 0, "tn": 1, "precision": 1.0, "recall": 1.0, "f1": 1.0, "balanced_accuracy": 1.0, "auc": 1.0}
    assert g["cells"] == {"tp": [0, 1], "fp": [], "fn": [], "tn": [3]}  # the failed en-xss is in no cell

    lexical = confusion_at(rows(), "lexical", labels=LABELS)
    assert figures(lexical, "flagged", "scored", "tp", "fp", "fn", "tn") == {"flagged": 1, "scored": 4, "tp": 1, "fp": 0, "fn": 1, "tn": 2}
    assert (lexical["precision"], lexical["recall"], lexical["f1"], lexical["balanced_accuracy"]) == (1.0, 0.5, 2 / 3, 0.75)


@pytest.mark.parametrize(("metric", "threshold", "cells"), [
    # higher = hallucinated: a value equal to the threshold is flagged (zh-1's 0.7)
    ("grounding", 0.7, {"tp": [0, 1], "fp": [], "fn": [], "tn": [3]}),
    ("grounding", 0.71, {"tp": [0], "fp": [], "fn": [1], "tn": [3]}),
    ("grounding", 0.1, {"tp": [0, 1], "fp": [3], "fn": [], "tn": []}),
    # higher = grounded: flagged below the threshold only, so zh-1's 0.45 is not flagged at 0.45
    ("lexical", 0.45, {"tp": [0], "fp": [], "fn": [1], "tn": [2, 3]}),
    ("lexical", 0.46, {"tp": [0, 1], "fp": [], "fn": [], "tn": [2, 3]}),
    ("lexical", 0.85, {"tp": [0, 1], "fp": [2], "fn": [], "tn": [3]}),
])
def test_moving_the_threshold_moves_records_between_cells(metric, threshold, cells):
    result = confusion_at(rows(), metric, threshold, LABELS)
    assert result["cells"] == cells
    assert result["flagged"] == len(cells["tp"]) + len(cells["fp"])


def test_rates_at_a_threshold_where_one_negative_is_flagged():
    result = confusion_at(rows(), "lexical", 0.85, LABELS)
    assert result["precision"] == 2 / 3 and result["recall"] == 1.0
    assert result["f1"] == pytest.approx(0.8, abs=1e-15)  # 2 * 2/3 * 1 / (2/3 + 1)
    assert result["balanced_accuracy"] == 0.75  # (1 + 1/2) / 2


def test_labels_come_by_id_or_one_per_row_and_unlabelled_rows_only_count_as_flagged():
    by_row = confusion_at(rows(), "lexical", 0.85, [1, None, 0, None])
    assert figures(by_row, "flagged", "labelled", "tp", "fp", "fn", "tn") == \
        {"flagged": 3, "labelled": 2, "tp": 1, "fp": 1, "fn": 0, "tn": 0}
    assert (by_row["precision"], by_row["recall"], by_row["balanced_accuracy"], by_row["auc"]) == (0.5, 1.0, 0.5, 1.0)
    unlabelled = confusion_at(rows(), "lexical")
    assert unlabelled["labelled"] == 0 and unlabelled["precision"] is None and unlabelled["flagged_share"] == 1 / 4


def test_the_breakdown_by_language_has_one_group_per_language_and_the_rest_last():
    groups = breakdown(rows(), "language", LABELS)
    assert [(g["value"], g["records"], g["rows"]) for g in groups] == [("en", 1, [3]), ("ru", 1, [0]), ("zh", 1, [1]), (None, 1, [2])]
    lexical = {g["value"]: g["metrics"]["lexical"] for g in groups}
    assert figures(lexical["zh"], "flagged", "fn", "tp") == {"flagged": 0, "fn": 1, "tp": 0}
    assert lexical["zh"]["cells"]["fn"] == [1]  # row indices of the whole file, not of the group
    assert figures(breakdown(rows(), "language", LABELS, {"lexical": 0.46})[2]["metrics"]["lexical"], "tp", "fn") == {"tp": 1, "fn": 0}


def test_breakdowns_by_session_day_and_a_metadata_key():
    records = rows()
    for row, session, release, started in zip(records, ["chat-1", "chat-1", "chat-2", None], ["v1", "v2", "v2", True],
                                              ["2024-05-01T23:30:00+02:00", 1714608000, "2024-05-02T01:00:00+02:00", "soon"],
                                              strict=True):
        row.record.session_id = session
        row.record.metadata.update(release=release, started=started)
    sessions = breakdown(records, "session", LABELS)
    assert [(g["value"], g["rows"], g["metrics"]["grounding"]["flagged"]) for g in sessions] == \
        [("chat-1", [0, 1], 2), ("chat-2", [2], 0), (None, [3], 0)]
    # UTC days: 21:30 on May 1st, midnight of May 2nd (epoch seconds), 23:00 on May 1st; "soon" is no time
    days = breakdown(records, "day", LABELS)
    assert [(g["value"], g["rows"]) for g in days] == [("2024-05-01", [0, 2]), ("2024-05-02", [1]), (None, [3])]
    releases = breakdown(records, "metadata.release", LABELS)
    assert [(g["value"], g["rows"]) for g in releases] == [("true", [3]), ("v1", [0]), ("v2", [1, 2])]
    data = views_data(records, LABELS)
    assert data["group_keys"][:3] == ["language", "session", "day"]
    assert {"metadata.release", "metadata.started", "metadata.label"} <= set(data["group_keys"])
    assert "metadata.spans" not in data["group_keys"]  # a list is no group


def test_without_a_time_there_is_no_day_view():
    assert "day" not in views_data(rows())["group_keys"]
    with pytest.raises(ValueError, match="cannot break records down by 'colour'"):
        breakdown(rows(), "colour")


def test_the_views_data_blob_holds_what_the_page_computes_from():
    data = views_data(rows(), LABELS, trace_url="http://localhost:16686/trace/{trace_id}")
    assert data["metrics"] == [{"name": "grounding", "higher_is_better": False, "threshold": 0.5},
                               {"name": "lexical", "higher_is_better": True, "threshold": 0.4}]
    assert data["labelled"] == 4
    assert [r["scores"] for r in data["rows"]] == [{"grounding": 0.9, "lexical": 0.2}, {"grounding": 0.7, "lexical": 0.45},
                                                   {"grounding": None, "lexical": 0.8}, {"grounding": 0.1, "lexical": 0.95}]
    assert [r["label"] for r in data["rows"]] == [1, 1, 0, 0]
    assert [r["trace"] for r in data["rows"]] == [None] * 4  # no record has a trace id


def test_two_runs_compared_per_record_and_in_the_rates():
    a, b = rows(), rows()
    b[3].scores[0] = score("grounding", 0.6, details={})  # en-ok: 0.1 -> 0.6, now flagged
    b[1].scores[1] = score("lexical", 0.5, higher_is_better=True, threshold=0.4)  # zh-1: 0.45 -> 0.5, both grounded
    b[2].scores[0] = score("grounding", 0.3)  # en-xss: failed -> 0.3
    del b[0]  # ru-1 only in a
    result = compare(a, b, LABELS)
    assert result["counts"] == {"both": 3, "only_a": 1, "only_b": 0, "no_id": 0, "changed": 3, "newly flagged": 1,
                                "cleared": 0, "error changed": 1, "value changed": 1, "unchanged": 0}
    assert [(r["id"], r["change"], r["a"], r["b"]) for r in result["records"]] == \
        [("en-ok", "newly flagged", 3, 2), (f"en-xss {XSS}", "error changed", 2, 1), ("zh-1", "value changed", 1, 0)]
    en_ok = result["records"][0]["metrics"]["grounding"]
    assert en_ok == {"a": 0.1, "b": 0.6, "flagged_a": False, "flagged_b": True, "delta": 0.6 - 0.1, "change": "newly flagged"}
    grounding = next(m for m in result["metrics"] if m["name"] == "grounding")
    assert figures(grounding["a"], "flagged", "scored", "tp", "fp", "tn") == {"flagged": 2, "scored": 3, "tp": 2, "fp": 0, "tn": 1}
    # b: zh-1 0.7 and en-ok 0.6 flagged, en-xss 0.3 not: one hallucinated caught, one faithful flagged
    assert figures(grounding["b"], "flagged", "scored", "tp", "fp", "fn", "tn") == {"flagged": 2, "scored": 3, "tp": 1, "fp": 1, "fn": 0, "tn": 1}
    assert grounding["b"]["precision"] == 0.5


@pytest.mark.parametrize(("template", "link"), [
    ("http://localhost:6006/redirects/traces/{trace_id}", "http://localhost:6006/redirects/traces/0af7651916cd43dd8448eb211c80319c"),
    ("https://smith.langchain.com/o/ORG/projects/p/PROJECT/r/{run_id}?trace_id={run_id}",
     "https://smith.langchain.com/o/ORG/projects/p/PROJECT/r/1f0e-run?trace_id=1f0e-run"),
    ("http://localhost:5000/#/experiments/1/traces?selectedEvaluationId={links.mlflow}",
     "http://localhost:5000/#/experiments/1/traces?selectedEvaluationId=tr-abc"),
    # a value cannot leave its place: slashes, quotes, markup and fragments are encoded
    ("http://jaeger:16686/trace/{span_id}/{id}", "http://jaeger:16686/trace/b7ad6b7169203331/a%2F..%2F%22%3E%3Cscript%3E%23x%3Fy%26z"),
    ("http://grafana:3000/explore?panes={{\"a\":{{\"query\":\"{trace_id}\"}}}}",
     "http://grafana:3000/explore?panes={\"a\":{\"query\":\"0af7651916cd43dd8448eb211c80319c\"}}"),
])
def test_a_trace_link_fills_the_template_with_encoded_values(template, link):
    record = rows()[0].record.model_copy(update={"trace_id": "0af7651916cd43dd8448eb211c80319c", "span_id": "b7ad6b7169203331",
                                                 "run_id": "1f0e-run", "id": 'a/../"><script>#x?y&z',
                                                 "trace_links": {"mlflow": "tr-abc"}})
    assert trace_link(template, record) == link


def test_a_record_without_the_id_a_template_needs_gets_no_link():
    assert trace_link("http://localhost:16686/trace/{trace_id}", rows()[0]) is None
    assert trace_link("http://localhost:16686/trace/{session_id}", rows()[0]) is None
    assert trace_link(None, rows()[0]) is None


@pytest.mark.parametrize(("template", "why"), [
    ("javascript:alert(1)//{id}", "http:// or https://"),
    ("data:text/html,{id}", "http:// or https://"),
    ("//evil.example/{id}", "http:// or https://"),
    ("http://{id}.example.com/x", "the host must be written out"),
    ("https:///{trace_id}", "the host must be written out"),
    ("http://localhost/{traceid}", "unknown placeholder {traceid}"),
    ("http://localhost/{trace_id", "a lone brace"),
])
def test_unsafe_or_wrong_templates_are_refused(template, why):
    with pytest.raises(ValueError, match="trace URL template") as raised:
        trace_link(template, rows()[0])
    assert why in str(raised.value)


def test_metadata_keys_that_make_no_groups_are_not_offered():
    records = [rows()[i % 4].model_copy(deep=True) for i in range(1001)]
    for i, row in enumerate(records):
        row.record.metadata.update(request=f"req-{i}", prompt="p" * 201, release=f"v{i % 2}")
    keys = views_data(records)["group_keys"]
    assert "metadata.release" in keys and "metadata.label" in keys
    assert "metadata.request" not in keys  # 1001 distinct values: one group per record
    assert "metadata.prompt" not in keys  # longer than 200 characters


def test_a_breakdown_by_what_a_guard_did_with_each_answer():
    records = rows()
    for row, action in zip(records, ["redacted", "passed", "redacted", None], strict=True):
        if action is not None:
            row.record.metadata["guard"] = {"action": action, "hallucinated": action != "passed", "seconds": 0.02}
    groups = breakdown(records, "guard", LABELS)
    assert [(g["value"], g["rows"]) for g in groups] == [("passed", [1]), ("redacted", [0, 2]), (None, [3])]
    assert "guard" in views_data(records, LABELS)["group_keys"]
    assert "guard" not in views_data(rows(), LABELS)["group_keys"]  # no record a guard saw: no such view
