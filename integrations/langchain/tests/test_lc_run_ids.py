"""The handler's edge: LangChain passes ``config["run_id"]`` on as the caller gave it (LangServe: a string; other
servers: an int; most: a UUID or none). A run id in any of those forms makes one right record; an event that cannot
be read makes no record for its run, never one built from part of its tree, and says so once per cause."""

from __future__ import annotations

import logging
import uuid

import pytest
from groundtrace_langchain import GroundtraceCallbackHandler
from groundtrace_langchain.events import UnreadableEvent, metadata_dict, run_key, run_text, tag_list
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, LLMResult
from lc_app import BY_ID, GROUNDED_ANSWER, rag_chain

QUESTION = "What is the capital of France?"
UNREADABLE = "groundtrace could not read one of its events"
FIXED = uuid.UUID("5f0c7a8e-3b1d-4c2a-9e6f-0123456789ab")


@pytest.mark.parametrize(("given", "carried"), [
    (FIXED, str(FIXED)),
    (str(FIXED), str(FIXED)),  # LangServe's
    (str(FIXED).upper(), str(FIXED)),
    ("{" + FIXED.hex + "}", str(FIXED)),
    (4711, "4711"),
    ("request-17", "request-17"),
    (None, None),  # LangChain makes one
])
def test_a_run_id_in_any_form_makes_one_record_of_the_whole_run(handler, sink, given, carried):
    config = {"callbacks": [handler], **({} if given is None else {"run_id": given})}
    assert rag_chain().invoke(QUESTION, config=config) == GROUNDED_ANSWER
    assert handler.monitor.flush(10)
    [record] = sink.records
    assert (record.question, record.contexts, record.answer) == \
        (QUESTION, [BY_ID["en-paris"].page_content], GROUNDED_ANSWER)
    if carried is None:
        assert uuid.UUID(record.run_id) and record.run_id == record.id
    else:
        assert record.run_id == record.id == carried


def test_the_keys_of_every_form_of_one_uuid_are_one_key():
    forms = [FIXED, str(FIXED), str(FIXED).upper(), FIXED.hex, "{" + str(FIXED) + "}", f"urn:uuid:{FIXED}"]
    assert {run_key(form) for form in forms} == {FIXED.int}
    assert {run_text(form) for form in forms} == {str(FIXED)}
    assert (run_key(7), run_key("job-7"), run_text(7), run_text("job-7")) == (7, "job-7", "7", "job-7")


@pytest.mark.parametrize(("value", "cause"), [
    (object(), "run_id of type object"),
    (3.5, "run_id of type float"),
    (b"\x00\x01", "run_id of type bytes"),
    ("", "run_id is an empty or overlong string"),
    ("x" * 201, "run_id is an empty or overlong string"),
    (True, "run_id of type bool"),
])
def test_an_id_that_is_no_id_is_unreadable_and_said_by_its_type_only(value, cause):
    with pytest.raises(UnreadableEvent) as raised:
        run_key(value)
    assert raised.value.cause == cause


def test_tags_and_metadata_of_any_type_are_read_as_far_as_they_can_be():
    assert (tag_list("solo"), tag_list(("a", 1, "b")), tag_list(5), tag_list(None)) == (["solo"], ["a", "b"], [], [])
    assert (metadata_dict({"k": 1}), metadata_dict([("k", 1)]), metadata_dict("x"), metadata_dict({1: "a", "b": 2})) \
        == ({"k": 1}, {}, {}, {"b": 2})


def test_a_run_whose_id_cannot_be_read_makes_no_record_and_none_of_its_steps_becomes_a_root(
        handler, sink, capture_delta, caplog, unsaid_reasons):
    """The root's id is an object LangChain passes on as it is: the root and every step below it are unreadable
    (their parent id is that object). Nothing is recorded: not the root, and not its ``retriever | format`` step
    as a root of its own (whose "answer" would be the retrieved text). Said once, however often it happens."""
    with caplog.at_level(logging.WARNING, logger="groundtrace"):
        for _ in range(3):
            assert rag_chain().invoke(QUESTION, config={"callbacks": [handler], "run_id": object()}) == GROUNDED_ANSWER
    assert handler.monitor.flush(10)
    assert sink.records == []
    moved = capture_delta()
    assert moved.get("recorded", 0) == 0
    assert set(moved.get("no_record", {})) <= {UNREADABLE}, moved
    assert moved["callback_errors"] >= 3
    said = [r.getMessage() for r in caplog.records if "could not be read" in r.getMessage()]
    assert said and all("(run_id of type object)" in line or "(parent_run_id of type object)" in line for line in said)
    assert len(said) == len(set(said)), said  # once per cause
    assert said[0].startswith("groundtrace: LangChain: on_chain_start could not be read (run_id of type object): "
                              "the run it belongs to makes no record"), said


