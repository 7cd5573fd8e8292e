"""groundtrace's scores where people read them: the real Phoenix and MLflow UIs in a headless Chromium.

A small RAG chain (retrieval | prompt | chat model | parser, LangChain's fake chat model) answers three questions:
one answer faithful to its passage, one contradicting it (5 euros where the passage says 12) and one partly made
up. The application is traced as its users trace it (OpenInference's LangChainInstrumentor into Phoenix;
mlflow.langchain.autolog() into MLflow), groundtrace's handler scores each answer with the grounding detector and
its sink writes the scores there; then the viewer's own UI is opened, clicked through as a reader would, and
screenshotted (phoenix-traces.png, phoenix-annotations.png, mlflow-traces.png, mlflow-assessment.png: kept in
$GROUNDTRACE_SCREENSHOTS_DIR when set, for the docs' sink pages).

What issue 45 asks of them, checked on what the page shows (innerText, data attributes), never on JSON:
in the list, a hallucinated answer reads worse than the faithful one at a glance; its label and its unsupported
phrases are visible without opening JSON. Each test gathers every such check that fails and reports them
together, after its screenshots are written."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.viewers import mlflow_ui
from tests.viewers.browser import MISSING as NO_BROWSER
from tests.viewers.browser import Browser, headless_chromium

needs_browser = pytest.mark.skipif(NO_BROWSER is not None, reason=NO_BROWSER or "")
pytest.importorskip("langchain_core", reason="the test application is a LangChain chain")
pytest.importorskip("groundtrace_langchain", reason="the scores come from groundtrace's LangChain handler")

from groundtrace.monitor import Monitor  # noqa: E402
from groundtrace.record import Record  # noqa: E402
from groundtrace.score import Score  # noqa: E402
from groundtrace.sinks import Sink  # noqa: E402
from groundtrace_langchain import GroundtraceCallbackHandler  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.language_models.fake_chat_models import FakeListChatModel  # noqa: E402
from langchain_core.output_parsers import StrOutputParser  # noqa: E402
from langchain_core.prompts import ChatPromptTemplate  # noqa: E402
from langchain_core.runnables import Runnable, RunnableLambda, RunnablePassthrough  # noqa: E402

METRIC = "grounding"  # the shipped detector: it catches the wrong number and the made-up sentence alike
PASSAGES = {
    "dormitory": "A bed in the student dormitory costs 12 euros per night, breakfast included.",
    "library": "The university library opens at 8 am and closes at 10 pm on weekdays.",
}
PROMPT = ChatPromptTemplate.from_messages([
    ("system", "Answer from these passages only:\n{context}"),
    ("human", "{question}"),
])


@dataclass(frozen=True)
class Ask:
    question: str
    passage: str
    answer: str
    hallucinated: bool


FAITHFUL = Ask("How much is a night in the dormitory?", "dormitory",
               "A bed in the dormitory costs 12 euros per night, breakfast included.", False)
CONTRADICTED = Ask("What does the dormitory cost per night?", "dormitory",
                   "A night in the dormitory costs 5 euros.", True)
MADE_UP = Ask("When does the library open?", "library",
              "The library opens at 8 am, and students get free coffee at the entrance.", True)
ASKS = (FAITHFUL, CONTRADICTED, MADE_UP)


class Kept(Sink):
    """What the Monitor emitted, so the test knows each answer's verdict and unsupported phrases."""

    name = "kept"

    def __init__(self) -> None:
        self.emitted: list[tuple[Record, list[Score]]] = []

    def emit(self, record: Record, scores: list[Score]) -> None:
        self.emitted.append((record, scores))

    def score_of(self, ask: Ask) -> Score:
        [score] = [s for record, scores in self.emitted if record.question == ask.question
                   for s in scores if s.metric == METRIC]
        return score


def search(passage: str) -> Runnable:
    """Retrieval as code: the question's passage, as LangChain Documents."""
    def retrieve(question: str) -> list[Document]:
        return [Document(page_content=PASSAGES[passage], metadata={"source": f"{passage}.md"})]

    return RunnableLambda(retrieve, name="retrieve")


def rag_chain(ask: Ask) -> Runnable:
    """question -> retrieval -> prompt -> chat model (answers ``ask.answer``) -> str."""
    def format_documents(documents: list[Document]) -> str:
        return "\n".join(d.page_content for d in documents)

    return ({"context": search(ask.passage) | RunnableLambda(format_documents, name="format_docs"),
             "question": RunnablePassthrough()}
            | PROMPT | FakeListChatModel(responses=[ask.answer]) | StrOutputParser())


