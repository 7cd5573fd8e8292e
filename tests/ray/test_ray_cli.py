"""`groundtrace score/bench --engine ray` print the same numbers as the local engine."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from groundtrace.cli import app
from groundtrace.score import ScoredRecord
from tests.ray.synthetic import records

pytest.importorskip("ray", reason="the ray extra is not installed: pip install 'groundtrace[ray]'")
runner = CliRunner()


@pytest.fixture(scope="module")
def answers(tmp_path_factory):
    path = tmp_path_factory.mktemp("ray-cli") / "answers.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records(120, seed=21)), encoding="utf-8")
    return path


def _scores(path):
    rows = [ScoredRecord.model_validate_json(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [(r.id, [(s.metric, s.value, s.hallucinated, [sp.model_dump() for sp in s.spans]) for s in r.scores])
            for r in rows]


def test_score_with_the_ray_engine_writes_what_the_local_engine_writes(cluster, answers, tmp_path):
    outputs = {}
    for engine in ("local", "ray"):
        outputs[engine] = tmp_path / f"{engine}.jsonl"
        result = runner.invoke(app, ["score", str(answers), "-m", "lexical,grounding", "-o", str(outputs[engine]),
                                     "--engine", engine, "--actors", "2", "--batch-size", "16"])
        assert result.exit_code == 0, result.output
        summary = result.stdout
        assert "lexical" in summary and "grounding" in summary
    assert _scores(outputs["ray"]) == _scores(outputs["local"])
    assert len(_scores(outputs["ray"])) == 120


def test_bench_with_the_ray_engine_gives_the_local_numbers(cluster, answers):
    reports = {}
    for engine in ("local", "ray"):
        result = runner.invoke(app, ["bench", str(answers), "-m", "lexical,grounding", "--json", "--engine", engine,
                                     "--actors", "2", "--batch-size", "16"])
        assert result.exit_code == 0, result.output
        reports[engine] = json.loads(result.stdout)
    for name in ("lexical", "grounding"):
        local, remote = reports["local"][name], reports["ray"][name]
        for key in ("n", "errors", "positives", "auc", "f1", "precision", "recall", "balanced_accuracy", "threshold",
                    "oracle", "spans"):
            assert remote[key] == local[key], (name, key)
    assert reports["ray"]["grounding"]["auc"] > 0.5


def test_an_unknown_engine_is_refused(answers):
    result = runner.invoke(app, ["score", str(answers), "--engine", "spark"])
    assert result.exit_code == 2
    assert "not an engine" in result.output


def test_score_from_a_source_on_ray_scores_what_the_local_engine_scores(cluster, tmp_path):
    """score --from on Ray: the same Scores, the same per-metric skips (a trace that carries lexical
    is scored for facts only), the same counts."""
    from tests.test_backfill import write_otlp, spans_for_backfill

    spans = write_otlp(tmp_path / "spans.jsonl", spans_for_backfill())
    outputs, lines = {}, {}
    for engine in ("local", "ray"):
        outputs[engine] = tmp_path / f"{engine}.jsonl"
        result = runner.invoke(app, ["score", "--from", f"otel-json:{spans}", "-m", "lexical,facts", "-O", "facts.mode=seed",
                                     "-o", str(outputs[engine]), "--engine", engine, "--actors", "2", "--batch-size", "2"])
        assert result.exit_code == 0, result.output
        text = " ".join(result.output.split())
        lines[engine] = text[text.index("read 4 requests"):text.index(" failed") + len(" failed")]
    assert _scores(outputs["ray"]) == _scores(outputs["local"])
    assert [(rid, [m for m, *_ in scores]) for rid, scores in _scores(outputs["ray"])] == [
        ("a" * 32, ["lexical", "facts"]), ("c" * 32, ["facts"]), ("d" * 32, ["lexical", "facts"])]
    assert lines["ray"] == lines["local"]
    assert lines["ray"] == ("read 4 requests: 0 filtered out, 1 not RAG requests (1 no retrieval), 0 already scored, "
                            "0 already in the output, 3 scored, 0 failed")


def test_parquet_in_on_ray_scores_what_jsonl_does_locally(cluster, answers, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    rows = [json.loads(line) for line in answers.read_text(encoding="utf-8").splitlines()]
    parquet = tmp_path / "answers.parquet"
    pq.write_table(pa.Table.from_pylist(rows), parquet, row_group_size=50)
    outputs = {}
    for name, path, engine in (("local", answers, "local"), ("ray", parquet, "ray")):
        outputs[name] = tmp_path / f"{name}.jsonl"
        result = runner.invoke(app, ["score", str(path), "-m", "lexical", "-o", str(outputs[name]), "--engine", engine,
                                     "--batch-size", "16"])
        assert result.exit_code == 0, result.output
    assert _scores(outputs["ray"]) == _scores(outputs["local"])
    assert len(_scores(outputs["ray"])) == 120
