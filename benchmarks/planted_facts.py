"""Planted twins: faithful answers of the dev files with one grounded number, year, date, time or name changed, each
beside its original, as labelled files for `groundtrace bench`.

    python benchmarks/planted_facts.py --out DIR [--limit 300] [--seed 0]

For each faithful answer (label 0) one fact that its contexts state (text/conflicts.py: same_value, same_year,
same_date, same_time, same_name) is drawn (a seeded hash of the record's id) and changed: a number, year, date or
time moved by a plausible amount (benchmarks/fact_conflicts.py's rule, never to a value the contexts state), a
name replaced by a name of another answer of the same file that the contexts do not hold. DIR/planted_LANG.jsonl
holds the original (label 0) and the twin (label 1, its span the changed fact, meta.pair the original's id).

Sources, none of them trained on by grounding-5's claim verdict: en halueval_qa_dev, paraphrase_en; zh halluqa_zh,
uhgeval_zh_dev, paraphrase_zh; ru paraphrase_ru, paraphrase_ru_b and TERRa's entailed pairs outside the verdict's
training sample (training/claim_verdict.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from fact_conflicts import _draw, _moved, records

from groundtrace.text.conflicts import check_claim
from groundtrace.text.sentences import split_sentences

SOURCES = {"en": ["halueval_qa_dev", "paraphrase_en"], "zh": ["halluqa_zh", "uhgeval_zh_dev", "paraphrase_zh"],
           "ru": ["paraphrase_ru", "paraphrase_ru_b", "ru_terra"]}
_SUPPORTED = ("same_value", "same_year", "same_date", "same_time", "same_name")


def _trained_pairs() -> set[str]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "training"))
    from claim_verdict import pair_records

    return {r["id"].partition(":")[2] for r in pair_records()}


def twins(language: str, limit: int, seed: int) -> tuple[list[dict], Counter]:
    trained = _trained_pairs()
    out: list[dict] = []
    kinds: Counter = Counter()
    for name in SOURCES[language]:
        rows = [r for r in records(name, limit) if r["label"] == 0 and r["id"] not in trained]
        names = sorted({c.fact.text.strip() for r in rows for c in _checks(r) if c.fact.kind == "name"})
        for row in rows:
            twin = _twin(row, names, language, seed)
            if twin is None:
                continue
            kinds[twin["meta"]["changed"]] += 1
            out += [{**row, "language": language, "spans": [], "meta": {"source": name}},
                    {**twin, "meta": {**twin["meta"], "source": name}}]
    return out, kinds


def _checks(row: dict):
    evidence = tuple(s.text for c in row["contexts"] for s in split_sentences(c))
    return [c for claim in split_sentences(row["answer"]) for c in check_claim(claim.text, evidence, row["language"])]


def _twin(row: dict, names: list[str], language: str, seed: int) -> dict | None:
    evidence = tuple(s.text for c in row["contexts"] for s in split_sentences(c))
    stated = [(claim, c) for claim in split_sentences(row["answer"])
              for c in check_claim(claim.text, evidence, language) if c.rule in _SUPPORTED]
    if not stated:
        return None
    claim, check = stated[_draw(row["id"], seed) % len(stated)]
    fact, draw = check.fact, _draw(row["id"] + "/v", seed)
    original = claim.text[fact.start:fact.end]
    if fact.kind == "name":
        context = " ".join(row["contexts"]).casefold()
        others = [n for n in names if n.casefold() not in context and n.casefold() not in original.casefold()]
        new = others[draw % len(others)] if others else None
    else:
        new = _moved(original, fact.kind, draw)
    if new is None:
        return None
    changed = claim.text[: fact.start] + new + claim.text[fact.end:]
    if any(c.rule in _SUPPORTED for c in check_claim(changed, evidence, language)
           if c.fact.start < fact.start + len(new) and fact.start < c.fact.end):
        return None  # the change reads as a fact the contexts state: nothing planted
    start = claim.start + fact.start
    answer = row["answer"][:start] + new + row["answer"][claim.start + fact.end:]
    return {**row, "id": f"{row['id']}:planted", "language": language, "question": row.get("question"),
            "contexts": row["contexts"], "answer": answer, "label": 1,
            "spans": [{"start": start, "end": start + len(new), "text": new, "type": fact.kind}],
            "meta": {"pair": row["id"], "changed": fact.kind, "was": original}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--limit", type=int, default=300, help="faithful answers read per source file at most")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for language in SOURCES:
        rows, kinds = twins(language, args.limit, args.seed)
        with open(args.out / f"planted_{language}.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        print(f"{language}: {len(rows) // 2} twins {dict(kinds)}")


if __name__ == "__main__":
    main()
