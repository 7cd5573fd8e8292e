"""`groundtrace report` with the shared views' options: labels from a review labels file, --compare,
--trace-url (and GROUNDTRACE_TRACE_URL), and grounding's flagged claims beside their passages."""

import json
from importlib import resources

import pytest
from typer.testing import CliRunner

from groundtrace.cli import app
from groundtrace.scoring.engine import Evaluator
from groundtrace.io import read_jsonl, read_scored, write_jsonl
from groundtrace.io.labels import append, decide
from tests.report.dom import parse
from tests.report.samples import XSS, rows, score

runner = CliRunner()


def write(path, records):
    with open(path, "w", encoding="utf-8") as handle:
        write_jsonl(records, handle)
    return path


def views_blob(page):
    return json.loads(parse(page.read_text(encoding="utf-8")).find("script", type="application/json").text)


def unlabelled():
    records = rows()
    for row in records:
        row.record.metadata.clear()  # samples keep gold labels in metadata; here the labels file alone says
    return records


def test_labels_from_a_review_file_join_by_id_and_the_last_decision_counts(tmp_path):
    scores = write(tmp_path / "scores.jsonl", unlabelled())
    review = tmp_path / "labels.jsonl"
    for record_id, label in [("ru-1", "supported"), ("zh-1", "unsupported"), ("ru-1", "unsupported"), ("en-ok", "skip"),
                             (f"en-xss {XSS}", "supported")]:
        append(review, decide(record_id, label))
    result = runner.invoke(app, ["report", str(scores), "-o", str(tmp_path / "r.html"), "--labels", str(review)])
    assert result.exit_code == 0, result.output
    assert "4 records, 3 with gold labels" in " ".join(result.output.split())
    # ru-1 was changed to unsupported; en-ok was skipped: it has no label
    assert [r["label"] for r in views_blob(tmp_path / "r.html")["rows"]] == [1, 1, 0, None]

    labelled = tmp_path / "labelled.jsonl"  # the same labels as a labelled file give the same page figures
    labelled.write_text("".join(json.dumps({"id": i, "label": v}) + "\n" for i, v in
                                [("ru-1", 1), ("zh-1", 1), (f"en-xss {XSS}", 0)]), encoding="utf-8")
    assert runner.invoke(app, ["report", str(scores), "-o", str(tmp_path / "l.html"), "--labels", str(labelled)]).exit_code == 0
    assert views_blob(tmp_path / "l.html") == views_blob(tmp_path / "r.html")


def test_a_review_file_with_lines_that_are_no_decision_is_read_without_them(tmp_path, caplog):
    scores = write(tmp_path / "scores.jsonl", unlabelled())
    broken = tmp_path / "labels.jsonl"
    broken.write_text(json.dumps({"id": "ru-1", "label": "unsupported"}) + "\n" + "not json\n" + "{}\n", encoding="utf-8")
    result = runner.invoke(app, ["report", str(scores), "-o", str(tmp_path / "r.html"), "--labels", str(broken)])
    assert result.exit_code == 0, result.output
    # line 2, a fragment, is skipped as a crash leaves them; line 3, JSON but no decision (a hand edit), too
    assert [r["label"] for r in views_blob(tmp_path / "r.html")["rows"]] == [1, None, None, None]
    assert "(line 2, 3)" in caplog.text


def test_trace_links_from_the_option_or_the_environment(tmp_path, monkeypatch):
    records = rows()
    records[0].record.trace_id = "0af7651916cd43dd8448eb211c80319c"
    scores = write(tmp_path / "scores.jsonl", records)
    page = tmp_path / "r.html"
    monkeypatch.setenv("GROUNDTRACE_TRACE_URL", "http://localhost:16686/trace/{trace_id}")
    assert runner.invoke(app, ["report", str(scores), "-o", str(page)]).exit_code == 0
    assert [r["trace"] for r in views_blob(page)["rows"]] == ["http://localhost:16686/trace/0af7651916cd43dd8448eb211c80319c", None, None, None]
    doc = parse(page.read_text(encoding="utf-8"))
    assert doc.find("details", id="r0").find("a", cls="trace").get("href") == "http://localhost:16686/trace/0af7651916cd43dd8448eb211c80319c"
    assert runner.invoke(app, ["report", str(scores), "-o", str(page), "--trace-url",
                               "https://cloud.langfuse.com/project/p1/traces/{trace_id}"]).exit_code == 0  # the option wins
    assert views_blob(page)["rows"][0]["trace"] == "https://cloud.langfuse.com/project/p1/traces/0af7651916cd43dd8448eb211c80319c"


@pytest.mark.parametrize("template", ["javascript:alert(1)//{id}", "http://{id}.example/", "http://x/{trace}"])
def test_an_unsafe_or_wrong_trace_url_is_refused_before_anything_is_written(tmp_path, template):
    scores = write(tmp_path / "scores.jsonl", rows())
    result = runner.invoke(app, ["report", str(scores), "-o", str(tmp_path / "r.html"), "--trace-url", template])
    assert result.exit_code == 2 and "trace URL template" in result.output
    assert not (tmp_path / "r.html").exists()


def test_compare_shows_what_changed_per_record_and_in_the_rates(tmp_path):
    before = write(tmp_path / "before.jsonl", rows())
    after_rows = rows()
    after_rows[3].scores[0] = score("grounding", 0.6)  # en-ok newly flagged
    after_rows[0].scores[0] = score("grounding", 0.2)  # ru-1 cleared
    after = write(tmp_path / "after.jsonl", after_rows)
    result = runner.invoke(app, ["report", str(after), "-o", str(tmp_path / "r.html"), "--compare", str(before)])
    assert result.exit_code == 0, result.output
    section = parse((tmp_path / "r.html").read_text(encoding="utf-8")).find("section", id="compare")
    assert section.find("h2").text == "Compared with before.jsonl"
    changed = section.find("table", cls="gt-compare-records").find("tbody").find_all("tr")
    assert [(tr.get("data-id"), tr.get("data-change")) for tr in changed] == [("ru-1", "cleared"), ("en-ok", "newly flagged")]
    assert changed[1].find("td", data_metric="grounding").text == "0.10 → 0.60"
    share = section.find("table", cls="gt-compare-rates").find("tr", data_metric="grounding").find("td", data_key="flagged_share")
    assert (share.get("data-a"), share.get("data-b"), share.text) == (str(2 / 3), str(2 / 3), "67% → 67%")  # one in, one out


def test_the_demo_shows_each_flagged_claim_beside_the_passages_it_was_checked_against(tmp_path):
    examples = resources.files("groundtrace") / "examples" / "answers.jsonl"
    scores = write(tmp_path / "scores.jsonl", Evaluator("grounding,facts").evaluate(read_jsonl(examples)))
    assert runner.invoke(app, ["report", str(scores), "-o", str(tmp_path / "r.html")]).exit_code == 0
    doc = parse((tmp_path / "r.html").read_text(encoding="utf-8"))
    shown = 0
    for index, row in enumerate(read_scored(scores)):
        pairs = doc.find("details", id=f"r{index}").find_all("div", cls="claim-pair")
        if not any(s.ok and s.hallucinated and s.spans for s in row.scores):
            assert not pairs
            continue
        assert pairs, row.id
        for pair in pairs:
            claim = pair.find("p", cls="claim")
            assert "".join(m.text for m in claim.find_all("mark"))  # the flagged span inside the claim is marked
            for passage in pair.find_all("p", cls="passage"):
                sentence = passage.find("mark", cls="support").text
                assert any(sentence in context for context in row.record.contexts)
                shown += 1
    assert shown  # the demo's planted hallucinations have passages to be read against
