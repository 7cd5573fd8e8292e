"""The ship gate's verdict check (training/xe/gate.py): faithful answers flagged and planted errors
caught, each model at its own threshold, by hand."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "training"))

from xe import gate  # noqa: E402


def _rows(scores: list[tuple[int, float]], key: str) -> list[dict]:
    return [{"id": f"p{i // 2}:{label}", "label": label, key: value} for i, (label, value) in enumerate(scores)]


# four pairs (faithful, planted); the candidate reads "score" at 0.9, grounding-2 "max" at 0.5
CANDIDATE = {"paraphrase_ru": _rows([(0, 0.95), (1, 0.97), (0, 0.30), (1, 0.92), (0, 0.91), (1, 0.50),
                                     (0, 0.10), (1, 0.99)], "score")}
GROUNDING_2 = {"paraphrase_ru": _rows([(0, 0.20), (1, 0.60), (0, 0.55), (1, 0.40), (0, 0.10), (1, 0.70),
                                       (0, 0.30), (1, 0.80)], "max")}


def test_each_model_is_read_at_its_own_threshold():
    out = gate.paired_verdicts(CANDIDATE, GROUNDING_2, ("paraphrase_ru",), "score", "max", 0.9, 0.5)
    # candidate flags faithful 0.95 and 0.91 (2 of 4), grounding-2 flags 0.55 (1 of 4)
    assert out["faithful_flagged"]["candidate"] == 0.5 and out["faithful_flagged"]["grounding_2"] == 0.25
    assert out["faithful_flagged"]["difference"] == 0.25
    # candidate catches 0.97, 0.92, 0.99 (3 of 4); grounding-2 catches 0.60, 0.70, 0.80 (3 of 4)
    assert out["planted_caught"]["candidate"] == 0.75 and out["planted_caught"]["grounding_2"] == 0.75
    assert out["thresholds"] == [0.9, 0.5] and out["faithful_flagged"]["n"] == 4
    low, high = out["faithful_flagged"]["difference_90"]
    assert -1.0 <= low <= 0.25 <= high <= 1.0


def test_a_candidate_that_flags_every_faithful_answer_fails_the_check():
    flags_all = {"paraphrase_ru": [{**r, "score": 0.99} for r in CANDIDATE["paraphrase_ru"]]}
    out = gate.paired_verdicts(flags_all, GROUNDING_2, ("paraphrase_ru",), "score", "max", 0.9, 0.5)
    # every resample: candidate 1.0; grounding-2 flags one of the four, so only a draw of that answer four
    # times (1 in 256) ties: the 5th percentile of the difference is above 0
    assert out["faithful_flagged"]["candidate"] == 1.0
    assert out["faithful_flagged"]["difference_90"][0] > 0