def answer_all(handler: GroundtraceCallbackHandler, kept: Kept) -> None:
    """The three requests, each scored; the verdicts are the ones the UIs should show."""
    for ask in ASKS:
        assert rag_chain(ask).invoke(ask.question, config={"callbacks": [handler]}) == ask.answer
    monitor = handler.monitor
    assert monitor.flush(60), f"the Monitor did not finish scoring: {monitor.stats}"
    assert monitor.stats.sink_errors == 0, f"a sink failed: {monitor.stats}"
    for ask in ASKS:  # the detector's own verdicts (not the UIs'), and the phrases it flagged
        score = kept.score_of(ask)
        assert score.hallucinated is ask.hallucinated, (ask.question, score)
        assert bool(score.spans) is ask.hallucinated, (ask.question, score.spans)


def phrases(score: Score) -> list[str]:
    return [span.text for span in score.spans if span.text]


def missing_from(shown: str, wanted: list[str]) -> list[str]:
    return [text for text in wanted if text not in shown]


def fixed(problems: list[str]) -> None:
    """The checks of issue 45 that failed, all of them (the screenshots are written before)."""
    assert not problems, "what a reader cannot see yet:\n- " + "\n- ".join(problems)


# ------------------------------------------------------------------------------ Phoenix
PHOENIX_PROJECT = "groundtrace-viewers"


@contextmanager
def traced_to_phoenix(url: str, project: str) -> Iterator[Any]:
    """The application traced as Phoenix's docs say: phoenix.otel.register (its TracerProvider, made global) and
    OpenInference's LangChainInstrumentor; both undone after, so later tests see neither."""
    pytest.importorskip("phoenix.otel", reason="arize-phoenix-otel registers the app's tracing")
    pytest.importorskip("openinference.instrumentation.langchain",
                        reason="openinference-instrumentation-langchain traces the chain into Phoenix")
    from openinference.instrumentation.langchain import LangChainInstrumentor
    from opentelemetry import trace
    from opentelemetry.util._once import Once
    from phoenix.otel import register

    before = trace._TRACER_PROVIDER_SET_ONCE, trace._TRACER_PROVIDER
    provider = register(endpoint=f"{url}/v1/traces", project_name=project, batch=False, verbose=False)
    LangChainInstrumentor().instrument(tracer_provider=provider)
    try:
        yield provider
    finally:
        LangChainInstrumentor().uninstrument()
        provider.shutdown()
        # the API sets a process's provider once; put back as opentelemetry's own test utilities do
        if before[1] is None:
            trace._TRACER_PROVIDER_SET_ONCE, trace._TRACER_PROVIDER = Once(), None
        else:
            trace._TRACER_PROVIDER_SET_ONCE, trace._TRACER_PROVIDER = before


CHIP = "button[aria-haspopup=dialog]:has(.annotation-name-and-value)"


def phoenix_rows(browser: Browser) -> dict[str, Any]:
    """The traces table's rows by the question each shows."""
    rows = browser.find("table tbody tr")
    return {ask.question: row for ask in ASKS for row in rows if ask.question in browser.text(row)}


def annotation_details(browser: Browser, root: Any) -> str:
    """The annotation chip under ``root``: its details (label, score, explanation) in the popover a pointer resting on
    it opens (a click toggles the same popover); their text."""
    chip = browser.until(lambda b: [c for c in b.find(CHIP, root) if c.is_displayed()], f"the {METRIC} chip")[0]

    def popover(b: Browser) -> Any:
        return [d for d in b.find(f'.react-aria-Popover[aria-label="{METRIC} annotation details"]') if b.text(d)]

    browser.hover(chip)
    if not browser.until(popover, "the annotation's details", timeout_s=4, required=False):
        browser.press(chip)
    return browser.text(browser.until(popover, f"the {METRIC} annotation's details")[0])


def close_popover(browser: Browser) -> None:
    browser.point_at(5, 5)  # the pointer off the chip
    browser.until(lambda b: not b.find(".react-aria-Popover"), "the popover closed", timeout_s=5, required=False)


def phoenix_columns(browser: Browser, hide: tuple[str, ...]) -> None:
    """Columns > untick ``hide`` (what a reader does to bring the annotations column into view)."""
    browser.click_text("Columns", css="button")
    browser.until(lambda b: b.find("li[data-column-id]"), "the column list")
    for column in hide:  # the checkbox input itself: React Aria's label swallows a pointer click
        browser.js("const box = document.querySelector(arguments[0]); if (box && box.checked) box.click()",
                   f'li[data-column-id="{column}"] input[type=checkbox]')
    browser.key("ESCAPE")


