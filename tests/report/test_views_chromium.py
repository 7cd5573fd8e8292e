"""The shared views in a real browser (Debian's headless Chromium, as test_report_chromium.py): the page's
own script computes the figures at each threshold, and they must be the Python views' (hence
`groundtrace bench`'s: test_views_bench.py) to the last bit; clicks on its cells filter the table.

A driver script appended to a copy of the page moves the sliders and clicks like a person, after the
page has loaded, and leaves what it read in ``data-result`` on <body> for --dump-dom."""

import json

import pytest
from typer.testing import CliRunner

from groundtrace.cli import app
from groundtrace.report import render_report
from groundtrace.report.views import breakdown, confusion_at
from tests.report.dom import parse
from tests.report.samples import XSS, rows
from tests.report.test_report_chromium import CHROMIUM, chromium, row_id, table_rows

pytestmark = pytest.mark.skipif(not CHROMIUM, reason="headless browser tests need Debian's chromium: apt-get install -y chromium")

FIGURES = ("threshold", "records", "errors", "scored", "flagged", "flagged_share", "labelled", "positives",
           "tp", "fp", "fn", "tn", "precision", "recall", "f1", "balanced_accuracy", "auc")
SHOWN = ("flagged", "scored", "flagged_share", "tp", "fp", "fn", "tn", "precision", "recall", "f1", "balanced_accuracy",
         "auc", "labelled", "positives")  # the outputs of a metric's card, by data-gt name

# helpers the drivers share: the card of a metric (found by comparing names, never by a selector built
# from one), typing a threshold, and reading a card's outputs by their exact values
HELPERS = """
function card(name) { return Array.prototype.filter.call(document.querySelectorAll('.gt-metric'), function (c) { return c.dataset.metric === name; })[0]; }
function type(name, value) { var input = card(name).querySelector('[data-gt="threshold"]'); input.value = value; input.dispatchEvent(new Event('input')); }
function slide(name, value) { var input = card(name).querySelector('[data-gt="range"]'); input.value = value; input.dispatchEvent(new Event('input')); }
function read(name, keys) { var out = {}; keys.forEach(function (k) { var e = card(name).querySelector('[data-gt="' + k + '"]'); out[k] = e ? e.dataset.value : null; }); return out; }
function visible() { return Array.prototype.filter.call(document.querySelectorAll('#records tbody tr'), function (tr) { return !tr.hidden; }).map(function (tr) { return Number(tr.dataset.index); }); }
"""


def js(value) -> str:
    """``value`` as a JavaScript literal inside a <script> element (where "</" would end it)."""
    return json.dumps(value).replace("</", "<\\/")


def drive(tmp_path, html: str, script: str, fragment: str = "", report: bool = True) -> tuple:
    """The page after ``script`` ran on its load event; (its DOM, what the script left in data-result)."""
    page = tmp_path / "driven.html"
    driver = f"<script>{HELPERS}\nwindow.addEventListener('load', function () {{ var out = {{}};\n{script}\n" \
             "document.body.dataset.result = JSON.stringify(out); });</script></body>"
    page.write_text(html.replace("</body>", driver), encoding="utf-8")
    doc = parse(chromium(tmp_path, "--dump-dom", page.as_uri() + fragment))
    assert doc.find("section", id="views").get("data-ready") == "1"  # the views' script ran to its end
    assert doc.find("html").get("data-ready") == ("1" if report else None)  # and the report's table's
    assert doc.find("body").get("data-pwned") is None
    return doc, json.loads(doc.find("body").get("data-result") or "{}")


def number(text: str):
    return None if text == "" else float(text)


def shown_as_python(figures: dict) -> dict:
    """A card's outputs (strings of JS numbers) as the Python views' values."""
    return {k: number(v) for k, v in figures.items()}


def python_shown(result: dict) -> dict:
    return {k: None if result[k] is None else float(result[k]) for k in SHOWN}


@pytest.fixture(scope="module")
def labelled_page(bench_file):
    return render_report(bench_file.rows, labelled={k: {"label": v} for k, v in bench_file.labels.items()})


def test_the_page_and_python_give_the_same_figures_at_every_threshold(bench_file, labelled_page, tmp_path):
    rows, labels = bench_file.rows, bench_file.labels
    values = sorted({row.score("lexical").value for row in rows})
    # every record's value (ties: lexical flags below, never at, the threshold), between two, and the ends
    thresholds = [0.0, 1.0, *values, *[(a + b) / 2 for a, b in zip(values, values[1:], strict=False)]]
    script = f"""
      out.rates = {js(thresholds)}.map(function (t) {{ return window.groundtraceViews.rates('lexical', t); }});
      out.cards = {js(thresholds[:6])}.map(function (t) {{ type('lexical', String(t)); return read('lexical', {js(list(SHOWN))}); }});
    """
    _, result = drive(tmp_path, labelled_page, script)
    assert len(result["rates"]) == len(thresholds) > 40
    for t, page in zip(thresholds, result["rates"], strict=True):
        python = confusion_at(rows, "lexical", t, labels)
        assert {k: page[k] for k in FIGURES} == {k: python[k] for k in FIGURES}, t
        assert page["cells"] == python["cells"], t
    for t, card in zip(thresholds[:6], result["cards"], strict=True):
        assert shown_as_python(card) == python_shown(confusion_at(rows, "lexical", t, labels)), t


