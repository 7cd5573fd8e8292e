"""Which question should `grounding` read? The detector reads ``question + context window`` against
each answer chunk, so a captured turn's question matters. A conversational turn offers several:
the user's literal message (a follow-up that leans on the history), the application's condensed
standalone question, a tool's keyword query. This script scores the same labelled records with the
question replaced, and prints what each choice does to the measurements:

    python benchmarks/question_choice.py [--ragtruth ../shared/data/ragtruth_qa_dev.jsonl] [--limit N]

Variants (the contexts and the answer never change):
  question   the record's own question (a standalone question: what a condensing step produces)
  none       no question at all
  follow-up  a follow-up that names nothing ("Can you tell me more about that?", per language):
             the literal message of a conversational turn whose subject lives in the history
  keywords   the question's words minus stopwords ("automotive technicians paid"): what an agent
             passes to its search tool
  follow-up+keywords   the follow-up, then the keywords: what a detector reads if it takes the
             user's message and the turn's last derived query together, in a conversational turn
  question+keywords    the question, then the keywords: the same rule in a standalone turn

Measured: ROC AUC on ragtruth_qa_dev (answer-level, label 1 = hallucinated) and, on the
hand-written paraphrase pairs (benchmarks/data/paraphrase_*.jsonl), pairwise accuracy (the planted
twin scores higher than its faithful answer), faithful answers flagged and planted errors caught at
the metric's documented threshold.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from groundtrace.measure.bench import load_labelled
from groundtrace.measure.classification import roc_auc
from groundtrace.metrics import get_metric
from groundtrace.text.stopwords import stopwords
from groundtrace.text.tokenize import tokenize

sys.path.insert(0, str(Path(__file__).parent))
from paraphrase import DATA, load  # noqa: E402

FOLLOW_UP = {
    "en": "Can you tell me more about that?",
    "ru": "А можно подробнее об этом?",
    "zh": "能再详细说说吗？",
}


def keywords(question: str | None, language: str) -> str | None:
    if not question:
        return None
    stop = stopwords(language)
    kept = [t.text for t in tokenize(question, language) if t.text.casefold() not in stop]
    return (" " if language != "zh" else "").join(kept) or None


VARIANTS: dict[str, Callable[[dict], str | None]] = {
    "question": lambda row: row.get("question"),
    "none": lambda row: None,
    "follow-up": lambda row: FOLLOW_UP.get(row.get("language") or "en", FOLLOW_UP["en"]),
    "keywords": lambda row: keywords(row.get("question"), row.get("language") or "en"),
    "follow-up+keywords": lambda row: _joined(VARIANTS["follow-up"](row), VARIANTS["keywords"](row)),
    "question+keywords": lambda row: _joined(row.get("question"), VARIANTS["keywords"](row)),
}


def _joined(*parts: str | None) -> str | None:
    return " ".join(p for p in parts if p) or None


def with_question(row: dict, variant: str) -> dict:
    return {**row, "question": VARIANTS[variant](row)}


def ragtruth(metric, path: Path, limit: int | None) -> dict[str, float | None]:
    items = load_labelled(path, limit=limit)
    labels = np.array([i.label for i in items])
    found = {}
    for variant in VARIANTS:
        started = time.perf_counter()
        scores = [metric.score(with_question(dict(i.raw), variant)) for i in items]
        values = np.array([s.hallucination_score for s in scores], dtype=float)
        flagged = np.array([bool(s.hallucinated) for s in scores])
        found[variant] = roc_auc(labels, values)
        print(f"  ragtruth_qa_dev {variant:18s} ROC AUC {found[variant]:.4f}, at the threshold: "
              f"faithful flagged {int(flagged[labels == 0].sum())}/{int((labels == 0).sum())}, "
              f"hallucinated caught {int(flagged[labels == 1].sum())}/{int((labels == 1).sum())}  "
              f"({len(items)} records, {time.perf_counter() - started:.0f} s)", flush=True)
    return found


def paraphrase(metric) -> dict[str, dict[str, float]]:
    pairs = load(sorted(DATA.glob("paraphrase_*.jsonl")))
    found = {}
    for variant in VARIANTS:
        pairwise = flagged = caught = 0
        for faithful, planted in pairs:
            sf = metric.score(with_question(faithful, variant))
            sp = metric.score(with_question(planted, variant))
            pairwise += int(sp.hallucination_score > sf.hallucination_score)
            flagged += int(bool(sf.hallucinated))
            caught += int(bool(sp.hallucinated))
        n = len(pairs)
        found[variant] = {"pairwise": pairwise / n, "faithful_flagged": flagged / n, "planted_caught": caught / n}
        print(f"  paraphrase {variant:18s} pairwise {pairwise}/{n} ({pairwise / n:.3f}), faithful flagged "
              f"{flagged}/{n}, planted caught {caught}/{n}", flush=True)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-m", "--metric", default="grounding")
    parser.add_argument("--ragtruth", type=Path, default=Path(__file__).parents[1] / ".." / "shared" / "data"
                        / "ragtruth_qa_dev.jsonl")
    parser.add_argument("--limit", type=int, default=None, help="use only the first N ragtruth records")
    parser.add_argument("--skip-ragtruth", action="store_true")
    args = parser.parse_args()
    metric = get_metric(args.metric)
    print(f"{args.metric} at threshold {metric.threshold:.3f}", flush=True)
    paraphrase(metric)
    if not args.skip_ragtruth:
        ragtruth(metric, args.ragtruth, args.limit)


if __name__ == "__main__":
    main()