def phoenix_charts(browser: Browser, off: tuple[str, ...], on: tuple[str, ...]) -> None:
    """Charts > untick ``off``, tick ``on`` (the span annotations' chart has the scores; the traces' has none)."""
    browser.click_text("Charts", css="button")
    for names, checked in ((off, "true"), (on, "false")):
        for name in names:
            browser.until(lambda b, n=name, c=checked: any(
                b.press(item) for item in b.find(f"[role=menuitemcheckbox][aria-checked={c}]")
                if b.text(item).split("\n")[0] == n), f"the chart {name!r} to tick", timeout_s=5, required=False)
    browser.key("ESCAPE")


@needs_browser
def test_phoenix_traces_and_annotations(phoenix_url, tmp_path) -> None:
    pytest.importorskip("phoenix.client", reason="the phoenix sink needs arize-phoenix-client")
    from groundtrace.sinks.phoenix import PhoenixSink

    kept = Kept()
    monitor = Monitor([METRIC], sinks=[PhoenixSink(base_url=phoenix_url), kept], isolation="thread",
                      flush_at_exit=False)
    with traced_to_phoenix(phoenix_url, PHOENIX_PROJECT):
        handler = GroundtraceCallbackHandler(monitor=monitor)
        try:
            answer_all(handler, kept)
        finally:
            monitor.close()

    problems: list[str] = []
    with headless_chromium(tmp_path / "profile") as browser:
        # Projects > the project (Phoenix's own link by name) > Traces
        browser.open(f"{phoenix_url}/redirects/projects/{PHOENIX_PROJECT}")
        browser.until(lambda b: re.search(r"/projects/[^/?#]+", urlsplit(b.url).path), "the project's page")
        browser.click_text("Traces", css="[role=tab]")
        browser.until(lambda b: urlsplit(b.url).path.endswith("/traces"), "the Traces tab")
        browser.wait_for_text(*(ask.question for ask in ASKS), timeout_s=60)
        browser.until(lambda b: len(b.find("table tbody tr .annotation-name-and-value")) >= len(ASKS),
                      "an annotation on each of the three traces", timeout_s=30, required=False)
        # room for the annotations: the navigation folded, the charts dragged small, fewer columns, each row
        # wrapped to its whole text
        browser.click('button[aria-label="Collapse side navigation"]', timeout_s=5, required=False)
        phoenix_charts(browser, off=("Trace annotation scores",), on=("Span annotation scores",))
        for handle in browser.find('[role=separator][aria-controls="metrics-charts"]')[:1]:
            browser.drag(handle, 0, 100 - handle.location["y"])  # up to the smallest the charts go
        phoenix_columns(browser, ("error", "userId", "traceAnnotations", "startTime", "cumulativeTokenCountTotal",
                                  "cumulativeTokenCostTotal"))
        browser.click('button[aria-label="Wrap each row over as many lines as it needs"]', timeout_s=5,
                      required=False)
        browser.settle()
        browser.screenshot(tmp_path / "phoenix-traces.png", "phoenix-traces.png")

        rows = phoenix_rows(browser)
        assert set(rows) == {ask.question for ask in ASKS}, f"the traces table shows:\n{browser.text()[:3000]}"
        shown_rows = browser.find("table tbody tr")
        if len(shown_rows) != len(ASKS):
            problems.append(f"the project has {len(shown_rows)} traces for {len(ASKS)} requests (scores on traces "
                            f"of their own?): {[browser.text(r)[:80] for r in shown_rows]}")
        for ask in ASKS:
            row, verdict = rows[ask.question], "hallucinated" if ask.hallucinated else "grounded"
            cell = browser.text(row)
            if METRIC not in cell:
                problems.append(f"{ask.question!r}: its trace row shows no {METRIC} annotation: {cell!r}")
                continue
            # at a glance: Phoenix colours a score green or red (data-direction positive/negative, read out as
            # "Favorable score" / "Unfavorable score") when the project has an annotation config for the name
            wanted = "negative" if ask.hallucinated else "positive"
            directions = [e.get_attribute("data-direction") for e in browser.find("[data-direction]", row)]
            if wanted not in directions:
                problems.append(f"{ask.question!r} ({verdict}): its score is not marked {wanted} in the traces "
                                f"list (data-direction {directions}; the cell reads {cell.split(METRIC)[-1]!r})")
            details = annotation_details(browser, row)
            if verdict not in details:
                problems.append(f"{ask.question!r}: its annotation's details lack the label {verdict!r}: {details!r}")
            close_popover(browser)

        # a hallucinated answer's trace (a click on its row) > the root span's Annotations > the annotation
        traces_url = browser.url
        for ask in (MADE_UP, CONTRADICTED):  # the contradiction's view is the screenshot
            browser.click_text("RunnableSequence", css="a", root=phoenix_rows(browser)[ask.question])
            info = browser.until(lambda b, a=ask: [i for i in b.find('[data-testid="span-info-wrap"]')
                                                   if a.answer in b.text(i)], "the trace's root span")[0]
            browser.click('button[aria-label="Annotations"][aria-expanded="false"]', root=info, timeout_s=5,
                          required=False)
            if METRIC not in browser.text(info):
                problems.append(f"{ask.question!r}: the trace's root span has no {METRIC} annotation "
                                f"(span details: {browser.text(info)[:300]!r})")
            else:
                details = annotation_details(browser, info)
                browser.settle()
                if ask is CONTRADICTED:
                    browser.screenshot(tmp_path / "phoenix-annotations.png", "phoenix-annotations.png")
                if "hallucinated" not in details:
                    problems.append(f"{ask.question!r}: the span's annotation lacks the label 'hallucinated': "
                                    f"{details!r}")
                unseen = missing_from(details, phrases(kept.score_of(ask)))
                if unseen:
                    problems.append(f"{ask.question!r}: unsupported phrases {unseen} are not in the annotation's "
                                    f"details (only in its metadata JSON?): {details!r}")
            browser.open(traces_url)  # back to the list
            browser.wait_for_text(*(a.question for a in ASKS))
    fixed(problems)


