"""build_record on root runs fed through the collector by hand, with LangChain's own message and
result types: the orderings and fallbacks that a scripted agent cannot force."""

from __future__ import annotations

import uuid

import pytest
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, LLMResult
from langgraph.types import Command

from groundtrace_langchain.collector import Collector, RootRun
from groundtrace_langchain.records import NothingToScore, build_record

SCOPE = 1
PRICES = "Adult ticket: 20 EUR online, 25 EUR at the door."
CLOCK = "It is 10:30 am at the museum on a Tuesday."
HOURS = Document(id="hours", page_content="The city museum opens at 9 am and closes at 6 pm every day except Monday.")


def result(text: str) -> LLMResult:
    return LLMResult(generations=[[ChatGeneration(message=AIMessage(text))]])


class Run:
    """A root run in a collector, fed the way the handler feeds it."""

    def __init__(self, inputs: object = None) -> None:
        self.collector = Collector()
        self.root_id = uuid.uuid4()
        self.root = RootRun(run_id=str(self.root_id), key=self.root_id.int, name="LangGraph", inputs=inputs, tags=[],
                            metadata={}, excluded=False, otel_ids=None, links={})
        self.collector.add_root(SCOPE, self.root)

    def tool(self, name: str, call_id: str | None, arguments: dict, output: object, parent: uuid.UUID | None = None) -> uuid.UUID:
        run = uuid.uuid4()
        self.collector.adopt_tool(SCOPE, run.int, (parent or self.root_id).int, name, arguments, call_id)
        self.root.tools[run.int].output = output
        return run

    def retrieve(self, query: str, documents: list[Document], parent: uuid.UUID | None = None) -> None:
        run = uuid.uuid4()
        self.collector.adopt_retriever(SCOPE, run.int, (parent or self.root_id).int, query, "KeywordRetriever")
        self.root.retrievals[run.int].documents = documents

    def model(self, messages: list, reply: str) -> None:
        self.root.turn.start_call([messages]).output = result(reply)

    def record(self, outputs: object, **options):
        return build_record(self.root, outputs, None, None, **options)


def test_parallel_tool_calls_are_contexts_in_the_order_the_model_asked_for_them():
    question = HumanMessage("What time is it, and what does a ticket cost?")
    run = Run({"messages": [question]})
    asked = AIMessage("", tool_calls=[{"name": "lookup_prices", "args": {"query": "adult"}, "id": "c1"},
                                      {"name": "search_museum", "args": {"query": "museum opens"}, "id": "c2"}])
    # started in the reverse order (a thread pool runs them), the search retrieving inside its tool
    search = run.tool("search_museum", "c2", {"query": "museum opens"}, ToolMessage(HOURS.page_content, tool_call_id="c2"))
    run.retrieve("museum opens", [HOURS], parent=search)
    run.tool("lookup_prices", "c1", {"query": "adult"}, ToolMessage(PRICES, tool_call_id="c1"))
    answer = "It opens at 9 am and an adult ticket costs 20 euros online."
    run.model([question, asked, ToolMessage(PRICES, tool_call_id="c1"), ToolMessage(HOURS.page_content, tool_call_id="c2")],
              answer)

    record = run.record({"messages": [question, AIMessage(answer)]})
    assert record.contexts == [PRICES, HOURS.page_content]
    assert [d.get("tool") for d in record.metadata["documents"]] == ["lookup_prices", "search_museum"]
    assert record.metadata["documents"][1]["id"] == "hours"  # the search's document stands for its output
    assert record.queries == ["museum opens", "adult"]  # derived in the order they were made


def test_a_handoff_command_is_routing_and_a_command_carrying_a_tool_message_is_content():
    run = Run("Where is the cafe?")
    run.tool("transfer_to_helpdesk", "h1", {}, Command(goto="helpdesk", update={
        "messages": [ToolMessage("Successfully transferred to helpdesk", tool_call_id="h1")]}))
    run.tool("find_cafe", "f1", {"query": "cafe"}, Command(update={
        "messages": [ToolMessage("The cafe is on the top floor, open from noon until 3 pm.", tool_call_id="f1")]}))
    run.model(["Where is the cafe? The cafe is on the top floor, open from noon until 3 pm. "
               "Successfully transferred to helpdesk"], "On the top floor.")

    record = run.record("On the top floor.")
    assert record.contexts == ["The cafe is on the top floor, open from noon until 3 pm."]


def test_without_a_question_in_the_input_the_first_derived_query_stands_in():
    run = Run({"topic": "tickets"})
    run.retrieve("adult ticket price", [HOURS])
    run.model(["Context: " + HOURS.page_content], "It opens at 9 am.")

    record = run.record({"reply": "It opens at 9 am."})
    assert (record.question, record.queries) == ("adult ticket price", None)
    assert record.metadata["question_from"] == "query"


def test_with_no_model_call_every_passage_is_kept_and_marked_unchecked():
    run = Run("When does it open?")
    run.retrieve("When does it open?", [HOURS, Document(page_content=PRICES)])
    record = run.record("9 am")  # the answer was assembled by code
    assert record.contexts == [HOURS.page_content, PRICES]
    assert record.metadata["contexts_unchecked"] is True
    assert [d["id"] for d in record.metadata["documents"]] == ["hours", None]


def test_contexts_the_application_carries_itself_are_taken_as_given():
    run = Run({"question": "When?", "contexts": ["Opens at 9.", HOURS]})
    run.model(["unrelated prompt"], "At 9.")
    record = run.record("At 9.")
    assert record.contexts == ["Opens at 9.", HOURS.page_content]
    assert record.metadata["documents"] == [{"id": None, "source": None, "metadata": {}},
                                            {"id": "hours", "source": None, "metadata": {}}]
    assert record.metadata["contexts_unchecked"] is True


def test_no_answer_and_no_source_are_reasons():
    run = Run("hello")
    run.model([SystemMessage("be kind"), HumanMessage("hello")], "Hi!")
    with pytest.raises(NothingToScore) as nothing:
        run.record({"messages": [AIMessage("Hi!")]})
    assert nothing.value.reason == "no retrieval and no tool output"

    run = Run("hello")
    run.retrieve("hello", [HOURS])
    run.root.turn.start_call([[HumanMessage("hello")]])  # a model call that never finished
    with pytest.raises(NothingToScore) as nothing:
        run.record(None)
    assert nothing.value.reason == "no answer"


def test_a_tool_called_without_a_tool_call_id_is_named_by_its_run_id():
    run = Run("What does a ticket cost?")
    tool_run = run.tool("lookup_prices", None, {"query": "adult"}, PRICES)  # a tool invoked as a Runnable
    run.model([f"Prices: {PRICES}"], "20 euros online.")
    record = run.record("20 euros online.")
    assert record.contexts == [PRICES]
    assert record.metadata["documents"] == [{"id": str(tool_run), "source": None, "metadata": {}, "tool": "lookup_prices"}]
