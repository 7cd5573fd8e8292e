"""Contexts read from what reached the model when no retriever or tool ran: retrieval written as code.

Most production RAG retrieves in a function (a vector database's client, ``store.similarity_search``)
and fills a prompt from a variable. No retriever or tool event says what was retrieved, but the
framework still shows what reached the model:

- the **outputs of the turn's steps**: a function that returned Documents or nodes, a LangGraph node
  whose state update puts them (or text) under a context-like key (``{"context": docs}``);
- the **variables of the prompt template** that built the model's input (LangChain's
  ``PromptTemplate``/``ChatPromptTemplate`` inputs, LlamaIndex's ``template_args``): the variable(s)
  named like contexts (:data:`CONTEXT_WORDS`), else, by elimination, those that are not the question,
  not the chat history and long enough to prove anything.

Each becomes a :class:`Carried` candidate with its origin (said on the Record as
``metadata["contexts_from"]``, e.g. ``"prompt variable 'context'"``) and a tier: Documents first
(structured, each its own passage, with ids), then prompt variables, then text under a context-like
key. :func:`choose` takes the first tier whose passages reached the answer's model call
(:func:`groundtrace.capture.turn.select_contexts`), so a condense-question prompt never stands in for
the answer's prompt. The order of trust around it stays: a retriever's documents that were used,
then tool outputs, then these (the integrations consult this module only when neither ran).

Splitting: Documents, nodes and lists are one passage each; a joined string stays one passage unless
its separators are unambiguous (lines of ``---``/``***``/``===``, or consecutive markers ``[1]``,
``[2]`` ... or ``Document 1:``, ``Source 2:`` ... at line starts). Everything here is framework-neutral:
items are read by duck typing (a Document's ``page_content``, a node's ``get_content()``, a dict's
text field), so both integrations and ``@groundtrace.retrieval`` share it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from groundtrace.capture.turn import DOCUMENT, ReadCall, Passage, Selection, normalize, select_contexts
from groundtrace.capture.vector_results import BYTES, Reading, first_rows, taken, unwrap
from groundtrace.record import CUT_FROM, MAX_CONTEXT_CHARS, MAX_PASSAGES

# Words that make a name a context's: a variable, a state key, an output key ("context_str", "docs_content",
# "retrieved_docs", "search_results" ...). Matched against the name's words (split at _ - . and camelCase).
CONTEXT_WORDS = frozenset({
    "context", "contexts", "document", "documents", "doc", "docs", "source", "sources", "passage", "passages",
    "knowledge", "chunk", "chunks", "snippet", "snippets", "evidence", "retrieved", "retrieval", "excerpts",
})
# Names of the question (never a context): LangChain's and LlamaIndex's conventions and the usual others
QUESTION_WORDS = frozenset({"question", "query", "input", "ask", "msg", "message", "request"})
# Names of a conversation's history: what was said before is not what the answer was grounded on
HISTORY_WORDS = frozenset({"history", "messages", "memory", "scratchpad", "conversation", "chat"})
# By elimination, a value shorter than this proves nothing ("English", a user's name, a date)
MIN_ELIMINATED = 24
# Keys under which a dict item keeps its text (a vector database's hit as a dict)
TEXT_KEYS = ("page_content", "text", "content", "document", "chunk", "passage")
#: a row's score fields (a text-bearing dict's): its similarity or distance
ROW_SCORES = ("score", "_score", "_distance", "distance", "_relevance_score")
#: a row's columns that are not its document's metadata (besides its text, id and score): its vector
_ROW_VECTORS = frozenset({"vector", "embedding", "values", "_rowid"})

DOCUMENTS, PROMPT, TEXT = 0, 1, 2  # the tiers, most trusted first

_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_RULE = re.compile(r"^\s*(?:-{3,}|\*{3,}|={3,}|_{3,}|#{3,})\s*$", re.MULTILINE)
_MARKER = re.compile(r"^\s*(?:\[(\d+)\]|\((\d+)\)|(?:document|doc|source|passage|context|chunk|excerpt)\s*#?(\d+)\s*[:.)\]-])",
                     re.IGNORECASE | re.MULTILINE)


def name_words(name: str) -> list[str]:
    """The lowercase words of a name: ``context_str`` -> context, str; ``retrievedDocs`` -> retrieved, docs."""
    return [word.lower() for word in _WORDS.findall(name)]


_named_by_app: set[str] = set()  # exact keys the application names as context-like (add_context_keys)
_env_read = False


def add_context_keys(names: Iterable[str]) -> None:
    """Keys an application's state or prompt holds its contexts under, beyond CONTEXT_WORDS (``search_results``):
    process-wide, as LangChain's and LlamaIndex's instrumentation is. From ``context_keys=`` on the handlers and
    ``instrument()``, and GROUNDTRACE_CONTEXT_KEYS."""
    _named_by_app.update(name.strip() for name in names if isinstance(name, str) and name.strip())
    _NAMES.clear()  # the keys outputs have had are asked again


def is_context_name(name: Any) -> bool:
    global _env_read
    if not _env_read:  # once: the environment's keys join those given in code
        _env_read = True
        from groundtrace.config import context_keys

        add_context_keys(context_keys())
    return isinstance(name, str) and (name in _named_by_app or _context_name(name))


@functools.lru_cache(maxsize=4096)
def _context_name(name: str) -> bool:  # asked at every step's end for every key of a dict output: cached
    return any(word in CONTEXT_WORDS for word in name_words(name))


def _is_named(name: str, words: frozenset[str]) -> bool:
    return any(word in words for word in name_words(name))


@dataclass(frozen=True, slots=True)
class Item:
    """One passage read out of an application's value: its text, and what names it where known."""

    text: str
    id: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    score: float | None = None
    cut_from: int = 0  # its text's length before it was cut to the Record's bound where it was read (0: not cut)


