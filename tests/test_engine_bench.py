import json

import numpy as np
import pytest

from groundtrace import Evaluator, evaluate, get_metric
from groundtrace.measure.bench import load_labelled, run_bench
from groundtrace.measure.classification import best_f1_threshold, confusion, reliability, roc_auc, roc_curve
from groundtrace.io import read_jsonl
from groundtrace.record import InvalidInput
from tests.conftest import shared_data


def test_evaluate_runs_every_metric_on_every_record_in_order_with_workers():
    records = [{"id": str(i), "contexts": [f"Room {i} costs {i * 10} rubles."], "answer": f"Room {i} costs {i * 10} rubles."}
               for i in range(30)]
    rows = Evaluator(["lexical", "facts"], workers=3).evaluate(records)
    assert [r.id for r in rows] == [str(i) for i in range(30)]
    assert all([s.metric for s in r.scores] == ["lexical", "facts"] and all(s.ok for s in r.scores) for r in rows)
    sequential = Evaluator(["lexical", "facts"], workers=1).evaluate(records)

    def values(rows):
        return [[(s.value, s.reason, s.spans) for s in r.scores] for r in rows]

    assert values(rows) == values(sequential)


def test_metric_options_reach_the_metric_and_unknown_ones_fail_early():
    rows = evaluate([{"contexts": ["a b"], "answer": "a b"}], metrics=["lexical"], options={"lexical": {"threshold": 0.9}})
    assert rows[0].scores[0].threshold == 0.9
    with pytest.raises(ValueError, match="not selected"):
        evaluate([], metrics=["lexical"], options={"facts": {"mode": "seed"}})
    with pytest.raises(KeyError, match="unknown metric 'nope'"):
        evaluate([], metrics=["nope"])


def test_unreadable_lines_become_error_scores(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_bytes(b'{"id": "a", "contexts": ["x y"], "answer": "x y"}\n{not json\n\n[1, 2]\n\xff\xfe{"id": "b"}\n')
    items = list(read_jsonl(path))
    assert isinstance(items[0], dict)
    assert [i.message for i in items[1:] if isinstance(i, InvalidInput)] == [
        "line 2 is not valid JSON (Expecting property name enclosed in double quotes)",
        "line 4 is a JSON list, not an object",
        "line 5 is not valid JSON (Expecting value)",
    ]
    rows = evaluate(items, metrics=["lexical"])
    assert rows[0].scores[0].ok
    assert [r.id for r in rows[1:]] == ["line-2", "line-4", "line-5"]
    assert all("invalid record: line" in r.scores[0].error for r in rows[1:])


def test_auc_f1_and_balanced_accuracy_against_scikit_learn():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 500)
    scores = np.round(rng.random(500) + labels * 0.3, 2)  # rounded: many ties
    assert roc_auc(labels, scores) == pytest.approx(metrics.roc_auc_score(labels, scores))
    predicted = scores >= 0.7
    c = confusion(labels, predicted)
    assert c.precision == pytest.approx(metrics.precision_score(labels, predicted))
    assert c.recall == pytest.approx(metrics.recall_score(labels, predicted))
    assert c.f1 == pytest.approx(metrics.f1_score(labels, predicted))
    assert c.balanced_accuracy == pytest.approx(metrics.balanced_accuracy_score(labels, predicted))
    best = best_f1_threshold(labels, scores)
    brute = max(np.unique(scores), key=lambda t: metrics.f1_score(labels, scores >= t))
    assert metrics.f1_score(labels, scores >= best) == pytest.approx(metrics.f1_score(labels, scores >= brute))
    fpr, tpr, _ = metrics.roc_curve(labels, scores, drop_intermediate=False)
    assert np.allclose(np.array(roc_curve(labels, scores)), np.c_[fpr, tpr])


def test_statistics_by_hand():
    labels, scores = np.array([1, 1, 0, 0]), np.array([0.9, 0.4, 0.6, 0.1])
    assert roc_auc(labels, scores) == 0.75  # pairs (1 beats 0): 0.9>0.6, 0.9>0.1, 0.4>0.1, 0.4<0.6
    c = confusion(labels, scores >= 0.5)
    assert (c.tp, c.fp, c.fn, c.tn) == (1, 1, 1, 1) and c.f1 == 0.5 and c.balanced_accuracy == 0.5
    assert roc_auc(np.array([1, 1]), np.array([0.2, 0.3])) is None
    assert reliability(labels, scores, bins=2) == [
        {"bin": [0.0, 0.5], "n": 2, "mean_score": 0.25, "observed_rate": 0.5},
        {"bin": [0.5, 1.0], "n": 2, "mean_score": 0.75, "observed_rate": 0.5},
    ]


