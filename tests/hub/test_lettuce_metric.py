"""`lettuce` gives what lettucedetect itself gives on the same inputs: the same spans and probabilities, the
same chunks for a long context; and maps spans onto the answer as given."""

from __future__ import annotations

import pytest

from groundtrace.metrics import get_metric
from groundtrace.record import Record

QUESTION = "What is the capital of France?"
CONTEXT = "The capital of France is Paris. The Eiffel Tower was built in 1889 for the world fair."
ANSWERS = [
    "The capital of France is Paris.",
    "The capital of France is purple and dragons flew to Mars in 1999.",
    "Purple dragons.",
]


def package_detector(path, max_length=4096, lang="en"):
    from lettucedetect.models.inference import HallucinationDetector

    return HallucinationDetector(method="transformer", model_path=str(path), max_length=max_length, device="cpu",
                                 lang=lang)


def expected_value(tokens) -> float:
    """The highest P(hallucinated) over the answer's tokens (the trailing [SEP] is no answer text)."""
    return max(t["prob"] for t in tokens if t["token"] not in ("[SEP]", "[CLS]", "[PAD]"))


def spans_of(score):
    return [(s.start, s.end, s.text, s.score) for s in score.spans]


def package_spans(found, shift=0, answer=None):
    return [(s["start"] + shift, s["end"] + shift, answer[s["start"] + shift:s["end"] + shift] if answer else s["text"],
             round(s["confidence"], 4)) for s in found]


@pytest.mark.parametrize("answer", ANSWERS)
def test_spans_and_value_are_lettucedetects_own(models, answer):
    metric = get_metric("lettuce", model=str(models["lettuce"]))
    score = metric.score(Record(question=QUESTION, contexts=[CONTEXT], answer=answer, language="en"))
    detector = package_detector(models["lettuce"])
    spans = detector.predict([CONTEXT], answer, QUESTION, output_format="spans")
    tokens = detector.predict([CONTEXT], answer, QUESTION, output_format="tokens")
    assert score.ok, score.error
    assert spans_of(score) == package_spans(spans)
    assert score.value == pytest.approx(expected_value(tokens), abs=1e-9)
    assert score.hallucinated == bool(spans)  # at 0.5 the verdict is the package's own decision
    assert score.details["chunks"] == 1 and score.details["lang"] == "en"


def test_the_flagged_words_are_the_spans(models):
    score = get_metric("lettuce", model=str(models["lettuce"])).score(
        Record(question=QUESTION, contexts=[CONTEXT], answer=ANSWERS[1]))
    assert [s.text for s in score.spans] == ["purple", "dragons", "mars", "1999"] or \
        [s.text.lower() for s in score.spans] == ["purple", "dragons", "mars", "1999"]
    assert all(s.score > 0.9 and s.label == "unsupported" for s in score.spans)
    assert score.value > 0.9 and score.hallucinated
    assert "purple" in score.reason.lower()


def test_an_answer_with_leading_spaces_gets_spans_on_its_own_characters(models):
    answer = "   " + ANSWERS[1]
    score = get_metric("lettuce", model=str(models["lettuce"])).score(
        Record(question=QUESTION, contexts=[CONTEXT], answer=answer))
    found = package_detector(models["lettuce"]).predict([CONTEXT], answer, QUESTION, output_format="spans")
    # the package counts from the first answer token: its texts are cut 3 characters early
    assert [s["text"] for s in found][0] != "purple"
    assert spans_of(score) == package_spans(found, shift=3, answer=answer)
    assert [s.text.lower() for s in score.spans] == ["purple", "dragons", "mars", "1999"]


def test_a_long_context_is_chunked_as_the_package_chunks_it(models):
    passages = [f"Passage about the river seine number {i}: the capital of France is Paris." for i in range(12)]
    answer = ANSWERS[1]
    metric = get_metric("lettuce", model=str(models["lettuce"]), max_length=200)
    score = metric.score(Record(question=QUESTION, contexts=passages, answer=answer))
    detector = package_detector(models["lettuce"], max_length=200)
    groups = detector.detector._group_passages_into_chunks(passages, QUESTION, answer)
    assert len(groups) > 2  # the test reads a really chunked context
    assert score.details["chunks"] == len(groups)
    assert spans_of(score) == package_spans(detector.predict(passages, answer, QUESTION, output_format="spans"))
    assert score.value == pytest.approx(expected_value(
        detector.predict(passages, answer, QUESTION, output_format="tokens")), abs=1e-9)


