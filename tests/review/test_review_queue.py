"""The queue's order (nearest a threshold first, the two sides in turn), its filters and the progress toward a fit."""

from __future__ import annotations

from groundtrace.io.labels import decide
from groundtrace.review.queue import Filters, progress, queue
from tests.review.samples import row


def ids(items) -> list[str]:
    return [item.id for item in items]


def test_the_nearest_and_the_farthest_of_each_side_in_turn() -> None:
    rows = [row("far-pass", 0.95), row("flag-sure", 0.05), row("near-below", 0.35), row("near-above", 0.42),
            row("flag-less-sure", 0.25), row("pass", 0.7), row("pass-too", 0.8)]
    # threshold 0.4 (below it: flagged). Passed side by distance: 0.42 (0.02), 0.7 (0.30), 0.8 (0.40), 0.95 (0.55);
    # flagged side: 0.35 (0.05), 0.25 (0.15), 0.05 (0.35). Four lanes in turn, the side with the nearer head first:
    # nearest passed, nearest flagged, farthest passed, farthest flagged; then again, skipping what was taken
    assert ids(queue(rows, Filters(), {})) == ["near-above", "near-below", "far-pass", "flag-sure", "pass",
                                               "flag-less-sure", "pass-too"]


def test_filters_narrow_the_queue() -> None:
    rows = [row("a", 0.1, language="ru", session="s1", source="faq"), row("b", 0.9, language="en", session="s2"),
            row("c", 0.38, language="ru", session="s1", source="web")]
    decisions = {"a": decide("a", "unsupported")}
    assert ids(queue(rows, Filters(language="ru"), {})) == ["c", "a"]
    assert ids(queue(rows, Filters(verdict="flagged"), {})) == ["c", "a"]
    assert ids(queue(rows, Filters(verdict="passed"), {})) == ["b"]
    assert ids(queue(rows, Filters(verdict="near"), {})) == ["c"]
    assert ids(queue(rows, Filters(verdict="undecided"), decisions)) == ["c", "b"]
    assert ids(queue(rows, Filters(session="s2"), {})) == ["b"]
    assert ids(queue(rows, Filters(meta_key="source"), {})) == ["c", "a"]
    assert ids(queue(rows, Filters(meta_key="source", meta_value="faq"), {})) == ["a"]
    assert ids(queue(rows, Filters(metric="facts"), {})) == []


def test_progress_says_how_far_from_a_fit() -> None:
    keys = [f"r{i}" for i in range(40)]
    decisions = {key: decide(key, "unsupported" if i < 9 else "supported") for i, key in enumerate(keys[:37])}
    decisions["r37"] = decide("r37", "skip")
    decisions["elsewhere"] = decide("elsewhere", "unsupported")  # a record of another file: not counted
    done = progress(decisions, keys)
    assert (done.labelled, done.unsupported, done.supported, done.skipped, done.ready) == (37, 9, 28, 1, True)
    assert done.sentence() == "37 labelled: 9 unsupported, 1 skipped; enough for `fit`"
    few = progress({key: decide(key, "unsupported") for key in keys[:12]}, keys)
    assert few.sentence() == "12 labelled: 12 unsupported; `fit` needs 30 with 8 of each" and not few.ready


def test_the_queue_narrows_to_what_a_guard_did_with_the_answer() -> None:
    rows = [row("a", 0.1, guard={"action": "redacted", "hallucinated": True, "seconds": 0.03}),
            row("b", 0.9, guard={"action": "passed", "hallucinated": False, "seconds": 0.02}), row("c", 0.2)]
    assert ids(queue(rows, Filters(guard="redacted"), {})) == ["a"]
    assert ids(queue(rows, Filters(guard="passed"), {})) == ["b"]
    assert ids(queue(rows, Filters.of({"guard": "replaced"}), {})) == []
    assert sorted(ids(queue(rows, Filters(), {}))) == ["a", "b", "c"]
