"""`grounding`: the trained offline detector (no API, CPU only), the default metric without a judge.

A multilingual cross-encoder (multilingual-e5-small's first 6 layers, fine-tuned) reads the
question and contexts together with the answer and gives every answer token P(unsupported):

    claims   = the answer's sentences, long ones cut at clause joints (lead-ins, citations and
               refusals are not claims)
    read     = what each answer chunk is read against (detector/reading.py): every context window
               (evidence="all"), the sentences its claims pick ("select"), or the first while the
               full reading needs at most 2 windows per answer chunk and the second beyond ("auto",
               the default: a pile of 20 retrieved passages costs about what 5 do)
    p_t      = P(token t unsupported), the minimum over the windows that read it
    xe_claim = max of p_t over the claim's tokens that hold a letter or digit (or, where the model
               card says "aggregation": "claims-top3-noisy-or", the mean of its top 3)
    p_claim  = grounding-5's claim verdict (detector/claim_verdict.py): a calibrated logistic model over
               xe_claim, the claim's facts against the contexts (a conflict, facts the contexts do not
               state), the share of its content the contexts hold, a dropped condition or negation,
               its length and place (detector/claim_features.py); option claims="xe": xe_claim alone
               (grounding-2.1, also the metric `grounding_xe`)
    value    = max over the claims                                      higher = more hallucinated
    spans    = in each flagged claim: the facts in conflict with the contexts, runs of tokens with
               p_t >= the cross-encoder's threshold widened to whole words, each number, date, time
               or name the contexts do not state (metrics/fact_spans.py; option fact_spans=false:
               not), else the claim itself

The metric's class is light: the detector (numpy, the tokenizer, the cross-encoder) is imported with the first
answer it scores (metrics/grounding_reading.py), so a process that only hands records to a scoring process (a
server's worker, under the default isolation) never loads it. The model card is docs/benchmarks/grounding-model-card.md; training is training/ (grounding-2: commit 582ff0f's training/build_crossencoder.sh).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from groundtrace.metrics.base import Metric, Result, needed
from groundtrace.record import Record

if TYPE_CHECKING:
    from groundtrace.detector.crossencoder import CrossEncoder
    from groundtrace.detector.evidence import SentenceEmbedder
    from groundtrace.detector.reading import Reading

# the detector's folder (detector.crossencoder.MODEL_DIR), named without importing it
CARD_FILE = Path(__file__).resolve().parent.parent / "detector" / "grounding.json"
CLAIMS = ("verdict", "xe")  # grounding-5's claim verdict, or the cross-encoder alone (grounding-2.1)
#: detector.reading.DEFAULT_EVIDENCE, named without importing the detector (a test keeps them equal)
DEFAULT_EVIDENCE = "auto"
# How a model's card says its token probabilities become claims and a value: "max" (grounding-2: the
# highest token of the highest claim) unless the card names the aggregation it was measured with.
NOISY_OR = "claims-top3-noisy-or"


@lru_cache(maxsize=1)
def model_card() -> dict:
    return json.loads(CARD_FILE.read_text(encoding="utf-8"))


def xe_threshold() -> float:
    """The cross-encoder's own threshold (grounding-2.1's verdict; the spans' token threshold)."""
    return float(model_card()["threshold"])


def verdict_threshold() -> float:
    return float(model_card()["claim_verdict"]["threshold"])


