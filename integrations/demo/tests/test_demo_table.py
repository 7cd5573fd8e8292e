"""What `groundtrace demo` prints fits an 80-column terminal: the answers are cut, the flagged text is not."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from groundtrace.record import Record
from groundtrace.score import Score, ScoredRecord, Span
from groundtrace_demo import data
from groundtrace_demo.llms import REPLAY_LABEL, LLMChoice
from groundtrace_demo.present import Outcome, excerpt
from groundtrace_demo.runner import DemoResult, show
from groundtrace_demo.telemetry import SpanCounts

METRICS = ("grounding", "facts", "lexical")


def scored(question: data.Question) -> ScoredRecord:
    """The recorded answer, flagged by grounding and facts exactly at its planted text."""
    spans = []
    if question.planted:
        start = question.answer.index(question.planted["text"])
        spans = [Span(start=start, end=start + len(question.planted["text"]), text=question.planted["text"])]
    scores = [Score(metric=m, value=0.9 if spans else 0.1, higher_is_better=False, hallucinated=bool(spans),
                    spans=spans if m != "lexical" else []) for m in METRICS]
    return ScoredRecord(id=question.id, record=Record(question=question.question, contexts=["…"],
                                                      answer=question.answer), scores=scores)


def render(width: int, tmp_path: Path) -> list[str]:
    outcomes = [Outcome(q, "LangChain" if q.lang == "en" else "LlamaIndex", scored(q)) for q in data.questions()]
    result = DemoResult(llm=LLMChoice("replay", REPLAY_LABEL), metrics=METRICS, outcomes=outcomes, out_dir=tmp_path,
                        scores_path=tmp_path / "scores.jsonl", spans=SpanCounts(120, 12, 12, 36),
                        mlflow_uri=f"sqlite:///{tmp_path / 'mlflow' / 'mlflow.db'}", mlflow_feedback=36,
                        report_path=tmp_path / "report.html", seconds=15.0)
    console = Console(width=width, record=True, color_system=None)
    show(result, console)
    return console.export_text().splitlines()


def columns(lines: list[str]) -> dict[str, list[str]]:
    """Each row of the table (by question id) as its columns' text, the wrapped lines of each joined."""
    rows: dict[str, list[list[str]]] = {}
    current = None
    for line in lines:
        cells = line.split("│")
        if len(cells) != 4:
            continue
        if cells[0].strip():
            current = cells[0].strip()
            rows[current] = [[] for _ in cells]
        for parts, cell in zip(rows[current], cells, strict=True):
            parts.append(cell.strip())
    return {key: [" ".join(" ".join(parts).split()) for parts in cells] for key, cells in rows.items()}


def test_in_80_columns_no_line_is_longer_and_every_flagged_text_is_whole(tmp_path) -> None:
    lines = render(80, tmp_path)
    assert max(len(line) for line in lines) <= 80, "\n".join(line for line in lines if len(line) > 80)
    table = columns(lines)
    assert set(table) == {q.id for q in data.questions()}
    for question in data.questions():
        answer, scores, flagged = table[question.id][1:]
        assert question.question in answer
        assert "grounding" in scores and "lexical" in scores
        if question.planted:
            assert question.planted["text"] in flagged, (question.id, flagged)
            assert question.label in flagged and "⚠" in scores
        else:
            assert flagged.startswith("—") and question.label in flagged
    cut = [q for q in data.questions() if not table[q.id][1].endswith(q.answer)]
    assert cut and all("…" in table[q.id][1] for q in cut)  # the long answers are cut, and say so
    assert "grounding flagged 6 of 6 planted hallucinations" in " ".join(" ".join(lines).split())


def test_a_wide_terminal_shows_the_whole_answers(tmp_path) -> None:
    table = columns(render(200, tmp_path))
    for question in data.questions():
        assert table[question.id][1].endswith(" ".join(question.answer.split()))


@pytest.mark.parametrize("question", [q for q in data.questions() if q.planted], ids=lambda q: q.id)
def test_a_cut_answer_still_holds_its_first_flagged_span(question: data.Question) -> None:
    span = scored(question).scores[0].spans[0]
    shown, shift = excerpt(question.answer, [span], limit=60)
    assert len(shown) <= 60 and shown.endswith("…")
    assert shown[span.start + shift:].startswith(span.text[:20])  # where the underline goes


def test_a_short_answer_is_not_cut() -> None:
    assert excerpt("Short.", [], limit=60) == ("Short.", 0)
