"""The pure functions that read questions, answers and documents out of LangChain values."""

from __future__ import annotations

from langchain_core.documents import Document
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, Generation, LLMResult
from langchain_core.prompts import ChatPromptTemplate

from groundtrace_langchain.extract import (
    answer_from_output,
    contexts_from_values,
    document_summary,
    generation_text,
    message_text,
    question_from_input,
    unique_documents,
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


def test_unique_documents_keeps_order_and_drops_same_text_from_the_same_source():
    a = Document(page_content="A", metadata={"source": "s1"})
    a_again = Document(page_content="A", metadata={"source": "s1", "score": 0.9})
    a_elsewhere = Document(page_content="A", metadata={"source": "s2"})
    b_with_id = Document(page_content="B", id="b", metadata={"source": "s1"})
    b_same_id = Document(page_content="B", id="b")
    result = unique_documents([[a, b_with_id], None, [a_again, a_elsewhere, b_same_id]])
    assert result == [a, b_with_id, a_elsewhere]


def test_document_summary_keeps_scalar_metadata_only():
    document = Document(page_content="x", id="d1", metadata={
        "source": "f.md", "page": 3, "score": 0.5, "ok": True, "none": None,
        "vector": [0.1, 0.2], "nested": {"a": 1}, "long": "y" * 400,
    })
    assert document_summary(document) == {
        "id": "d1", "source": "f.md",
        "metadata": {"source": "f.md", "page": 3, "score": 0.5, "ok": True, "none": None, "long": "y" * 300},
    }


def test_contexts_from_values_reads_documents_or_strings_under_known_keys():
    document = Document(page_content="passage")
    assert contexts_from_values(None, {"documents": [document]}) == [document]
    assert contexts_from_values({"contexts": ["one", "two"]}) == ["one", "two"]
    assert contexts_from_values({"context": "a formatted string is not a list of passages"}) is None
    assert contexts_from_values({"documents": [1, 2]}) is None
    assert contexts_from_values({"documents": []}) is None
