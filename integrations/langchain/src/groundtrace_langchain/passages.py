"""What a turn's retrievals and tool calls gave, as the capture kit's Passages: a retriever's Documents, a tool's
output (and the Documents of its artifact), a marked retrieval's return value, tool results of earlier turns of a
thread; sorted into the turn's candidate contexts and what is set aside (groundtrace_langchain.records builds the
Record from them)."""

from __future__ import annotations

from typing import Any

from groundtrace.capture.turn import DOCUMENT, TOOL, Passage, ToolFilter
from groundtrace.record import CUT_FROM, MAX_CONTEXT_CHARS, cap
from langchain_core.documents import Document
from langchain_core.messages import ToolMessage

from groundtrace_langchain.collector import COLLECTOR, Retrieval, RootRun, ToolRun
from groundtrace_langchain.events import RunKey, key_text
from groundtrace_langchain.extract import (
    artifact_documents,
    is_error,
    requested_tool_calls,
    source_id,
    tool_output_text,
)


def tool_key(root: RootRun, run: RunKey | None) -> str | None:
    """What names a tool call: its tool_call_id, else its run id."""
    if run is None:
        return None
    tool = root.tools.get(run)
    return tool.call_id if tool is not None and tool.call_id else key_text(run)


def document_passage(retrieval: Retrieval, document: Document, tool_key: str | None, tool_name: str | None) -> Passage:
    passage = Passage(cap(document.page_content, MAX_CONTEXT_CHARS), DOCUMENT, retrieval.name, source_id(document),
                      within=tool_key, metadata={"document": document, "tool": tool_name})
    if len(document.page_content) > MAX_CONTEXT_CHARS:  # cut where it is read: the Record says so
        passage.metadata[CUT_FROM] = len(document.page_content)
    return passage


def tool_passage(name: str | None, text: str, key: str | None, within: str | None = None,
                  error: bool = False) -> Passage:
    """A tool's output; ``within``: the tool call it ran inside (a sub-agent's tool inside an
    agent called as a tool), which what reached the answer from inside it represents; ``error``: the
    call failed, as the framework says (never a context)."""
    return Passage(text, TOOL, name, key, within=within, metadata={"tool": name}, error=error)


def tool_passages(name: str | None, output: Any, key: str | None, within: str | None = None,
                   earlier: bool = False, text: str | None = None) -> list[Passage]:
    """A tool's output (a ToolMessage, or what the tool returned) as passages: its text, then, for a
    ``content_and_artifact`` tool whose artifact is Documents, each Document, which stand for the text
    (their ids and metadata kept) wherever they reached the model. ``earlier``: an earlier turn's
    output (the caller names the turn, when it is remembered); ``text``: the output's, if read already."""
    if text is None:
        text = tool_output_text(output)
    if not text or not text.strip():
        return []
    text = cap(text, MAX_CONTEXT_CHARS)
    if is_error(output):
        return [tool_passage(name, text, key, within, error=True)]
    found = [tool_passage(name, text, key, within)]
    for document in artifact_documents(output) or ():
        if document.page_content.strip():
            found.append(Passage(document.page_content, DOCUMENT, name, source_id(document), within=key,
                                 metadata={"document": document, "tool": name}))
    if earlier:
        for passage in found:
            passage.metadata["earlier_turn"] = True
    return found


def within_tool(passage: Passage, key: str | None, tool_name: str | None) -> Passage:
    """A marked retrieval's passage, as retrieved inside the tool call its function ran in (if any)."""
    passage.within = key
    if tool_name is not None:
        passage.metadata["tool"] = tool_name
    return passage


class Candidates:
    """The passages of a turn, sorted into candidate contexts and what is set aside at once."""

    def __init__(self) -> None:
        self.marked: list[Passage] = []  # of @groundtrace.retrieval calls (among the passages)
        self.passages: list[Passage] = []
        self.left_out: list[Passage] = []  # retrieved inside a tool the filter leaves out
        self.internal: list[Passage] = []  # a nested retriever's documents (a compression's input)
        self.retrieved = False  # a (top-level) retriever ran, even if it found nothing
        self.filtered_tools = False  # a tool's output was left out by the filter