def test_the_slider_moves_the_flagged_count_and_the_cells_as_bench_counts_them(bench_file, labelled_page, tmp_path):
    rows, labels = bench_file.rows, bench_file.labels
    steps = ["0.2", "0.37", "0.5", "0.83"]
    script = f"out.cards = {js(steps)}.map(function (t) {{ slide('lexical', t); return read('lexical', {js(list(SHOWN))}); }});"
    doc, result = drive(tmp_path, labelled_page, script)
    flagged = [int(card["flagged"]) for card in result["cards"]]
    assert flagged == sorted(flagged) and flagged[0] < flagged[-1]  # a higher-is-better metric flags more as it rises
    for step, card in zip(steps, result["cards"], strict=True):
        assert shown_as_python(card) == python_shown(confusion_at(rows, "lexical", float(step), labels)), step
    # the table follows the last threshold: its lexical cells and the rows' flags
    at = confusion_at(rows, "lexical", 0.83, labels)
    marked = [tr for tr in table_rows(doc) if "flag" in tr.find("td", data_metric="lexical").classes]
    assert len(marked) == at["flagged"] and all(tr.get("data-flagged") == "1" for tr in marked)


def test_clicking_a_cell_lists_its_records_and_a_second_click_lists_all(bench_file, labelled_page, tmp_path):
    rows, labels = bench_file.rows, bench_file.labels
    script = """
      type('lexical', '0.5');
      var fp = card('lexical').querySelector('[data-cell="fp"]');
      fp.click();
      out.fp = visible(); out.hash = decodeURIComponent(location.hash); out.shown = document.getElementById('shown').textContent;
      out.banner = document.querySelector('[data-gt="selection-title"]').textContent;
      card('lexical').querySelector('[data-cell="tn"]').click();
      out.tn = visible();
      document.querySelector('[data-gt="clear"]').click();
      out.cleared = visible().length;
      card('lexical').querySelector('[data-cell="fn"]').click(); card('lexical').querySelector('[data-cell="fn"]').click();
      out.twice = visible().length;
    """
    _, result = drive(tmp_path, labelled_page, script)
    cells = confusion_at(rows, "lexical", 0.5, labels)["cells"]
    assert cells["fp"] and result["fp"] == cells["fp"] and result["shown"] == str(len(cells["fp"]))
    assert result["tn"] == cells["tn"]
    assert result["banner"] == "lexical FP at 0.5"
    assert result["hash"] == "#t.lexical=0.5&cell=lexical.fp"
    assert result["cleared"] == result["twice"] == len(rows)


def test_a_linked_view_opens_with_its_threshold_cell_and_breakdown(tmp_path):
    labels = [1, 1, 0, 0]
    page = render_report(rows(), labelled={r.id: {"label": label} for r, label in zip(rows(), labels, strict=True)})
    # grounding is higher = hallucinated: at 0.7 zh-1's 0.7 is flagged (a tie), at 0.71 it is not
    for threshold, flagged in (("0.7", ["ru-1", "zh-1"]), ("0.71", ["ru-1"])):
        doc, _ = drive(tmp_path, page, "", f"#t.grounding={threshold}&cell=grounding.tp&by=language&by.metric=grounding")
        assert [row_id(tr) for tr in table_rows(doc) if "hidden" not in tr.attrs] == flagged
        assert doc.find("section", id="views").find("button", data_cell="tp").get("aria-pressed") == "true"
        groups = doc.find("tbody", data_gt="groups").find_all("tr")
        assert [tr.find("button").text for tr in groups] == ["en", "ru", "zh", "—"]
        assert [tr.find_all("td")[3].get("data-value") for tr in groups] == ["0", "1", str(len(flagged) - 1), "0"]


