"""groundtrace.capture.turn: documents retrieved inside a tool call follow that tool's filter (a tool left out
with exclude_tools must not come back as the documents it returned)."""

from __future__ import annotations

from groundtrace.capture.turn import TOOL, Passage, ToolFilter, select_contexts

DOC = "The museum opens at 9 am and closes at 6 pm every day except Monday."
CLOCK = "Today is Monday, the 2nd of March 2026."


def passages() -> list[Passage]:
    return [Passage(DOC, id="doc-a", within="call-1"), Passage(DOC, kind=TOOL, name="search", id="call-1"),
            Passage(CLOCK, kind=TOOL, name="clock", id="call-2")]


def test_documents_of_an_excluded_tool_are_not_contexts():
    prompt = f"tool: {DOC}\ntool: {CLOCK}"
    selection = select_contexts(passages(), prompt, ToolFilter.of(exclude=["search"]))
    assert [p.id for p in selection.contexts] == ["call-2"]
    assert [p.id for p in selection.unused] == ["doc-a", "call-1"]
    selection = select_contexts(passages(), prompt, ToolFilter.of(include=["search"]))
    assert [p.id for p in selection.contexts] == ["doc-a"]  # the tool is represented by its document
    assert [p.id for p in selection.unused] == ["call-2"]


def test_a_document_whose_tool_call_is_unknown_is_never_filtered():
    orphan = Passage(DOC, id="doc-b", within="call-9")
    assert [p.id for p in select_contexts([orphan], DOC, ToolFilter.of(include=["clock"])).contexts] == ["doc-b"]
