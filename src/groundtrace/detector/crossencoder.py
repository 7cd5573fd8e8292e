"""The shipped cross-encoder: reads question + contexts and the answer together and gives each answer
token P(unsupported). int8 ONNX run by onnxruntime; no torch. One session per process and thread
count, shared by every metric instance and thread (``InferenceSession.run`` is thread-safe).

Files beside this module: ``grounding-xe.onnx`` (the network, its vocabulary pruned to en/ru/zh),
``grounding-xe.spm`` + ``grounding-xe-normalizer.json`` (its tokenizer) and ``grounding.json``
(the card: threshold, numbers, training), all reproduced by commit 582ff0f's ``training/build_crossencoder.sh``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from groundtrace.detector.evidence import Evidence
from groundtrace.detector.packing import evidence_windows
from groundtrace.detector.tokenizer import Encoding, XETokenizer
from groundtrace.detector.windows import MAX_TOKENS, Window, answer_minimum, build_windows, pad_batch

MODEL_DIR = Path(__file__).parent
ONNX_FILE = MODEL_DIR / "grounding-xe.onnx"
TOKENIZER_FILE = MODEL_DIR / "grounding-xe.spm"
NORMALIZER_FILE = MODEL_DIR / "grounding-xe-normalizer.json"
# Windows per onnxruntime call: bounds the activations of one call (~40 MB at 512 tokens each).
_WINDOWS_PER_RUN = 4


@dataclass(frozen=True)
class TokenScores:
    encoding: Encoding  # the answer's tokens with character offsets
    p_unsupported: np.ndarray  # per token
    windows: int
    tokens: int = 0  # encoder positions read, all windows together (the cost)


class CrossEncoder:
    def __init__(self, onnx_file: Path = ONNX_FILE, tokenizer_file: Path = TOKENIZER_FILE,
                 normalizer_file: Path = NORMALIZER_FILE, threads: int = 1) -> None:
        self.onnx_file = Path(onnx_file)
        self.tokenizer_file = Path(tokenizer_file)
        self.normalizer_file = Path(normalizer_file)
        self.threads = threads
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: XETokenizer | None = None

    def _load(self) -> tuple[Any, XETokenizer]:
        if self._session is None:
            with self._lock:
                if self._session is None:
                    import onnxruntime as ort

                    options = ort.SessionOptions()
                    options.intra_op_num_threads = self.threads
                    options.inter_op_num_threads = 1
                    self._tokenizer = XETokenizer(self.tokenizer_file, self.normalizer_file)
                    self._session = ort.InferenceSession(str(self.onnx_file), options,
                                                         providers=["CPUExecutionProvider"])
        assert self._tokenizer is not None
        return self._session, self._tokenizer

    @property
    def tokenizer(self) -> XETokenizer:
        return self._load()[1]

    def score(self, question: str | None, contexts: list[str], answer: str) -> TokenScores:
        """Every answer token read against every context window (the full reading)."""
        return self.score_windows(*self.full_windows(question, contexts, answer))

    def full_windows(self, question: str | None, contexts: list[str], answer: str) -> tuple[Encoding, list[Window]]:
        """The answer's tokens and the full reading's windows (none for an answer without tokens)."""
        tokenizer = self.tokenizer
        encoding = tokenizer.encode(answer)
        if len(encoding) == 0:
            return encoding, []
        return encoding, build_windows(tokenizer, question, contexts, encoding, MAX_TOKENS)

    def score_evidence(self, question: str | None, evidence: Evidence, answer: str, fill: bool = False) -> TokenScores:
        """The answer read against the sentences its claims picked (detector/packing.py)."""
        tokenizer = self.tokenizer
        encoding = tokenizer.encode(answer)
        if len(encoding) == 0:
            return TokenScores(encoding, np.zeros(0), 0)
        return self.score_windows(encoding, evidence_windows(tokenizer, question, evidence, encoding, MAX_TOKENS, fill))

    def score_windows(self, encoding: Encoding, windows: list[Window]) -> TokenScores:
        if len(encoding) == 0:
            return TokenScores(encoding, np.zeros(0), 0)
        values = self.window_probabilities(windows)
        return TokenScores(encoding, answer_minimum(windows, values, len(encoding)).astype(np.float64), len(windows),
                           sum(len(w.ids) for w in windows))


    def window_probabilities(self, windows: list[Window]) -> list[np.ndarray]:
        """P(unsupported) of every position of every window (padding cut off)."""
        session, tokenizer = self._load()
        values: list[np.ndarray] = []
        for start in range(0, len(windows), _WINDOWS_PER_RUN):
            part = windows[start:start + _WINDOWS_PER_RUN]
            ids, mask = pad_batch(part, tokenizer.pad_id)
            out = session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
            values.extend(row[:len(w.ids)] for row, w in zip(out, part, strict=True))
        return values


_shared: dict[int, CrossEncoder] = {}
_shared_lock = threading.Lock()


def shared_crossencoder(threads: int = 1) -> CrossEncoder:
    with _shared_lock:
        return _shared.setdefault(threads, CrossEncoder(threads=threads))