def _capped(item: Item, room: int) -> Item:
    """``item`` with its text cut to ``room`` characters: a slice, before anything strips, splits or copies it."""
    if len(item.text) <= room:
        return item
    return Item(item.text[:room], item.id, item.metadata, item.score, item.cut_from or len(item.text))


def read_item(value: Any) -> Item | None:
    """A text-bearing item by duck typing, or None: a string, a LangChain Document (``page_content``), a
    LlamaIndex node (``get_content()``) or NodeWithScore, a dict with a text field; a ``(item, score)`` pair
    (``similarity_search_with_score``) is its item. Chat messages are not passages (they carry a role)."""
    if isinstance(value, str):
        return Item(value)
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], (int, float)):
        found = read_item(value[0])
        return None if found is None else Item(found.text, found.id, found.metadata, float(value[1]))
    if isinstance(value, Mapping):
        if "role" in value:
            return None
        for key in TEXT_KEYS:
            text = value[key] if key in value else None  # its own key: a Milvus Hit's get() reads its entity too
            if isinstance(text, str):
                metadata = value.get("metadata")
                ident = value.get("id")
                # a row's score, as LanceDB (_distance, _relevance_score) and others name it
                score = next((float(found) for name in ROW_SCORES if isinstance(found := value.get(name), (int, float))
                              and not isinstance(found, bool)), None)
                # a row with no metadata field (pgvector, LanceDB): its other columns are its metadata
                kept = dict(metadata) if isinstance(metadata, Mapping) else {
                    name: column for name, column in value.items()
                    if name not in (key, "id", *ROW_SCORES, *_ROW_VECTORS) and not isinstance(column, (list, Mapping))}
                return Item(text, None if ident is None else str(ident),
                            {**kept, "score": score} if score is not None else kept, score)
        return None
    page_content = getattr(value, "page_content", None)
    if isinstance(page_content, str):  # a LangChain Document
        ident = getattr(value, "id", None) or _metadata(value).get("source")
        return Item(page_content, None if ident is None else str(ident), _metadata(value))
    node = getattr(value, "node", None)
    if node is not None and callable(getattr(node, "get_content", None)):  # a LlamaIndex NodeWithScore
        found = read_item(node)
        score = getattr(value, "score", None)
        return None if found is None else Item(found.text, found.id, found.metadata,
                                               score if isinstance(score, (int, float)) else None)
    get_content = getattr(value, "get_content", None)
    if callable(get_content) and hasattr(value, "node_id"):  # a LlamaIndex node
        try:
            text = get_content()
        except Exception:
            return None
        return Item(text, str(value.node_id), _metadata(value)) if isinstance(text, str) else None
    return None


