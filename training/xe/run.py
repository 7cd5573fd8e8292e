"""Train grounding-3 wherever torch runs (a lent GPU or this CPU), from the files that ``build.py``
wrote: the example sets (``examples.py``), the tokenizer and the pruned encoder.

    python training/xe/run.py tokenize --work WORK [--workers 14]
    python training/xe/run.py train --work WORK --variant full [--device cuda] [--base-minutes 5]
                                    [--base-epochs E | --base-steps N] [--resume]
    python training/xe/run.py stage1 --work WORK --tag TAG     (a run's stage-1 model as a candidate)

``train`` runs, for one variant (which base sources it reads: ``VARIANTS``):
  1. base: stage 1 on the variant's base examples (pairs composed into RAG answers, ...), then its
     predictions on every measurement set (ragtruth_qa_dev is out of sample at this point);
  2. cv: 5 fine-tunes of the base, each on ragtruth_qa_dev without one fold (folds by
     meta.source_id) plus a replay of base examples, each predicting its held-out fold;
  3. final: the base fine-tuned on every fold, its predictions on every measurement set, and its
     weights (``final.npz``: fp16, all but the frozen word embeddings).
Everything lands in WORK/runs/VARIANT/. Stage 1 checkpoints every 10 minutes; ``--resume`` goes on.

This process never imports groundtrace's package (``_light_import``): the training machine needs only
numpy, torch and sentencepiece, not the scorer's dependencies.
"""

from __future__ import annotations

import argparse
import json
import lzma
import pickle
import random
import sys
import time
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def _light_import() -> None:
    """groundtrace.detector.{tokenizer,windows} without groundtrace/__init__ (pydantic, jieba, ...)."""
    src = ROOT / "src" / "groundtrace"
    for name, path in (("groundtrace", src), ("groundtrace.detector", src / "detector")):
        if name not in sys.modules:
            module = types.ModuleType(name)
            module.__path__ = [str(path)]
            sys.modules[name] = module


_light_import()
sys.path.insert(0, str(ROOT / "training"))

import torch  # noqa: E402

from groundtrace.detector import aggregate  # noqa: E402
from groundtrace.detector.tokenizer import XETokenizer  # noqa: E402
from xe import e5_file, model as xe_model, train as xe_train  # noqa: E402
from xe.jsonxz import read_xz  # noqa: E402

LAYERS = 6
DEFAULT_READING = "auto"  # groundtrace.detector.reading.DEFAULT_EVIDENCE (a test keeps them equal)
FOLDS = 5
# the measurement sets whose per-token probabilities are kept (cv_report.py and the gate read them)
TOKEN_SETS = ("ragtruth_qa_dev", "paraphrase_en", "paraphrase_ru", "paraphrase_ru_b", "paraphrase_zh")
# Stage 1 sources per variant: which example sources (examples.py names them) a variant reads.
_PAIR_SOURCES = ("pairs/", "raw/", "factscore/")
VARIANTS = {
    "full": lambda source: True,
    "nopairs": lambda source: not source.startswith(_PAIR_SOURCES),
    "nopolarity": lambda source: "+flip" not in source and "+restrict" not in source,
    "pairsonly": lambda source: not source.startswith(("synth", "halueval_qa")),
}


def tokenizer_of(work: Path) -> XETokenizer:
    return XETokenizer(work / "tok" / "tokenizer.model", work / "tok" / "normalizer.json")


# --- tokenize: every example and record to windows, once -------------------------------------------

_worker_tokenizer: XETokenizer | None = None
_worker_reading = "all"


def _init_worker(work: str, reading: str) -> None:
    global _worker_tokenizer, _worker_reading
    _worker_tokenizer = tokenizer_of(Path(work))
    _worker_reading = reading


def _featurize(ex: dict):
    assert _worker_tokenizer is not None
    if "claims" in ex:  # a measurement record: windows, and the claim each word token belongs to (-1: none)
        item = xe_train.featurize_record(_worker_tokenizer, ex, _worker_reading)
        enc = _worker_tokenizer.encode(ex["answer"])
        words = enc.word_tokens(ex["answer"])
        claim_of = np.full(len(enc), -1, dtype=np.int32)
        for c, (s, e) in reversed(list(enumerate(ex["claims"]))):
            claim_of[(enc.starts < e) & (enc.ends > s) & words] = c
        return item, claim_of, enc.starts, enc.ends, len(ex["claims"])
    return xe_train.featurize(_worker_tokenizer, ex, _worker_reading)


