"""The shipped grounding detector: an ONNX network over claim features, run by onnxruntime.

The weights (``grounding.onnx``) and their card (``grounding.json``: feature names, threshold,
validation numbers) live beside this file and are reproduced by ``training/train_detector.py``.
"""

from __future__ import annotations

import json
import threading
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from groundtrace.detector.features import FEATURE_NAMES

MODEL_DIR = Path(__file__).parent
MODEL_FILE = MODEL_DIR / "grounding.onnx"
CARD_FILE = MODEL_DIR / "grounding.json"


class DetectorModel:
    """Claim probabilities from feature rows. Thread-safe; the session loads on first use."""

    def __init__(self, path: Path = MODEL_FILE, card: Path = CARD_FILE, threads: int = 1) -> None:
        self.path = Path(path)
        self.card_path = Path(card)
        self.threads = threads
        self._lock = threading.Lock()
        self._session: Any = None

    @cached_property
    def card(self) -> dict[str, Any]:
        card = json.loads(self.card_path.read_text(encoding="utf-8"))
        if tuple(card["features"]) != FEATURE_NAMES:
            raise RuntimeError(
                f"{self.path.name} was trained on other features than this version of groundtrace computes; "
                "retrain it with training/train_detector.py"
            )
        return card

    @property
    def threshold(self) -> float:
        return float(self.card["threshold"])

    def _load(self) -> Any:
        if self._session is None:
            with self._lock:
                if self._session is None:
                    import onnxruntime as ort

                    options = ort.SessionOptions()
                    options.intra_op_num_threads = self.threads
                    options.inter_op_num_threads = 1
                    self.card  # noqa: B018 - fail on a feature mismatch before the first prediction
                    self._session = ort.InferenceSession(str(self.path), options, providers=["CPUExecutionProvider"])
        return self._session

    def predict(self, features: np.ndarray) -> np.ndarray:
        """P(unsupported) per row of ``features``."""
        if len(features) == 0:
            return np.zeros(0, dtype=np.float64)
        session = self._load()
        outputs = session.run(None, {session.get_inputs()[0].name: np.ascontiguousarray(features, dtype=np.float32)})
        return np.clip(outputs[0][:, 0].astype(np.float64), 0.0, 1.0)


_shared: dict[int, DetectorModel] = {}
_shared_lock = threading.Lock()


def shared_model(threads: int = 1) -> DetectorModel:
    """One loaded model per thread count, for every metric instance in the process."""
    with _shared_lock:
        return _shared.setdefault(threads, DetectorModel(threads=threads))
