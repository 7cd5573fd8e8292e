"""Issue 54, rows 9, 10, 11 and 17: hostile retrieval results, read on the application's thread where
``@groundtrace.retrieval`` returns. Bytes-like results are no passages, never read byte by byte (row 9); a mapping
whose ``len()``, iteration or items raise never raises into the application, its turn's Record says it could not be
read (row 10); reading stops at MAX_PASSAGES entries and at the Record's bound on text, an endless pager is not run
to its end, and the Record says so in ``metadata["truncated"]`` (row 11); one 5 MB passage is cut to the bound when
it is read, not copied whole first (row 17)."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

import groundtrace
from groundtrace.capture import vector_results
from groundtrace.capture.explicit import stats
from groundtrace.monitor import Monitor
from groundtrace.record import CUT_FROM, MAX_CONTEXT_CHARS, MAX_PASSAGES
from tests.custom_sinks import PlainSink

QUESTION, ANSWER = "When does the museum open?", "It opens at 9 am."
NO_CONTEXTS = "no contexts to check the answer against: "


@pytest.fixture
def collected() -> Iterator[tuple[Monitor, PlainSink]]:
    sink = PlainSink()
    monitor = Monitor(metrics=["lexical"], sinks=[sink], isolation="thread", flush_at_exit=False)
    yield monitor, sink
    monitor.close()


def turn_with(value: Any, name: str, monitor: Monitor):
    @groundtrace.retrieval(name=name)
    def search(question: str) -> Any:
        return value

    @groundtrace.turn(monitor=monitor)
    def answer(question: str) -> str:
        search(question)
        return ANSWER

    return answer


def scored(monitor: Monitor, sink: PlainSink) -> list[tuple[Any, list[Any]]]:
    assert monitor.flush(60)
    return list(sink.got)


# ------------------------------------------------------------------------ row 9: bytes-like results
@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_a_bytes_like_result_is_no_text_and_is_never_read_byte_by_byte(kind, collected, monkeypatch):
    monitor, sink = collected
    looked_at: list[Any] = []
    hit = vector_results._hit
    monkeypatch.setattr(vector_results, "_hit", lambda value: looked_at.append(value) or hit(value))
    name = f"search_bytes_like_{kind.__name__}"  # a name of its own: warnings are said once per name
    turn_with(kind(b"The museum opens at 9 am. " * 40), name, monitor)(QUESTION)
    [(record, [score])] = scored(monitor, sink)
    said = f"@groundtrace.retrieval {name!r} returned {kind.__name__} (decode it to str)"
    assert record.contexts == [] and record.metadata["contexts_unreadable"] == said
    assert score.value is None and score.error == NO_CONTEXTS + said
    assert [value for value in looked_at if isinstance(value, int)] == []  # not one byte read as a hit


# --------------------------------------------------------------- row 10: a mapping whose reading raises
class Hostile(Mapping):
    """A client's result as a mapping (with a text field or none), one of whose methods raises."""

    def __init__(self, raising: str, text: bool) -> None:
        self.raising = raising
        self.fields: dict[str, Any] = {"text": fact(0)} if text else {}
        self.fields["vector"] = [0.1, 0.2]

    def _check(self, name: str) -> None:
        if self.raising == name:
            raise RuntimeError(f"{name} is broken")

    def __len__(self) -> int:
        self._check("__len__")
        return len(self.fields)

    def __iter__(self) -> Iterator[str]:
        self._check("__iter__")
        return iter(self.fields)

    def __getitem__(self, key: str) -> Any:
        self._check("__getitem__")
        return self.fields[key]

    def keys(self) -> Any:
        self._check("keys")
        return super().keys()


@pytest.mark.parametrize("text", [False, True], ids=["no text", "text"])
@pytest.mark.parametrize("raising", ["__len__", "__iter__", "__getitem__", "keys"])
def test_a_mapping_whose_reading_raises_never_reaches_the_app_and_its_record_says_so(raising, text, collected, caplog):
    monitor, sink = collected
    name = f"search_raising_{raising.strip('_')}_{text}"
    before = stats().callback_errors
    with caplog.at_level(logging.WARNING, logger="groundtrace"):
        for _ in range(2):
            assert turn_with(Hostile(raising, text), name, monitor)(QUESTION) == ANSWER  # nothing raised into the app
    got = scored(monitor, sink)
    assert len(got) == 2
    kind = f"{Hostile.__module__.split('.')[0]}.Hostile"
    unreadable = f"@groundtrace.retrieval {name!r} returned a {kind} that could not be read (RuntimeError)"
    for record, scores in got:  # its text, or no contexts and why
        if record.contexts:
            assert record.contexts == [fact(0)] and "contexts_unreadable" not in record.metadata
            continue
        said = record.metadata["contexts_unreadable"]
        assert said in (unreadable, f"@groundtrace.retrieval {name!r} returned a {kind}")
        assert {score.error for score in scores} == {NO_CONTEXTS + said}
    if any(record.metadata.get("contexts_unreadable") == unreadable for record, _ in got):
        assert stats().callback_errors == before + 2  # counted each time
        warned = [r for r in caplog.records if f"@groundtrace.retrieval {name!r} (reading what it returned) failed "
                  "(RuntimeError)" in r.getMessage()]
        assert len(warned) == 1  # said once per cause
        assert not any("is broken" in r.getMessage() for r in caplog.records)  # its message is the app's: not said
    if raising in ("__len__", "__getitem__") and not text:  # a result that cannot be asked whether it is empty
        assert all(record.metadata.get("contexts_unreadable") == unreadable for record, _ in got)


# ------------------------------------------------------- row 11: huge and endless results are read to a bound
@dataclass
class Point:  # a Qdrant ScoredPoint's shape
    id: int
    score: float
    payload: dict[str, Any] = field(default_factory=dict)