def _metadata(value: Any) -> dict[str, Any]:
    metadata = getattr(value, "metadata", None)
    return dict(metadata) if isinstance(metadata, Mapping) else {}


def read_items(value: Any, read: Reading | None = None) -> tuple[list[Item], int] | None:
    """The passages of a value: a list of text-bearing items (or one item), and how many entries of a list
    were not text-bearing; None when it holds none. A string is one item, split at unambiguous separators
    (:func:`split_joined`); a vector store's result with ``.nodes`` is its nodes; what a vector database's client
    returns (Qdrant, Pinecone, Chroma, Elasticsearch, Weaviate, Milvus, rows with a text column) is read by
    :mod:`groundtrace.capture.vector_results` when nothing else reads it.

    Bounded (the application's thread): bytes are no passages; at most MAX_PASSAGES entries and MAX_CONTEXT_CHARS
    of text are read, a longer text cut before anything reads it (``cut_from``); ``read`` notes where it stopped."""
    if isinstance(value, BYTES):
        return None
    read = Reading() if read is None else read
    found = _read_plain(value, read)
    if found is not None:
        return found
    read.stopped = read.entries = None  # what was not plain is read again as a client's result
    hits = unwrap(value, read)
    if not hits:
        return None
    items, _ = _within((Item(hit["text"], hit["id"], {**hit["metadata"], **({"score": hit["score"]} if hit["score"]
                        is not None else {})}, hit["score"]) for hit in hits), read)
    return (items, 0) if items else None


def _within(items: Iterable[Item | None], read: Reading) -> tuple[list[Item], int]:
    """The items with text, in order, until their text reaches the Record's bound (the one that crosses it cut),
    and how many held none."""
    kept, unreadable, room = [], 0, MAX_CONTEXT_CHARS
    for item in items:
        if room <= 0:  # more entries than the bound lets in: left unread
            read.stopped = "chars"
            break
        if item is None:
            unreadable += 1
            continue
        item = _capped(item, room)
        if item.text.strip():
            kept.append(item)
            room -= len(item.text)
    return kept, unreadable


def _read_plain(value: Any, read: Reading) -> tuple[list[Item], int] | None:
    if isinstance(value, str):
        text = value[:MAX_CONTEXT_CHARS]  # a 5 MB passage is cut before it is stripped or split: O(bound)
        if not text.strip():
            return None
        items = [Item(piece) for piece in split_joined(text)]
        if len(value) > len(text):  # the last piece holds what was cut off
            items[-1] = Item(items[-1].text, cut_from=len(items[-1].text) + len(value) - len(text))
        return items, 0
    nodes = getattr(value, "nodes", None)  # LlamaIndex's VectorStoreQueryResult
    size = None
    if isinstance(nodes, Sequence) and not isinstance(value, Mapping):
        value = nodes
    elif (rows := first_rows(value)) is not None:
        value, size = rows  # a numpy array's, a pandas Series', a frame's or an Arrow table's first rows, as a list
    if isinstance(value, (list, tuple)) and not (isinstance(value, tuple) and read_item(value) is not None):
        items, unreadable = _within(map(read_item, taken(value, read)), read)
        if read.stopped is not None:
            read.entries = size if size is not None else len(value)
        return (items, unreadable) if items else None
    item = read_item(value)
    if item is None:
        return None
    item = _capped(item, MAX_CONTEXT_CHARS)
    return ([item], 0) if item.text.strip() else None


