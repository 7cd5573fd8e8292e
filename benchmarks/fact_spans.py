"""Do grounding's highlighted spans hold the wrong fact? Planted errors on faithful answers of shared/data.

    python benchmarks/fact_spans.py [--per-language 120] [--seed 0] [--json]

Each faithful answer (label 0) gets one planted error: a number, year, date or time the contexts state is changed
(its first run of digits moved by a few units, never to a value the contexts hold), or a name the contexts state is
swapped for a name of another record in the same language. English: ragtruth_qa_dev (real LLM answers); Chinese:
halluqa_zh and uhgeval_zh_dev; Russian: passages_ru_zh (no answers there: the answer is the passage's first
sentence with a fact, copied, and the passage its context). Nothing here was trained on for spans.

Scored once with grounding's own spans (fact_spans=false); the widened spans are computed from the same Score's
claims (metrics/fact_spans.py, exactly what grounding does by default). Printed per language and planted kind:
the share of planted answers flagged; among those, the share whose planted fact lies wholly inside a highlighted
span before and after, and the share any span touches; the characters highlighted per flagged answer; and, on the
faithful originals flagged (false alarms), how many got a span they did not have.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from groundtrace.metrics import get_metric
from groundtrace.metrics.fact_spans import ClaimRange, absent_facts, with_facts
from groundtrace.score import Score
from groundtrace.text.facts import Fact, context_index, extract_facts

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SOURCES = {"en": ["ragtruth_qa_dev.jsonl"], "zh": ["halluqa_zh.jsonl", "uhgeval_zh_dev.jsonl"],
           "ru": ["passages_ru_zh.jsonl"]}
_DIGITS = re.compile(r"\d+")
_SENTENCE = re.compile(r"[^.!?]+[.!?]")


def _draw(key: str, seed: int) -> int:
    return int(hashlib.sha256(f"{seed}:{key}".encode()).hexdigest()[:8], 16)


def faithful(language: str) -> Iterator[dict]:
    for name in SOURCES[language]:
        for line in open(DATA / name, encoding="utf-8"):
            row = json.loads(line)
            if name.startswith("passages"):
                if row["language"] != language:
                    continue
                first = next((s.strip() for s in _SENTENCE.findall(row["text"]) if _DIGITS.search(s)), None)
                if first:
                    yield {"id": row["id"], "language": language, "question": row.get("title"),
                           "contexts": [row["text"]], "answer": first}
            elif row["label"] == 0 and row["contexts"]:
                yield row


def plant(row: dict, names: list[str], seed: int) -> dict | None:
    """The row with one planted error and its range, or None when it has no stated fact to change."""
    answer, language = row["answer"], row["language"]
    index = context_index("\n\n".join(row["contexts"]), language)
    stated = [f for f in extract_facts(answer, language) if index.supports(f)]
    if not stated:
        return None
    fact = stated[_draw(row["id"], seed) % len(stated)]
    new = _changed(fact, names, index, _draw(row["id"] + "/v", seed))
    if new is None:
        return None
    planted = answer[:fact.start] + new + answer[fact.end:]
    end = fact.start + len(new.rstrip(" .,;:。，"))
    found = [f for f in extract_facts(planted, language) if f.start < end and fact.start < f.end]
    if not found or any(index.supports(f) for f in found):
        return None  # the change must read as a fact the contexts do not state
    return {**row, "answer": planted, "label": 1, "planted": {"start": fact.start, "end": end, "kind": fact.kind,
                                                             "was": fact.text, "now": new}}


def _changed(fact: Fact, names: list[str], index, draw: int) -> str | None:
    if fact.kind == "name":
        others = [n for n in names if n.lower() != fact.text.lower()]
        for step in range(len(others)):
            name = others[(draw + step) % len(others)]
            if not index.supports(Fact("name", name.lower(), name, 0, len(name))):
                return name
        return None
    digits = _DIGITS.search(fact.text)
    if digits is None:
        return None
    value = int(digits.group())
    delta = (3 + draw % 5) if fact.kind == "year" or value >= 10 else 1 + draw % 2
    for sign in (1, -1):
        moved = value + sign * delta
        if moved > 0 and (fact.kind != "time" or moved <= 12):
            return fact.text[:digits.start()] + str(moved) + fact.text[digits.end():]
    return None


def inside(spans, start: int, end: int) -> bool:
    return any(s.start <= start and end <= s.end for s in spans)


def touched(spans, start: int, end: int) -> bool:
    return any(s.start < end and start < s.end for s in spans)


def widened(row: dict, score: Score, threshold: float):
    claims = [ClaimRange(c["start"], c["end"], c["p_unsupported"]) for c in score.details.get("claims", [])]
    absent = absent_facts(row["answer"], row["contexts"], row["language"], claims, threshold)
    return with_facts(row["answer"], score.spans, absent)


def run(per_language: int, seed: int) -> dict:
    metric = get_metric("grounding", fact_spans=False)
    span_threshold = metric.threshold  # the card gives no span threshold of its own: the verdict's
    table: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for language in SOURCES:
        rows = list(faithful(language))
        names = sorted({f.text for r in rows for f in extract_facts(r["answer"], language) if f.kind == "name"})
        planted = [p for r in rows if (p := plant(r, names, seed)) is not None]
        planted.sort(key=lambda p: _draw(p["id"], seed))
        for case in planted[:per_language]:
            original = next(r for r in rows if r["id"] == case["id"])
            s_planted, s_original = metric.score(case), metric.score(original)
            if not (s_planted.ok and s_original.ok):
                raise RuntimeError(f"{case['id']}: {s_planted.error or s_original.error}")
            where = case["planted"]
            for group in (language, f"{language}/{where['kind']}", "all"):
                row = table[group]
                row["planted"] += 1
                if s_planted.hallucinated:
                    after = widened(case, s_planted, span_threshold)
                    row["flagged"] += 1
                    row["inside_before"] += inside(s_planted.spans, where["start"], where["end"])
                    row["inside_after"] += inside(after, where["start"], where["end"])
                    row["touched_before"] += touched(s_planted.spans, where["start"], where["end"])
                    row["chars_before"] += sum(s.end - s.start for s in s_planted.spans)
                    row["chars_after"] += sum(s.end - s.start for s in after)
                if s_original.hallucinated:
                    row["false_alarms"] += 1
                    row["false_alarms_widened"] += widened(original, s_original, span_threshold) != s_original.spans
    return {"metric": "grounding", "threshold": metric.threshold, "per_language": per_language, "seed": seed,
            "groups": {group: dict(row) for group, row in sorted(table.items())}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-language", type=int, default=120)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.per_language, args.seed)
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(f"grounding at threshold {result['threshold']:.4f}, seed {result['seed']}: planted fact inside a span, among "
          "the planted answers flagged")
    print(f"{'group':12s} {'flagged':>12s} {'inside before':>14s} {'inside after':>13s} {'touched before':>15s} "
          f"{'chars/answer before→after':>26s} {'false alarms widened':>21s}")
    for group, row in result["groups"].items():
        flagged = row.get("flagged", 0)

        def share(key: str, row: dict = row, of: float = flagged) -> str:
            return f"{row.get(key, 0) / of:6.1%}" if of else "     —"

        chars = (f"{row.get('chars_before', 0) / flagged:.0f} → {row.get('chars_after', 0) / flagged:.0f}"
                 if flagged else "—")
        alarms = f"{row.get('false_alarms_widened', 0):.0f}/{row.get('false_alarms', 0):.0f}"
        print(f"{group:12s} {flagged:4.0f}/{row['planted']:<4.0f}{'':3s} {share('inside_before'):>14s} "
              f"{share('inside_after'):>13s} {share('touched_before'):>15s} {chars:>26s} {alarms:>21s}")


if __name__ == "__main__":
    main()
