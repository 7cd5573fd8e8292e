"""What the cross-encoder reads the answer against: every context ("all"), the evidence its claims
pick ("select", detector/evidence.py and packing.py), or the first while it is cheap and the second
beyond ("auto").

    all     every context window against every answer chunk (grounding-2's training format); its
            cost grows with the retrieved pile: 20 passages cost 5x five
    select  each answer chunk against the sentences its claims picked (top ``k``, covering terms,
            ``neighbours``, titles); with ``fill``, a chunk whose contexts all fit one window reads
            them all, and otherwise its evidence widened while it fits the window
    auto    "all" while the full reading needs at most ``max_windows`` windows per answer chunk,
            "select" (with ``fill``) beyond: the cost of a record is then bounded by its answer
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from groundtrace.detector.claims import Claim
from groundtrace.detector.crossencoder import CrossEncoder, TokenScores
from groundtrace.detector.evidence import (
    DEFAULT_K,
    DEFAULT_MAX_PICKS,
    DEFAULT_NEIGHBOURS,
    SELECTORS,
    SentenceEmbedder,
    Selector,
    select_evidence,
)
from groundtrace.detector.packing import evidence_windows
from groundtrace.detector.tokenizer import Encoding, XETokenizer
from groundtrace.detector.windows import ANSWER_CHUNK, MAX_TOKENS, Window, build_windows

EvidenceMode = Literal["all", "select", "auto"]
MODES = ("all", "select", "auto")
DEFAULT_EVIDENCE: EvidenceMode = "auto"  # what the metric ships, and what training featurizes with by default
DEFAULT_MAX_WINDOWS = 2


@dataclass(frozen=True)
class Reading:
    evidence: EvidenceMode = "all"
    k: int = DEFAULT_K
    neighbours: int = DEFAULT_NEIGHBOURS
    selector: Selector = "lexical"
    cover: bool = True
    max_picks: int = DEFAULT_MAX_PICKS
    titles: bool = True
    fill: bool = True
    max_windows: int = DEFAULT_MAX_WINDOWS

    def __post_init__(self) -> None:
        if self.evidence not in MODES:
            raise ValueError(f"grounding: evidence must be one of {MODES}, got {self.evidence!r}")
        if self.selector not in SELECTORS:
            raise ValueError(f"grounding: selector must be one of {SELECTORS}, got {self.selector!r}")
        if self.k < 1 or self.neighbours < 0 or self.max_windows < 1:
            raise ValueError(f"grounding: k and max_windows must be >= 1 and neighbours >= 0, got k={self.k}, "
                             f"neighbours={self.neighbours}, max_windows={self.max_windows}")

    def read(self, model: CrossEncoder, question: str | None, contexts: Sequence[str], answer: str, language: str,
             claims: list[Claim], embedder: Callable[[], SentenceEmbedder] | None = None) -> tuple[TokenScores, dict]:
        """The answer's token probabilities, and what was read (for ``details.evidence``)."""
        encoding, windows, detail = self.windows(model.tokenizer, question, contexts, answer, language, claims,
                                                 embedder)
        return model.score_windows(encoding, windows), detail

    def windows(self, tokenizer: XETokenizer, question: str | None, contexts: Sequence[str], answer: str,
                language: str, claims: list[Claim] | None = None,
                embedder: Callable[[], SentenceEmbedder] | None = None) -> tuple[Encoding, list[Window], dict]:
        """The answer's tokens and the windows this reading scores them in, with what was read: the one
        decision the metric and training (training/xe, ``--reading``) both take."""
        encoding = tokenizer.encode(answer)
        if len(encoding) == 0:
            return encoding, [], {"reading": "all"}
        if self.evidence != "select":
            windows = build_windows(tokenizer, question, list(contexts), encoding, MAX_TOKENS)
            chunks = max(1, -(-len(encoding) // ANSWER_CHUNK))
            if self.evidence == "all" or len(windows) <= self.max_windows * chunks:
                return encoding, windows, {"reading": "all"}
        picked = select_evidence(question, contexts, answer, language, k=self.k, neighbours=self.neighbours,
                                 selector=self.selector, embedder=embedder() if self.selector != "lexical" and embedder
                                 else None, claims=claims, cover=self.cover, max_picks=max(self.max_picks, self.k),
                                 titles=self.titles)
        detail = {"reading": "select", "selected": len(picked.kept), "sentences": len(picked.sentences)}
        if not picked.kept:  # no claim shares a word with any sentence: read everything rather than nothing
            return (encoding, build_windows(tokenizer, question, list(contexts), encoding, MAX_TOKENS),
                    {**detail, "reading": "all (nothing selected)"})
        return encoding, evidence_windows(tokenizer, question, picked, encoding, MAX_TOKENS, self.fill), detail
