"""The pure functions that read questions, answers and documents out of LangChain values."""

from __future__ import annotations

from langchain_core.documents import Document
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, Generation, LLMResult
from langchain_core.prompts import ChatPromptTemplate
from langgraph.types import Command
from pydantic import BaseModel

from groundtrace_langchain.extract import (
    answer_from_output,
    call_input_text,
    document_summary,
    generation_text,
    message_text,
    question_from_input,
    replies_read,
    tool_messages,
    tool_output_text,
    tool_query,
)


def test_question_from_a_string_and_from_dict_keys_in_order():
    assert question_from_input("Какая столица России?") == "Какая столица России?"
    assert question_from_input({"question": "q1", "input": "i1", "query": "x"}) == "q1"
    assert question_from_input({"input": "i1", "query": "x"}) == "i1"
    assert question_from_input({"query": "x", "other": "y"}) == "x"
    assert question_from_input({"other": "y"}) is None
    assert question_from_input(42) is None
    assert question_from_input(None) is None


def test_question_from_the_last_human_message_in_every_message_shape():
    history = [SystemMessage("be brief"), HumanMessage("first"), AIMessage("reply"), HumanMessage("second")]
    assert question_from_input(history) == "second"
    assert question_from_input({"messages": history}) == "second"
    assert question_from_input({"input": [("system", "s"), ("user", "tuple form")]}) == "tuple form"
    dict_messages = [{"role": "user", "content": "dict form"}, {"role": "assistant", "content": "a"}]
    assert question_from_input(dict_messages) == "dict form"
    assert question_from_input(HumanMessage("alone")) == "alone"
    prompt_value = ChatPromptTemplate.from_messages([("system", "ctx"), ("human", "{q}")]).invoke({"q": "from a prompt"})
    assert question_from_input(prompt_value) == "from a prompt"
    assert question_from_input([AIMessage("no human here")]) is None


def test_message_text_joins_text_blocks_and_skips_others():
    message = AIMessage(content=[{"type": "text", "text": "Paris "}, {"type": "image_url", "image_url": {"url": "u"}},
                                 "is the capital."])
    assert message_text(message) == "Paris is the capital."


def test_answer_from_strings_messages_and_dict_keys():
    assert answer_from_output("plain") == "plain"
    assert answer_from_output(AIMessage("from a message")) == "from a message"
    assert answer_from_output({"output": "o", "result": "r"}) == "o"
    assert answer_from_output({"answer": AIMessage("state answer"), "output": "o"}) == "state answer"
    assert answer_from_output({"text": "t"}) == "t"
    conversation = [HumanMessage("q"), AIMessage("a1"), AIMessage("a2"), HumanMessage("q2")]
    assert answer_from_output({"messages": conversation}) == "a2"
    assert answer_from_output({"documents": []}) is None
    assert answer_from_output(None) is None


def test_answer_key_is_the_only_key_read_when_given():
    output = {"answer": "default", "final": "configured"}
    assert answer_from_output(output, answer_key="final") == "configured"
    assert answer_from_output(output, answer_key="missing") is None


def test_generation_text_of_chat_and_text_generations():
    chat = LLMResult(generations=[[ChatGeneration(message=AIMessage("chat text"))]])
    assert generation_text(chat) == "chat text"
    assert generation_text(LLMResult(generations=[[Generation(text="plain text")]])) == "plain text"
    assert generation_text(LLMResult(generations=[])) is None
    assert generation_text(None) is None


def test_document_summary_keeps_scalar_metadata_only():
    document = Document(page_content="x", id="d1", metadata={
        "source": "f.md", "page": 3, "score": 0.5, "ok": True, "none": None,
        "vector": [0.1, 0.2], "nested": {"a": 1}, "long": "y" * 400,
    })
    assert document_summary(document) == {
        "id": "d1", "source": "f.md",
        "metadata": {"source": "f.md", "page": 3, "score": 0.5, "ok": True, "none": None, "long": "y" * 300},
    }


def test_a_model_calls_input_is_the_text_of_all_its_messages_or_prompts():
    messages = [[SystemMessage("Context: the museum opens at 9."), HumanMessage("When?"),
                 AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": "c1"}]), ToolMessage("9 am", tool_call_id="c1")]]
    assert call_input_text(messages) == "Context: the museum opens at 9.\nWhen?\n\n9 am"
    assert call_input_text(["prompt one", "prompt two"]) == "prompt one\nprompt two"
    assert call_input_text([]) is None
    assert call_input_text(None) is None


def test_tool_messages_and_replies_leave_handoffs_and_cleared_results_out():
    kept = ToolMessage("Adult tickets cost 20 euros.", tool_call_id="c1", name="search")
    handoff = ToolMessage("Successfully transferred to research", tool_call_id="c2",
                          response_metadata={"__handoff_destination": "research"})
    back = ToolMessage("Successfully transferred back to supervisor", tool_call_id="c3",
                       response_metadata={"__is_handoff_back": True})
    cleared = ToolMessage("[cleared]", tool_call_id="c4")
    reply = AIMessage("The research agent says 20 euros.", name="research")
    messages = [[HumanMessage("q"), kept, handoff, back, cleared, reply]]
    assert tool_messages(messages) == [kept]
    assert replies_read(messages) == ["Adult tickets cost 20 euros.", "[cleared]", "The research agent says 20 euros."]


class Opening(BaseModel):
    day: str
    opens: str


def test_tool_output_text_of_every_shape_a_tool_returns():
    assert tool_output_text(ToolMessage("found it", tool_call_id="c")) == "found it"
    assert tool_output_text(ToolMessage([{"type": "text", "text": "block "}, {"type": "text", "text": "text"}],
                                        tool_call_id="c")) == "block text"
    assert tool_output_text("plain") == "plain"
    assert tool_output_text({"price": 20, "currency": "EUR"}) == '{"price": 20, "currency": "EUR"}'
    assert tool_output_text(["a", "б"]) == '["a", "б"]'
    assert tool_output_text(42) == "42"
    assert tool_output_text(Opening(day="Tuesday", opens="09:00")) == '{"day":"Tuesday","opens":"09:00"}'
    assert tool_output_text([Document(page_content="one"), Document(page_content="two")]) == "one\n\ntwo"
    assert tool_output_text(Command(update={"messages": [ToolMessage("via command", tool_call_id="c")]})) == "via command"
    assert tool_output_text(Command(goto="agent", update={"messages": [ToolMessage("moved", tool_call_id="c")]})) is None
    assert tool_output_text(None) is None


def test_tool_query_is_the_query_argument_the_only_string_or_the_arguments_as_json():
    assert tool_query({"query": "adult price", "k": 3}) == "adult price"
    assert tool_query({"question": "when?"}) == "when?"
    assert tool_query({"request": "ask this"}) == "ask this"
    assert tool_query({"day": "Tuesday", "section": "garden"}) == '{"day": "Tuesday", "section": "garden"}'
    assert tool_query({"n": 3}) == '{"n": 3}'
    assert tool_query("raw input") == "raw input"
    assert tool_query({}) is None and tool_query(None) is None
