"""The selectable embedders: any OpenAI-compatible endpoint (on a loopback server) and all-MiniLM-L6-v2."""

import numpy as np
import pytest

from groundtrace import get_metric
from groundtrace._extras import MissingExtraError
from groundtrace.backends.embedders import MiniLMEmbedder, OpenAIEmbedder, get_embedder
from tests.loopback import LoopbackServer


def test_openai_compatible_endpoint_payload_and_result():
    def respond(request):
        body = request.json
        # a deterministic embedding: the text's length and its number of spaces
        data = [{"object": "embedding", "index": i, "embedding": [len(t), t.count(" ") + 1.0, 0.0]}
                for i, t in enumerate(body["input"])]
        return 200, {"object": "list", "data": data[::-1], "model": body["model"],
                     "usage": {"prompt_tokens": 3, "total_tokens": 3}}

    with LoopbackServer(respond) as server:
        embedder = OpenAIEmbedder("my-embedder", base_url=f"{server.url}/v1", api_key="sk-test", batch_size=2)
        vectors = embedder.embed(["a b", "abcd", "a b"])
        assert server.paths("POST") == ["/v1/embeddings"]
        assert server.requests[0].json["model"] == "my-embedder"
        assert server.requests[0].json["input"] == ["a b", "abcd"]  # the repeat comes from the cache
        assert server.requests[0].headers["authorization"] == "Bearer sk-test"
        expected = np.array([[3, 2, 0], [4, 1, 0], [3, 2, 0]], dtype=np.float32)
        expected /= np.linalg.norm(expected, axis=1, keepdims=True)
        assert np.allclose(vectors, expected)
        score = get_metric("facts", embedder=embedder).score({"contexts": ["abcd"], "answer": "a b"})
        assert score.details["S_c"] == pytest.approx(float(expected[0] @ expected[1]))


def test_an_endpoint_that_is_down_gives_an_error_score():
    embedder = OpenAIEmbedder("m", base_url="http://127.0.0.1:9/v1", max_retries=0, timeout=2)
    score = get_metric("facts", embedder=embedder).score({"contexts": ["c"], "answer": "a"})
    assert score.value is None and "APIConnectionError" in score.error


def test_an_endpoint_error_status_gives_an_error_score():
    with LoopbackServer(lambda request: (500, {"error": {"message": "boom"}})) as server:
        embedder = OpenAIEmbedder("m", base_url=f"{server.url}/v1", max_retries=0)
        score = get_metric("facts", embedder=embedder).score({"contexts": ["c"], "answer": "a"})
    assert score.value is None and "InternalServerError" in score.error


def test_minilm_loads_offline_from_its_package():
    pytest.importorskip("sentence_transformers", reason="install the 'minilm' extra")
    embedder = MiniLMEmbedder()
    vectors = embedder.embed(["The library opens at nine.", "The library opens at 9 am.", "Cats purr."])
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.3


def test_unknown_embedder_names_are_refused():
    with pytest.raises(ValueError, match="unknown embedder"):
        get_embedder("word2vec")
    assert issubclass(MissingExtraError, ImportError)
