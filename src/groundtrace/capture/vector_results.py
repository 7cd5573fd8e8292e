"""Retrieval results as vector databases' clients return them: the passages' text, ids and scores out of each shape.

A retrieval function usually returns what its client returned. Each shape keeps the text in a record of fields
(a payload, metadata, ``_source``, properties, an entity), beside an id and a score:

- Qdrant: ``ScoredPoint`` (``.payload``, ``.id``, ``.score``); ``QueryResponse`` (``.points``).
- Pinecone: SDK matches (``.metadata``, ``.id``, ``.score``); REST JSON ``{"matches": [{"id", "score", "metadata"}]}``.
- Chroma: ``QueryResult`` ``{"ids": [[...]], "documents": [[...]], "metadatas": [[...]], "distances": [[...]]}``
  (one list per query: the first query's), and ``GetResult`` (flat lists).
- Elasticsearch / OpenSearch: ``{"hits": {"hits": [{"_id", "_score", "_source": {...}}]}}``, or the hits.
- Weaviate: objects (``.properties``, ``.uuid``, ``.metadata.score``/``distance``); GraphQL JSON
  ``{"data": {"Get": {"Class": [{..., "_additional": {"id", "score"}}]}}}``.
- Milvus: hits ``{"id", "distance", "entity": {...}}`` (a list per query: the first).
- LanceDB / psycopg / pgvector rows: dicts (or named rows with ``_asdict()``) with a text column.

The text field is the first of TEXT_FIELDS present (what these clients' docs name it), or one the app names
(``groundtrace.capture.vector_results.TEXT_FIELDS`` is a list it may extend). What :func:`unwrap` returns is a list
of plain ``{"text", "id", "score", "metadata"}`` dicts, which groundtrace.capture.carried reads as passages.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

from groundtrace.record import MAX_PASSAGES

#: the names of the text field, in the order they are looked for
TEXT_FIELDS: list[str] = ["page_content", "text", "content", "document", "chunk", "chunk_text", "passage", "body"]
#: where a hit keeps its fields
_FIELD_HOLDERS = ("payload", "metadata", "_source", "properties", "entity", "fields")
#: a hit's own keys that are not its document's metadata
_HIT_KEYS = frozenset({"id", "_id", "uuid", "score", "_score", "distance", "_additional", "vector", "values"})


#: bytes-like results are no sequence of passages: never read byte by byte
BYTES = (bytes, bytearray, memoryview)


@dataclass(slots=True)
class Reading:
    """Where reading a result stopped short of its end: the bound that stopped it (``"passages"``:
    :data:`~groundtrace.record.MAX_PASSAGES` entries; ``"chars"``: the Record's bound on contexts), and how many
    entries the result held where its length said (None for a pager, whose end is never asked for)."""

    stopped: str | None = None
    entries: int | None = None


def taken(values: Iterable[Any], read: Reading | None = None) -> list[Any]:
    """At most :data:`~groundtrace.record.MAX_PASSAGES` entries of a result, in order: the rest is never read (an
    endless pager is not run to its end, a million hits cost a thousand); ``read`` notes that there were more."""
    found = list(islice(values, MAX_PASSAGES + 1))
    if len(found) <= MAX_PASSAGES:
        return found
    if read is not None:
        read.stopped = "passages"
        try:
            read.entries = len(values)  # type: ignore[arg-type]
        except Exception:  # no length, or one that raises: a pager
            read.entries = None
    return found[:MAX_PASSAGES]


def first_rows(value: Any) -> tuple[list[Any], int | None] | None:
    """A numpy array or pandas Series (of texts, or of dicts), a pandas frame (LanceDB's ``to_pandas()``, a pgvector
    query read with pandas) or an Arrow table (LanceDB's ``to_arrow()``) as a list of its first rows (one past the
    bound, so that more is seen; never the whole of a large one), and how many it held; None for anything else."""
    take, kind = MAX_PASSAGES + 1, type(value).__name__
    if kind == "ndarray" and callable(getattr(value, "tolist", None)):
        if not getattr(value, "ndim", 1):  # a 0-d array: its one value
            return value.tolist(), None
        return value[:take].tolist(), len(value)
    if kind == "Series" and callable(getattr(value, "tolist", None)):
        return value.iloc[:take].tolist(), len(value)
    if kind == "DataFrame" and callable(getattr(value, "to_dict", None)):
        return value.head(take).to_dict("records"), len(value)
    if kind == "Table" and callable(getattr(value, "to_pylist", None)):
        return value.slice(0, take).to_pylist(), value.num_rows
    return None


def _text_of(fields: Any) -> tuple[str, str] | None:
    """(field name, text) of the first text field in a mapping."""
    if not isinstance(fields, Mapping):
        return None
    for name in TEXT_FIELDS:
        text = fields.get(name)
        if isinstance(text, str):
            return name, text
    return None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _hit(value: Any) -> dict[str, Any] | None:
    """One hit of a vector database as a plain passage dict, or None when it is no such hit."""
    def get(name: str) -> Any:
        return value.get(name) if isinstance(value, Mapping) else getattr(value, name, None)

    for holder in (*_FIELD_HOLDERS, None):  # None: the hit's own fields (Weaviate's GraphQL objects, rows), last: a
        # Milvus Hit reads its entity's fields as its own, and its entity holds the metadata beside the text
        fields: Any = value if holder is None else get(holder)
        if fields is not None and hasattr(fields, "_asdict"):
            fields = fields._asdict()
        found = _text_of(fields)
        if found is None:
            continue
        name, text = found
        ident = get("id") if get("id") is not None else get("_id") if get("_id") is not None else get("uuid")
        additional: Mapping[str, Any] = get("_additional") if isinstance(get("_additional"), Mapping) else {}
        ident = additional.get("id", ident) if ident is None else ident
        meta = get("metadata") if holder != "metadata" else None
        score = next((s for s in (_number(get("score")), _number(get("_score")), _number(get("distance")),
                                  _number(getattr(meta, "score", None)), _number(getattr(meta, "distance", None)),
                                  _number(additional.get("score")), _number(additional.get("distance")))
                      if s is not None), None)
        metadata = {k: v for k, v in fields.items() if k != name and not (holder is None and k in _HIT_KEYS)} \
            if isinstance(fields, Mapping) else {}
        return {"text": text, "id": None if ident is None else str(ident), "score": score, "metadata": metadata}
    return None


def _first_query(values: Any) -> Any:
    """Chroma's and Milvus's results hold one list per query: the first query's."""
    if isinstance(values, Sequence) and not isinstance(values, str) and values and \
            isinstance(values[0], Sequence) and not isinstance(values[0], (str, Mapping)) and \
            not hasattr(values[0], "_asdict"):  # a named row (psycopg's namedtuple_row) is a hit, not a query's list
        return values[0]
    return values


def _chroma(result: Mapping[str, Any], read: Reading | None) -> list[dict[str, Any]] | None:
    documents = _first_query(result.get("documents"))
    if not isinstance(documents, Sequence) or isinstance(documents, str):
        return None
    ids = _first_query(result.get("ids")) or []
    metadatas = _first_query(result.get("metadatas")) or []
    distances = _first_query(result.get("distances")) or []
    passages = []
    for i, text in enumerate(taken(documents, read)):
        if isinstance(text, str):
            metadata = metadatas[i] if i < len(metadatas) and isinstance(metadatas[i], Mapping) else {}
            passages.append({"text": text, "id": str(ids[i]) if i < len(ids) else None,
                             "score": _number(distances[i]) if i < len(distances) else None,
                             "metadata": dict(metadata)})
    return passages


def unwrap(value: Any, read: Reading | None = None) -> list[dict[str, Any]] | None:
    """The passages of a vector database's result, or None when ``value`` is none of the shapes above. At most
    :data:`~groundtrace.record.MAX_PASSAGES` of its entries are read (``read`` says when it held more)."""
    if isinstance(value, BYTES):
        return None
    if isinstance(value, Mapping):
        if "documents" in value and ("ids" in value or "distances" in value):
            return _chroma(value, read)
        hits = value.get("hits")
        if isinstance(hits, Mapping):  # Elasticsearch / OpenSearch
            return unwrap(hits.get("hits"), read)
        for key in ("matches", "points", "results", "objects"):  # Pinecone REST, Qdrant REST, and the like
            if isinstance(value.get(key), Sequence) and not isinstance(value.get(key), str):
                return unwrap(value[key], read)
        data = value.get("data")
        got = data.get("Get") if isinstance(data, Mapping) else None
        if isinstance(got, Mapping) and got:  # Weaviate GraphQL: the first class's objects
            return unwrap(next(iter(got.values())), read)
        hit = _hit(value)
        return None if hit is None else [hit]
    for attribute in ("points", "matches", "objects"):  # Qdrant QueryResponse, Pinecone QueryResponse, Weaviate
        held = getattr(value, attribute, None)
        if isinstance(held, Sequence) and not isinstance(held, str):
            return unwrap(taken(held, read), read)  # a pager's first entries only, never its end
    if isinstance(value, Sequence) and not isinstance(value, (str, *BYTES)):
        entries = _first_query(value)
        passages = [hit for entry in taken(entries, read) if (hit := _hit(entry)) is not None]
        return passages if passages else None
    hit = _hit(value)
    return None if hit is None else [hit]


__all__ = ["BYTES", "TEXT_FIELDS", "Reading", "first_rows", "taken", "unwrap"]