def fact(i: int) -> str:
    return f"Room {i} of the museum opens at 9 am."


class Hits(Sequence):
    """A client's hits, made as they are read, counted; ``size=None``: a pager that pages on and never ends (it
    has no length; it stops at ``guard`` only so that a reader that runs to its end fails the test, not hangs)."""

    def __init__(self, size: int | None, guard: int = 50_000) -> None:
        self.size, self.guard, self.taken = size, guard, 0

    def __len__(self) -> int:
        if self.size is None:
            raise TypeError("a pager has no length")
        return self.size

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            raise TypeError("read it in order")
        if (self.size is not None and i >= self.size) or i >= self.guard:
            raise IndexError(i)
        self.taken += 1
        return Point(i, 0.5, {"text": fact(i)})


@dataclass
class Response:  # a Qdrant QueryResponse's shape
    points: Hits


def assert_stopped_at_passages(record: Any, entries: int | None) -> None:
    texts = [fact(i) for i in range(MAX_PASSAGES)]
    chars = sum(map(len, texts))
    assert record.contexts == texts
    assert record.metadata["truncated"] == {"contexts": {"chars": chars, "kept": chars, "passages": MAX_PASSAGES,
                                                         "kept_passages": MAX_PASSAGES, "stopped": "passages",
                                                         "entries": entries}}


def test_a_hundred_thousand_rows_are_read_to_the_bound_on_passages(collected):
    monitor, sink = collected
    turn_with([{"id": i, "text": fact(i)} for i in range(100_000)], "search_rows", monitor)(QUESTION)
    [(record, _)] = scored(monitor, sink)
    assert_stopped_at_passages(record, 100_000)


def test_a_frame_of_a_hundred_thousand_rows_is_read_to_the_bound(collected):
    pandas = pytest.importorskip("pandas")
    monitor, sink = collected
    frame = pandas.DataFrame({"text": [fact(i) for i in range(100_000)], "id": range(100_000)})
    turn_with(frame, "search_frame", monitor)(QUESTION)
    [(record, _)] = scored(monitor, sink)
    assert_stopped_at_passages(record, 100_000)


def test_a_million_hits_are_read_to_the_bound_not_to_their_end(collected):
    monitor, sink = collected
    hits = Hits(1_000_000)
    turn_with(Response(hits), "search_million", monitor)(QUESTION)
    assert hits.taken <= MAX_PASSAGES + 1
    [(record, _)] = scored(monitor, sink)
    assert_stopped_at_passages(record, 1_000_000)


def test_an_endless_pager_of_points_is_not_run_to_its_end(collected):
    monitor, sink = collected
    pager = Hits(None)
    turn_with(Response(pager), "search_pager", monitor)(QUESTION)
    assert pager.taken <= MAX_PASSAGES + 1  # the rest never asked for
    [(record, _)] = scored(monitor, sink)
    assert_stopped_at_passages(record, None)  # how many it held is not known: it was not asked


@dataclass
class CountedDoc:  # a LangChain Document whose text is counted as it is read
    text: str
    reads: list[int]
    metadata: dict[str, Any] = field(default_factory=dict)
    id: str | None = None

    @property
    def page_content(self) -> str:
        self.reads.append(1)
        return self.text


def test_reading_stops_at_the_records_bound_on_text(collected):
    monitor, sink = collected
    reads: list[int] = []
    docs = [CountedDoc(f"{i:05d} " + "museum " * 142, reads) for i in range(5_000)]  # 1,000 characters each
    turn_with(docs, "search_long", monitor)(QUESTION)
    assert len(reads) <= 3 * (MAX_CONTEXT_CHARS // 1_000 + 1)  # the documents past the bound never read
    [(record, _)] = scored(monitor, sink)
    assert record.contexts == [doc.text for doc in docs[:200]]
    assert record.metadata["truncated"] == {"contexts": {"chars": 200_000, "kept": 200_000, "passages": 200,
                                                         "kept_passages": 200, "stopped": "chars", "entries": 5_000}}


# --------------------------------------------------------- row 17: one 5 MB passage, cut where it is read
@dataclass
class Doc:
    page_content: str
    metadata: dict[str, Any] = field(default_factory=dict)
    id: str | None = None


SHAPES = {"str": lambda text: text, "Document": lambda text: [Doc(text)],
          "hit": lambda text: [{"id": "big", "payload": {"text": text}, "score": 0.9}]}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_5_mb_passage_is_cut_to_the_bound_where_it_is_read(shape, collected):
    monitor, sink = collected
    text = "x" + "word " * 999_999 + "word"  # 5,000,000 characters, no space where the bound cuts it
    value = SHAPES[shape](text)

    @groundtrace.retrieval(name=f"search_5mb_{shape}")
    def search(question: str) -> Any:
        return value

    with groundtrace.turn(QUESTION, monitor=monitor) as turn:
        search(QUESTION)
        [passage] = turn.retrievals[0].found.passages  # what the application's thread kept
        turn.answer = ANSWER
    assert len(passage.text) == MAX_CONTEXT_CHARS and text.startswith(passage.text)
    assert passage.metadata[CUT_FROM] == 5_000_000
    for _ in range(99):  # 100 calls on one thread
        turn_with(value, f"search_5mb_{shape}", monitor)(QUESTION)
    records = [record for record, _ in scored(monitor, sink)]
    assert len(records) == 100
    for record in records:
        assert sum(map(len, record.contexts)) == MAX_CONTEXT_CHARS
        assert record.metadata["truncated"] == {"contexts": {"chars": 5_000_000, "kept": 200_000, "passages": 1,
                                                             "kept_passages": 1}}
