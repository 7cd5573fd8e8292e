"""Every example set (grounding-3's ``g3``, grounding-4's ``g4``: ``SETS``), written once on the CPU (they need groundtrace.text: sentences,
claims, stopwords, jieba), read by ``run.py`` wherever it trains (it needs only numpy, torch and
sentencepiece).

    WORK/examples/base.jsonl.xz      stage 1: composed pairs, raw pairs, FActScore, synthetic, HaluEval
                                     QA, UHGEval train, the hand-written training pairs
    WORK/examples/ragtruth.jsonl.xz  stage 2: ragtruth_qa_dev with ablation twins, each tagged with its
                                     fold (5 folds by meta.source_id)
    WORK/eval/NAME.jsonl.xz          measurement sets, each record with its claims (character spans,
                                     as the metric cuts them), never trained on

Sources and what each teaches are in docs/benchmarks/grounding-model-card.md.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

from xe import compose, data, polarity, public

from groundtrace.detector.claims import split_claims

FOLDS = 5
_ROOT = Path(__file__).resolve().parents[2]
DATA = _ROOT.parent / "shared" / "data"
PAIRS = DATA / "pairs"
PARAPHRASE_DEV = _ROOT / "benchmarks" / "data"
FACTSCORE_MAX_PREMISE = 15000  # characters: longer Wikipedia texts cost dozens of windows per answer

# how many of each (defaults of the shipped run)
COMPOSED_PER_LANGUAGE = 10000
RAW_PAIRS_PER_LANGUAGE = 6000
FACTSCORE_COMPOSED_PER_BIO = 2
SYNTH_PER_LANGUAGE = 2200
HALUEVAL_ITEMS = 1500
UHGEVAL = (1000, 500)
POLARITY_SOURCES = {"synth": 1500, "pairs/": 600, "paraphrase_train": 10_000, "factscore/facts": 400}  # per language


def fold_of(source_id: str) -> int:
    """Stable fold of a RAGTruth source: every answer of one source lands in the same fold."""
    return int(hashlib.sha256(source_id.encode()).hexdigest(), 16) % FOLDS


def paraphrase_train_files() -> list[Path]:
    return sorted((_ROOT / "training" / "data").glob("paraphrase_train_*.jsonl"))


def handwritten(rng: random.Random) -> list[dict]:
    """The hand-written training pairs, read twice, with ablation twins of half their faithful answers:
    the only faithful answers besides RAGTruth's that reword the way LLMs do."""
    rows = [r for path in paraphrase_train_files() for r in data.read_jsonl(path)]
    return [ex for _ in range(2) for ex in data.with_ablations(rows, "paraphrase_train", rng, share=0.5)]


def base_examples(work: Path, seed: int) -> list[dict]:
    rng = random.Random(seed)
    pairs = compose.read_pairs(PAIRS)
    bios = [b for b in compose.read_factscore(PAIRS / "en_factscore.jsonl") if len(b["premise"]) <= FACTSCORE_MAX_PREMISE]
    examples = []
    for language in ("en", "ru", "zh"):
        examples += compose.compose(pairs, language, COMPOSED_PER_LANGUAGE, rng, str(seed))
    examples += compose.raw_pairs(pairs, RAW_PAIRS_PER_LANGUAGE, rng)
    examples += compose.factscore_responses(bios, heldout=False)
    examples += compose.factscore_composed(bios, FACTSCORE_COMPOSED_PER_BIO, rng)
    examples += data.synth(work / "synth", SYNTH_PER_LANGUAGE, rng)
    examples += data.halueval_qa(DATA / "halueval_qa_train.jsonl", HALUEVAL_ITEMS, rng)
    examples += data.uhgeval(DATA / "uhgeval_zh_train.jsonl", *UHGEVAL, rng)
    examples += handwritten(rng)
    examples += polarity_twins(examples, rng)
    return examples


# grounding-4 (``g4``): grounding-2's base sources at its sizes, the public sets of summaries, dialogue
# replies and claims (balanced by copy share: public.py), some polarity twins and composed pairs;
# sized for a 2-core CPU (docs/benchmarks/grounding-model-card.md, grounding-4)
G4_SYNTH_PER_LANGUAGE = 2200
G4_HALUEVAL_ITEMS = 1000
G4_COMPOSED_PER_LANGUAGE = 800
G4_POLARITY_SOURCES = {"synth": 300, "paraphrase_train": 10_000, "pairs/": 150}  # per language
G4_PUBLIC_RATIO = 1.25  # public.balance: per copy-share bin, at most this many of one label per one of the other
G4_PUBLIC_TWINS = 1000  # faithful records per public set given polarity twins


