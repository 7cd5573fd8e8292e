"""The shared collector on its own: parent map, root lookup, cleanup and the bound on roots in flight. It is keyed by
the run keys the handler reads at its edge (events.py): a UUID's int here."""

from __future__ import annotations

import uuid

from groundtrace_langchain.collector import Collector, RootRun

SCOPE, OTHER_SCOPE = 1, 2


def new_key() -> int:
    """A run's key, as the handler reads a LangChain run id (groundtrace_langchain.events.run_key)."""
    return uuid.uuid4().int


def root_run(key: int) -> RootRun:
    return RootRun(run_id=str(uuid.UUID(int=key)), key=key, name="chain", inputs="q", tags=[], metadata={},
                   excluded=False, otel_ids=None, links={})


def test_descendants_find_their_root_and_leave_with_it():
    collector = Collector()
    root_id, child, grandchild, retriever = (new_key() for _ in range(4))
    root = root_run(root_id)
    collector.add_root(SCOPE, root)

    assert collector.adopt(SCOPE, child, root_id) is root
    assert collector.adopt(SCOPE, grandchild, child) is root
    assert collector.adopt_retriever(SCOPE, retriever, grandchild, "first query") is root
    assert collector.adopt_retriever(SCOPE, new_key(), grandchild, "second query") is root
    assert [s.query for s in root.sources] == ["first query", "second query"]
    assert list(root.retrievals)[0] == retriever and not root.retrievals[retriever].nested
    assert collector.root_of(SCOPE, retriever) is root
    assert collector.tracked_runs() == 5  # the root, two chains, two retrievers

    assert collector.pop_root(SCOPE, child) is None  # not a root: nothing happens
    assert collector.pop_root(SCOPE, root_id) is root
    assert collector.tracked_runs() == 0
    assert collector.root_of(SCOPE, grandchild) is None
    assert collector.pop_root(SCOPE, root_id) is None  # a second end is harmless


def test_scopes_do_not_see_each_other():
    collector = Collector()
    root_id = new_key()
    collector.add_root(SCOPE, root_run(root_id))

    assert collector.adopt(OTHER_SCOPE, new_key(), root_id) is None
    assert collector.pop_root(OTHER_SCOPE, root_id) is None
    assert collector.pop_root(SCOPE, root_id) is not None


def test_an_unknown_parent_adopts_nothing():
    collector = Collector()
    assert collector.adopt(SCOPE, new_key(), new_key()) is None
    assert collector.root_of(SCOPE, None) is None
    assert collector.tracked_runs() == 0


def test_roots_beyond_the_bound_evict_the_oldest_with_its_runs():
    collector = Collector(max_roots=2)
    ids = [new_key() for _ in range(3)]
    roots = [root_run(i) for i in ids]
    collector.add_root(SCOPE, roots[0])
    collector.adopt(SCOPE, new_key(), ids[0])
    assert collector.add_root(SCOPE, roots[1]) == []

    assert collector.add_root(SCOPE, roots[2]) == [roots[0]]
    stats = collector.stats()
    assert (stats.roots, stats.evicted, stats.in_flight, stats.no_record) == (3, 1, 2, {})
    assert stats.accounted() == stats.roots
    assert collector.tracked_runs() == 2
    assert collector.pop_root(SCOPE, ids[0]) is None


def test_runs_know_the_tool_and_the_retriever_they_run_inside():
    collector = Collector()
    root_id, tool, tool_chain, outer, inner, plain = (new_key() for _ in range(6))
    root = root_run(root_id)
    collector.add_root(SCOPE, root)

    collector.adopt_tool(SCOPE, tool, root_id, "search_docs", {"query": "q"}, "call_1")
    collector.adopt(SCOPE, tool_chain, tool)  # a chain inside the tool
    collector.adopt_retriever(SCOPE, outer, tool_chain, "q", "Compression")
    collector.adopt_retriever(SCOPE, inner, outer, "q", "Base")  # a compression's base retriever
    collector.adopt_retriever(SCOPE, plain, root_id, "q2", "Plain")

    retrievals = root.retrievals
    assert (retrievals[outer].tool, retrievals[outer].nested) == (tool, False)
    assert (retrievals[inner].tool, retrievals[inner].nested) == (tool, True)
    assert (retrievals[plain].tool, retrievals[plain].nested) == (None, False)
    assert [type(s).__name__ for s in root.sources] == ["ToolRun", "Retrieval", "Retrieval", "Retrieval"]
    assert root.tools[tool].call_id == "call_1" and not root.tools[tool].ended
    assert collector.pop_root(SCOPE, root_id) is root and collector.tracked_runs() == 0


def test_a_root_keeps_only_its_last_sources(monkeypatch):
    from groundtrace_langchain import collector as module

    monkeypatch.setattr(module, "MAX_SOURCES", 3)
    collector = Collector()
    root_id = new_key()
    root = root_run(root_id)
    collector.add_root(SCOPE, root)
    runs = [new_key() for _ in range(5)]
    for i, run in enumerate(runs):
        collector.adopt_tool(SCOPE, run, root_id, f"tool{i}", {}, None)
    assert [s.name for s in root.sources] == ["tool2", "tool3", "tool4"]
    assert set(root.tools) == {r for r in runs[2:]}
    collector.pop_root(SCOPE, root_id)
