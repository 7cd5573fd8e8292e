"""`nli`: each claim read against the context chunks by a sequence classifier; compared with forward passes
run by hand with transformers."""

from __future__ import annotations

import json
import shutil

import pytest

from groundtrace.backends.nli import entailment_index
from groundtrace.detector.claims import split_claims
from groundtrace.metrics import get_metric
from groundtrace.metrics.nli import context_chunks
from groundtrace.record import Record

CONTEXT = "The capital of France is Paris. The Eiffel Tower was built in 1889 for the world fair."


def p_entailment(path, premise: str, hypothesis: str, index: int) -> float:
    """P(label ``index``) of one (premise, hypothesis), by hand."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path).eval()
    with torch.no_grad():
        logits = model(**tokenizer(premise, hypothesis, return_tensors="pt")).logits[0]
    return float(torch.softmax(logits, dim=-1)[index])


@pytest.mark.parametrize(("name", "index"), [("nli3", 0), ("nli2", 1)])
def test_one_claim_one_chunk_is_one_minus_p_entailment(models, name, index):
    answer = "The capital of France is purple."
    score = get_metric("nli", model=str(models[name])).score(Record(contexts=[CONTEXT], answer=answer, language="en"))
    assert score.ok, score.error
    assert score.value == pytest.approx(1.0 - p_entailment(models[name], CONTEXT, answer, index), abs=1e-6)
    assert score.details["chunks"] == 1 and score.details["pairs"] == 1
    assert score.hallucinated == (score.value >= 0.5)


def test_spans_are_the_unsupported_claims_at_their_offsets(models):
    answer = "The capital of France is Paris. Dragons flew to Mars in 1999."
    claims = split_claims(answer, "en")
    assert len(claims) == 2
    p = [1.0 - p_entailment(models["nli3"], CONTEXT, c.text, 0) for c in claims]
    assert abs(p[0] - p[1]) > 0.01, p  # the seeded model tells them apart
    threshold = (p[0] + p[1]) / 2
    score = get_metric("nli", model=str(models["nli3"]), threshold=threshold).score(
        Record(contexts=[CONTEXT], answer=answer, language="en"))
    worse = claims[p.index(max(p))]
    assert [(s.start, s.end, s.text) for s in score.spans] == [(worse.start, worse.end, worse.text)]
    assert score.spans[0].score == pytest.approx(max(p), abs=1e-4)
    assert score.value == pytest.approx(max(p), abs=1e-6)
    assert [c["support"] for c in score.details["claims"]] == [pytest.approx(1 - x, abs=1e-4) for x in p]
    mean = get_metric("nli", model=str(models["nli3"]), aggregation="mean").score(
        Record(contexts=[CONTEXT], answer=answer, language="en"))
    assert mean.value == pytest.approx(sum(p) / 2, abs=1e-6)


def test_a_claims_support_is_its_best_chunk(models):
    contexts = ["The capital of France is Paris.", "The Eiffel Tower was built in 1889.", "Water boils at 100 degrees."]
    answer = "The Eiffel Tower was built in 1889."
    score = get_metric("nli", model=str(models["nli3"]), chunk_tokens=8, overlap_sentences=0).score(
        Record(contexts=contexts, answer=answer, language="en"))
    by_hand = [p_entailment(models["nli3"], c, answer, 0) for c in contexts]
    assert score.details["chunks"] == 3
    assert score.value == pytest.approx(1.0 - max(by_hand), abs=1e-6)
    assert score.details["claims"][0]["chunk"] == by_hand.index(max(by_hand))


def words(texts):
    return [len(t.split()) for t in texts]


def test_chunks_pack_whole_sentences_with_an_overlap():
    contexts = ["One two three. Four five six. Seven eight.", "Nine ten eleven twelve."]
    # sentence lengths 3, 3, 2 | 4; size 8 counts one separator token per sentence
    assert context_chunks(contexts, words, 8, 0) == ["One two three. Four five six.", "Seven eight.\nNine ten eleven twelve."]
    assert context_chunks(contexts, words, 8, 1) == ["One two three. Four five six.", "Four five six. Seven eight.",
                                                     "Seven eight.\nNine ten eleven twelve."]
    assert context_chunks(contexts, words, 100, 1) == ["One two three. Four five six. Seven eight.\nNine ten eleven twelve."]
    assert context_chunks(["A very long sentence of many words here."], words, 3, 1) == ["A very long sentence of many words here."]


@pytest.mark.parametrize(("labels", "chosen", "index"), [
    ({0: "entailment", 1: "neutral", 2: "contradiction"}, None, 0),
    ({0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}, None, 2),
    ({0: "not_entailment", 1: "entailment"}, None, 1),
    ({0: "hallucinated", 1: "consistent"}, None, 1),
    ({0: "LABEL_0", 1: "LABEL_1"}, 1, 1),
    ({0: "LABEL_0", 1: "LABEL_1"}, "label_1", 1),
])
def test_the_entailment_label_is_found_by_name_or_given(labels, chosen, index):
    assert entailment_index(labels, chosen, "m") == index


def test_an_unnamed_label_asks_for_the_option():
    from groundtrace._extras import ModelUnavailableError

    with pytest.raises(ModelUnavailableError, match="entailment_label"):
        entailment_index({0: "LABEL_0", 1: "LABEL_1"}, None, "lytang/MiniCheck-RoBERTa-Large")
    with pytest.raises(ModelUnavailableError, match="no label 'yes'"):
        entailment_index({0: "LABEL_0", 1: "LABEL_1"}, "yes", "m")


def test_a_model_with_code_of_its_own_needs_trust_remote_code(models, tmp_path):
    folder = shutil.copytree(models["nli3"], tmp_path / "remote")
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoModelForSequenceClassification": "modeling_x.X"}
    (folder / "config.json").write_text(json.dumps(config))
    metric = get_metric("nli", model=str(folder))
    with pytest.raises(RuntimeError, match="trust_remote_code=true"):
        metric.preflight()
    score = metric.score(Record(contexts=[CONTEXT], answer="Paris is the capital."))
    assert not score.ok and "trust_remote_code=true" in score.error


def test_no_claims_and_no_contexts(models):
    metric = get_metric("nli", model=str(models["nli3"]))
    assert metric.score(Record(contexts=[CONTEXT], answer="I hope this helps!")).value == 0.0
    empty = metric.score(Record(contexts=[""], answer="Paris is the capital. It is big."))
    assert empty.value == 1.0 and len(empty.spans) == 2


def test_bad_options_are_refused_when_the_metric_is_built(models):
    with pytest.raises(ValueError, match="aggregation"):
        get_metric("nli", model=str(models["nli3"]), aggregation="median")
    with pytest.raises(ValueError, match="chunk_tokens"):
        get_metric("nli", model=str(models["nli3"]), chunk_tokens=0)


def test_a_model_with_its_own_predict_is_asked_through_it_when_trusted(tmp_path):
    """HHEM-2.1-open's shape (tests/tiny_hub_models.py): code of its own, no tokenizer, predict(pairs)."""
    from tests.tiny_hub_models import build_remote_code_consistency

    folder = build_remote_code_consistency(tmp_path / "remote")
    record = Record(contexts=["The capital of France is Paris."], answer="The capital of France is Paris. Dragons live on Paris.",
                    language="en")
    refused = get_metric("nli", model=str(folder)).score(record)
    assert not refused.ok and "trust_remote_code=true" in refused.error
    score = get_metric("nli", model=str(folder), trust_remote_code=True).score(record)
    assert score.ok, score.error
    # word overlap by hand: claim 1 has all 6 words in the premise, claim 2 one of 4 ("paris")
    assert [c["support"] for c in score.details["claims"]] == [1.0, 0.25]
    assert score.value == pytest.approx(0.75) and [s.text for s in score.spans] == ["Dragons live on Paris."]
