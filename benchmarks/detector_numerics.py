"""Is the shipped detector's arithmetic the model's? The `grounding` metric on labelled files, its
windows computed three ways in one run: the shipped graph (onnxruntime, float32), the float64
reference from the same weights (training/xe/reference.py), and optionally a second graph
(``--compare FILE.onnx``, e.g. grounding-2's first, int8-activation graph from git).

    python benchmarks/detector_numerics.py [FILES ...] [--limit N] [--compare OLD.onnx] [--no-reference] [--json]

Default files: ragtruth_qa_dev and the paraphrase dev set (benchmarks/data). Per file and graph:
the largest |P(unsupported)| difference of any answer position from the reference, the largest
difference of a record's value, the records whose verdict at the shipped threshold differs from the
reference's, and the records whose reference value lies within the card's tolerance of the threshold
(the only ones whose verdict may differ between CPUs); then ROC AUC, and F1 / flagged share at the
shipped threshold, as each graph reads the file. The reference costs ~0.5 s per window.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from groundtrace.measure.classification import confusion, roc_auc
from groundtrace.detector.crossencoder import CrossEncoder
from groundtrace.detector.windows import Window
from groundtrace.metrics import get_metric
from groundtrace.metrics.grounding import model_card

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "training"))
from xe.reference import ReferenceEncoder  # noqa: E402

DEFAULT_FILES = [ROOT.parent / "shared" / "data" / "ragtruth_qa_dev.jsonl",
                 *sorted((ROOT / "benchmarks" / "data").glob("paraphrase_*.jsonl"))]


class Recording(CrossEncoder):
    """A graph whose every window is compared, answer positions only, with the reference's."""

    def __init__(self, onnx_file: Path, reference: ReferenceEncoder | None) -> None:
        super().__init__(onnx_file)
        self.reference, self.max_difference = reference, 0.0

    def window_probabilities(self, windows: list[Window]) -> list[np.ndarray]:
        values = super().window_probabilities(windows)
        if self.reference is not None:
            for w, v, r in zip(windows, values, self.reference.window_probabilities(windows), strict=True):
                answer = slice(w.answer_offset, w.answer_offset + len(w.answer_tokens))
                self.max_difference = max(self.max_difference, float(np.abs(v[answer] - r[answer]).max(initial=0.0)))
        return values


def score(rows: list[dict], encoder: CrossEncoder) -> list[float]:
    metric = get_metric("grounding", model=encoder)
    values = []
    for row in rows:
        s = metric.score(row)
        if not s.ok:
            raise RuntimeError(f"{row['id']}: {s.error}")
        values.append(s.value)
    return values


def reading(labels: np.ndarray, values: np.ndarray, threshold: float) -> dict:
    flagged = values >= threshold
    out: dict = {"flagged": round(float(flagged.mean()), 3)}
    if labels.any() and not labels.all():
        out |= {"auc": round(roc_auc(labels, values) or 0.0, 3), "f1": round(confusion(labels, flagged).f1, 3)}
    return out


def measure(path: Path, limit: int | None, graphs: dict[str, Path], reference: ReferenceEncoder | None,
            threshold: float, tolerance: float) -> dict:
    rows = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()][:limit]
    labels = np.array([r["label"] for r in rows], dtype=bool)
    result: dict = {"file": path.name, "records": len(rows), "hallucinated": int(labels.sum())}
    ref_values = None
    for name, onnx_file in graphs.items():
        encoder = Recording(onnx_file, reference)
        started = time.perf_counter()
        values = np.array(score(rows, encoder))
        entry = reading(labels, values, threshold) | {"seconds": round(time.perf_counter() - started, 1)}
        if reference is not None:
            if ref_values is None:
                ref_values = np.array(score(rows, reference))
                result["reference"] = reading(labels, ref_values, threshold) | {
                    "near_threshold": int((np.abs(ref_values - threshold) <= tolerance).sum())}
            entry |= {"max_token_difference": encoder.max_difference,
                      "max_value_difference": float(np.abs(values - ref_values).max()),
                      "verdicts_differing": int(((values >= threshold) != (ref_values >= threshold)).sum())}
        result[name] = entry
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", type=Path, nargs="*", default=DEFAULT_FILES)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--compare", type=Path, default=None, help="a second graph, measured the same way")
    parser.add_argument("--no-reference", action="store_true", help="graphs only (fast)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    card = model_card()
    threshold, tolerance = float(card["threshold"]), float(card["numerics"]["tolerance"])
    graphs = {"shipped": CrossEncoder().onnx_file} | ({"compare": args.compare} if args.compare else {})
    reference = None if args.no_reference else ReferenceEncoder()
    results = [measure(p, args.limit, graphs, reference, threshold, tolerance) for p in args.files]
    if args.json:
        print(json.dumps({"threshold": threshold, "tolerance": tolerance, "files": results}, indent=1))
        return
    print(f"threshold {threshold}, tolerance {tolerance:g}")
    for r in results:
        print(f"\n{r['file']}: {r['records']} records, {r['hallucinated']} hallucinated")
        for name in ("reference", *graphs):
            if name in r:
                print(f"  {name:9} " + ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in r[name].items()))


if __name__ == "__main__":
    main()