def test_the_breakdown_by_language_shows_bench_figures(bench_file, labelled_page, tmp_path):
    rows, labels = bench_file.rows, bench_file.labels
    result = CliRunner().invoke(app, ["bench", str(bench_file.path), "-m", "lexical", "--json"])
    assert result.exit_code == 0, result.output
    bench = json.loads(result.output[result.output.index("{"):])["lexical"]
    doc, _ = drive(tmp_path, labelled_page, "", "#by=language")
    table = doc.find("table", cls="gt-breakdown")
    head = [th.text for th in table.find("thead").find_all("th")]
    assert head[0] == "language"
    shown = {}
    for tr in table.find("tbody").find_all("tr"):
        cells = dict(zip(head[1:], (number(td.get("data-value")) for td in tr.find_all("td")), strict=True))
        shown[f"language:{tr.find('button').text}"] = {"n": cells["labelled"], "errors": cells["errors"], "positives": cells["unsupported"],
                                                      "precision": cells["precision"], "recall": cells["recall"], "f1": cells["F1"],
                                                      "balanced_accuracy": cells["balanced accuracy"], "auc": cells["AUC"]}
    assert shown == {name: {k: stats[k] for k in shown["language:en"]} for name, stats in bench["groups"].items()
                     if name.startswith("language:")}
    # and the Python breakdown, which the review app shows, has the same groups and flagged counts
    python = breakdown(rows, "language", labels)
    assert [(f"language:{g['value']}", float(g["metrics"]["lexical"]["flagged"])) for g in python] == \
        [(tr_name, number(tr.find_all("td")[3].get("data-value"))) for tr_name, tr in
         zip(shown, table.find("tbody").find_all("tr"), strict=True)]


def test_groups_and_metadata_keys_with_markup_are_text(tmp_path):
    records = rows()
    for row in records:
        row.record.session_id = XSS
        row.record.metadata[XSS] = XSS
        row.record.metadata["started"] = "2024-05-01T10:00:00Z"
    page = render_report(records)
    script = f"""
      var by = document.querySelector('[data-gt="by"]');
      out.keys = Array.prototype.map.call(by.options, function (o) {{ return o.value; }});
      by.value = {js('metadata.' + XSS)}; by.dispatchEvent(new Event('change'));
      out.groups = Array.prototype.map.call(document.querySelectorAll('[data-gt="groups"] th button'), function (b) {{ return b.textContent; }});
      document.querySelector('[data-gt="groups"] th button').click();
      out.listed = visible(); out.banner = document.querySelector('[data-gt="selection-title"]').textContent;
    """
    _, result = drive(tmp_path, page, script)
    assert result["keys"][:3] == ["language", "session", "day"] and f"metadata.{XSS}" in result["keys"]
    assert result["groups"] == [XSS]
    assert result["listed"] == [0, 1, 2, 3] and result["banner"] == f"metadata.{XSS} = {XSS}"


def test_a_trace_link_per_record(tmp_path):
    records = rows()
    for row, trace in zip(records, ["0af7651916cd43dd8448eb211c80319c", None, XSS, "1" * 32], strict=True):
        row.record.trace_id = trace
    page = render_report(records, trace_url="http://localhost:6006/redirects/traces/{trace_id}")
    doc, _ = drive(tmp_path, page, "")
    links = [(tr.find_all("a", cls="trace") or [None])[0] for tr in table_rows(doc)]
    assert [a.get("href") if a else None for a in links] == [
        "http://localhost:6006/redirects/traces/0af7651916cd43dd8448eb211c80319c", None,
        "http://localhost:6006/redirects/traces/%3Cscript%3Edocument.body.setAttribute%28%27data-pwned%27%2C%271%27%29%3C%2Fscript%3E%3Cimg"
        "%20src%3Dx%20onerror%3D%22document.body.setAttribute%28%27data-pwned%27%2C%272%27%29%22%3E",
        "http://localhost:6006/redirects/traces/" + "1" * 32]
    assert all(a.get("rel") == "noopener noreferrer" and a.get("target") == "_blank" for a in links if a)


def test_another_page_embeds_the_views_and_hears_what_they_select(tmp_path):
    """What the review app does: views_html in a page of its own, which lists what a click selects."""
    from groundtrace.report.views import views_html

    labels = {"ru-1": 1, "zh-1": 1, f"en-xss {XSS}": 0, "en-ok": 0}
    host = f"""<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>
      <main>{views_html(rows(), labels)}</main><ol id="picked"></ol>
      <script>
        document.addEventListener('groundtrace:select', function (event) {{
          document.getElementById('picked').dataset.rows = JSON.stringify(event.detail.rows);
        }});
        document.addEventListener('groundtrace:threshold', function (event) {{
          document.getElementById('picked').dataset.flagged = JSON.stringify(event.detail.flagged);
        }});
      </script></body></html>"""
    script = """
      type('lexical', '0.5');
      out.flagged = JSON.parse(document.getElementById('picked').dataset.flagged);
      card('lexical').querySelector('[data-cell="tn"]').click();
      out.rows = JSON.parse(document.getElementById('picked').dataset.rows);
    """
    _, result = drive(tmp_path, host, script, report=False)
    assert result["flagged"] == [True, True, False, False]  # lexical 0.2, 0.45 < 0.5; 0.8, 0.95 not
    assert result["rows"] == [2, 3]
