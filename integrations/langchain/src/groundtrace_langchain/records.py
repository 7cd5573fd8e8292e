"""Turn what a root run showed into a groundtrace Record."""

from __future__ import annotations

from typing import Any

from groundtrace.record import Record
from groundtrace.trace_context import current_links
from langchain_core.documents import Document

from groundtrace_langchain.collector import RootRun
from groundtrace_langchain.extract import (
    answer_from_output,
    contexts_from_values,
    document_summary,
    generation_text,
    question_from_input,
    scalar_metadata,
    unique_documents,
)

SOURCE = "langchain"


class NothingToScore(Exception):
    """A root run ended without what a grounding score needs: it makes no Record."""


def _root_metadata(root: RootRun) -> dict[str, Any]:
    metadata: dict[str, Any] = {"source": SOURCE, "run_name": root.name, "tags": list(root.tags),
                "run_metadata": scalar_metadata(root.metadata)}
    if root.excluded:  # the run's own flag, where the Monitor reads it: counted there, never scored
        metadata["groundtrace_exclude"] = True
    return metadata


def _links(root: RootRun) -> dict[str, str]:
    # Ids seen at the start win: they were read inside the request; the end may add ids that other
    # tools created lazily during the run. Nothing is attached to an excluded run's traces.
    return {} if root.excluded else {**current_links(), **root.links}


def _ids(root: RootRun) -> tuple[str | None, str | None]:
    return root.otel_ids if root.otel_ids is not None else (None, None)


def build_record(root: RootRun, outputs: Any, end_inputs: Any, answer_key: str | None) -> Record:
    """The Record of a finished root run.

    Raises NothingToScore when no retriever ran and no contexts came in or out (not a RAG answer),
    or when there is no answer (a stream closed before its first chunk, a chain returning None)."""
    # a streamed root starts with a placeholder input; its end event carries the real one
    inputs = end_inputs if end_inputs is not None else root.inputs
    documents: list[Document | str] | None = list(unique_documents(root.retrievals.values())) if root.retrievals \
        else contexts_from_values(outputs, inputs)
    if documents is None:
        raise NothingToScore("retrieved nothing")
    answer = answer_from_output(outputs, answer_key)
    if answer is None:
        answer = generation_text(root.llm_response)
        if answer is None:
            raise NothingToScore("produced no answer")
    question = root.query if root.query is not None else question_from_input(inputs)
    metadata = _root_metadata(root)
    metadata["documents"] = [document_summary(d) for d in documents if isinstance(d, Document)]
    trace_id, span_id = _ids(root)
    run_id = str(root.run_id)
    return Record(
        id=run_id,
        question=question,
        contexts=[d.page_content if isinstance(d, Document) else d for d in documents],
        answer=answer,
        metadata=metadata,
        trace_id=trace_id,
        span_id=span_id,
        run_id=run_id,
        trace_links=_links(root),
    )