# ------------------------------------------------------------------------------ MLflow
MLFLOW_EXPERIMENT = "groundtrace-viewers"
ASSESSMENT_TAG = '[data-component-id="shared.model-trace-explorer.assesment-value-tag"][role=status]'
READS_BAD = {"false", "fail", "no", "hallucinated"}
READS_GOOD = {"true", "pass", "yes", "grounded"}


def mlflow_rows(browser: Browser) -> dict[str, Any]:
    rows = browser.find("[role=row]")
    return {ask.question: row for ask in ASKS for row in rows if f'"{ask.question}"' in browser.text(row)}


def mlflow_hide_columns(browser: Browser, names: tuple[str, ...]) -> None:
    """Display > Columns > untick ``names``."""
    for name in names:
        if not browser.find("[role=menuitemcheckbox]"):
            browser.click('button[aria-label="Display"]')
            browser.click_text("Columns", css="[role=menuitem]")
        browser.click_text(name, css="[role=menuitemcheckbox][aria-checked=true]", timeout_s=5, required=False)
    browser.key("ESCAPE")
    browser.key("ESCAPE")
    browser.until(lambda b: not b.find("[role=menu]"), "the menu closed", timeout_s=5, required=False)


def mlflow_tooltip(browser: Browser, tag: Any) -> str:
    """Hover an assessment in the list: its tooltip's text (value, rationale, source)."""
    def tooltips(b: Browser) -> list[Any]:
        return [t for t in b.find("[role=tooltip], [data-radix-popper-content-wrapper]") if b.text(t).strip()]

    browser.hover(tag)
    tip = browser.until(tooltips, "the assessment's tooltip", timeout_s=10, required=False)
    text = browser.text(tip[0]) if tip else ""
    browser.point_at(5, 5)  # the pointer away: the tooltip closes before the next one opens
    browser.until(lambda b: not tooltips(b), "the tooltip closed", timeout_s=5, required=False)
    return text


