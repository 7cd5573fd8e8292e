"""The contexts of a finished run: every node and tool output it saw is a candidate
(groundtrace.capture.turn.Passage); those that reached the model call that wrote the answer, or a model call
whose reply it read, are the contexts (groundtrace.capture.turn: a passage written by a model of the turn
stands for what that model read).

So an agent with a QueryEngineTool has the nodes the engine's synthesis read as its contexts, and
the engine's answer (the tool's output, which the agent read) is set aside in ``unused_contexts``
as ``"model-written"``: an engine that makes something up and an agent that repeats it are measured
against the nodes. A tool whose model read no passage the run saw keeps its output as a context.
A reply may be handed over anywhere in an input here (a ReAct agent reads a tool's output as a
user message, "Observation: ..."; a refine step reads the answer so far in its prompt).

LlamaIndex's reading of that rule adds two things: the nodes a final Response names as its
``source_nodes`` are what its synthesizer was given, and a synthesizer may read them over several
model calls (refine, tree_summarize) of which the answer's call is only the last; so they count as
read by the answer's call. And where no model wrote the answer (a tool's output returned
directly), every candidate is kept, as when no model call was seen.

A tool call that failed (LlamaIndex said so: ``ToolOutput.is_error``) is an error passage, never a
context, even though its model read it. A tool whose raw output is nodes has those nodes as its
passages (read when the tool's text was). Neither this module nor run.py imports the other's
run: :class:`Candidates` is what is read of it here.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Protocol

from groundtrace.capture.carried import choose, item_origin, prompt_candidates
from groundtrace.record import CUT_FROM
from groundtrace.capture.turn import (
    DOCUMENT,
    TOOL,
    Passage,
    ToolFilter,
    Turn,
    appears_in,
    normalize,
    origin_of,
    select_contexts,
)
from llama_index.core.schema import NodeWithScore

from groundtrace.capture.earlier_turns import EarlierCalls
from groundtrace_llamaindex.extract import (
    llm_output_text,
    model_input_text,
    node_entry,
    tool_artifact_nodes,
    tool_messages,
)

# what a run keeps of each candidate until its end: (NODES, [NodeWithScore], the tool call they were
# retrieved inside), (TOOL_OUTPUT, ToolOutput, its tool call) or (MARKED, a @groundtrace.retrieval call, the
# tool call it ran inside)
NODES, TOOL_OUTPUT, MARKED = "nodes", "tool", "marked"
# what choose_contexts says of the contexts' length before any was cut where it was read (run.TurnEnd reads it)
CHARS = "_chars"


class Candidates(Protocol):
    """What a run (run.RootRun) has seen that this module reads at its end."""

    turn: Turn
    found: list[tuple[str, Any, str | None]]
    control_tools: frozenset[str]
    tool_names: dict[str, str]
    answer_call_unseen: bool
    prompts: list[dict[str, Any]]


def choose_contexts(run: Candidates, answer: str, response_nodes: list[Any], tools: ToolFilter,
                    earlier: EarlierCalls | None = None,
                    question: str | None = None) -> tuple[list[str], dict[str, Any]] | None:
    """The contexts and the metadata that says where each came from, or None when the run saw
    nothing that could be one (no retrieval, no tool output, no prompt variable). ``response_nodes``:
    the source nodes of what the root returned (extract.source_nodes), what a synthesizer read.
    ``earlier``: the tool calls of turns that ended (an earlier turn's output read from memory is named
    by its turn, and set aside if that call failed). ``question``: the turn's, never a prompt's context."""
    passages, latest, read_by_synthesizer, artifacts = run_passages(run, response_nodes)
    call = None if run.answer_call_unseen else run.turn.answer_call(answer, llm_output_text)
    reading = run.turn.reading(call, model_input_text, llm_output_text) if call is not None else None
    model_input, read = (reading.model_input, reading.read) if reading is not None else (None, [])
    if call is not None:
        passages.extend(unseen_tool_messages(call.input, passages, run.control_tools, earlier))
    if not passages:
        return _carried(run, model_input, read, question)
    if model_input is not None and returned_directly(answer, call, passages):
        # no model wrote it: nothing says which passages it came from; all are kept
        model_input, read = None, []
    if model_input is not None and artifacts:
        # a tool's nodes were read when its text (their serialization, maybe cut short) was
        haystack = "\n".join([normalize(model_input), *(reader.input for reader in read)])
        read_by_synthesizer.extend(text for tool_text, texts in artifacts if appears_in(tool_text, haystack)
                                   for text in texts)
    if read_by_synthesizer:
        model_input = "\n\n".join([model_input or "", *read_by_synthesizer])
    selection = select_contexts(passages, model_input, tools, read)
    metadata: dict[str, Any] = {"nodes": [origin(p, latest, run.tool_names) for p in selection.contexts]}
    if (marked := marked_origin(selection.contexts)) is not None:
        metadata["contexts_from"] = marked
    unused = selection.set_aside()
    if unused:
        metadata["unused_contexts"] = unused
    # an earlier turn's failed call is set aside, but it is no failure of this turn's own
    errors = replace(selection, errors=[p for p in selection.errors if "turn" not in p.metadata]).tool_errors()
    if errors is not None:
        metadata["tool_errors"] = errors
    metadata[CHARS] = sum(p.metadata.get(CUT_FROM, len(p.text)) for p in selection.contexts)
    return [p.text for p in selection.contexts], metadata


def run_passages(run: Candidates, response_nodes: list[Any]
                 ) -> tuple[list[Passage], dict[str, NodeWithScore], list[str], list[tuple[str, list[str]]]]:
    """Every candidate the run saw, in order (a node once per tool call it was retrieved in or
    returned by), each node's latest NodeWithScore (a reranker's or the response's score replaces
    the retriever's), the texts of the response's own nodes, and for each tool that returned nodes
    (its raw output), its text and theirs."""
    passages: list[Passage] = []
    latest: dict[str, NodeWithScore] = {}
    seen: set[tuple[str, str | None]] = set()
    response_texts: list[str] = []
    artifacts: list[tuple[str, list[str]]] = []

    def add_nodes(items: list[Any], within: str | None, texts: list[str] | None = None) -> None:
        for item in items:
            entry = node_entry(item)
            if entry is None:
                continue
            latest[entry.id] = item
            if texts is not None:
                texts.append(entry.text)
            if (entry.id, within) not in seen:
                seen.add((entry.id, within))
                passages.append(Passage(entry.text, DOCUMENT, id=entry.id, within=within,
                                        metadata={CUT_FROM: entry.length} if entry.length else {}))

    for kind, value, call_id in run.found:
        if kind == NODES:
            add_nodes(value, call_id)
            continue
        if kind == MARKED:  # a @groundtrace.retrieval call: its return value, read now
            marked = value.candidate()
            for passage in marked.passages if marked is not None else ():
                passage.within = call_id
                passages.append(passage)
            continue
        text = tool_output_text(value)
        if not text:
            continue
        # the framework's word that the call failed: its text is the error, never a context
        failed = getattr(value, "is_error", False) is True
        passages.append(Passage(text, TOOL, name=getattr(value, "tool_name", None), id=call_id, error=failed))
        nodes = [] if failed else tool_artifact_nodes(value)
        if nodes:  # the documents the text was made of stand for it
            texts: list[str] = []
            add_nodes(nodes, call_id, texts)
            artifacts.append((text, texts))
    add_nodes(response_nodes, None, response_texts)
    return passages, latest, response_texts, artifacts


def returned_directly(answer: str, call: Any, passages: list[Passage]) -> bool:
    """The answer is a tool's output handed to the user as it was (``return_direct=True``), not the
    output of the model call the kit fell back to."""
    wanted = normalize(answer)
    written = llm_output_text(call.output) if call is not None else None
    if written and wanted in normalize(written):
        return False
    return any(p.kind == TOOL and not p.error and normalize(p.text) == wanted for p in passages)


def tool_output_text(output: Any) -> str | None:
    try:
        content = output.content
    except Exception:
        return None
    return content if isinstance(content, str) else None


def unseen_tool_messages(model_input: Any, passages: list[Passage], control_tools: frozenset[str],
                         earlier: EarlierCalls | None = None) -> list[Passage]:
    """Tool outputs the answer's call read that no tool call of this run produced (an earlier
    turn's, kept in the agent's memory; a tool run outside LlamaIndex's instrumentation). Only the
    answer's call: a tool a sub-agent called inside a tool ran inside that outer call, whose nodes
    are passages already (and whose other results reach the answer only through the sub-agent's
    reply, which then stays a context: no passage stands for it). An earlier turn's output carries
    that turn's id (``metadata["turn"]``), and is an error passage when that turn's call failed.
    A failed call of this run is a passage already (an error one), so its message is known."""
    known = {normalize(p.text) for p in passages if p.kind == TOOL}
    found = []
    for message in tool_messages(model_input):
        if message.name in control_tools or normalize(message.text) in known:
            continue
        known.add(normalize(message.text))
        before = earlier.find(message.call_id, message.text) if earlier is not None else None
        passage = Passage(message.text, TOOL, name=message.name, id=message.call_id,
                          error=before is not None and before.error)
        if before is not None:
            passage.metadata["turn"] = before.turn
        found.append(passage)
    return found


def _carried(run: Candidates, model_input: str | None, read: list[Any],
             question: str | None) -> tuple[list[str], dict[str, Any]] | None:
    """With no node and no tool output: the contexts a prompt template's variables carried (capture.carried)."""
    candidates = [found for variables in list(run.prompts) for found in prompt_candidates(variables, question)]
    chosen = choose(candidates, model_input, read)
    if chosen is None:
        return None
    contexts = chosen.selection.contexts
    metadata: dict[str, Any] = {"nodes": [item_origin(p) for p in contexts], "contexts_from": chosen.origin}
    if chosen.selection.unchecked:
        metadata["contexts_unchecked"] = True
    return [p.text for p in contexts], metadata


