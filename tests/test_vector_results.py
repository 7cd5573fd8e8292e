"""What a retrieval function returns when it returns its vector database client's result: the passages' text, with
their ids and scores in the document metadata. The REST bodies are the shapes the services' docs show (recorded,
with our own texts); a LangChain (Document, score) pair is a real Document."""

from __future__ import annotations

import pytest

import groundtrace
from groundtrace.capture.carried import read_items
from groundtrace.monitor import Monitor
from tests.custom_sinks import PlainSink

OPENS, CLOSES = "The museum opens at 9 am.", "The museum closes at 6 pm."

SHAPES = {
    "pinecone REST": {"matches": [{"id": "doc-1", "score": 0.91, "values": [], "metadata": {"text": OPENS, "page": 1}},
                                  {"id": "doc-2", "score": 0.72, "values": [], "metadata": {"text": CLOSES}}],
                      "namespace": ""},
    "pinecone matches": [{"id": "doc-1", "score": 0.91, "metadata": {"text": OPENS, "page": 1}},
                         {"id": "doc-2", "score": 0.72, "metadata": {"text": CLOSES}}],
    "qdrant REST": {"result": None, "points": [{"id": "doc-1", "version": 3, "score": 0.91,
                                                "payload": {"page_content": OPENS, "page": 1}},
                                               {"id": "doc-2", "version": 3, "score": 0.72,
                                                "payload": {"page_content": CLOSES}}]},
    "chroma QueryResult": {"ids": [["doc-1", "doc-2"]], "documents": [[OPENS, CLOSES]],
                           "metadatas": [[{"page": 1}, {}]], "distances": [[0.91, 0.72]], "embeddings": None},
    "elasticsearch": {"took": 3, "hits": {"total": {"value": 2}, "max_score": 0.91, "hits": [
        {"_index": "docs", "_id": "doc-1", "_score": 0.91, "_source": {"content": OPENS, "page": 1}},
        {"_index": "docs", "_id": "doc-2", "_score": 0.72, "_source": {"content": CLOSES}}]}},
    "weaviate GraphQL": {"data": {"Get": {"Museum": [
        {"body": OPENS, "page": 1, "_additional": {"id": "doc-1", "score": 0.91}},
        {"body": CLOSES, "_additional": {"id": "doc-2", "score": 0.72}}]}}},
    "milvus hits": [[{"id": "doc-1", "distance": 0.91, "entity": {"chunk": OPENS, "page": 1}},
                     {"id": "doc-2", "distance": 0.72, "entity": {"chunk": CLOSES}}]],
}


def test_pgvector_rows_as_dicts_or_named_rows_keep_their_other_columns_as_metadata():
    """psycopg with dict_row or namedtuple_row, as a pgvector query (`SELECT id, content, embedding <=> %s AS
    distance, page ...`) returns them: the text column, the id, the distance, the rest as metadata."""
    from collections import namedtuple

    Row = namedtuple("Row", "id content distance page")
    as_dicts = [{"id": "doc-1", "content": OPENS, "distance": 0.91, "page": 1, "embedding": [0.1, 0.2]},
                {"id": "doc-2", "content": CLOSES, "distance": 0.72, "page": 2, "embedding": [0.3, 0.4]}]
    for rows in (as_dicts, [Row("doc-1", OPENS, 0.91, 1), Row("doc-2", CLOSES, 0.72, 2)]):
        items, _ = read_items(rows)
        assert [(item.text, item.id, item.score, item.metadata) for item in items] == [
            (OPENS, "doc-1", 0.91, {"page": 1, "score": 0.91}), (CLOSES, "doc-2", 0.72, {"page": 2, "score": 0.72})]


@pytest.mark.parametrize("shape", SHAPES)
def test_each_shape_gives_its_passages_with_ids_and_scores(shape):
    items, unreadable = read_items(SHAPES[shape])
    assert [(item.text, item.id, item.score) for item in items] == [(OPENS, "doc-1", 0.91), (CLOSES, "doc-2", 0.72)]
    assert items[0].metadata == {"page": 1, "score": 0.91} and unreadable == 0


def test_a_marked_retrieval_returning_pinecone_matches_is_scored_against_them():
    """Before: contexts=[] and a confident false alarm ("no contexts were retrieved")."""
    sink = PlainSink()

    @groundtrace.retrieval
    def search(question: str) -> dict:
        return SHAPES["pinecone REST"]

    with Monitor(["lexical"], [sink], isolation="thread", flush_at_exit=False) as monitor:
        @groundtrace.turn(monitor=monitor)
        def answer(question: str) -> str:
            search(question)
            return "It opens at 9 am."

        answer("When does the museum open?")
        assert monitor.flush(30)
    [(record, [score])] = sink.got
    assert record.contexts == [OPENS, CLOSES] and score.ok
    assert [d["id"] for d in record.metadata["documents"]] == ["doc-1", "doc-2"]