def in_call_order(root: RootRun, call_order: dict[str, int]) -> list[Retrieval | ToolRun]:
    """The root's sources in start order, except that tool calls the answer's model call read are
    in the order it read them: parallel tool calls start in any order, the model reads them in the
    order it asked for them. A tool call moves with the retrievals made inside it."""
    if not call_order or not root.tools:  # a chain: nothing to reorder
        return list(root.sources)
    units: list[list[Retrieval | ToolRun]] = []
    unit_of: dict[RunKey, list[Retrieval | ToolRun]] = {}
    for source in list(root.sources):
        if isinstance(source, Retrieval) and source.tool in unit_of:
            unit_of[source.tool].append(source)
            continue
        unit: list[Retrieval | ToolRun] = [source]
        units.append(unit)
        if isinstance(source, ToolRun):
            unit_of[source.run] = unit

    # the units of tool calls the model read trade places among themselves, by the order it read them
    read = {i: call_order[unit[0].call_id] for i, unit in enumerate(units)
            if isinstance(unit[0], ToolRun) and unit[0].call_id in call_order}
    moved = [units[i] for i in sorted(read, key=read.__getitem__)]
    for slot, unit in zip(sorted(read), moved, strict=True):
        units[slot] = unit
    return [source for unit in units for source in unit]


def candidates(root: RootRun, history: list[Passage], call_order: dict[str, int], tools: ToolFilter) -> Candidates:
    found = Candidates()
    found.passages.extend(history)
    for source in in_call_order(root, call_order):
        if isinstance(source, ToolRun):
            key, within = tool_key(root, source.run), tool_key(root, source.parent)
            if source.failed is not None:  # it raised: whatever a handler made of it is no context
                found.passages.append(tool_passage(source.name, source.failed, key, within, error=True))
            elif source.ended:
                passages = tool_passages(source.name, source.output, key, within)
                found.passages.extend(passages)
                found.filtered_tools |= bool(passages) and not tools.allows(source.name)
            continue
        tool = root.tools.get(source.tool) if source.tool is not None else None
        key, name = tool_key(root, source.tool), tool.name if tool is not None else None
        if source.marked is not None:  # a @groundtrace.retrieval call: its return value, read now
            marked = source.marked.candidate()
            passages = [] if marked is None else [within_tool(p, key, name) for p in marked.passages]
            found.marked.extend(passages)
        else:
            passages = [document_passage(source, d, key, name) for d in source.documents or () if d.page_content.strip()]
        if source.nested:
            found.internal.extend(passages)
            continue
        found.retrieved = True
        if tool is not None and not tools.allows(tool.name):
            found.left_out.extend(passages)
            found.filtered_tools = True
        else:
            found.passages.extend(passages)
    return found


def history(messages: list[ToolMessage], root: RootRun) -> list[Passage]:
    """Tool results in the answer call's input that no tool run of this turn produced: an earlier
    turn's, carried by a checkpointed thread (only what the final call read), or an error message a
    tool node or middleware of this turn put there for a call that ran no tool (a call it refused)."""
    own = {tool.call_id for tool in root.tools.values() if (tool.ended or tool.failed) and tool.call_id}
    asked = {key for call in root.turn.calls for key in requested_tool_calls(call.output)}
    this_turn = str(root.run_id)
    passages = []
    for message in messages:
        if message.tool_call_id in own:
            continue
        own.add(message.tool_call_id)  # a message read by several calls counts once
        if is_error(message):
            # this turn's failed call; an earlier turn's error was that turn's (its record counted it)
            if message.tool_call_id in asked:
                passages.extend(tool_passages(message.name, message, message.tool_call_id))
            continue
        text = tool_output_text(message)
        found = tool_passages(message.name, message, message.tool_call_id, earlier=True, text=text)
        # the turn that ran it, if this process remembers it (not this turn: its runs are its own)
        before = COLLECTOR.earlier_calls().find(message.tool_call_id, text) if found and text is not None else None
        if before is not None and before.turn != this_turn:
            for passage in found:
                passage.metadata["turn"] = before.turn
        passages.extend(found)
    return passages
