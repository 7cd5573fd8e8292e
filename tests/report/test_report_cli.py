"""The report of real scores: the bundled example answers, and a labelled sample of RAGTruth scored by lexical."""

import json
from importlib import resources

import pytest
from typer.testing import CliRunner

from groundtrace.cli import app
from groundtrace.scoring.engine import Evaluator
from groundtrace.io import read_jsonl, read_scored, write_jsonl
from tests.conftest import shared_data
from tests.report.dom import marked_chars, parse

runner = CliRunner()


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The bundled example answers (ru, en, zh), scored by the demo's offline metrics."""
    examples = resources.files("groundtrace") / "examples" / "answers.jsonl"
    scores = tmp_path_factory.mktemp("demo") / "scores.jsonl"
    with open(scores, "w", encoding="utf-8") as handle:
        write_jsonl(Evaluator("grounding,lexical,facts").evaluate(read_jsonl(examples)), handle)
    report = scores.with_name("report.html")
    result = runner.invoke(app, ["report", str(scores), "-o", str(report)])
    assert result.exit_code == 0, result.output
    assert f"wrote {report}: 8 records" in result.output.replace("\n", "")
    return list(read_scored(scores)), parse(report.read_text(encoding="utf-8"))


def test_the_demo_report_has_a_row_and_a_section_per_record(demo):
    rows, doc = demo
    assert len(doc.find("table", id="records").find("tbody").find_all("tr")) == len(rows) == 8
    assert [d.find("p", cls="answer").text for d in doc.find_all("details", cls="record")] == [r.record.answer for r in rows]


def test_the_demo_marks_are_the_spans_of_its_scores(demo):
    rows, doc = demo
    flagged = 0
    for index, row in enumerate(rows):
        answer = doc.find("details", id=f"r{index}").find("p", cls="answer")
        want = {}
        for score in row.scores:
            for sp in score.spans:
                want.setdefault(score.metric, set()).update(range(sp.start, sp.end))
                flagged += 1
        assert marked_chars(answer) == want
        for mark in answer.find_all("mark"):
            for metric in mark.get("data-sources").split():
                assert row.score(metric).reason[:100] in mark.get("title")
    assert flagged  # the demo plants hallucinations: some spans must be there


def test_the_demo_languages_are_kept(demo):
    rows, doc = demo
    langs = [d.find("p", cls="answer").get("lang") for d in doc.find_all("details", cls="record")]
    assert langs == [r.id.split("-")[0] for r in rows]  # ids are ru-1, en-2, zh-1, ...


@pytest.fixture(scope="module")
def labelled(tmp_path_factory):
    """The first 40 RAGTruth records (hallucinated and faithful), scored by lexical."""
    folder = tmp_path_factory.mktemp("labelled")
    source = folder / "labelled.jsonl"
    lines = shared_data("ragtruth_qa_dev.jsonl").read_text(encoding="utf-8").splitlines()[:40]
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    scores = folder / "scores.jsonl"
    with open(scores, "w", encoding="utf-8") as handle:
        write_jsonl(Evaluator("lexical").evaluate([json.loads(line) for line in lines]), handle)
    result = runner.invoke(app, ["report", str(scores), "--labels", str(source)])
    assert result.exit_code == 0, result.output
    assert "40 records, 40 with gold labels" in result.output.replace("\n", "")
    return [json.loads(line) for line in lines], parse(scores.with_suffix(".html").read_text(encoding="utf-8"))


def test_a_labelled_report_has_roc_reliability_labels_and_gold_spans(labelled):
    gold, doc = labelled
    figure = doc.find("figure", data_metric="lexical")
    assert figure.find_all("svg", cls="roc") and figure.find_all("svg", cls="reliability")
    trs = doc.find("table", id="records").find("tbody").find_all("tr")
    assert [tr.find_all("td")[5].text for tr in trs] == [str(g["label"]) for g in gold]
    with_spans = [i for i, g in enumerate(gold) if g["spans"]]
    assert with_spans
    for i in with_spans:
        answer = doc.find("details", id=f"r{i}").find("p", cls="answer")
        assert marked_chars(answer)["gold"] == {c for s in gold[i]["spans"] for c in range(s["start"], s["end"])}


def test_report_says_what_is_wrong_with_a_file_that_is_not_scores(tmp_path):
    bad = tmp_path / "records.jsonl"
    bad.write_text(json.dumps({"answer": "a", "contexts": ["b"]}) + "\n", encoding="utf-8")
    result = runner.invoke(app, ["report", str(bad)])
    assert result.exit_code == 2
    said = " ".join(result.output.split())
    assert "holds no scored record (line 1: record: Field required)" in said and "is it a scores file" in said
    assert runner.invoke(app, ["report", str(tmp_path / "missing.jsonl")]).exit_code == 2


def test_an_empty_scores_file_gives_the_no_records_page(tmp_path):
    empty = tmp_path / "scores.jsonl"
    empty.write_text("", encoding="utf-8")
    result = runner.invoke(app, ["report", str(empty), "-o", str(tmp_path / "out" / "r.html")])
    assert result.exit_code == 0, result.output
    assert parse((tmp_path / "out" / "r.html").read_text(encoding="utf-8")).find("section", id="empty")


def test_a_file_with_no_records_says_why_there_may_be_none(tmp_path):
    scores = tmp_path / "groundtrace-scores.jsonl"
    scores.write_text("")
    result = runner.invoke(app, ["report", str(scores), "-o", str(tmp_path / "report.html")])
    assert result.exit_code == 0
    said = " ".join(result.output.split())
    assert "0 records" in said and f"no scored answer in {scores}" in said
    assert "decorate the function with @groundtrace.retrieval" in said
    page = parse((tmp_path / "report.html").read_text(encoding="utf-8"))
    assert "@groundtrace.retrieval" in page.find("section", id="empty").text
