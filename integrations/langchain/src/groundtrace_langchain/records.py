"""Turn what a root run showed into a groundtrace Record, by the capture kit's definition of a turn
(groundtrace.capture.turn): the user's question, the derived queries, the answer, and the passages that
reached the model call that wrote it, or a call whose reply it read (a sub-agent's answer handed to
a supervisor, a tool that runs a model: the kit's rule). What is LangChain's own here: where a reply
may be handed over (AI and tool messages, never a handoff's acknowledgement), the tool calls a tool
ran inside, and tool results from earlier turns of a thread (named by the turn that ran them, when
this process remembers it: :func:`remember_tool_calls`). Everything here runs once per root:
:func:`remember_tool_calls` and :func:`read_end` on the application's thread when the root ends, :meth:`TurnEnd.finish` (most of the
work) later, in the Monitor's worker, and only for a Record the Monitor keeps."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from groundtrace.record import CUT_FROM, EXCLUDED, NO_TEXT, NOT_EXCLUDED, PendingRecord, Record, bounded
from groundtrace.trace_context import current_links
from groundtrace.capture.carried import (
    Carried,
    choose,
    item_origin,
    may_carry_output,
    output_candidates,
    prompt_candidates,
    prompt_variables,
)
from groundtrace.capture.turn import (
    DOCUMENT,
    ModelCall,
    Passage,
    Selection,
    ToolFilter,
    normalize,
    origin_of,
    select_contexts,
)

from groundtrace_langchain.collector import COLLECTOR, Retrieval, RootRun, ToolRun, report_failure
from groundtrace_langchain.passages import Candidates, candidates, history
from groundtrace_langchain.extract import (
    STEP_OUTPUTS,
    answer_from_output,
    call_input_text,
    document_summary,
    generation_text,
    response_id,
    question_from_input,
    replies_read,
    scalar_metadata,
    tool_messages,
    tool_output_text,
    tool_query,
)

SOURCE = "langchain"
NO_SOURCE = "no retrieval and no tool output"
NO_SOURCE_HINT = ("no retriever, tool, prompt variable or step output held its contexts (an f-string prompt?): "
                  "decorate your retrieval function with @groundtrace.retrieval (docs: troubleshooting, "
                  "'I see no scores')")
FILTERED = "only tools left out by include_tools/exclude_tools"
NO_ANSWER = "no answer"
NO_ANSWER_HINT = "the root's output holds no answer and no model call finished (answer_key= names a dict key)"


EVERY_TOOL = ToolFilter()


class NothingToScore(Exception):
    """A root run ended without what a grounding score needs: it makes no Record."""

    def __init__(self, reason: str, hint: str = "", called_model: bool = False) -> None:
        super().__init__(reason)
        # called_model: the turn called a model (an app that answered and could not be read): said at WARNING
        self.reason, self.hint, self.called_model = reason, hint, called_model


def _root_metadata(root: RootRun) -> dict[str, Any]:
    metadata: dict[str, Any] = {"source": SOURCE, "run_name": root.name, "tags": list(root.tags),
                                "run_metadata": scalar_metadata(root.metadata)}
    if root.excluded:  # the run's own flag, where the Monitor reads it: counted there, never scored
        metadata["groundtrace_exclude"] = True
    return metadata


def _links(root: RootRun) -> dict[str, str]:
    # Ids seen at the start win: they were read inside the request; the end may add ids that other
    # tools created lazily during the run. Nothing is attached to an excluded run's traces.
    if root.excluded:
        return {}
    found = current_links()
    return {**found, **root.links} if root.links else found


def _ids(root: RootRun) -> tuple[str | None, str | None]:
    return root.otel_ids if root.otel_ids is not None else (None, None)


def session_of(root: RootRun) -> str | None:
    """The conversation of a root: the framework's own id (LangGraph's thread_id, which reaches the run's
    metadata; RunnableWithMessageHistory's session_id), else the application's (groundtrace.session(),
    else a session_id in the run's metadata)."""
    for session in (root.metadata.get("thread_id"), root.history_session, root.given_session,
                    root.metadata.get("session_id")):
        if session is not None:
            return str(session)
    return None


def _origin(passage: Passage) -> dict[str, Any]:
    """Where a context came from, for metadata["documents"]: a document's id, source and scalar
    metadata (and the tool it was retrieved inside), or a tool call's id and tool name."""
    document = passage.metadata.get("document")
    if document is not None:
        found = document_summary(document)
    elif "item" in passage.metadata:  # read from a value (carried, or a @groundtrace.retrieval's return)
        found = item_origin(passage)
    else:
        found = {"id": passage.id, "source": None, "metadata": {}}
    if passage.metadata.get("tool") is not None:
        found["tool"] = passage.metadata["tool"]
    # a tool output of an earlier turn of the thread, read again: the turn's Record id, where this
    # process remembers it (else, another process's turn or one forgotten since, only that it was earlier)
    if "turn" in passage.metadata:
        found["turn"] = passage.metadata["turn"]
    elif passage.metadata.get("earlier_turn"):
        found["earlier_turn"] = True
    return found


def _unused(selection: Selection, found: Candidates) -> list[dict[str, Any]]:
    """Summaries (no text) of what was retrieved or returned and is not a context."""
    more = list(found.left_out)
    if found.internal:
        reached = {normalize(p.text) for p in selection.contexts}
        more.extend(p for p in found.internal if normalize(p.text) not in reached)
    return selection.set_aside(more)


def _queries(root: RootRun) -> None:
    """The queries derived on the way: retriever queries and tool arguments, in order."""
    for source in list(root.sources):
        root.turn.note_query(source.query if isinstance(source, Retrieval) else tool_query(source.inputs))


def build_record(root: RootRun, outputs: Any, end_inputs: Any, answer_key: str | None,
                 tools: ToolFilter = EVERY_TOOL) -> Record:
    """The Record of a finished root run, built at once (see :func:`read_end`).

    Raises NothingToScore when no retriever or tool ran and nothing that reached the model held contexts
    (not a RAG answer, or one groundtrace cannot read), or when there is no answer (a stream closed before
    its first chunk, a chain returning None)."""
    ended = read_end(root, outputs, end_inputs, answer_key, tools)
    return ended if isinstance(ended, Record) else ended.finish()


def read_end(root: RootRun, outputs: Any, end_inputs: Any, answer_key: str | None,
             tools: ToolFilter = EVERY_TOOL) -> Record | TurnEnd:
    """What the application's thread reads when a root ends: the question, the answer and the trace
    links (the input and output are the application's objects, which it may change or reuse as soon
    as the run returns, and the links belong to the request's context). When a retrieval, a tool's
    output or a value that reached the model (a prompt's variable, a step's output) makes this a turn,
    the rest (which passages reached the answer, the metadata, the Record's validation) waits in a
    :class:`TurnEnd`, to be built off the application's thread and only if the Record is kept; else
    NothingToScore is raised here."""
    # a streamed root starts with a placeholder input; its end event carries the real one
    inputs = end_inputs if end_inputs is not None else root.inputs
    question = question_from_input(inputs)
    answer = answer_from_output(outputs, answer_key)
    call = None
    if answer is None:  # the answer is the last model generation (the output is no text we know)
        call = root.turn.answer_call(None, generation_text)
        answer = generation_text(call.output) if call is not None else None
        if answer is None:
            raise NothingToScore(NO_ANSWER, NO_ANSWER_HINT)
    ended = TurnEnd(root, question, answer, call, _links(root), tools)
    if _is_turn(root, tools):  # its contexts are chosen among its retrievals and tool outputs
        return ended
    # the root's own input and output, as they are now: the application may reuse them once the run returned
    ended.ends = [(label, dict(value) if isinstance(value, Mapping) else list(value))
                  for label, value in (("output", outputs), ("input", inputs))
                  if type(value) in STEP_OUTPUTS and may_carry_output(value)]
    if ended.ends or _may_carry(root, question):
        return ended
    # nothing says yet that this is a turn: only the answer's model call may (an earlier turn's tool output
    # it read from a thread), so the Record is built here, or NothingToScore raised
    return ended.finish()


def _may_carry(root: RootRun, question: str | None) -> bool:
    """Whether a value that reached the model may hold contexts: a prompt's variables named like contexts
    (or, by elimination, not the question), or a step's output kept for its Documents or context-like keys.
    Cheap: names, types and lengths, no text read."""
    return any(run is not None or (isinstance(value, Mapping) and bool(prompt_variables(value, question)))
               for run, value in list(root.carried))





def _is_turn(root: RootRun, tools: ToolFilter) -> bool:
    """A retriever ran, or a tool that may be a context returned text: the Record will have its
    contexts chosen among them (what :meth:`TurnEnd.finish` then never refuses)."""
    sources = root.sources
    if any(isinstance(source, Retrieval) and not source.nested for source in sources):
        return True
    for source in sources:  # only then render tool outputs
        if isinstance(source, ToolRun) and source.failed is not None:
            return True  # a failed call is a turn's fact (its tool_errors), whatever the agent answered
        if isinstance(source, ToolRun) and source.ended and tools.allows(source.name):
            text = tool_output_text(source.output)
            if text and text.strip():
                return True
    return False


class TurnEnd(PendingRecord):
    """A root that ended, read as far as the application's thread needs to (:func:`read_end`): the
    Record to be, handed to the Monitor, whose worker builds it (:meth:`build`) if it keeps it."""

    __slots__ = ("root", "question", "answer", "call", "links", "tools", "ends")

    def __init__(self, root: RootRun, question: str | None, answer: str, call: ModelCall | None,
                 links: dict[str, str], tools: ToolFilter) -> None:
        # PendingRecord's fields, set here rather than through its __init__ (this runs on every request)
        self.id = self.run_id = str(root.run_id)
        self.trace_id = root.otel_ids[0] if root.otel_ids is not None else None
        self.metadata = EXCLUDED if root.excluded else NOT_EXCLUDED
        self.root, self.question, self.answer, self.call, self.links, self.tools = root, question, answer, call, links, tools
        # the root's output and input, where they may hold contexts, (label, a copy): read only for a turn with no
        # retrieval and no tool output (read_end)
        self.ends: Sequence[tuple[str, Any]] = ()

    def build(self) -> Record:
        """The Record, in the Monitor's worker: a failure is groundtrace's own (logged and counted
        in stats().callback_errors; the Monitor counts the record as failed, with error Scores)."""
        try:
            COLLECTOR.earlier_calls()  # the ended roots' tool calls filed here, off the application's thread
            return self.finish()
        except Exception:
            report_failure("building the record")
            raise

    def finish(self) -> Record:
        """The Record: the contexts are the passages that reached the answer's model call: retrieved
        (by a retriever or a @groundtrace.retrieval function) or returned by a tool; with neither, what
        reached it in a prompt's variable or a step's output (groundtrace.capture.carried)."""
        root, tools, answer = self.root, self.tools, self.answer
        turn = root.turn
        turn.question = self.question
        call = self.call if self.call is not None else turn.answer_call(answer, generation_text)
        # the answer's call and every call whose reply it read, handed over as an AI or tool message
        reading = turn.reading(call, call_input_text, generation_text, replies_read) if call is not None else None
        model_input = reading.model_input if reading is not None else None
        read = [message for c in (reading.calls if reading is not None else ()) for message in tool_messages(c.input)]
        order: dict[str, int] = {}
        for message in read:
            order.setdefault(message.tool_call_id, len(order))
        found = candidates(root, history(read, root), order, tools)
        metadata = _root_metadata(root)
        if call is not None and (reply_id := response_id(call.output)) is not None:
            metadata["response_id"] = reply_id  # the provider's id of the evaluated reply (gen_ai.response.id)
        calls = reading.read if reading is not None else ()
        if found.retrieved or any(p.kind == DOCUMENT or p.error or tools.allows(p.name) for p in found.passages):
            selection = select_contexts(found.passages, model_input, tools, calls)
            marked_ids = {id(p) for p in found.marked}
            if (marked := origin_of(selection.contexts, lambda passage: id(passage) in marked_ids)) is not None:
                metadata["contexts_from"] = marked
        elif found.filtered_tools:
            raise NothingToScore(FILTERED)
        else:
            chosen = choose(self._carried(), model_input, calls)
            if chosen is None:
                raise NothingToScore(NO_SOURCE, NO_SOURCE_HINT, called_model=bool(turn.calls))
            selection = chosen.selection
            metadata["contexts_from"] = chosen.origin
        if not selection.contexts and (unreadable := [source.marked.no_text for source in root.sources
                                                      if isinstance(source, Retrieval) and source.marked is not None
                                                      and source.marked.no_text]):
            metadata[NO_TEXT] = "; ".join(unreadable)  # the metrics say this as their error: no verdict from nothing
        _queries(root)
        question = turn.question
        if question is None and turn.queries:  # the input holds no question we know: the first query stands in
            question = turn.queries.pop(0)
            metadata["question_from"] = "query"
        contexts = selection.contexts
        metadata["documents"] = [_origin(p) for p in contexts]
        question, kept_answer, texts, cut = bounded(question, answer, [p.text for p in contexts],
                                                    sum(p.metadata.get(CUT_FROM, len(p.text)) for p in contexts))
        if cut is not None:  # what was cut to the bounds a Record keeps, said on it
            metadata["truncated"] = cut
            metadata["documents"] = metadata["documents"][:len(texts)]
        unused = _unused(selection, found)
        if unused:
            metadata["unused_contexts"] = unused
        if (errors := selection.tool_errors()) is not None:
            metadata["tool_errors"] = errors
        if selection.unchecked:
            metadata["contexts_unchecked"] = True  # no model call was seen: every passage is kept
        trace_id, span_id = _ids(root)
        run_id = str(root.run_id)
        return Record(
            id=run_id,
            question=question,
            queries=turn.queries or None,
            contexts=texts,
            answer=kept_answer,
            metadata=metadata,
            trace_id=trace_id,
            span_id=span_id,
            run_id=run_id,
            trace_links=self.links,
            session_id=session_of(root),
        )

    def size_hint(self) -> int:
        """The answer, and what the root's retrievers returned and its tools output as text (lengths only)."""
        size = len(self.answer)
        for source in list(self.root.sources):
            if isinstance(source, Retrieval):
                size += sum(len(d.page_content) for d in source.documents or ())
            elif type(source.output) is str:
                size += len(source.output)
        return size

    def _carried(self) -> list[Carried]:
        """What reached the model in values, in the order seen: the prompts' variables and the steps' outputs,
        then the root's output and input (a LangGraph state: the steps that wrote it came first)."""
        root, found = self.root, []
        names = dict(root.members)
        for run, value in list(root.carried):
            if run is None:
                found.extend(prompt_candidates(value, self.question))
            else:
                found.extend(output_candidates(value, names.get(run)))
        for where, value in self.ends:
            found.extend(output_candidates(value, root.name, where))
        return found

