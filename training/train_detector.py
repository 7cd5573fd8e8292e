"""Train the grounding detector and export it as a plain ONNX graph.

    python training/train_detector.py --features synth.npz:spans:1 --features halueval_summaries.npz:answers:2 \
        --out src/groundtrace/detector

Each ``--features`` is FILE:KIND:WEIGHT, a feature file from training/detector_features.py.
KIND ``faithful``: only the file's label-0 answers are used, every claim as supported (the human
HaluEval summaries: abstractive rewording that the rule-paraphrased synthetic answers lack).
KIND ``spans``: claim labels come from gold spans (synthetic data) and train a claim-level loss as
well as the answer-level one; KIND ``answers``: only the answer's label is known (HaluEval), so only
the answer-level loss applies, a multiple-instance objective: the answer's probability is that of
its most doubtful claim, the same max the metric uses at inference.

The network: standardised features -> 64 -> 32 -> 1, ReLU, sigmoid. The standardisation is folded
into the first layer and the graph is written with onnx.helper, so inference needs onnxruntime only.
10% of the records of every file (seeded, by record) are held out; the default threshold is the
F1-optimal one on them, at answer level. Output: OUT/grounding.onnx and OUT/grounding.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from groundtrace.detector.features import FEATURE_NAMES

HIDDEN = (64, 32)


@dataclass
class Part:
    name: str
    X: np.ndarray
    claim_y: np.ndarray  # -1 where unknown
    starts: np.ndarray  # per record: first claim index, and one past the last
    ends: np.ndarray
    record_y: np.ndarray
    language: np.ndarray
    weight: float
    features: list[str]


def load_part(spec: str) -> Part:
    path, kind, weight = spec.rsplit(":", 2)
    d = np.load(path)
    # the columns this version of the package computes, by name (older files may hold more)
    stored = [str(f) for f in d["features"]]
    columns = [stored.index(name) for name in FEATURE_NAMES]
    group = d["group"]
    n = len(d["record_label"])
    counts = np.bincount(group, minlength=n)
    ends = np.cumsum(counts)
    claim_y = d["y"].astype(np.int8) if kind in ("spans", "faithful") else np.full(len(group), -1, np.int8)
    part = Part(Path(path).stem, d["X"][:, columns].astype(np.float32), claim_y, ends - counts, ends,
                d["record_label"].astype(np.float32), d["language"], float(weight), list(FEATURE_NAMES))
    return only_faithful(part) if kind == "faithful" else part


def only_faithful(part: Part) -> Part:
    """The label-0 records of a part, every claim labelled supported."""
    keep = np.flatnonzero(part.record_y == 0)
    rows = np.concatenate([np.arange(part.starts[r], part.ends[r]) for r in keep])
    counts = part.ends[keep] - part.starts[keep]
    ends = np.cumsum(counts)
    return Part(part.name, part.X[rows], np.zeros(len(rows), np.int8), ends - counts, ends, part.record_y[keep],
                part.language[keep], part.weight, part.features)


def best_f1_threshold(labels: np.ndarray, scores: np.ndarray) -> tuple[float, float]:
    best = (0.5, 0.0)
    for t in np.unique(np.round(scores, 3)):
        predicted = scores >= t
        tp = float(np.sum(predicted & (labels == 1)))
        f1 = 2 * tp / (predicted.sum() + labels.sum()) if tp else 0.0
        if f1 > best[1]:
            best = (float(t), f1)
    return best


def auc(labels: np.ndarray, scores: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(labels, scores)) if len(set(labels.tolist())) == 2 else float("nan")


class Batches:
    """Records of all parts as one index; a batch is a list of records with their claims."""

    def __init__(self, parts: list[Part], records: list[np.ndarray]) -> None:
        self.parts = parts
        self.items = [(i, r) for i, rs in enumerate(records) for r in rs]

    def arrays(self, items):
        xs, ys, owner, ry, rw = [], [], [], [], []
        for k, (p, r) in enumerate(items):
            part = self.parts[p]
            s, e = part.starts[r], part.ends[r]
            xs.append(part.X[s:e])
            ys.append(part.claim_y[s:e])
            owner.append(np.full(e - s, k))
            ry.append(part.record_y[r])
            rw.append(part.weight)
        return np.concatenate(xs), np.concatenate(ys), np.concatenate(owner), np.asarray(ry, np.float32), np.asarray(rw, np.float32)


def train(parts: list[Part], train_records: list[np.ndarray], epochs: int, seed: int, mean, std, smooth: float):
    import torch

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    layers, width = [], parts[0].X.shape[1]
    for h in HIDDEN:
        layers += [torch.nn.Linear(width, h), torch.nn.ReLU()]
        width = h
    layers.append(torch.nn.Linear(width, 1))
    net = torch.nn.Sequential(*layers)
    optimiser = torch.optim.AdamW(net.parameters(), lr=2e-3, weight_decay=1e-3)
    batches = Batches(parts, train_records)
    mean_t, std_t = torch.tensor(mean), torch.tensor(std)
    bce = torch.nn.functional.binary_cross_entropy_with_logits
    for epoch in range(epochs):
        order = rng.permutation(len(batches.items))
        total = 0.0
        for i in range(0, len(order), 256):
            x, y, owner, ry, rw = batches.arrays([batches.items[j] for j in order[i : i + 256]])
            if len(x) == 0:
                continue
            logits = net((torch.from_numpy(x) - mean_t) / std_t).squeeze(1)
            owner_t = torch.from_numpy(owner)
            record_logits = torch.full((len(ry),), -30.0).scatter_reduce(0, owner_t, logits, "amax", include_self=False)
            target = torch.from_numpy(ry) * (1 - 2 * smooth) + smooth
            loss = (bce(record_logits, target, reduction="none") * torch.from_numpy(rw)).mean()
            known = torch.from_numpy(y >= 0)
            if known.any():
                claim_w = torch.from_numpy(rw)[owner_t][known]
                loss = loss + (bce(logits[known], torch.from_numpy(y)[known].float() * (1 - 2 * smooth) + smooth, reduction="none") * claim_w).mean()
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            total += float(loss.detach())
        print(f"epoch {epoch + 1}: loss {total:.2f}", flush=True)
    return net


def predict_records(net, part: Part, records: np.ndarray, mean, std) -> np.ndarray:
    import torch

    with torch.no_grad():
        p = torch.sigmoid(net((torch.from_numpy(part.X) - torch.tensor(mean)) / torch.tensor(std))).squeeze(1).numpy()
    return np.asarray([p[part.starts[r] : part.ends[r]].max() if part.ends[r] > part.starts[r] else 0.0 for r in records])


def export_onnx(net, mean: np.ndarray, std: np.ndarray, path: Path) -> None:
    """scaler folded into layer 1; Gemm/Relu/Sigmoid only, opset 17."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    linears = [m for m in net if hasattr(m, "weight")]
    weights = [m.weight.detach().numpy().astype(np.float64) for m in linears]
    biases = [m.bias.detach().numpy().astype(np.float64) for m in linears]
    weights[0] = weights[0] / std
    biases[0] = biases[0] - weights[0] @ mean
    nodes, inits, current = [], [], "features"
    for i, (w, b) in enumerate(zip(weights, biases)):
        inits += [numpy_helper.from_array(w.astype(np.float32), f"W{i}"), numpy_helper.from_array(b.astype(np.float32), f"B{i}")]
        nodes.append(helper.make_node("Gemm", [current, f"W{i}", f"B{i}"], [f"z{i}"], transB=1))
        current = f"z{i}"
        if i < len(weights) - 1:
            nodes.append(helper.make_node("Relu", [current], [f"h{i}"]))
            current = f"h{i}"
    nodes.append(helper.make_node("Sigmoid", [current], ["p_unsupported"]))
    graph = helper.make_graph(
        nodes, "grounding", [helper.make_tensor_value_info("features", TensorProto.FLOAT, [None, len(mean)])],
        [helper.make_tensor_value_info("p_unsupported", TensorProto.FLOAT, [None, 1])], inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="groundtrace")
    model.ir_version = 8
    onnx.checker.check_model(model)
    path.write_bytes(model.SerializeToString())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--features", action="append", required=True, help="FILE:spans|answers|faithful:WEIGHT")
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smooth", type=float, default=0.0,
                        help="label smoothing (0.1 was tried: it lowered ragtruth AUC from 0.80 to 0.73)")
    parser.add_argument("--version", default="grounding-1")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    started = time.time()
    parts = [load_part(spec) for spec in args.features]
    names = parts[0].features
    rng = np.random.default_rng(args.seed)
    held = [rng.random(len(p.record_y)) < 0.10 for p in parts]
    train_records = [np.flatnonzero(~h) for h in held]
    train_x = np.concatenate([p.X[p.starts[r] : p.ends[r]] for p, rs in zip(parts, train_records) for r in rs[:: max(1, len(rs) // 4000)]])
    mean, std = train_x.mean(axis=0).astype(np.float64), train_x.std(axis=0).astype(np.float64) + 1e-6

    net = train(parts, train_records, args.epochs, args.seed, mean.astype(np.float32), std.astype(np.float32), args.smooth)

    report, all_labels, all_scores = {}, [], []
    for p, h in zip(parts, held):
        records = np.flatnonzero(h)
        scores = predict_records(net, p, records, mean.astype(np.float32), std.astype(np.float32))
        labels = p.record_y[records]
        report[p.name] = {"records": len(records), "auc": round(auc(labels, scores), 4)}
        for lang in sorted(set(p.language[records].tolist())):
            mask = p.language[records] == lang
            if len(set(p.language[records].tolist())) > 1:
                report[p.name][f"auc_{lang}"] = round(auc(labels[mask], scores[mask]), 4)
        all_labels.append(labels)
        all_scores.append(scores)
    threshold, f1 = best_f1_threshold(np.concatenate(all_labels), np.concatenate(all_scores))
    report["threshold"], report["f1_at_threshold"] = threshold, round(f1, 4)
    print(json.dumps(report, indent=1))

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    export_onnx(net, mean, std, out / "grounding.onnx")
    card = {
        "version": args.version,
        "features": names,
        "threshold": round(threshold, 3),
        "hidden": list(HIDDEN),
        "validation": report,
        "training": {"inputs": args.features, "epochs": args.epochs, "seed": args.seed, "smooth": args.smooth,
                     "records": int(sum(len(r) for r in train_records)), "seconds": round(time.time() - started, 1),
                     "machine": f"{platform.machine()}, {__import__('os').cpu_count()} cores"},
    }
    (out / "grounding.json").write_text(json.dumps(card, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
