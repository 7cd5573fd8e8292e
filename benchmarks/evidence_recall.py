"""Evidence recall of `grounding`'s evidence selection (groundtrace/detector/evidence.py): how often
what a claim picks holds what supports it, on faithful answers (ragtruth_qa_dev label 0, the
paraphrase sets' faithful answers).

    python benchmarks/evidence_recall.py [--files F ...] [--limit N] [--entailment] [--json]

Two definitions of "what supports a claim", both over the claims of faithful answers:

- terms: the claim's content terms (evidence.content_terms: folded, no stopwords, numbers in one
  form, Russian stems, jieba words) that occur anywhere in the contexts; recall = share of them
  that occur in the sentences the encoder reads (picks and neighbours), micro-averaged.
- entailment (--entailment; slow: one short encoder pass per claim and context sentence): the
  supporting sentence of a claim is the context sentence that, read alone with the question by
  grounding-2, gives the claim its lowest P(unsupported) (the max over its word tokens); every
  claim of a faithful answer counts (the answer is labelled supported; the count of claims whose
  lowest value is below the shipped threshold is printed beside); recall = share of claims whose
  supporting sentence is among the claim's own picks (without neighbours) / among all the
  sentences the encoder reads for the answer.

For each selector and k (neighbours 0 and 1; with coverage and titles, and "plain" top-k without)
it prints both recalls and the share of context sentences the encoder reads.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from groundtrace.backends.embedders import get_embedder
from groundtrace.detector.claims import split_claims
from groundtrace.detector.crossencoder import shared_crossencoder
from groundtrace.detector.evidence import SELECTORS, content_terms, context_sentences, select_evidence
from groundtrace.detector.windows import question_head, read_windows
from groundtrace.metrics import get_metric

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_FILES = [ROOT.parent / "shared" / "data" / "ragtruth_qa_dev.jsonl",
                 *sorted((ROOT / "benchmarks" / "data").glob("paraphrase_*.jsonl")),
                 *sorted((ROOT / "training" / "data").glob("paraphrase_train_*.jsonl"))]
# (selector, k, neighbours, cover and titles)
SETTINGS = [(selector, k, n, True) for selector in SELECTORS for k in (1, 2, 3) for n in (0, 1)] + \
    [("lexical", k, n, False) for k in (1, 2, 3) for n in (0, 1)]


def faithful(path: Path, limit: int | None) -> list[dict]:
    rows = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
    return [r for r in rows if r["label"] == 0][:limit]


def supporting_sentence(question: str | None, sentences: list[str], claim: str) -> tuple[int | None, float]:
    """Index of the sentence that alone supports ``claim`` best, and the claim's P(unsupported) read
    against it; None for a claim without a word token."""
    model = shared_crossencoder(1)
    tokenizer = model.tokenizer
    encoding = tokenizer.encode(claim)
    words = encoding.word_tokens(claim)
    if not words.any():
        return None, 1.0
    head = question_head(tokenizer, question)
    everything = np.arange(len(encoding))
    windows = [w for s in sentences for w in read_windows(tokenizer, head, tokenizer.encode(s).ids, encoding, everything)]
    best = [float(np.asarray(values)[w.answer_offset:w.answer_offset + len(encoding)][words].max())
            for w, values in zip(windows, model.window_probabilities(windows), strict=True)]
    # a sentence longer than one window is read in several: its best window counts
    per_sentence, i = [], 0
    for s in sentences:
        count = len(read_windows(tokenizer, head, tokenizer.encode(s).ids, encoding, everything))
        per_sentence.append(min(best[i:i + count]))
        i += count
    top = int(np.argmin(per_sentence))
    return top, per_sentence[top]


def measure(rows: list[dict], language: str, entailment: bool, cache: dict) -> dict:
    embedder = get_embedder("use")
    threshold = get_metric("grounding").threshold
    terms_hit = {s: [0, 0] for s in SETTINGS}
    picked_hit = {s: [0, 0] for s in SETTINGS}
    kept_hit = {s: [0, 0] for s in SETTINGS}
    read = {s: [0, 0] for s in SETTINGS}
    supported = claims_total = 0
    for row in rows:
        contexts = [c for c in row["contexts"] if c.strip()]
        claims = split_claims(row["answer"], language)
        sentences = context_sentences(contexts)
        if not claims or not sentences:
            continue
        sentence_terms = [set(content_terms(s.text, language)) for s in sentences]
        everywhere = set().union(*sentence_terms)
        claim_terms = [set(content_terms(c.text, language)) & everywhere for c in claims]
        if entailment and row["id"] not in cache:
            cache[row["id"]] = [supporting_sentence(row.get("question"), [s.text for s in sentences], c.text)
                                for c in claims]
        found = cache[row["id"]] if entailment else [(None, 1.0)] * len(claims)
        support = [index for index, _ in found]
        claims_total += len(claims)
        supported += sum(p < threshold for _, p in found)
        for setting in SETTINGS:
            selector, k, n, extend = setting
            ev = select_evidence(row.get("question"), contexts, row["answer"], language, k=k, neighbours=n,
                                 selector=selector, embedder=embedder, claims=claims, cover=extend, titles=extend)
            kept = set(ev.kept)
            kept_terms = set().union(*(sentence_terms[i] for i in kept)) if kept else set()
            read[setting][0] += len(kept)
            read[setting][1] += len(sentences)
            for c, wanted in enumerate(claim_terms):
                terms_hit[setting][0] += len(wanted & kept_terms)
                terms_hit[setting][1] += len(wanted)
                if support[c] is not None:
                    picked_hit[setting][0] += int(support[c] in ev.picked[c])
                    picked_hit[setting][1] += 1
                    kept_hit[setting][0] += int(support[c] in kept)
                    kept_hit[setting][1] += 1

    def rate(pair: list[int]) -> float | None:
        return round(pair[0] / pair[1], 3) if pair[1] else None

    return {"answers": len(rows), "claims": claims_total, "claims_one_sentence_supports": supported if entailment else None,
            "settings": {f"{s}/k={k}/neighbours={n}" + ("" if e else "/plain"): {
                "terms_recall": rate(terms_hit[(s, k, n, e)]),
                "entailment_recall_picked": rate(picked_hit[(s, k, n, e)]),
                "entailment_recall_read": rate(kept_hit[(s, k, n, e)]),
                "sentences_read": rate(read[(s, k, n, e)])} for s, k, n, e in SETTINGS}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", nargs="*", type=Path, default=DEFAULT_FILES)
    parser.add_argument("--limit", type=int, default=None, help="faithful answers per file")
    parser.add_argument("--entailment", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--support-cache", type=Path, default=None,
                        help="JSON file keeping each claim's supporting sentence between runs (the slow part)")
    args = parser.parse_args()
    cache = json.loads(args.support_cache.read_text()) if args.support_cache and args.support_cache.exists() else {}
    results = {}
    for path in args.files:
        rows = faithful(path, args.limit)
        if not rows:
            continue
        results[path.name] = measure(rows, rows[0].get("language") or "en", args.entailment, cache)
        if args.support_cache:
            args.support_cache.write_text(json.dumps(cache))
    if args.json:
        print(json.dumps(results, indent=1))
        return
    for name, result in results.items():
        print(f"{name}: {result['answers']} faithful answers, {result['claims']} claims"
              + (f", {result['claims_one_sentence_supports']} with one sentence below the threshold" if args.entailment else ""))
        print(f"  {'setting':40s} {'terms':>6s} {'entail picked':>14s} {'entail read':>12s} {'sentences read':>15s}")
        for setting, row in result["settings"].items():
            cells = [row["terms_recall"], row["entailment_recall_picked"], row["entailment_recall_read"], row["sentences_read"]]
            print(f"  {setting:40s} " + " ".join(f"{'—' if v is None else v:>{w}}" for v, w in zip(cells, (6, 14, 12, 15), strict=True)))


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