def g4_base_examples(work: Path, seed: int) -> tuple[list[dict], dict]:
    """grounding-4's stage 1, and the copy-share shortcut statistics of its public part."""
    rng = random.Random(seed)
    examples = data.synth(work / "synth", G4_SYNTH_PER_LANGUAGE, rng)
    examples += data.halueval_qa(DATA / "halueval_qa_train.jsonl", G4_HALUEVAL_ITEMS, rng)
    examples += data.uhgeval(DATA / "uhgeval_zh_train.jsonl", *UHGEVAL, rng)
    examples += handwritten(rng)
    pairs = compose.read_pairs(PAIRS)
    for language in ("en", "ru", "zh"):
        examples += compose.compose(pairs, language, G4_COMPOSED_PER_LANGUAGE, rng, str(seed))
    examples += polarity_twins(examples, rng, G4_POLARITY_SOURCES)
    public_examples, stats = public.examples(rng, ratio=G4_PUBLIC_RATIO, twins_per_set=G4_PUBLIC_TWINS)
    examples += public_examples
    stats["train_set"] = {"examples": len(examples), "shortcut_auc": public.shortcut_auc(examples)}
    return examples, stats


def polarity_twins(examples: list[dict], rng: random.Random,
                   sources: dict[str, int] = POLARITY_SOURCES) -> list[dict]:
    """Contradiction and restriction twins (polarity.py) of up to ``sources[prefix]`` faithful examples
    of each source and language."""
    out = []
    for prefix, cap in sources.items():
        for language in ("en", "ru", "zh"):
            pool = [ex for ex in examples if ex["source"].startswith(prefix) and "+" not in ex["source"]
                    and ex["label"] == 0 and ex["language"] == language]
            pool = list({ex["id"]: ex for ex in pool}.values())  # the hand-written pairs are read twice
            for ex in rng.sample(pool, min(cap, len(pool))):
                out += polarity.twins(ex, rng)
    return out


def ragtruth_examples(seed: int) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for row in data.read_jsonl(DATA / "ragtruth_qa_dev.jsonl"):
        fold = fold_of(row["meta"]["source_id"])
        for ex in data.with_ablations([row], "ragtruth", rng, share=0.6):
            out.append({**ex, "fold": fold})
        out += polarity.twins({**data.example(row, "ragtruth", []), "fold": fold}, rng) if row["label"] == 0 else []
    return out


def with_claims(row: dict) -> dict:
    claims = split_claims(row["answer"], row["language"])
    return {k: row.get(k) for k in ("id", "language", "question", "contexts", "answer", "label", "spans", "meta")} | {
        "claims": [[c.start, c.end] for c in claims]}


def g4_eval_sets() -> dict[str, list[dict]]:
    """grounding-4's measurement sets: ragtruth_qa_dev (with folds), the paraphrase dev sets, halluqa_zh
    and the held-out part of every public set (``public_NAME``), never trained on."""
    sets = _common_eval_sets()
    sets["halluqa_zh"] = [with_claims(r) for r in data.read_jsonl(DATA / "halluqa_zh.jsonl")]
    for name in public.HELDOUT_SETS:
        sets[f"public_{name}"] = [with_claims(r) for r in public.read_set(name, "heldout")]
    return sets


def _common_eval_sets() -> dict[str, list[dict]]:
    sets: dict[str, list[dict]] = {}
    rag = []
    for row in data.read_jsonl(DATA / "ragtruth_qa_dev.jsonl"):
        rag.append({**with_claims(row), "fold": fold_of(row["meta"]["source_id"])})
    sets["ragtruth_qa_dev"] = rag
    for path in sorted(PARAPHRASE_DEV.glob("paraphrase_*.jsonl")):
        sets[path.stem] = [with_claims(r) for r in data.read_jsonl(path)]
    return sets


def eval_sets(seed: int) -> dict[str, list[dict]]:
    rng = random.Random(seed + 1)
    sets = _common_eval_sets()
    for name in ("halluqa_zh", "uhgeval_zh_dev", "halueval_qa_dev"):
        sets[name] = [with_claims(r) for r in data.read_jsonl(DATA / f"{name}.jsonl")]
    pairs = compose.read_pairs(PAIRS)
    sets["heldout_pairs"] = [with_claims(r) for r in compose.heldout_pairs(pairs, 800, rng)]
    composed = [ex for language in ("en", "ru", "zh")
                for ex in compose.compose(pairs, language, 300, rng, "heldout", heldout=True)]
    sets["heldout_composed"] = [with_claims(r) for r in composed]
    bios = [b for b in compose.read_factscore(PAIRS / "en_factscore.jsonl") if len(b["premise"]) <= FACTSCORE_MAX_PREMISE]
    sets["heldout_factscore"] = [with_claims(r) for r in compose.factscore_responses(bios, heldout=True)]
    return sets
