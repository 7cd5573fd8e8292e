"""`--engine ray` with the hub metrics: each actor loads the model once (warm_up) and the scores equal the
local engine's; a model that is not there stops the command before any actor starts."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from groundtrace.cli import app
from groundtrace.score import ScoredRecord

pytest.importorskip("ray", reason="the ray extra is not installed: pip install 'groundtrace[ray]'")
pytest.importorskip("transformers", reason="install the 'transformers' extra")
pytest.importorskip("lettucedetect", reason="install lettucedetect (the 'lettuce' extra)")
runner = CliRunner()
CONTEXT = "The capital of France is Paris. The Eiffel Tower was built in 1889 for the world fair."
ANSWERS = ["The capital of France is Paris.", "The capital of France is purple. Dragons flew to Mars in 1999.",
           "The Eiffel Tower was built in 1999 by dragons.", "Water boils at 100 degrees."]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from tests.tiny_hub_models import build_entailment_classifier, build_token_classifier

    root = tmp_path_factory.mktemp("ray-hub")
    lettuce = build_token_classifier(root / "lettuce")
    nli = build_entailment_classifier(root / "nli", {0: "entailment", 1: "neutral", 2: "contradiction"})
    answers = root / "answers.jsonl"
    answers.write_text("".join(json.dumps({"id": f"r{i}", "question": "What about France?", "contexts": [CONTEXT],
                                           "answer": a, "label": int(i % 2 == 1)}) + "\n"
                               for i, a in enumerate(ANSWERS * 3)), encoding="utf-8")
    return answers, ["-O", f"lettuce.model={lettuce}", "-O", f"nli.model={nli}"]


def _scores(path):
    rows = [ScoredRecord.model_validate_json(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [(r.id, [(s.metric, round(s.value or -1, 6), s.hallucinated, [(sp.start, sp.end, sp.score) for sp in s.spans],
                     s.error) for s in r.scores]) for r in rows]


def test_score_on_ray_equals_the_local_engine(cluster, setup, tmp_path):
    answers, options = setup
    outputs = {}
    for engine in ("local", "ray"):
        outputs[engine] = tmp_path / f"{engine}.jsonl"
        result = runner.invoke(app, ["score", str(answers), "-m", "lettuce,nli", *options, "-o", str(outputs[engine]),
                                     "--engine", engine, "--actors", "2", "--batch-size", "4"])
        assert result.exit_code == 0, result.output
    local = _scores(outputs["local"])
    assert _scores(outputs["ray"]) == local and len(local) == 12
    assert all(error is None for _, scores in local for *_, error in scores)
    assert any(spans for _, scores in local for _, _, _, spans, _ in scores)


def test_a_missing_model_stops_ray_before_scoring(setup, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    answers, _ = setup
    result = runner.invoke(app, ["score", str(answers), "-m", "nli", "-O", "nli.model=nobody-here/nothing",
                                 "--engine", "ray", "--address", "ray://127.0.0.1:1"])
    assert result.exit_code == 2 and "nobody-here/nothing" in result.output and "hf download" in result.output