@pytest.fixture
def labelled(tmp_path):
    rows = [
        {"id": "g1", "task": "qa", "language": "en", "contexts": ["Students borrow books from the library."],
         "answer": "Students borrow books from the library.", "label": 0},
        {"id": "g2", "task": "qa", "language": "ru", "contexts": ["Библиотека работает утром."],
         "answer": "Библиотека работает утром.", "label": 0},
        {"id": "h1", "task": "qa", "language": "en", "contexts": ["Students borrow books from the library."],
         "answer": "Teachers sell magazines in the museum.", "label": 1},
        {"id": "h2", "task": "qa", "language": "ru", "contexts": ["Библиотека работает утром."],
         "answer": "Музей закрыт вечером.", "label": 1},
    ]
    path = tmp_path / "labelled.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    return path


def test_bench_orients_higher_is_better_metrics_and_reports_groups(labelled):
    result = run_bench(labelled, ["lexical"])["lexical"]
    assert result.overall.auc == 1.0  # hallucinated answers score lower grounding: oriented automatically
    assert result.overall.n == 4 and result.overall.positives == 2
    assert set(result.groups) == {"language:en", "language:ru", "task:qa"}
    assert result.groups["language:ru"].n == 2
    assert result.groups["language:ru"].records_per_s > 0
    assert result.records_per_s > 0
    d = result.as_dict()
    for key in ("n", "auc", "f1", "precision", "recall", "balanced_accuracy", "threshold", "records_per_s"):
        assert key in d


def test_threshold_given_and_fitted_on_another_file(labelled):
    given = run_bench(labelled, ["lexical"], threshold=0.0)["lexical"]
    assert given.overall.recall == 0.0  # value < 0 never happens: nothing flagged
    fitted = run_bench(labelled, ["lexical"], threshold_from=labelled)["lexical"]
    assert fitted.threshold_source == "F1-optimal on labelled.jsonl"
    assert fitted.overall.f1 == 1.0
    with pytest.raises(ValueError, match="either"):
        run_bench(labelled, ["lexical"], threshold=0.5, threshold_from=labelled)


def test_labels_are_required(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"id": "a", "answer": "x", "contexts": []}\n')
    with pytest.raises(ValueError, match="label"):
        load_labelled(path)


def test_lexical_reaches_the_seed_level_on_ragtruth():
    # the bar: ROC AUC >= 0.72 (the seed with whitespace tokens gets 0.74)
    result = run_bench(shared_data("ragtruth_qa_dev.jsonl"), ["lexical"])["lexical"]
    assert result.overall.n == 447 and result.overall.errors == 0
    assert result.overall.auc >= 0.72


def test_default_metric_thresholds_are_in_the_unit_interval():
    for name in ("lexical", "facts"):
        assert 0 < get_metric(name).threshold < 1


def test_bench_breaks_figures_down_by_session_when_asked(labelled, tmp_path):
    from typer.testing import CliRunner

    from groundtrace.cli import app

    sessions = {"g1": "chat-1", "h1": "chat-1", "g2": "chat-2"}  # h2 belongs to no conversation
    rows = [json.loads(line) for line in labelled.read_text(encoding="utf-8").splitlines()]
    path = tmp_path / "sessions.jsonl"
    path.write_text("\n".join(json.dumps({**r, "session_id": sessions.get(r["id"])}, ensure_ascii=False) for r in rows),
                    encoding="utf-8")

    assert not any(key.startswith("session_id:") for key in run_bench(path, ["lexical"])["lexical"].groups)
    groups = run_bench(path, ["lexical"], by=["session"])["lexical"].groups
    assert {key: (s.n, s.positives) for key, s in groups.items() if key.startswith("session_id:")} == {
        "session_id:chat-1": (2, 1), "session_id:chat-2": (1, 0)}
    assert groups["session_id:chat-1"].recall == 1.0  # lexical flags h1, the one hallucination there

    result = CliRunner().invoke(app, ["bench", str(path), "-m", "lexical", "--by", "session", "--json"])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout[result.stdout.index("{"):])
    assert printed["lexical"]["groups"]["session_id:chat-1"]["n"] == 2
