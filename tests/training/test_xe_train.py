"""The grounding trainer (training/xe/train.py): the batched minimum over windows and the loss equal
their per-example definitions; a run is a replayable plan, checkpointed and resumable."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.nn import functional as F

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "training"))

from xe import model as xe_model, train as xe_train  # noqa: E402

from groundtrace.detector.crossencoder import shared_crossencoder  # noqa: E402
from groundtrace.detector.windows import build_windows  # noqa: E402

CONTEXT = " ".join(f"Sentence {i} of the context says that tram line {i} runs every {i + 3} minutes." for i in range(60))


@pytest.fixture(scope="module")
def tokenizer():
    return shared_crossencoder().tokenizer


@pytest.fixture()
def tiny():
    torch.manual_seed(0)
    return xe_model.CrossEncoder(vocab=shared_crossencoder().tokenizer.vocab_size, hidden=32, layers=1, heads=2, ffn=64)


def _examples():
    return [
        {"question": "How often?", "contexts": [CONTEXT], "answer": "Line 3 runs every 6 minutes and line 50 every 9.",
         "label": 1, "spans": [[33, 46]]},
        {"question": None, "contexts": ["Trams run all night."], "answer": "Trams run at night.", "label": 0, "spans": []},
        {"question": "When?", "contexts": ["Trams run all night."], "answer": "Buses run too.", "label": 1, "spans": None},
    ]


def test_batched_token_logits_are_the_minimum_over_each_tokens_windows(tokenizer, tiny):
    items = [xe_train.featurize(tokenizer, ex) for ex in _examples()]
    assert len(items[0].windows) > 1  # the long context is read in several windows
    tokens, item_of, firsts = xe_train.batch_logits(tiny.eval(), items, tokenizer.pad_id, torch.device("cpu"))
    for k, it in enumerate(items):
        expected = np.full(it.answer_tokens, np.inf)
        for w in it.windows:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                out = tiny(torch.from_numpy(w.ids[None]), torch.ones(1, len(w.ids), dtype=torch.bool)).float()[0]
            values = out[w.answer_offset:w.answer_offset + len(w.answer_tokens)].detach().numpy()
            np.minimum.at(expected, w.answer_tokens, values)
        got = tokens[firsts[k]:firsts[k] + it.answer_tokens].detach().numpy()
        np.testing.assert_allclose(got, expected, atol=2e-2)  # bf16 activations, padded vs unpadded
        assert (item_of[firsts[k]:firsts[k] + it.answer_tokens] == k).all()


def test_the_loss_is_token_bce_plus_half_the_answer_bce_or_the_answer_bce_alone(tokenizer):
    items = [xe_train.featurize(tokenizer, ex) for ex in _examples()]
    assert items[2].labels is None  # span unknown
    n = [it.answer_tokens for it in items]
    tokens = torch.linspace(-2, 2, sum(n))
    item_of = torch.from_numpy(np.repeat(np.arange(3), n))
    smooth = lambda y: y * 0.9 + 0.05  # noqa: E731
    expected = []
    for k, it in enumerate(items):
        lg = tokens[item_of == k]
        answer = F.binary_cross_entropy_with_logits(lg.max(), torch.tensor(smooth(float(it.label))))
        if it.labels is None:
            expected.append(answer)
        else:
            expected.append(F.binary_cross_entropy_with_logits(lg, smooth(torch.from_numpy(it.labels))) + 0.5 * answer)
    got = xe_train.loss_of(items, tokens, item_of, 0.5, 0.1)
    assert float(got) == pytest.approx(float(torch.stack(expected).mean()), rel=1e-5)


def test_a_run_checkpoints_and_resumes_where_it_stopped(tokenizer, tiny, tmp_path):
    items = [xe_train.featurize(tokenizer, ex) for ex in _examples()] * 4
    checkpoint = tmp_path / "run.pt"
    first = xe_train.train(tiny, items, epochs=2, lr=1e-3, seed=0, token_budget=1024, pad_id=tokenizer.pad_id,
                           steps=3, checkpoint=checkpoint)
    assert first["steps"] == 3 and checkpoint.exists()
    assert np.isfinite(first["final_loss"])
    saved = torch.load(checkpoint)
    assert saved["step"] == 3 and saved["total"] == 3
    resumed = xe_train.train(tiny, items, epochs=2, lr=1e-3, seed=0, token_budget=1024, pad_id=tokenizer.pad_id,
                             steps=3, checkpoint=checkpoint, resume=True)
    assert resumed["steps"] == 3 and resumed["final_loss"] is None  # nothing left to do
    # the plan is the seed's: the same batches in the same order
    a = xe_train.plan_batches(items, 2, 1024, random.Random(0))
    b = xe_train.plan_batches(items, 2, 1024, random.Random(0))
    assert [[id(i) for i in batch] for batch in a] == [[id(i) for i in batch] for batch in b]


def test_token_probabilities_score_every_answer_token(tokenizer, tiny):
    items = [xe_train.featurize_record(tokenizer, ex) for ex in _examples()]
    probabilities = xe_train.token_probabilities(tiny, items, tokenizer.pad_id, token_budget=2048)
    assert [len(p) for p in probabilities] == [it.answer_tokens for it in items]
    assert all(((p >= 0) & (p <= 1)).all() for p in probabilities)
    assert build_windows  # the same windows as inference (imported from the metric's module)