class GroundingMetric(Metric):
    name = "grounding"
    description = ("Trained offline detector (a cross-encoder and a verdict per claim): probability that the answer "
                   "states something the contexts do not support, with the unsupported spans.")
    requires = ("answer", "contexts")
    higher_is_better = False
    # The full reading reads every context window against every answer chunk (300,000 characters of
    # context is ~200 windows, several seconds), and selection tokenizes all of it; beyond that an
    # error Score says so.
    default_max_context_chars = 300_000
    default_threshold = 0.5  # never used: documented_threshold() is the model card's (fitted on ragtruth_qa_dev)

    @classmethod
    def documented_threshold(cls) -> float:
        return verdict_threshold()

    @classmethod
    def numerics(cls) -> tuple[float, list[str]]:
        stated = model_card()["numerics"]
        return float(stated["tolerance"]), [m["instruction_set"] for m in stated["measured"]]

    @property
    def trained_on(self) -> list[dict[str, str]]:
        """The files the shipped model was trained on, from its card (see groundtrace.measure.provenance): the bench
        marks its numbers on them as in-sample."""
        return list(model_card().get("trained_on", []))

    def __init__(self, *, threads: int = 1, model: CrossEncoder | None = None, evidence: str = DEFAULT_EVIDENCE,
                 embedder: str | None = None, fact_spans: bool = True, claims: str = "verdict",
                 **options: Any) -> None:
        if claims not in CLAIMS:
            raise ValueError(f"grounding: claims must be one of {CLAIMS}, got {claims!r}")
        self.claims = claims
        if claims == "xe" and options.get("threshold") is None:  # the threshold its values were fitted with
            options["threshold"] = xe_threshold()
        reading_options: dict[str, Any] = {}
        if options:  # a reading option names a field of detector.reading.Reading: only then is the detector needed now
            from groundtrace.detector.reading import Reading

            reading_options = {k: _typed(getattr(Reading, k), options.pop(k)) for k in list(options)
                               if k in Reading.__dataclass_fields__}
        super().__init__(**options)
        self._reading_options = {"evidence": evidence, **reading_options}
        self._reading: Reading | None = None
        if evidence != DEFAULT_EVIDENCE or reading_options:  # what was asked for is checked when it is asked for
            self._reading = self.reading
        self._model, self._threads = model, threads
        self._embedder_spec = embedder
        self.fact_spans = _typed(True, fact_spans)

    @property
    def reading(self) -> Reading:
        """What each answer chunk is read against (detector.reading.Reading), made with the first answer."""
        if self._reading is None:
            from groundtrace.detector.reading import Reading

            self._reading = Reading(**self._reading_options)
        return self._reading

    @property
    def model(self) -> CrossEncoder:
        """The cross-encoder: the one given, else the process's shared one (its weights load when it first reads)."""
        if self._model is None:
            from groundtrace.detector.crossencoder import shared_crossencoder

            self._model = shared_crossencoder(self._threads)
        return self._model

    def _embedder(self) -> SentenceEmbedder:
        from groundtrace.backends.embedders import get_embedder

        return get_embedder(self._embedder_spec or "use")

    def compute(self, record: Record, language: str) -> Result:
        from groundtrace.metrics.grounding_reading import score_answer

        return score_answer(self, needed(record.answer), [c for c in needed(record.contexts) if c.strip()],
                            record.question, language)


class GroundingXEMetric(GroundingMetric):
    """grounding-2.1: the cross-encoder's claim probabilities alone (``grounding`` with claims="xe"), kept to
    compare with and for verdict files fitted on it."""

    name = "grounding_xe"
    description = ("The offline cross-encoder alone (grounding-2.1): the highest P(unsupported) of the answer's "
                   "claims, with the unsupported spans.")

    @classmethod
    def documented_threshold(cls) -> float:
        return xe_threshold()

    def __init__(self, **options: Any) -> None:
        if options.setdefault("claims", "xe") != "xe":
            raise ValueError("grounding_xe: is the cross-encoder alone; for the claim verdict use grounding")
        super().__init__(**options)


def _typed(default, value):
    """An option as its default's type: "2" -> 2 and "false" -> False, as -O and environment values come."""
    if isinstance(default, bool) and isinstance(value, str):
        if value.lower() not in ("true", "false", "1", "0"):
            raise ValueError(f"grounding: expected true or false, got {value!r}")
        return value.lower() in ("true", "1")
    return type(default)(value) if isinstance(default, int | str) and not isinstance(default, bool) else bool(value)
