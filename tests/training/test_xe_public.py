"""The public sets as grounding-4's training examples (training/xe/public.py): the copy share by hand,
the shortcut AUC, and the balance that takes the shortcut away within a set."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "training"))

from xe import public  # noqa: E402


def _ex(answer: str, context: str, label: int) -> dict:
    return {"id": answer, "language": "en", "question": None, "contexts": [context], "answer": answer,
            "label": label, "spans": [] if label == 0 else None, "source": "toy"}


def test_uncopied_is_the_share_of_answer_words_missing_from_the_contexts():
    # words: the, museum, opens, at, 9 -> "at" and "9" are not in the context: 2 of 5
    assert public.uncopied(_ex("The museum opens at 9", "the MUSEUM opens daily", 0)) == pytest.approx(0.4)
    assert public.uncopied(_ex("Museum opens", "museum opens", 0)) == 0.0


def test_shortcut_auc_by_hand():
    copied = [_ex("a b c d", "a b c d", 0), _ex("a b c d", "a b c x", 0)]  # uncopied 0.0, 0.25
    novel = [_ex("a b c d", "a x y z", 1), _ex("a b c d", "a b x y", 1)]  # 0.75, 0.5
    assert public.shortcut_auc(copied + novel) == 1.0  # every hallucinated one copies less
    swapped = [_ex("a b c d", "a b c x", 1), _ex("a b c d", "a b x y", 0)]  # 0.25 (1) vs 0.5 (0)
    assert public.shortcut_auc(swapped) == 0.0
    # pairs (pos, neg): (0.75, 0.0) 1, (0.75, 0.5) 1, (0.25, 0.0) 1, (0.25, 0.5) 0 -> 3 / 4
    assert public.shortcut_auc([_ex("a b c d", "a x y z", 1), _ex("a b c d", "a b c x", 1),
                                _ex("a b c d", "a b c d", 0), _ex("a b c d", "a b x y", 0)]) == 0.75
    assert public.shortcut_auc(copied) is None  # one label only


def test_balance_keeps_at_most_ratio_times_the_smaller_label_in_each_copy_bin():
    copied_faithful = [_ex(f"w{i} museum", f"w{i} museum", 0) for i in range(10)]  # uncopied 0.0
    copied_flipped = [_ex(f"w{i} museum", f"w{i} museum", 1) for i in range(100, 104)]  # 0.0: 4 positives
    novel_wrong = [_ex(f"w{i} zoo", f"w{i} museum", 1) for i in range(200, 230)]  # 0.5: positives only
    novel_right = [_ex(f"w{i} zoo", f"w{i} museum zoo", 0) for i in range(300, 303)]  # 0.0 as well
    pool = copied_faithful + copied_flipped + novel_wrong + novel_right
    kept = public.balance(pool, 1.5, random.Random(0))
    zero = [e for e in kept if public.uncopied(e) == 0.0]
    half = [e for e in kept if public.uncopied(e) == 0.5]
    # bin [0, 0.02): 13 faithful, 4 hallucinated -> at most int(4 * 1.5) = 6 faithful, all 4 hallucinated
    assert sum(e["label"] == 0 for e in zero) == 6 and sum(e["label"] == 1 for e in zero) == 4
    assert half == []  # a bin with one label only says nothing but the shortcut: dropped
    assert public.shortcut_auc(kept) == 0.5
    assert [e["id"] for e in kept] == [e["id"] for e in pool if e in kept]  # order kept
    again = public.balance(pool, 1.5, random.Random(0))
    assert [e["id"] for e in again] == [e["id"] for e in kept]  # the seed decides