def split_joined(text: str) -> list[str]:
    """A joined string's passages where its separators are unambiguous: rule lines (``---``, ``***``,
    ``===``), or markers numbered 1, 2, 3 ... at line starts (``[1]``, ``(2)``, ``Document 3:``). Anything
    else (paragraphs, single newlines) stays one passage: a passage may have paragraphs of its own."""
    pieces = [piece.strip() for piece in _RULE.split(text)]
    if len([p for p in pieces if p]) >= 2:
        return [p for p in pieces if p]
    starts = [(match.start(), int(next(g for g in match.groups() if g is not None))) for match in _MARKER.finditer(text)]
    if len(starts) >= 2 and [number for _, number in starts] == list(range(starts[0][1], starts[0][1] + len(starts))) \
            and starts[0][1] in (0, 1):
        bounds = [position for position, _ in starts] + [len(text)]
        head = text[: bounds[0]].strip()
        found = [text[a:b].strip() for a, b in zip(bounds, bounds[1:], strict=False)]
        return ([head] if head else []) + [p for p in found if p]
    return [text.strip()]


@dataclass(frozen=True, slots=True)
class Carried:
    """Contexts a turn carried in a value: ``origin`` (for ``contexts_from``), ``tier`` (:data:`DOCUMENTS`,
    :data:`PROMPT`, :data:`TEXT`) and the passages."""

    origin: str
    tier: int
    passages: list[Passage]
    unreadable: int = 0  # entries of a list that held no text
    stopped: str | None = None  # the bound that stopped reading the value short of its end (Reading.stopped)
    entries: int | None = None  # how many entries the value held then, where known


def _passages(items: Iterable[Item], origin: str) -> list[Passage]:
    return [Passage(item.text, DOCUMENT, origin, item.id,
                    metadata={"item": item, CUT_FROM: item.cut_from} if item.cut_from else {"item": item})
            for item in items]


def _structured(value: Any) -> bool:
    """Documents, nodes or dicts (each a passage with what names it), not bare strings."""
    if isinstance(value, str):
        return False
    if isinstance(value, (list, tuple)):
        return any(not isinstance(entry, str) for entry in value[:MAX_PASSAGES])  # what is read, no more
    return True


def no_text_reason(value: Any) -> str | None:
    """Why a retrieval's return value gave no passage, when it is not simply empty (a search that found
    nothing): ``"returned None"``, ``"returned bytes"``, ``"returned a numpy.ndarray"``, ``"returned 2 item(s) of
    type Hit with no text"``. None for an empty string or collection."""
    if value is None:
        return "returned None"
    if isinstance(value, str) or (isinstance(value, (list, tuple, Mapping)) and not value):
        return None
    name = type_name(value)
    if isinstance(value, (list, tuple)):
        types = sorted({type(entry).__name__ for entry in value[:MAX_PASSAGES]})  # a bounded look, as reading is
        return f"returned {len(value)} item(s) of type {', '.join(types)} with no text"
    if isinstance(value, BYTES):
        return f"returned {name} (decode it to str)"
    return f"returned a {name}" + (" (pass .tolist())" if hasattr(value, "tolist") else "")


def type_name(value: Any) -> str:
    """A value's type as said to the user: ``bytes``, ``numpy.ndarray``, ``qdrant_client.QueryResponse``."""
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__.split('.')[0]}.{kind.__name__}"


def value_candidate(value: Any, origin: str, tier: int | None = None) -> Carried | None:
    """``value`` as a candidate: Documents/nodes/dicts are :data:`DOCUMENTS`, text is ``tier`` (default
    :data:`TEXT`); None when it holds no passage."""
    reading = Reading()
    read = read_items(value, reading)
    if read is None:
        return None
    items, unreadable = read
    found_tier = DOCUMENTS if _structured(value) else (TEXT if tier is None else tier)
    return Carried(origin, found_tier, _passages(items, origin), unreadable, reading.stopped, reading.entries)


