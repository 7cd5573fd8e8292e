"""One Score as people read it in a trace viewer: a verdict first, numbers rounded, the unsupported phrases in words.

Several viewers draw a number as higher-is-better (MLflow's assessment bars, LangSmith's and Langfuse's
feedback): a raw ``grounding`` 0.95 (hallucinated) would read as good. Those sinks send :func:`passed`
(True: grounded) where the Score has a verdict, else :func:`higher_reads_better`; the raw value, the
threshold and the direction stay in :func:`rationale` and the metadata.
"""

from __future__ import annotations

from groundtrace.score import Score
from groundtrace.sinks import score_label

#: decimals of every number a person reads (the raw value stays exact in the metadata)
SHOWN_DECIMALS = 2
#: unsupported phrases quoted in a rationale, each cut to PHRASE_CHARS
PHRASES, PHRASE_CHARS = 5, 120


def shown(value: float) -> str:
    return f"{value:.{SHOWN_DECIMALS}f}"


def passed(score: Score) -> bool | None:
    """True for a grounded answer, False for a hallucinated one, None without a verdict (or on error)."""
    if score.error is not None or score.hallucinated is None:
        return None
    return not score.hallucinated


def higher_reads_better(score: Score) -> float | None:
    """The value turned so that higher is better (``1 - value`` where higher means less supported), rounded."""
    if score.value is None:
        return None
    value = score.value if score.higher_is_better else 1.0 - score.value
    return round(value, 3)


def headline(score: Score) -> str:
    """``hallucinated: grounding 0.95 (threshold 0.51; higher means less supported)``; ``error: ...``."""
    if score.error is not None:
        return f"error: {score.error}"
    if score.value is None:
        return f"{score_label(score)}: {score.metric} has no value"
    direction = "higher is better" if score.higher_is_better else "higher means less supported"
    threshold = f"threshold {shown(score.threshold)}; " if score.threshold is not None else ""
    verdict = score_label(score)
    lead = f"{verdict}: " if verdict != "unknown" else ""
    return f"{lead}{score.metric} {shown(score.value)} ({threshold}{direction})"


def phrases(score: Score) -> str | None:
    """``Unsupported: "Refunds are paid in 60 days"; "by courier"`` (the first PHRASES), or None."""
    texts = [" ".join(span.text.split()) for span in score.spans]
    texts = [text for text in texts if text]  # with capture_text off the spans keep their offsets, not their text
    quoted = [f'"{text[:PHRASE_CHARS - 1]}…"' if len(text) > PHRASE_CHARS else f'"{text}"' for text in texts[:PHRASES]]
    if not quoted:
        return None
    more = len(texts) - PHRASES
    return f"Unsupported: {'; '.join(quoted)}" + (f" (and {more} more)" if more > 0 else "")


def rationale(score: Score) -> str:
    """The headline, the unsupported phrases and the metric's reason, one per line."""
    lines = [headline(score), phrases(score), score.reason if score.error is None else None]
    return "\n".join(line for line in lines if line)


__all__ = ["headline", "higher_reads_better", "passed", "phrases", "rationale", "shown"]