def test_a_failure_inside_a_run_makes_no_record_rather_than_a_partial_one(handler, sink, capture_delta, caplog,
                                                                          unsaid_reasons, monkeypatch):
    """The retriever's end cannot be read (a failure of groundtrace's own, here forced): the run's answer would
    otherwise be scored against no contexts, or against what a later step carried."""
    import groundtrace_langchain.handler as handler_module

    def broken(document):
        raise RuntimeError("a document groundtrace cannot copy")

    monkeypatch.setattr(handler_module, "_snapshot", broken)
    with caplog.at_level(logging.WARNING, logger="groundtrace"):
        for _ in range(2):
            assert rag_chain().invoke(QUESTION, config={"callbacks": [handler]}) == GROUNDED_ANSWER
    assert handler.monitor.flush(10)
    assert sink.records == []
    moved = capture_delta()
    assert moved["roots"] == 2 and moved["no_record"] == {UNREADABLE: 2} and moved["callback_errors"] == 2, moved
    said = [r.getMessage() for r in caplog.records if "LangChain: on_retriever_end" in r.getMessage()]
    [line] = said  # where it failed, never its message (it may quote the request's text)
    assert line.startswith("groundtrace: LangChain: on_retriever_end failed (RuntimeError at test_lc_run_ids.py:")
    assert "cannot copy" not in line and line.endswith(
        "): the run it belongs to makes no record (said once per cause; counted in stats().callback_errors and "
        "no_record)"), line
    no_record = [r.getMessage() for r in caplog.records if UNREADABLE in r.getMessage()]
    assert len(no_record) == 1 and no_record[0].startswith("groundtrace: a LangChain turn made no record: " + UNREADABLE)


def test_events_given_by_hand_with_string_ids_odd_tags_and_metadata_make_one_record(handler, sink):
    """What a server of its own may send straight to the handler: string run ids, a tag as a bare string, metadata
    that is no mapping. The record is whole; the tags read as far as they can be."""
    root, retriever, model = "request-9", str(uuid.uuid4()), 12
    question = {"question": QUESTION}
    handler.on_chain_start({}, question, run_id=root, parent_run_id=None, tags="staging", metadata=["not", "a map"],
                           name="served")
    handler.on_retriever_start({}, QUESTION, run_id=retriever, parent_run_id=root)
    handler.on_retriever_end([BY_ID["en-paris"]], run_id=retriever, parent_run_id=root)
    handler.on_chat_model_start({}, [[HumanMessage(f"Context: {BY_ID['en-paris'].page_content}\n{QUESTION}")]],
                                run_id=model, parent_run_id=root)
    handler.on_llm_end(LLMResult(generations=[[ChatGeneration(message=AIMessage(GROUNDED_ANSWER))]]),
                       run_id=model, parent_run_id=root)
    handler.on_chain_end(GROUNDED_ANSWER, run_id=root, parent_run_id=None)
    assert handler.monitor.flush(10)
    [record] = sink.records
    assert (record.run_id, record.question, record.contexts, record.answer) == \
        ("request-9", QUESTION, [BY_ID["en-paris"].page_content], GROUNDED_ANSWER)
    assert record.metadata["tags"] == ["staging"] and record.metadata["run_metadata"] == {}


def test_a_document_list_of_any_shape_from_a_retriever_is_still_one_record(handler, sink):
    """A retriever's documents as a tuple (LangChain types them as a list): copied as they came."""
    root, retriever = uuid.uuid4(), uuid.uuid4()
    handler.on_chain_start({}, QUESTION, run_id=root, parent_run_id=None)
    handler.on_retriever_start({}, QUESTION, run_id=retriever, parent_run_id=root)
    handler.on_retriever_end((Document(page_content="Paris is the capital of France."),), run_id=retriever,
                             parent_run_id=root)
    handler.on_chain_end(GROUNDED_ANSWER, run_id=root)
    assert handler.monitor.flush(10)
    [record] = sink.records
    assert record.contexts == ["Paris is the capital of France."] and record.answer == GROUNDED_ANSWER


def test_the_handler_keeps_its_key_for_a_langserve_run_across_every_step(handler):
    """One LangServe-style run: its steps name their parent by the string LangChain was given."""
    assert isinstance(handler, GroundtraceCallbackHandler)
    run = str(uuid.uuid4())
    handler.on_chain_start({}, QUESTION, run_id=run, parent_run_id=None)
    step = uuid.uuid4()
    handler.on_chain_start({}, QUESTION, run_id=step, parent_run_id=run)
    from groundtrace_langchain.collector import COLLECTOR

    assert COLLECTOR.root_of(handler._scope, step.int) is COLLECTOR.root_of(handler._scope, uuid.UUID(run).int)
    handler.on_chain_end("x", run_id=step, parent_run_id=run)
    handler.on_chain_error(RuntimeError("stop"), run_id=run)