def _question_value(value: Any, question: str | None) -> bool:
    return isinstance(value, str) and question is not None and normalize(value) == normalize(question)


def prompt_variables(variables: Mapping[str, Any], question: str | None) -> list[tuple[str, Any]]:
    """The variables of a prompt that hold its contexts: those named like contexts; else, by elimination,
    those that are not the question (by name or by value), not the history, and 24+ characters of text or
    a list of text-bearing items. Cheap: no text is read beyond a length and one comparison."""
    named = [(name, value) for name, value in variables.items() if is_context_name(name)]
    if named:
        return [(name, value) for name, value in named if _holds_text(value)]
    kept = []
    for name, value in variables.items():
        if not isinstance(name, str) or _is_named(name, QUESTION_WORDS) or _is_named(name, HISTORY_WORDS):
            continue
        if _question_value(value, question):
            continue
        if isinstance(value, str) and len(value.strip()) < MIN_ELIMINATED:
            continue
        if _holds_text(value):
            kept.append((name, value))
    return kept


def _holds_text(value: Any) -> bool:
    if isinstance(value, str):
        return bool(value.strip())
    if isinstance(value, (list, tuple)):
        return bool(value) and read_item(value[0]) is not None
    return read_item(value) is not None or isinstance(getattr(value, "nodes", None), Sequence)


def prompt_candidates(variables: Mapping[str, Any], question: str | None) -> list[Carried]:
    """The candidates of one prompt template's variables (:func:`prompt_variables`), tier :data:`PROMPT`
    (Documents in a variable are :data:`DOCUMENTS`)."""
    found = []
    for name, value in prompt_variables(variables, question):
        candidate = value_candidate(value, f"prompt variable '{name}'", PROMPT)
        if candidate is not None:
            found.append(candidate)
    return found


def output_candidates(value: Any, step: str | None, label: str = "output") -> list[Carried]:
    """The candidates of one step's output: Documents/nodes it returned, or values under context-like keys
    of the dict it returned (a LangGraph node's state update). Their origin reads ``output 'context' of
    'retrieve'``, ``output of 'search'`` (``label`` in place of "output": "the chain's input", say)."""
    where = f" of '{step}'" if step else ""
    if isinstance(value, Mapping):
        found = []
        for key, entry in value.items():
            if is_context_name(key):
                candidate = value_candidate(entry, f"{label} '{key}'{where}")
                if candidate is not None:
                    found.append(candidate)
        return found
    if isinstance(value, (list, tuple)) and _structured(value):
        candidate = value_candidate(value, f"{label}{where}")
        return [candidate] if candidate is not None else []
    return []


def may_carry_output(value: Any) -> bool:
    """Whether a step's output may hold candidates: a cheap test on the application's thread, at every
    step's end (exact type checks first, then a few key lookups; nothing is read). Most outputs are a
    string, a message or a prompt value: answered by the first two tests."""
    kind = type(value)
    if kind is str:
        return False
    if kind is list or kind is tuple:
        return bool(value) and _looks_like_item(value[0])
    if kind is dict or (kind not in _NOT_MAPPINGS and isinstance(value, Mapping)):
        for key in value:
            if (_NAMES.get(key) if key in _NAMES else _named(key)) and value[key]:
                return True
        return False
    _NOT_MAPPINGS.add(kind)  # a class seen once is not asked again (the set only grows by output classes)
    return False


_NOT_MAPPINGS: set[type] = set()
_NAMES: dict[Any, bool] = {}  # key -> named like a context, for the keys outputs have had (bounded)
_ITEM_KINDS: dict[type, bool] = {}  # class -> its instances are text-bearing items (classes are few)
# the classes known to be no item (messages, say): an integration tests a list's first entry against it
# inline, before it calls may_carry_output at a step's end
NOT_ITEMS: set[type] = {str, int, float, bool, type(None)}