def test_chunk_probabilities_are_the_maximum_over_chunks(models):
    from lettucedetect.detectors.prompt_utils import PromptUtils

    passages = [f"Passage about the river seine number {i}: the capital of France is Paris." for i in range(12)]
    answer = "The capital of France is Paris."
    detector = package_detector(models["lettuce"], max_length=200).detector
    groups = detector._group_passages_into_chunks(passages, QUESTION, answer)
    per_chunk = [[t["prob"] for t in detector._predict_single(PromptUtils.format_context(g, QUESTION, "en"), answer,
                                                               "tokens")] for g in groups]
    by_hand = max(max(row[:-1]) for row in per_chunk)  # [:-1]: the trailing [SEP]
    assert len({tuple(row) for row in per_chunk}) > 1  # the chunks do read differently
    score = get_metric("lettuce", model=str(models["lettuce"]), max_length=200).score(
        Record(question=QUESTION, contexts=passages, answer=answer))
    assert score.value == pytest.approx(by_hand, abs=1e-9)


@pytest.mark.parametrize(("language", "prompt"), [("en", "en"), ("zh", "cn"), ("de", "de"), ("hu", "hu")])
def test_the_prompt_language_follows_the_record(models, language, prompt):
    answer = ANSWERS[1]
    score = get_metric("lettuce", model=str(models["lettuce"])).score(
        Record(question=QUESTION, contexts=[CONTEXT], answer=answer, language=language))
    assert score.details["lang"] == prompt and "lang_fallback" not in score.details
    found = package_detector(models["lettuce"], lang=prompt).predict([CONTEXT], answer, QUESTION, output_format="spans")
    assert spans_of(score) == package_spans(found)


def test_russian_has_no_template_and_reads_the_english_prompt_or_errs_when_asked(models):
    record = Record(question="Какая столица Германии?", contexts=["Берлин столица Германии."],
                    answer="Берлин столица Германии.", language="ru")
    score = get_metric("lettuce", model=str(models["lettuce"])).score(record)
    assert score.ok and score.details["lang"] == "en"
    assert "no lettucedetect prompt for 'ru'" in score.details["lang_fallback"]
    strict = get_metric("lettuce", model=str(models["lettuce"]), fallback_lang="").score(record)
    assert not strict.ok and "no prompt for language 'ru'" in strict.error
    forced = get_metric("lettuce", model=str(models["lettuce"]), lang="pl").score(record)
    assert forced.details["lang"] == "pl" and "lang_fallback" not in forced.details


def test_bad_options_are_refused_when_the_metric_is_built(models):
    with pytest.raises(ValueError, match="ru"):
        get_metric("lettuce", model=str(models["lettuce"]), lang="ru")
    with pytest.raises(ValueError, match="min_confidence"):
        get_metric("lettuce", model=str(models["lettuce"]), min_confidence=2)


def test_min_confidence_drops_weaker_spans_and_no_context_flags_everything(models):
    record = Record(question=QUESTION, contexts=[CONTEXT], answer=ANSWERS[1])
    assert get_metric("lettuce", model=str(models["lettuce"]), min_confidence=0.99).score(record).spans == []
    empty = get_metric("lettuce", model=str(models["lettuce"])).score(record.model_copy(update={"contexts": ["  "]}))
    assert empty.value == 1.0 and [(s.start, s.end) for s in empty.spans] == [(0, len(ANSWERS[1]))]


def test_an_answer_longer_than_max_length_gets_an_error_score(models):
    answer = "purple dragons " * 40
    score = get_metric("lettuce", model=str(models["lettuce"]), max_length=32).score(
        Record(question=QUESTION, contexts=[CONTEXT], answer=answer))
    assert not score.ok and "max_length 32" in score.error and "tokens" in score.error


def test_one_model_per_process_and_options(models):
    first = get_metric("lettuce", model=str(models["lettuce"]))
    second = get_metric("lettuce", model=str(models["lettuce"]), threshold=0.7)
    other = get_metric("lettuce", model=str(models["lettuce"]), max_length=200)
    assert first.backend.load() is second.backend.load()
    assert first.backend.load().detector.model is not other.backend.load().detector.model
