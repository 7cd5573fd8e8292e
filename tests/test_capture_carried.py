"""groundtrace.capture.carried: contexts read from what reached the model when no retriever or tool ran."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from groundtrace.capture.carried import (
    DOCUMENTS,
    PROMPT,
    TEXT,
    choose,
    is_context_name,
    item_origin,
    may_carry_output,
    name_words,
    output_candidates,
    prompt_candidates,
    prompt_variables,
    read_item,
    read_items,
    split_joined,
)

HOURS = "The museum opens at 9 am and closes at 6 pm every day."
PRICES = "An adult ticket costs 15 euros; children under 12 enter free."
QUESTION = "When does the museum open?"


@dataclass
class Doc:  # the shape of a LangChain Document, duck-typed
    page_content: str
    id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class Node:  # the shape of a LlamaIndex TextNode
    text: str
    node_id: str
    metadata: dict[str, Any] = field(default_factory=dict)

    def get_content(self) -> str:
        return self.text


@dataclass
class Scored:  # the shape of a LlamaIndex NodeWithScore
    node: Node
    score: float


@pytest.mark.parametrize(("name", "words", "context"), [
    ("context", ["context"], True),
    ("context_str", ["context", "str"], True),
    ("retrievedDocs", ["retrieved", "docs"], True),
    ("docs_content", ["docs", "content"], True),
    ("search_results", ["search", "results"], False),
    ("question", ["question"], False),
    ("chat_history", ["chat", "history"], False),
])
def test_a_name_is_a_contexts_by_its_words(name, words, context):
    assert name_words(name) == words
    assert is_context_name(name) is context


def test_variables_named_like_contexts_are_the_contexts_and_none_else():
    variables = {"question": QUESTION, "context": HOURS, "tone": "a friendly tone please, always polite"}
    assert prompt_variables(variables, QUESTION) == [("context", HOURS)]


def test_without_a_context_name_the_variables_left_after_the_question_and_history_are():
    variables = {"question": QUESTION, "chat_history": ["earlier"], "language": "English", "facts": HOURS,
                 "user_input": "the question under another name, long enough to count"}
    # the question by name (question, user_input), the history by name, a short value ("English"): eliminated
    assert prompt_variables(variables, QUESTION) == [("facts", HOURS)]
    # the question by value, whatever its name
    assert prompt_variables({"q_text": QUESTION, "facts": HOURS}, QUESTION) == [("facts", HOURS)]


def test_an_empty_context_variable_holds_nothing():
    assert prompt_variables({"context": "  ", "question": QUESTION}, QUESTION) == []


def test_rule_lines_split_a_joined_string_paragraphs_do_not():
    assert split_joined(f"{HOURS}\n---\n{PRICES}") == [HOURS, PRICES]
    assert split_joined(f"{HOURS}\n\n***\n\n{PRICES}\n=====\nThird.") == [HOURS, PRICES, "Third."]
    assert split_joined(f"{HOURS}\n\n{PRICES}") == [f"{HOURS}\n\n{PRICES}"]  # two paragraphs of one passage?


def test_numbered_markers_split_when_they_count_up_from_one():
    text = f"Sources:\n[1] {HOURS}\n[2] {PRICES}"
    assert split_joined(text) == ["Sources:", f"[1] {HOURS}", f"[2] {PRICES}"]
    assert split_joined(f"Document 1: {HOURS}\nDocument 2: {PRICES}") == [f"Document 1: {HOURS}",
                                                                           f"Document 2: {PRICES}"]
    # numbers that do not count 1, 2, ... are not markers (a list of years, a citation of one)
    assert split_joined(f"[3] {HOURS}\n[7] {PRICES}") == [f"[3] {HOURS}\n[7] {PRICES}"]
    assert split_joined(f"[1] {HOURS}") == [f"[1] {HOURS}"]


def test_items_are_read_by_their_shape():
    assert read_item("text") is not None and read_item("text").text == "text"
    document = read_item(Doc(HOURS, "hours", {"source": "hours.md"}))
    assert (document.text, document.id, document.metadata) == (HOURS, "hours", {"source": "hours.md"})
    assert read_item(Doc(HOURS, None, {"source": "hours.md"})).id == "hours.md"  # no id: its source names it
    node = read_item(Scored(Node(PRICES, "n1", {"page": 2}), 0.75))
    assert (node.text, node.id, node.metadata, node.score) == (PRICES, "n1", {"page": 2}, 0.75)
    hit = read_item({"id": 7, "text": HOURS, "metadata": {"source": "db"}})
    assert (hit.text, hit.id, hit.metadata) == (HOURS, "7", {"source": "db"})
    pair = read_item((Doc(HOURS, "hours"), 0.5))  # similarity_search_with_score
    assert (pair.text, pair.id, pair.score) == (HOURS, "hours", 0.5)
    assert read_item({"role": "user", "content": "hi"}) is None  # a chat message is no passage
    assert read_item(42) is None


def test_a_list_counts_what_it_could_not_read():
    items, unreadable = read_items([HOURS, 42, Doc(PRICES)])
    assert [item.text for item in items] == [HOURS, PRICES] and unreadable == 1
    assert read_items([42]) is None
    assert read_items("") is None


def test_prompt_candidates_are_one_passage_per_item_and_say_their_variable():
    [documents] = prompt_candidates({"context": [Doc(HOURS, "hours"), Doc(PRICES, "prices")], "question": QUESTION},
                                    QUESTION)
    assert (documents.origin, documents.tier) == ("prompt variable 'context'", DOCUMENTS)
    assert [p.text for p in documents.passages] == [HOURS, PRICES]
    [text] = prompt_candidates({"context": f"{HOURS}\n\n{PRICES}", "question": QUESTION}, QUESTION)
    assert (text.tier, [p.text for p in text.passages]) == (PROMPT, [f"{HOURS}\n\n{PRICES}"])


def test_step_outputs_are_documents_or_text_under_context_keys():
    [returned] = output_candidates([Doc(HOURS, "hours")], "search")
    assert (returned.origin, returned.tier) == ("output of 'search'", DOCUMENTS)
    [state] = output_candidates({"question": QUESTION, "context": HOURS}, "retrieve")
    assert (state.origin, state.tier) == ("output 'context' of 'retrieve'", TEXT)
    assert output_candidates(["just", "strings"], "split") == []  # strings without a key: anything at all
    assert output_candidates({"answer": HOURS}, "generate") == []


def test_the_cheap_test_at_each_steps_end():
    assert may_carry_output([Doc(HOURS)]) is True
    assert may_carry_output({"context": HOURS}) is True
    assert may_carry_output({"context": ""}) is False
    assert may_carry_output(["a", "b"]) is False and may_carry_output("text") is False and may_carry_output([]) is False


def test_choose_takes_the_first_tier_that_reached_the_model():
    documents = output_candidates([Doc(HOURS, "hours"), Doc(PRICES, "prices")], "search")
    prompt = prompt_candidates({"context": HOURS, "question": QUESTION}, QUESTION)
    model_input = f"Answer from: {HOURS}\nQuestion: {QUESTION}"

    chosen = choose(prompt + documents, model_input)
    # Documents come first, and only the one that reached the model is a context; the other is set aside
    assert [p.text for p in chosen.selection.contexts] == [HOURS]
    assert [p.id for p in chosen.selection.unused] == ["prices"]
    assert chosen.origin == "output of 'search'" and chosen.selection.unchecked is False


def test_a_tier_that_never_reached_the_model_gives_way_to_the_next():
    condense = prompt_candidates({"context": PRICES, "question": QUESTION}, QUESTION)  # another call's prompt
    state = output_candidates({"context": HOURS}, "retrieve")
    chosen = choose(condense + state, f"Context: {HOURS}")
    assert ([p.text for p in chosen.selection.contexts], chosen.origin) == ([HOURS], "output 'context' of 'retrieve'")


def test_when_nothing_reached_it_the_first_tier_is_kept_unchecked():
    chosen = choose(prompt_candidates({"context": HOURS}, None), "an unrelated prompt")
    assert [p.text for p in chosen.selection.contexts] == [HOURS] and chosen.selection.unchecked is True
    assert choose([], "anything") is None


def test_an_items_origin_is_its_id_source_scalar_metadata_and_score():
    [candidate] = output_candidates([(Doc(HOURS, "hours", {"source": "hours.md", "vector": [0.1], "page": 3}), 0.9)],
                                    "search")
    assert item_origin(candidate.passages[0]) == {"id": "hours", "source": "hours.md",
                                                  "metadata": {"source": "hours.md", "page": 3}, "score": 0.9}
