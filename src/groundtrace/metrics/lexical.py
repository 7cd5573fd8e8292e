"""`lexical`: the first seed, a keyword-and-BLEU grounding score written for Russian.

    K(x) = lowercased tokens of x, not stopwords, longer than 3 characters (Chinese: at least 2)
    J    = |K_C ∩ K_O| / max(|K_O|, 1)             K_C: all contexts together, K_O: the answer
    B    = mean over contexts of sentence BLEU(context, answer), weights (0.7, 0.3, 0, 0); undefined -> 0
    U    = K_O \\ K_C;   P = |U| / (|K_O| + 1e-6) if U else 0
    H    = max((0.6·B + 0.4·J) · (1 − P), 0)       higher = better grounded
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from groundtrace.metrics.base import Metric, Result, needed
from groundtrace.record import Record
from groundtrace.score import Span
from groundtrace.text.bleu import NgramCounts, bleu, orders
from groundtrace.text.stopwords import stopwords
from groundtrace.text.tokenize import Token, terms

# Chinese words are one to four characters long; the seed's "longer than 3" would drop nearly all.
_MIN_KEYWORD_CHARS = {"zh": 2, "ja": 2, "ko": 2}
_DEFAULT_MIN_KEYWORD_CHARS = 4


@lru_cache(maxsize=8192)
def _context_terms(text: str, language: str, max_n: int) -> tuple[tuple[str, ...], NgramCounts]:
    # Contexts recur across the answers of one corpus: tokenize and count each one once.
    words = tuple(t.text for t in terms(text, language))
    return words, NgramCounts(words, max_n)


class LexicalMetric(Metric):
    name = "lexical"
    description = "Keyword overlap, BLEU (1-2 grams) and unexpected-word penalty of the answer against the contexts."
    higher_is_better = True
    default_threshold = 0.40  # F1-optimal on halueval_qa_train and on uhgeval_zh_train alike; docs/metrics/lexical.md, "Default threshold"

    def __init__(
        self,
        *,
        bleu_weight: float = 0.6,
        keyword_weight: float = 0.4,
        bleu_weights: Sequence[float] = (0.7, 0.3, 0.0, 0.0),
        min_keyword_chars: int | None = None,
        **options,
    ) -> None:
        super().__init__(**options)
        if len(bleu_weights) > 4:
            raise ValueError("lexical: bleu_weights covers at most 4-grams")
        self.bleu_weight = bleu_weight
        self.keyword_weight = keyword_weight
        self.bleu_weights = tuple(bleu_weights)
        self.min_keyword_chars = min_keyword_chars

    def keywords(self, words: Sequence[str], language: str) -> set[str]:
        floor = self.min_keyword_chars or _MIN_KEYWORD_CHARS.get(language, _DEFAULT_MIN_KEYWORD_CHARS)
        stop = stopwords(language)
        return {w for w in words if len(w) >= floor and w not in stop}

    def compute(self, record: Record, language: str) -> Result:
        answer = needed(record.answer)
        answer_terms: list[Token] = terms(answer, language)
        answer_words = [t.text for t in answer_terms]
        max_n = orders(self.bleu_weights)
        contexts = [_context_terms(c, language, max_n) for c in needed(record.contexts) if c.strip()]
        answer_counts = NgramCounts(answer_words, max_n)

        k_o = self.keywords(answer_words, language)
        k_c: set[str] = set()
        for words, _ in contexts:
            k_c |= self.keywords(words, language)
        j = len(k_c & k_o) / max(len(k_o), 1)
        b = sum(bleu(ref, answer_counts, self.bleu_weights) for _, ref in contexts) / len(contexts) if contexts else 0.0
        unexpected = k_o - k_c
        p = len(unexpected) / (len(k_o) + 1e-6) if unexpected else 0.0
        h = max((self.bleu_weight * b + self.keyword_weight * j) * (1.0 - p), 0.0)

        spans = [Span(start=t.start, end=t.end, text=answer[t.start : t.end], label="unexpected word")
                 for t in answer_terms if t.text in unexpected]
        return Result(
            value=h,
            reason=self._reason(h, j, b, unexpected, k_o, bool(contexts)),
            spans=spans,
            details={"B": b, "J": j, "P": p, "U": sorted(unexpected), "answer_keywords": len(k_o),
                     "context_keywords": len(k_c)},
        )

    @staticmethod
    def _reason(h: float, j: float, b: float, unexpected: set[str], k_o: set[str], has_context: bool) -> str:
        if not has_context:
            return "no contexts were retrieved, so nothing in the answer is grounded"
        if not k_o:
            return "the answer has no keywords (only short or stop words) to check against the contexts"
        text = f"grounding {h:.2f}: {j:.0%} of the answer's keywords occur in the contexts, BLEU {b:.2f}"
        if unexpected:
            shown = ", ".join(sorted(unexpected)[:8]) + (" …" if len(unexpected) > 8 else "")
            text += f"; {len(unexpected)} keyword(s) not found in any context: {shown}"
        return text