def marked_origin(contexts: list[Passage]) -> str | None:
    """Where a turn's contexts came from when a @groundtrace.retrieval call is among them (capture.turn's
    rule: None, and no ``contexts_from``, when they all came from LlamaIndex's own retrievals and tools)."""
    return origin_of(contexts, lambda passage: "item" in passage.metadata)


def origin(passage: Passage, latest: dict[str, NodeWithScore], tool_names: dict[str, str]) -> dict[str, Any]:
    """Where a context came from: a node's id, score and metadata (and the tool it was retrieved in
    or returned by), or the tool whose output it is (and the earlier turn that called it)."""
    if "item" in passage.metadata:  # a @groundtrace.retrieval call's item
        marked = item_origin(passage)
        if passage.within is not None:
            marked["tool"] = tool_names.get(passage.within)
        return marked
    if passage.kind == TOOL:
        found: dict[str, Any] = {"tool": passage.name, "id": passage.id}
        if "turn" in passage.metadata:
            found["turn"] = passage.metadata["turn"]
        return found
    item = latest.get(passage.id or "")
    found = {"id": passage.id, "score": item.score if item is not None else None,
             "metadata": dict(item.node.metadata or {}) if item is not None else {}}
    if passage.within is not None:
        found["tool"] = tool_names.get(passage.within)
    return found