def _group(row: dict) -> str | None:
    """What a bootstrap resamples: a record's source group (public sets) or source (RAGTruth)."""
    meta = row.get("meta") or {}
    return meta.get("source_group") or meta.get("source_id")


def tokenize(work: Path, workers: int, reading: str = "all", items_file: str = "items.pkl",
             only: tuple[str, ...] = ()) -> None:
    """Every example and measurement record to the windows the metric reads under ``reading`` (the
    reading is saved with the items: ``train`` records it)."""
    import multiprocessing as mp

    jobs = {"base": work / "examples" / "base.jsonl.xz", "ragtruth": work / "examples" / "ragtruth.jsonl.xz"}
    jobs |= {f"eval/{p.name.removesuffix('.jsonl.xz')}": p for p in sorted((work / "eval").glob("*.jsonl.xz"))}
    jobs = {k: v for k, v in jobs.items() if not only or k.startswith(only)}
    out: dict = {"_reading": reading}
    started = time.time()
    with mp.get_context("fork").Pool(workers, _init_worker, (str(work), reading)) as pool:
        for name, path in jobs.items():
            rows = read_xz(path)
            items = pool.map(_featurize, rows, chunksize=64)
            meta = [{k: r.get(k) for k in ("id", "source", "language", "label", "fold", "spans")} | {"group": _group(r)}
                    for r in rows]
            out[name] = (meta, items)
            windows = [len(i[0].windows if isinstance(i, tuple) else i.windows) for i in items if i is not None]
            print(f"{name}: {len(rows)} rows, {len(windows)} usable, {np.mean(windows or [0]):.2f} windows, "
                  f"{time.time() - started:.0f} s", flush=True)
    with open(work / items_file, "wb") as f:
        pickle.dump(out, f, protocol=pickle.HIGHEST_PROTOCOL)


# --- train ------------------------------------------------------------------------------------------

def new_model(work: Path, layers: int = LAYERS):
    config, tensors = e5_file.read_pruned(work / "e5_pruned.npz")
    return xe_model.from_pruned(config, tensors, layers)


def scores_of(model, records: tuple[list[dict], list], pad_id: int, device: str, with_tokens: bool,
              precision: str = "bf16") -> list[dict]:
    """Each record's score as the metric computes it (groundtrace.detector.aggregate over its claims),
    its maximum token probability, and the per-token probabilities too where asked."""
    meta, items = records
    probabilities = xe_train.token_probabilities(model, [it[0] for it in items], pad_id, device, precision=precision)
    out = []
    for m, (_item, claim_of, starts, ends, claims), p in zip(meta, items, probabilities, strict=False):
        scored = claim_of >= 0
        row = {"id": m["id"], "label": m["label"], "language": m.get("language"),
               "score": round(aggregate.answer_probability(aggregate.claim_probabilities(p, claim_of, claims)), 5),
               "max": round(float(p[scored].max()) if scored.any() else 0.0, 5)}
        if m.get("fold") is not None:
            row["fold"] = m["fold"]
        if m.get("group") is not None:
            row["group"] = m["group"]
        if with_tokens:
            row["p"] = [round(float(x), 4) for x in p]
            row["scored"] = scored.astype(int).tolist()
            row["claim_of"] = claim_of.tolist()
            row["starts"], row["ends"] = starts.tolist(), ends.tolist()
        out.append(row)
    return out


def evaluate(model, data: dict, pad_id: int, device: str, token_sets: tuple[str, ...],
             only: tuple[str, ...] | None = None, precision: str = "bf16") -> dict:
    """Predictions on every measurement set (or the sets named in ``only``)."""
    return {name.removeprefix("eval/"): scores_of(model, records, pad_id, device, name.removeprefix("eval/") in token_sets,
                                                  precision)
            for name, records in data.items()
            if name.startswith("eval/") and (only is None or name.removeprefix("eval/") in only)}


def auc(rows: list[dict]) -> float | None:
    labels = np.array([r["label"] for r in rows])
    scores = np.array([r["score"] for r in rows])
    pos, neg = scores[labels == 1], scores[labels == 0]
    if not len(pos) or not len(neg):
        return None
    greater = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return round(float(greater / (len(pos) * len(neg))), 4)