@needs_browser
def test_mlflow_traces_and_assessments(tmp_path) -> None:
    reason = mlflow_ui.missing()
    if reason:
        pytest.skip(reason)
    mlflow = pytest.importorskip("mlflow")
    from tests.mlflow_store import sqlite_tracking

    kept = Kept()
    with sqlite_tracking(tmp_path, MLFLOW_EXPERIMENT):
        experiment_id = mlflow.get_experiment_by_name(MLFLOW_EXPERIMENT).experiment_id
        mlflow.langchain.autolog()
        try:
            monitor = Monitor([METRIC], sinks=["mlflow", kept], isolation="thread", flush_at_exit=False)
            handler = GroundtraceCallbackHandler(monitor=monitor)
            try:
                answer_all(handler, kept)
            finally:
                monitor.close()
        finally:
            mlflow.langchain.autolog(disable=True)

    problems: list[str] = []
    with mlflow_ui.mlflow_ui(tmp_path / "mlflow.db") as url, headless_chromium(tmp_path / "profile") as browser:
        # Experiments > the experiment > Traces
        browser.open(f"{url}/#/experiments/{experiment_id}/traces")
        browser.wait_for_text(*(f'"{ask.question}"' for ask in ASKS), METRIC, timeout_s=60)
        # a first visit's guidance and assistant, put away; the sidebar folded for the assessments' column
        browser.click_text("Got it", css="button", timeout_s=3, required=False)
        browser.click('button[aria-label="Close"]', timeout_s=3, required=False)
        browser.click('button[aria-label="Toggle sidebar"]', timeout_s=3, required=False)
        mlflow_hide_columns(browser, ("Tokens", "Tags"))  # the assessment's column in view
        rows = mlflow_rows(browser)
        assert set(rows) == {ask.question for ask in ASKS}, f"the traces table shows:\n{browser.text()[:3000]}"
        tags = {question: browser.find(ASSESSMENT_TAG, row) for question, row in rows.items()}
        browser.point_at(5, 5)
        browser.settle()
        browser.screenshot(tmp_path / "mlflow-traces.png", "mlflow-traces.png")

        traces = [r for r in browser.find("[role=row]") if browser.find("[role=cell]", r)]
        if len(traces) != len(ASKS):
            problems.append(f"the experiment has {len(traces)} traces for {len(ASKS)} requests: "
                            f"{[browser.text(r)[:80] for r in traces]}")
        for ask in ASKS:
            verdict = "hallucinated" if ask.hallucinated else "grounded"
            if not tags[ask.question]:
                problems.append(f"{ask.question!r}: its trace row shows no assessment: {browser.text(rows[ask.question])!r}")
                continue
            value = browser.text(tags[ask.question][0]).strip()
            reads = READS_BAD if ask.hallucinated else READS_GOOD
            if value.lower() not in reads:
                problems.append(f"{ask.question!r} ({verdict}): its {METRIC} assessment reads {value!r} in the "
                                f"traces list, not one of {sorted(reads)}")
            tip = mlflow_tooltip(browser, tags[ask.question][0])
            if verdict not in tip:
                problems.append(f"{ask.question!r}: hovering its assessment does not show the label {verdict!r}: "
                                f"{tip!r}")
            unseen = missing_from(tip, phrases(kept.score_of(ask)))
            if unseen:
                problems.append(f"{ask.question!r}: hovering its assessment does not show the unsupported phrases "
                                f"{unseen}: {tip!r}")

        # the contradicted answer's trace (a click on its row) > Assess > the assessment unfolded
        browser.click_text(f'"{CONTRADICTED.question}"', root=mlflow_rows(browser)[CONTRADICTED.question])
        browser.until(lambda b: "traceId=" in b.url, "the trace's details")
        browser.click('[data-component-id="shared.model-trace-explorer.assessments-pane-toggle"]')
        browser.click('[data-component-id="shared.model-trace-explorer.toggle-assessment-expanded"]')
        browser.wait_for_text("Rationale")
        browser.settle()
        browser.screenshot(tmp_path / "mlflow-assessment.png", "mlflow-assessment.png")
        pane = browser.text()
        pane = pane[pane.find("Assessments"):]
        if "hallucinated" not in pane:
            problems.append(f"the contradicted answer's Assessments pane lacks the label 'hallucinated': {pane[:800]!r}")
        unseen = missing_from(pane, phrases(kept.score_of(CONTRADICTED)))
        if unseen:
            problems.append(f"the contradicted answer's Assessments pane lacks the unsupported phrases {unseen}: "
                            f"{pane[:800]!r}")
    fixed(problems)


def test_the_mlflow_ui_helper_says_why_it_cannot_run(monkeypatch, tmp_path) -> None:
    """Without its venv the MLflow UI test skips, naming the script that makes it."""
    monkeypatch.setattr(mlflow_ui, "VENV", tmp_path / "absent")
    assert mlflow_ui.missing() == (f"the MLflow UI needs its own venv with the full mlflow: run "
                                   f"scripts/mlflow_ui_venv.sh (it makes {tmp_path / 'absent'})")

