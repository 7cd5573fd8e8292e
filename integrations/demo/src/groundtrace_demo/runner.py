"""Run the demo: answer the bundled questions with two real RAG applications, groundtrace attached.

    LangChain   retriever | prompt | chat model | parser   English questions   one callback handler
    LlamaIndex  VectorStoreIndex query engine              Russian questions   one instrument() call

Both hand their Records to one Monitor, which scores them in the background with offline metrics
and delivers the Scores to three sinks: jsonl (OUT/scores.jsonl), otel (children of each request's
span, written to OUT/otel-spans.jsonl) and, when mlflow is installed, mlflow (Feedback on each
request's trace in OUT/mlflow/mlflow.db).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from groundtrace_demo import installed
from groundtrace_demo.data import passages_in, questions, questions_in
from groundtrace_demo.llms import LLMChoice, choose_llm
from groundtrace_demo.present import Outcome, outcomes_table, summary_line
from groundtrace_demo.telemetry import Answered, MLflowTraces, SpanCounts, Tracing
from groundtrace.io import read_scored
from groundtrace.monitor import Monitor
from groundtrace.score import ScoredRecord
from groundtrace.sinks import Sink
from groundtrace.sinks.jsonl import JsonlSink

FLUSH_TIMEOUT_S = 120.0
Ask = Callable[[str, str], AbstractContextManager[Answered]]
LANGUAGE = {"LangChain": "en", "LlamaIndex": "ru"}  # which application answers which questions


@dataclass
class DemoResult:
    llm: LLMChoice
    metrics: tuple[str, ...]
    outcomes: list[Outcome]
    out_dir: Path
    scores_path: Path
    spans: SpanCounts | None
    mlflow_uri: str | None
    mlflow_feedback: int | None
    report_path: Path | None
    seconds: float


def _ask_langchain(llm: LLMChoice, monitor: Monitor, ask: Ask) -> None:
    from groundtrace_langchain import GroundtraceCallbackHandler

    from groundtrace_demo import langchain_app

    chain = langchain_app.build_chain(passages_in(LANGUAGE["LangChain"]), langchain_app.chat_model(llm))
    # groundtrace's one line: every call of this chain is captured and scored in the background
    chain = chain.with_config(callbacks=[GroundtraceCallbackHandler(monitor=monitor)])
    for question in questions_in(LANGUAGE["LangChain"]):
        with ask("LangChain", question.question) as answered:
            answered(chain.invoke(question.question))


def _ask_llamaindex(llm: LLMChoice, monitor: Monitor, ask: Ask) -> None:
    import groundtrace_llamaindex

    from groundtrace_demo import llamaindex_app

    engine = llamaindex_app.build_query_engine(passages_in(LANGUAGE["LlamaIndex"]), llamaindex_app.llm(llm))
    # groundtrace's one line: every LlamaIndex query of the process is captured and scored
    groundtrace_llamaindex.instrument(monitor=monitor)
    try:
        for question in questions_in(LANGUAGE["LlamaIndex"]):
            with ask("LlamaIndex", question.question) as answered:
                answered(str(engine.query(question.question)))
    finally:
        groundtrace_llamaindex.uninstrument()  # the Monitor is ours: it stays open


def _requests(tracers: Sequence[Any]) -> Ask:
    """One request span per tracer around a question, each told the answer when it comes."""

    @contextmanager
    def ask(framework: str, question: str) -> Iterator[Answered]:
        with ExitStack() as stack:
            done = [stack.enter_context(tracer.request(framework, question)) for tracer in tracers]

            def answered(answer: str) -> None:
                for tell in done:
                    tell(answer)

            yield answered

    return ask


def _write_planted_labels(outcomes: Sequence[Outcome], path: Path) -> Path:
    """The replay's planted hallucinations as gold labels (bench format: label, spans), by record id,
    so that the report can show them beside what the metrics found."""
    with open(path, "w", encoding="utf-8") as handle:
        for item in outcomes:
            if item.row is None:
                continue
            planted, answer = item.question.planted, item.row.record.answer or ""
            start = answer.find(planted["text"]) if planted else -1
            spans = [{"start": start, "end": start + len(planted["text"]), "text": planted["text"],
                      "type": planted["kind"]}] if planted and start >= 0 else []
            handle.write(json.dumps({"id": item.row.id, "label": int(planted is not None), "spans": spans},
                                    ensure_ascii=False) + "\n")
    return path


def _write_report(scores_path: Path, labels: Path | None, console: Console) -> Path | None:
    """report.html through groundtrace.report when that provides write_report; the demo works without it."""
    if not installed("groundtrace.report"):
        return None
    try:
        from groundtrace.report import write_report
    except ImportError as error:  # the renderer is there but something it needs is not
        console.print(f"[yellow]report.html was not written:[/yellow] {error}")
        return None
    path = scores_path.with_name("report.html")
    try:
        write_report(scores_path, path, labels=labels)
    except Exception as error:  # noqa: BLE001 - the report is a bonus: the scores are already written
        console.print(f"[yellow]report.html was not written:[/yellow] {type(error).__name__}: {error}")
        return None
    return path


def _outcomes(rows: list[ScoredRecord]) -> list[Outcome]:
    by_question = {row.record.question: row for row in rows}
    framework = {lang: name for name, lang in LANGUAGE.items()}
    return [Outcome(q, framework[q.lang], by_question.get(q.question)) for q in questions()]


def _tracing(console: Console) -> Tracing | None:
    if installed("opentelemetry.sdk"):
        return Tracing()
    console.print("[yellow]note:[/yellow] opentelemetry-sdk is not installed, so no spans: pip install opentelemetry-sdk")
    return None


def _mlflow(wanted: bool | None, out_dir: Path, console: Console) -> MLflowTraces | None:
    if wanted is False:
        return None
    if installed("mlflow"):
        console.print(f"MLflow: tracing to a local store in {out_dir / 'mlflow'}")
        return MLflowTraces(out_dir / "mlflow")
    if wanted:
        console.print("[yellow]note:[/yellow] mlflow is not installed, so no MLflow traces: pip install mlflow-skinny")
    return None


def _sinks(scores_path: Path, tracing: Tracing | None, traces: MLflowTraces | None) -> list[Sink]:
    sinks: list[Sink] = [JsonlSink(scores_path)]
    if tracing is not None:
        from groundtrace.sinks.otel import OTelSink

        sinks.append(OTelSink(tracer_provider=tracing.provider))
    if traces is not None:
        from groundtrace.sinks.mlflow import MLflowSink

        sinks.append(MLflowSink())
    return sinks


def run_demo(out_dir: Path, metrics: Sequence[str], mlflow: bool | None = None,
             console: Console | None = None) -> DemoResult:
    """Answer every bundled question, score the answers, and say where the scores went.

    ``mlflow``: None uses MLflow when it is installed; True asks for it (a note if it is missing)."""
    console = console or Console(stderr=True)
    started = time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    llm = choose_llm(questions())
    for note in llm.notes:
        console.print(f"[yellow]note:[/yellow] {note}")
    console.print(f"LLM: [bold]{llm.label}[/bold]")

    with ExitStack() as cleanup:
        tracing = _tracing(console)
        if tracing is not None:
            cleanup.callback(tracing.close)
        traces = _mlflow(mlflow, out_dir, console)
        if traces is not None:
            cleanup.callback(traces.close)  # restores the tracking URI, after the feedback is read back
        scores_path = out_dir / "scores.jsonl"
        scores_path.unlink(missing_ok=True)  # the jsonl sink appends
        monitor = Monitor(list(metrics), _sinks(scores_path, tracing, traces), flush_at_exit=False)
        with monitor:  # closing it flushes the sinks
            ask = _requests([t for t in (tracing, traces) if t is not None])
            for name, run in (("LangChain LCEL chain", _ask_langchain), ("LlamaIndex query engine", _ask_llamaindex)):
                began = time.perf_counter()
                run(llm, monitor, ask)
                console.print(f"{name}: answered in {time.perf_counter() - began:.1f} s; scoring in the background")
            if not monitor.flush(timeout=FLUSH_TIMEOUT_S):
                console.print(f"[yellow]some answers were still being scored after {FLUSH_TIMEOUT_S:g} s[/yellow]")
        rows = list(read_scored(scores_path))
        spans = tracing.write(out_dir / "otel-spans.jsonl") if tracing is not None else None
        feedback = traces.feedback_count([r.record.trace_links["mlflow"] for r in rows if "mlflow" in r.record.trace_links]) \
            if traces is not None else None
        mlflow_uri = traces.uri if traces is not None else None
    outcomes = _outcomes(rows)
    labels = _write_planted_labels(outcomes, out_dir / "planted-labels.jsonl") if llm.replay else None
    return DemoResult(llm=llm, metrics=tuple(metrics), outcomes=outcomes, out_dir=out_dir,
                      scores_path=scores_path, spans=spans, mlflow_uri=mlflow_uri, mlflow_feedback=feedback,
                      report_path=_write_report(scores_path, labels, console), seconds=time.perf_counter() - started)


def show(result: DemoResult, out: Console) -> None:
    """The table, the one-line verdict, and where to look next."""
    out.print(outcomes_table(result.outcomes, result.metrics, result.llm.replay, width=out.width))
    out.print(summary_line(result.outcomes, result.metrics, result.llm.label, result.llm.replay))
    scored = sum(1 for o in result.outcomes if o.row is not None)
    out.print(f"scores: {result.scores_path} ({scored} of {len(result.outcomes)} answers scored)")
    if result.spans is not None:
        s = result.spans
        out.print(f"OpenTelemetry: {s.evaluations} of {s.spans} spans carry groundtrace scores (gen_ai.evaluation.*, "
                  f"groundtrace.*), under {s.scored_requests} of {s.requests} request spans: "
                  f"{result.out_dir / 'otel-spans.jsonl'}")
    if result.mlflow_uri is not None:
        out.print(f"MLflow: {result.mlflow_feedback} groundtrace feedback assessments on the request traces; "
                  f"see them with: mlflow ui --backend-store-uri {result.mlflow_uri}")
    if result.report_path is not None:
        out.print(f"report: {result.report_path}")
    out.print(f"done in {result.seconds:.0f} s")
