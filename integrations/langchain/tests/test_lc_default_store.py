"""A handler with no sink configured: the scores of a real LCEL chain land in the default store, said once."""

from __future__ import annotations

import json
import logging

import pytest

from groundtrace.capture.kit import reset_shared_monitor
from groundtrace.sinks.default_store import forget_announcements
from groundtrace_langchain import GroundtraceCallbackHandler
from lc_app import GROUNDED_ANSWER, rag_chain

HALLUCINATED = "Paris is the capital of France, founded by Napoleon in 1200."


@pytest.fixture
def unconfigured(tmp_path, monkeypatch):
    monkeypatch.delenv("GROUNDTRACE_SINKS", raising=False)
    monkeypatch.delenv("GROUNDTRACE_JSONL_PATH", raising=False)
    monkeypatch.setenv("GROUNDTRACE_METRICS", "lexical")  # the shared Monitor's metric (the detector is not needed here)
    monkeypatch.chdir(tmp_path)
    forget_announcements()
    yield tmp_path
    reset_shared_monitor()
    forget_announcements()


@pytest.mark.parametrize("build", [lambda: GroundtraceCallbackHandler(metrics=["lexical"]),
                                   lambda: GroundtraceCallbackHandler()], ids=["own-monitor", "shared-monitor"])
def test_a_handler_with_no_sink_writes_the_default_store_and_says_so_once(unconfigured, caplog, build):
    caplog.set_level(logging.WARNING, logger="groundtrace")
    handler = build()
    for answer in (GROUNDED_ANSWER, HALLUCINATED, HALLUCINATED):
        assert rag_chain(answer).invoke("What is the capital of France?", config={"callbacks": [handler]}) == answer
    assert handler.monitor.flush(60)
    store = unconfigured / "groundtrace-scores.jsonl"
    rows = [json.loads(line) for line in store.read_text().splitlines()]
    assert [row["record"]["answer"] for row in rows] == [GROUNDED_ANSWER, HALLUCINATED, HALLUCINATED]
    assert [row["record"]["contexts"] for row in rows] == [["Paris is the capital of France."]] * 3
    assert [[(s["metric"], s["hallucinated"]) for s in row["scores"]] for row in rows] == \
        [[("lexical", False)], [("lexical", True)], [("lexical", True)]]
    announced = [r for r in caplog.records if "no sink configured" in r.getMessage()]
    assert len(announced) == 1 and announced[0].levelno == logging.WARNING
    assert announced[0].getMessage().splitlines()[:2] == [
        f"groundtrace: no sink configured, so scores go to {store}", f"  watch them:  groundtrace watch {store}"]
    handler.close()


def test_the_exit_summary_counts_the_turns_that_made_no_record(unconfigured, caplog):
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.runnables import chain

    caplog.set_level(logging.WARNING, logger="groundtrace")
    handler = GroundtraceCallbackHandler(metrics=["lexical"])
    llm = FakeListChatModel(responses=[GROUNDED_ANSWER])

    @chain
    def f_string(question: str) -> str:  # its context reaches the model in an f-string: no callback sees it
        return llm.invoke(f"Context: Paris is the capital of France.\nQuestion: {question}").content

    rag_chain().invoke("What is the capital of France?", config={"callbacks": [handler]})
    for _ in range(2):
        f_string.invoke("What is the capital of France?", config={"callbacks": [handler]})
    handler.close()

    store = unconfigured / "groundtrace-scores.jsonl"
    [closing] = [r.getMessage() for r in caplog.records if "scored" in r.getMessage()]
    assert closing.splitlines() == [
        f"groundtrace: 1 answer scored, 0 flagged; scores in {store}",
        "groundtrace: 2 turns made no record (no retrieval and no tool output: 2); the integration's stats() says why "
        "(handler.stats(), groundtrace_llamaindex.stats()), and @groundtrace.retrieval marks retrieval groundtrace "
        "cannot see (docs: troubleshooting, 'I see no scores')"]