def summary(evaluation: dict) -> dict:
    out = {}
    for name, rows in evaluation.items():
        if name.startswith("paraphrase_"):
            by = {}
            for r in rows:
                by.setdefault(r["id"].rsplit(":", 1)[0], {})[r["label"]] = r["score"]
            pairs = [v for v in by.values() if 0 in v and 1 in v]
            out[name] = {"pairwise": round(sum(v[1] > v[0] for v in pairs) / max(1, len(pairs)), 3)}
        elif name in ("heldout_pairs", "heldout_composed"):
            out[name] = {lang: auc([r for r in rows if r["language"] == lang]) for lang in ("en", "ru", "zh")}
        else:
            out[name] = {"auc": auc(rows)}
    return out


def train_variant(work: Path, variant: str, args) -> None:
    device = args.device
    out = work / "runs" / (args.tag or variant)
    out.mkdir(parents=True, exist_ok=True)
    with open(work / args.items, "rb") as f:
        data = pickle.load(f)
    tokenizer = tokenizer_of(work)
    pad = tokenizer.pad_id
    keep = VARIANTS[variant]
    base_meta, base_items = data["base"]
    kept = [(m, it) for m, it in zip(base_meta, base_items, strict=False) if it is not None and keep(m["source"])]
    items = [it for _, it in kept]
    result: dict = {"variant": variant, "tag": args.tag or variant, "layers": args.layers,
                    "reading": data.get("_reading", "all"), "base_examples": len(items), "mix": _mix([m for m, _ in kept]),
                    "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}}
    print(json.dumps(result), flush=True)

    model = new_model(work, args.layers)
    result["base"] = xe_train.train(
        model, items, epochs=args.base_epochs, steps=args.base_steps, lr=args.lr, seed=args.seed,
        token_budget=args.token_budget, pad_id=pad, device=device,
        time_budget=args.base_minutes * 60 if args.base_minutes else None, response_weight=args.response_weight,
        log=out / "base_log.jsonl", checkpoint=out / "base.pt", resume=args.resume, precision=args.precision)
    print(json.dumps({"variant": variant, "base": result["base"]}), flush=True)
    base_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    base_eval = evaluate(model, data, pad, device, (), tuple(args.base_eval.split(",")) if args.base_eval else None,
                         args.precision)
    result["base_summary"] = summary(base_eval)
    (out / "result.json").write_text(json.dumps(result, indent=1))
    print(json.dumps({"variant": variant, "base_summary": result["base_summary"]}), flush=True)

    rag_meta, rag_items = data["ragtruth"]
    rag = [(m, it) for m, it in zip(rag_meta, rag_items, strict=False) if it is not None]
    rng = random.Random(args.seed)
    oof = []
    eval_rag_meta, eval_rag_items = data["eval/ragtruth_qa_dev"]
    handwritten = [it for m, it in kept if m["source"].startswith("paraphrase_train")]
    if args.handwritten_limit is not None:
        handwritten = random.Random(args.seed).sample(handwritten, min(args.handwritten_limit, len(handwritten)))
    # each finished fold is kept (folds.json): a resumed run skips it, drawing the same replay sample
    folds_file = out / "folds.json"
    done = json.loads(folds_file.read_text()) if args.resume and folds_file.exists() else {"cv": [], "oof": []}
    for k, fold in enumerate([*range(FOLDS), None]):
        replay = rng.sample(items, min(args.replay, len(items)))
        if fold is not None and fold < len(done["cv"]):
            result.setdefault("cv", []).append(done["cv"][fold])
            oof += done["oof"][fold]
            print(json.dumps({"variant": variant, "fold": fold, "resumed": True, "auc": done["cv"][fold]["auc"]}),
                  flush=True)
            continue
        model.load_state_dict(base_state)
        train_items = [it for m, it in rag if m["fold"] != fold] + replay
        fine = xe_train.train(model, train_items + handwritten * args.handwritten_repeat, epochs=args.fine_epochs,
                              lr=args.fine_lr, seed=args.seed + k, token_budget=args.token_budget, pad_id=pad,
                              device=device, response_weight=args.response_weight,
                              steps=args.fine_steps[k] if args.fine_steps else None,
                              time_budget=args.fine_minutes * 60 if args.fine_minutes else None, precision=args.precision)
        (out / "result.json").write_text(json.dumps(result, indent=1))
        if fold is None:
            result["final"] = fine
            break
        held = [i for i, m in enumerate(eval_rag_meta) if m["fold"] == fold]
        rows = scores_of(model, ([eval_rag_meta[i] for i in held], [eval_rag_items[i] for i in held]), pad, device, True,
                         args.precision)
        oof += rows
        result.setdefault("cv", []).append({"fold": fold, **fine, "auc": auc(rows)})
        done["cv"].append(result["cv"][-1])
        done["oof"].append(rows)
        folds_file.write_text(json.dumps(done))
        print(json.dumps({"variant": variant, "fold": fold, **fine, "auc": auc(rows)}), flush=True)
    result["cv_auc"] = auc(oof)
    final_eval = evaluate(model, data, pad, device, TOKEN_SETS, precision=args.precision)
    result["final_summary"] = summary(final_eval)
    print(json.dumps({"variant": variant, "cv_auc": result["cv_auc"], "final_summary": result["final_summary"]}), flush=True)
    save_weights(model, out / "final.npz")
    (out / "result.json").write_text(json.dumps(result, indent=1))
    with lzma.open(out / "predictions.json.xz", "wt") as f:
        json.dump({"base": base_eval, "cv_oof": oof, "final": final_eval}, f)


def save_weights(model, path: Path) -> None:
    """fp16, all but the frozen word embeddings (build.py export adds them back)."""
    np.savez(path, **{k: v.detach().float().cpu().numpy().astype(np.float16) for k, v in model.state_dict().items()
                      if k != "word.weight"})


def stage1_candidate(work: Path, args) -> None:
    """A run's stage-1 model (``runs/TAG/base.pt``, trained without a RAGTruth record) as a candidate
    of its own, ``runs/TAG-stage1/``: its predictions on every measurement set, its ragtruth_qa_dev
    predictions as the "out-of-fold" ones (out of sample for every fold: cv_report.py fits each
    fold's threshold on the other folds as for a CV run) and its weights as ``final.npz`` for export."""
    import torch

    run = work / "runs" / args.tag
    out = work / "runs" / f"{args.tag}-stage1"
    out.mkdir(parents=True, exist_ok=True)
    with open(work / args.items, "rb") as f:
        data = pickle.load(f)
    model = new_model(work, args.layers)
    model.load_state_dict(torch.load(run / "base.pt", map_location=args.device)["model"])
    model.to(args.device)
    started = time.time()
    final_eval = evaluate(model, data, tokenizer_of(work).pad_id, args.device, TOKEN_SETS, precision=args.precision)
    result = {"variant": f"{args.tag}-stage1", "reading": data.get("_reading", "all"), "final_summary": summary(final_eval),
              "seconds": round(time.time() - started, 1),
              **{k: v for k, v in json.loads((run / "result.json").read_text()).items() if k in ("base_examples", "mix", "base")}}
    print(json.dumps(result), flush=True)
    save_weights(model, out / "final.npz")
    (out / "result.json").write_text(json.dumps(result, indent=1))
    with lzma.open(out / "predictions.json.xz", "wt") as f:
        json.dump({"cv_oof": final_eval["ragtruth_qa_dev"], "final": final_eval}, f)


def predict_shipped(work: Path, onnx_file: Path, args) -> None:
    """A shipped int8 ONNX model (read back into torch: from_onnx.py) on every measurement set of
    ``args.items``, through the code path a trained run's predictions take: grounding-2 measured as
    the candidates are. The items must be tokenized with that model's tokenizer (WORK/tok)."""
    from xe import from_onnx

    out = work / "runs" / (args.tag or onnx_file.stem)
    out.mkdir(parents=True, exist_ok=True)
    with open(work / args.items, "rb") as f:
        data = pickle.load(f)
    model = from_onnx.load_model(onnx_file).to(args.device)
    started = time.time()
    final_eval = evaluate(model, data, tokenizer_of(work).pad_id, args.device, TOKEN_SETS, precision=args.precision)
    result = {"model": str(onnx_file), "reading": data.get("_reading", "all"), "final_summary": summary(final_eval),
              "seconds": round(time.time() - started, 1)}
    print(json.dumps(result), flush=True)
    (out / "result.json").write_text(json.dumps(result, indent=1))
    with lzma.open(out / "predictions.json.xz", "wt") as f:
        json.dump({"final": final_eval}, f)


def _mix(meta: list[dict]) -> dict:
    out: dict[str, list[int]] = {}
    for m in meta:
        key = m["source"].split("+")[0] + ("+twin" if "+" in m["source"] else "") + "/" + m["language"]
        out.setdefault(key, [0, 0])[int(m["label"])] += 1
    return dict(sorted(out.items()))


def collect(work: Path, out: Path, keep: int, part_bytes: int = 15 * 2**20) -> None:
    """What comes back from a lent machine: every variant's results in one tar, and the weights of the
    ``keep`` best (out-of-fold AUC + mean paraphrase pairwise) cut into parts of ``part_bytes``."""
    import tarfile

    out.mkdir(parents=True, exist_ok=True)
    ranked = []
    with tarfile.open(out / "results.tar", "w") as tar:
        for run in sorted((work / "runs").iterdir()):
            for name in ("result.json", "predictions.json.xz", "base_log.jsonl"):
                if (run / name).exists():
                    tar.add(run / name, arcname=f"{run.name}/{name}")
            r = json.loads((run / "result.json").read_text()) if (run / "result.json").exists() else {}
            if "final_summary" in r and (run / "final.npz").exists():
                pairwise = [v["pairwise"] for k, v in r["final_summary"].items() if k.startswith("paraphrase_")]
                ranked.append((r["cv_auc"] + float(np.mean(pairwise)), run))
    for _, run in sorted(ranked, reverse=True)[:keep]:
        blob = (run / "final.npz").read_bytes()
        for i in range(0, len(blob), part_bytes):
            (out / f"{run.name}.npz.part{i // part_bytes}").write_bytes(blob[i:i + part_bytes])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=["tokenize", "train", "predict", "stage1", "collect"])
    parser.add_argument("--work", type=Path, default=ROOT / ".cache" / "xe")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--reading", default=DEFAULT_READING, choices=xe_train.READINGS,
                        help="tokenize: the windows the metric reads (default: what it ships, "
                             "groundtrace.detector.reading.DEFAULT_EVIDENCE)")
    parser.add_argument("--items", default="items.pkl", help="the tokenized file (WORK/ITEMS) tokenize writes and train reads")
    parser.add_argument("--only", default="", help="tokenize: only the jobs starting with these (comma-separated, e.g. eval/)")
    parser.add_argument("--base-eval", default=None,
                        help="measurement sets predicted after stage 1 (comma-separated; default: all)")
    parser.add_argument("--onnx", type=Path, default=None, help="predict: the shipped int8 ONNX model to measure")
    parser.add_argument("--variant", default="full", choices=sorted(VARIANTS))
    parser.add_argument("--tag", default=None, help="name of the run's folder (default: the variant)")
    parser.add_argument("--layers", type=int, default=LAYERS, help="encoder layers kept (the pruned file holds up to 12)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--fine-lr", type=float, default=3e-5)
    parser.add_argument("--base-epochs", type=float, default=2.0)
    parser.add_argument("--base-steps", type=int, default=None, help="replay a run: the steps it reached")
    parser.add_argument("--base-minutes", type=float, default=None, help="cut stage 1 to this time (GPU runs)")
    parser.add_argument("--fine-epochs", type=float, default=2.0)
    parser.add_argument("--fine-minutes", type=float, default=None, help="cut each fine-tune to this time (GPU runs)")
    parser.add_argument("--fine-steps", type=lambda v: [int(x) for x in v.split(",")], default=None,
                        help="replay a run: the steps each of the 6 fine-tunes reached (folds 0-4, final)")
    parser.add_argument("--response-weight", type=float, default=0.5, help="weight of the answer-level loss")
    parser.add_argument("--precision", default="bf16", choices=xe_train.PRECISIONS,
                        help="bf16 autocast (GPU) or fp32 (a CPU without AVX512-BF16: faster)")
    parser.add_argument("--handwritten-limit", type=int, default=None,
                        help="at most this many hand-written training examples (and their twins) in each fine-tune")
    parser.add_argument("--handwritten-repeat", type=int, default=1,
                        help="times the hand-written training pairs are read in each fine-tune")
    parser.add_argument("--replay", type=int, default=3000,
                        help="base examples mixed into every fine-tune on RAGTruth: the pairs stay in every stage")
    parser.add_argument("--token-budget", type=int, default=16384)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--out", type=Path, default=None, help="collect: where the results go")
    parser.add_argument("--keep", type=int, default=2, help="collect: how many variants' weights come back")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.backends.cuda.matmul.allow_tf32 = True
    if args.step == "tokenize":
        tokenize(args.work, args.workers, args.reading, args.items, tuple(x for x in args.only.split(",") if x))
    elif args.step == "stage1":
        stage1_candidate(args.work, args)
    elif args.step == "predict":
        predict_shipped(args.work, args.onnx or ROOT / "src" / "groundtrace" / "detector" / "grounding-xe.onnx", args)
    elif args.step == "collect":
        collect(args.work, args.out or args.work / "collected", args.keep)
    else:
        train_variant(args.work, args.variant, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
