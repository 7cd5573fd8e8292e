"""The report in a real browser: Debian's headless Chromium runs the page's script, then the test
reads the DOM it left (--dump-dom) and looks at a screenshot."""

import os
import shutil
import struct
import subprocess

import pytest

from groundtrace.report import render_report
from tests.report.dom import parse
from tests.report.samples import XSS, rows

CHROMIUM = os.environ.get("GROUNDTRACE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(not CHROMIUM, reason="headless browser tests need Debian's chromium: apt-get install -y chromium")

# No background traffic (this machine's network is closed; nothing of the page is remote anyway),
# no sandbox (tests run as root), a fresh profile per run.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync",
         "--disable-background-networking", "--disable-component-update", "--disable-extensions", "--hide-scrollbars"]

ORDER_BY_GROUNDING_DESC = ["ru-1", "zh-1", "en-ok", f"en-xss {XSS}"]  # the failed metric last


def chromium(tmp_path, *args: str) -> str:
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    result = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
                            check=False, capture_output=True, text=True, timeout=90)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.fixture
def report(tmp_path):
    path = tmp_path / "report.html"
    path.write_text(render_report(rows()), encoding="utf-8")
    return path


def table_rows(doc):
    return doc.find("table", id="records").find("tbody").find_all("tr")


def row_id(tr):
    """The record id of a table row: its label shows the question, the id is kept in data-id."""
    return tr.find_all("td")[1].get("data-id")


def row_ids(doc):
    return [row_id(tr) for tr in table_rows(doc)]


def test_the_url_fragment_sorts_and_filters_the_table(report, tmp_path):
    doc = parse(chromium(tmp_path, "--dump-dom", report.as_uri() + "#sort=grounding&dir=desc&min.lexical=0.4"))
    assert doc.find("html").get("data-ready") == "1"  # the script ran to its end
    assert row_ids(doc) == ORDER_BY_GROUNDING_DESC
    # each row shows its question's first words; the id is on hover (title)
    shown = [(tr.find_all("td")[1].text, tr.find_all("td")[1].get("title")) for tr in table_rows(doc)]
    assert shown == [("Сколько стоит общежитие?", "ru-1"), ("退款需要多长时间？", "zh-1"),
                     ("How long do refunds take?", "en-ok"), ("What is the fee? " + XSS[:43] + "…", f"en-xss {XSS}")]
    hidden = [row_id(tr) for tr in table_rows(doc) if "hidden" in tr.attrs]
    assert hidden == ["ru-1"]  # lexical 0.2 < 0.4
    assert doc.find("b", id="shown").text == "3"
    assert doc.find("th", data_key="grounding").get("aria-sort") == "descending"
    assert doc.find("input", name="min.lexical").get("value") is None  # a property, not an attribute
    assert doc.find("body").get("data-pwned") is None


def test_clicks_and_typing_sort_filter_and_update_the_fragment(report, tmp_path):
    # drive the page's own event handlers from a script appended to a copy of the page
    driver = """<script>
      var th = document.querySelector('th[data-key="lexical"]');
      th.click(); th.click();
      var search = document.querySelector('#filters input[name="q"]');
      search.value = 'refunds'; search.dispatchEvent(new Event('input'));
      document.body.dataset.hash = decodeURIComponent(location.hash);
    </script></body>"""
    driven = tmp_path / "driven.html"
    driven.write_text(report.read_text(encoding="utf-8").replace("</body>", driver), encoding="utf-8")
    doc = parse(chromium(tmp_path, "--dump-dom", driven.as_uri()))
    assert row_ids(doc) == ["en-ok", f"en-xss {XSS}", "zh-1", "ru-1"]  # lexical 0.95, 0.8, 0.45, 0.2
    visible = [row_id(tr) for tr in table_rows(doc) if "hidden" not in tr.attrs]
    assert visible == ["en-ok", f"en-xss {XSS}"]  # the answers that mention refunds
    assert doc.find("body").get("data-hash") == "#sort=lexical&dir=desc&q=refunds"
    assert doc.find("body").get("data-pwned") is None


def test_the_text_filter_finds_a_record_by_the_id_it_shows_only_on_hover(report, tmp_path):
    driver = """<script>
      var search = document.querySelector('#filters input[name="q"]');
      search.value = 'ZH-1'; search.dispatchEvent(new Event('input'));
    </script></body>"""
    driven = tmp_path / "driven.html"
    driven.write_text(report.read_text(encoding="utf-8").replace("</body>", driver), encoding="utf-8")
    doc = parse(chromium(tmp_path, "--dump-dom", driven.as_uri()))
    assert [row_id(tr) for tr in table_rows(doc) if "hidden" not in tr.attrs] == ["zh-1"]


def test_a_link_to_a_record_unfolds_it(tmp_path):
    many = rows() * 20  # more records than are shown unfolded
    path = tmp_path / "many.html"
    path.write_text(render_report(many), encoding="utf-8")
    doc = parse(chromium(tmp_path, "--dump-dom", path.as_uri() + "#r41"))
    unfolded = [d.get("id") for d in doc.find_all("details", cls="record") if "open" in d.attrs]
    assert unfolded == ["r41"]


def test_a_screenshot_of_the_page_is_written(report, tmp_path):
    shot = tmp_path / "report.png"
    chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,1600", report.as_uri())
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", data[16:24]) == (1280, 1600)  # IHDR width, height
    # a blank or unstyled page compresses to a few kilobytes; this one has text, marks and plots
    assert len(data) > 60_000


def test_a_session_in_the_fragment_shows_only_that_conversations_turns(tmp_path):
    records = rows()
    for row, session in zip(records, ["chat-1", "chat-1", "chat-2", None], strict=True):
        row.record.session_id = session
    path = tmp_path / "sessions.html"
    path.write_text(render_report(records), encoding="utf-8")
    doc = parse(chromium(tmp_path, "--dump-dom", path.as_uri() + "#session=chat-1"))
    assert doc.find("html").get("data-ready") == "1"
    shown = [tr.get("data-session") for tr in table_rows(doc) if "hidden" not in tr.attrs]
    assert shown == ["chat-1", "chat-1"]
    assert doc.find("b", id="shown").text == "2"