def _named(key: Any) -> bool:
    named = is_context_name(key)
    if len(_NAMES) < 4096:
        _NAMES[key] = named
    return named
# the types of output worth a look at every step's end (an integration tests ``type(output) in CARRIERS``
# before it calls may_carry_output: most outputs, strings, messages, prompt values, cost one set lookup)
CARRIERS: frozenset[type] = frozenset({dict, list, tuple})


def _looks_like_item(value: Any) -> bool:
    """A Document, a node, a (document, score) pair, a dict with a text field (not a string: a list of strings
    is anything at all). Decided once per class, except for dicts and pairs, whose content decides."""
    kind = type(value)
    known = _ITEM_KINDS.get(kind)
    if known is not None:
        return known
    if kind is str:
        return False
    found = read_item(value) is not None
    if not isinstance(value, (Mapping, tuple)):
        _ITEM_KINDS[kind] = found
        if not found:
            NOT_ITEMS.add(kind)
    return found


@dataclass(frozen=True, slots=True)
class Chosen:
    """What :func:`choose` took: the selection, where it came from, and whether it was checked against the
    model's input."""

    selection: Selection
    origin: str
    unreadable: int = 0
    stopped: str | None = None  # the bound that stopped reading a chosen candidate short of its end
    entries: int | None = None  # how many entries that candidate's value held, where known


def choose(candidates: Sequence[Carried], model_input: str | None, read: Sequence[ReadCall] = ()) -> Chosen | None:
    """The contexts among the candidates: the first tier whose passages reached the answer's model call
    (``model_input``, and the calls it read); when none did (or no model call was seen), the first tier's
    passages as they are, unchecked. None when there is no candidate."""
    tiers = sorted({candidate.tier for candidate in candidates})
    if not tiers:
        return None
    if model_input is not None:
        for tier in tiers:
            chosen = _select([c for c in candidates if c.tier == tier], model_input, read)
            if chosen.selection.contexts:
                return chosen
    return _select([c for c in candidates if c.tier == tiers[0]], None, ())


def _select(group: list[Carried], model_input: str | None, read: Sequence[ReadCall]) -> Chosen:
    selection = select_contexts([p for c in group for p in c.passages], model_input, read=read)
    used = {id(p) for p in selection.contexts}
    origins: list[str] = []
    for candidate in group:
        if candidate.origin not in origins and any(id(p) in used for p in candidate.passages):
            origins.append(candidate.origin)
    unreadable = sum(c.unreadable for c in group if c.origin in origins)
    stopped = next((c for c in group if c.origin in origins and c.stopped), None)
    if stopped is None:
        return Chosen(selection, "; ".join(origins), unreadable)
    return Chosen(selection, "; ".join(origins), unreadable, stopped.stopped, stopped.entries)


def item_origin(passage: Passage) -> dict[str, Any]:
    """Where a carried context came from, for the Record's list of origins: the item's id, source and
    scalar metadata (long texts cut), and its score where it had one."""
    item = passage.metadata.get("item")
    metadata = item.metadata if isinstance(item, Item) else {}
    found: dict[str, Any] = {"id": passage.id, "source": metadata.get("source"),
                             "metadata": scalar_metadata(metadata)}
    if isinstance(item, Item) and item.score is not None:
        found["score"] = item.score
    return found


def scalar_metadata(metadata: Mapping[str, Any], longest: int = 300) -> dict[str, Any]:
    """The JSON-safe scalar entries of a metadata dict (vectors and clients left out, long texts cut)."""
    kept: dict[str, Any] = {}
    for key, value in metadata.items():
        if isinstance(value, str):
            kept[str(key)] = value[:longest]
        elif value is None or isinstance(value, (int, float, bool)):
            kept[str(key)] = value
    return kept