def test_a_langchain_document_and_score_pair_keeps_its_score():
    documents = pytest.importorskip("langchain_core.documents")
    pair = (documents.Document(page_content=OPENS, id="doc-1", metadata={"page": 1}), 0.91)
    [item], _ = read_items([pair])
    assert (item.text, item.id, item.score) == (OPENS, "doc-1", 0.91)


def test_qdrant_in_memory_query_points_and_their_list():
    """The real qdrant-client, in memory: query_points returns a QueryResponse of ScoredPoints."""
    qdrant = pytest.importorskip("qdrant_client", reason="pip install qdrant-client (embedded, no server)")
    models = qdrant.models
    client = qdrant.QdrantClient(":memory:")
    client.create_collection("docs", vectors_config=models.VectorParams(size=3, distance=models.Distance.DOT))
    client.upsert("docs", points=[models.PointStruct(id=1, vector=[1.0, 0.0, 0.0], payload={"page_content": OPENS, "page": 1}),
                                  models.PointStruct(id=2, vector=[0.0, 1.0, 0.0], payload={"page_content": CLOSES})])
    response = client.query_points("docs", query=[0.9, 0.5, 0.0], limit=2)
    for value in (response, response.points):
        items, _ = read_items(value)
        assert [(item.text, item.id, item.score) for item in items] == [(OPENS, "1", 0.9), (CLOSES, "2", 0.5)]
        assert items[0].metadata == {"page": 1, "score": 0.9}


@pytest.mark.parametrize("form", ["list", "pandas", "arrow"])
def test_lancedb_rows_as_a_list_a_dataframe_or_an_arrow_table(tmp_path, form):
    lancedb = pytest.importorskip("lancedb", reason="pip install lancedb (embedded, no server)")
    table = lancedb.connect(tmp_path).create_table("docs", data=[
        {"vector": [1.0, 0.0], "text": OPENS, "id": "doc-1"}, {"vector": [0.0, 1.0], "text": CLOSES, "id": "doc-2"}])
    search = table.search([1.0, 0.0]).limit(2)
    if form == "pandas":
        pytest.importorskip("pandas")
    rows = {"list": search.to_list, "pandas": search.to_pandas, "arrow": search.to_arrow}[form]()
    items, _ = read_items(rows)
    assert [(item.text, item.id) for item in items] == [(OPENS, "doc-1"), (CLOSES, "doc-2")]
    assert [item.score for item in items] == [0.0, 2.0]  # LanceDB's _distance (squared L2)


def test_chroma_ephemeral_query_and_get_results():
    """The real chromadb, in memory, given its embeddings (no embedding model is fetched, no telemetry sent)."""
    chromadb = pytest.importorskip("chromadb", reason="pip install chromadb (embedded, no server)")
    from chromadb.config import Settings

    client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
    docs = client.create_collection("docs", embedding_function=None)
    docs.add(ids=["doc-1", "doc-2"], documents=[OPENS, CLOSES], embeddings=[[1.0, 0.0], [0.0, 1.0]],
             metadatas=[{"page": 1}, {"page": 2}])
    items, _ = read_items(docs.query(query_embeddings=[[1.0, 0.5]], n_results=2))
    assert [(item.text, item.id) for item in items] == [(OPENS, "doc-1"), (CLOSES, "doc-2")]
    assert [round(item.score, 4) for item in items] == [0.25, 1.25]  # Chroma's distance (squared L2)
    assert items[0].metadata == {"page": 1, "score": items[0].score}
    [got], _ = read_items(docs.get(ids=["doc-2"]))
    assert (got.text, got.id, got.metadata) == (CLOSES, "doc-2", {"page": 2})


def test_milvus_lite_search_results_and_their_first_query(tmp_path):
    """The real pymilvus on Milvus Lite (a local file, no server): search returns a list per query of Hits."""
    pymilvus = pytest.importorskip("pymilvus", reason="pip install pymilvus milvus-lite (embedded, no server)")
    pytest.importorskip("milvus_lite", reason="pip install milvus-lite")
    client = pymilvus.MilvusClient(str(tmp_path / "milvus.db"))
    try:
        client.create_collection("docs", dimension=2)
        client.insert("docs", [{"id": 1, "vector": [1.0, 0.0], "chunk": OPENS, "page": 1},
                               {"id": 2, "vector": [0.0, 1.0], "chunk": CLOSES}])
        result = client.search("docs", data=[[1.0, 0.5]], limit=2, output_fields=["chunk", "page"])
    finally:
        client.close()
    for value in (result, result[0]):
        items, _ = read_items(value)
        assert [(item.text, item.id) for item in items] == [(OPENS, "1"), (CLOSES, "2")]
        assert [round(item.score, 4) for item in items] == [0.8944, 0.4472]  # cosine, Milvus's default metric
        assert items[0].metadata == {"page": 1, "score": items[0].score}
