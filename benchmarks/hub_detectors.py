"""Hub detectors beside groundtrace's own: `groundtrace bench` numbers of `lettuce` and/or `nli` with the
model you point at, next to `grounding`, `lexical` and `facts`, on the labelled files of ../shared/data.

    python benchmarks/hub_detectors.py --lettuce DIR_OR_HUB_ID [--nli DIR_OR_HUB_ID] [-O nli.entailment_label=1]
                                       [--limit N] [--files a.jsonl b.jsonl] [--json]

Default files: ragtruth_qa_dev (en, human span labels), halueval_qa_dev (en), halluqa_zh (zh). Per file
and metric: records, errors, ROC AUC, and F1 / precision / recall / balanced accuracy of the hallucinated
class at each metric's own threshold (lettuce and nli: 0.5, not calibrated; nothing is fitted on the file
it reports), span F1 where the file has gold spans, records per second on this machine. A model given by
Hub id is read from the Hugging Face cache or downloaded (unless HF_HUB_OFFLINE=1); a folder is read as is.

    python benchmarks/hub_detectors.py --tiny DIR --limit 100

builds the tests' tiny random models into DIR (tests/tiny_hub_models.py; seconds, no download) and benches
them: it shows the plumbing works; their numbers mean nothing about any real model.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from groundtrace.measure.bench import run_bench
from groundtrace.cli.common import parse_options

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
FILES = ("ragtruth_qa_dev.jsonl", "halueval_qa_dev.jsonl", "halluqa_zh.jsonl")
OURS = ("grounding", "lexical", "facts")


def bench_file(path: Path, metrics: list[str], options: dict[str, dict[str, Any]], limit: int | None) -> dict[str, Any]:
    results = run_bench(path, ",".join(metrics), options=options, limit=limit)
    return {name: r.as_dict() for name, r in results.items()}


def tiny_models(folder: Path) -> tuple[str, str]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.tiny_hub_models import build_entailment_classifier, build_token_classifier

    if not (folder / "lettuce" / "config.json").is_file():
        build_token_classifier(folder / "lettuce")
    if not (folder / "nli" / "config.json").is_file():
        build_entailment_classifier(folder / "nli", {0: "entailment", 1: "neutral", 2: "contradiction"})
    return str(folder / "lettuce"), str(folder / "nli")


def fmt(value: Any, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lettuce", help="a LettuceDetect model: folder or Hub id")
    parser.add_argument("--nli", help="an entailment / consistency model: folder or Hub id")
    parser.add_argument("-O", "--option", action="append", default=[], help="METRIC.KEY=VALUE, e.g. nli.entailment_label=1")
    parser.add_argument("--limit", type=int, default=None, help="the first N records of each file")
    parser.add_argument("--files", nargs="*", type=Path, default=None)
    parser.add_argument("--ours", default=",".join(OURS), help="groundtrace's metrics to show beside them")
    parser.add_argument("--tiny", type=Path, help="build the tests' tiny random models here and bench them")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.tiny:
        args.lettuce, args.nli = tiny_models(args.tiny)
    if not (args.lettuce or args.nli):
        parser.error("give --lettuce and/or --nli (or --tiny DIR)")
    options = parse_options(args.option)
    metrics = [m for m in args.ours.split(",") if m]
    for name, model in (("lettuce", args.lettuce), ("nli", args.nli)):
        if model:
            metrics.append(name)
            options.setdefault(name, {})["model"] = model
    files = args.files or [DATA / name for name in FILES]
    report = {path.name: bench_file(path, metrics, options, args.limit) for path in files}
    if args.json:
        print(json.dumps(report, indent=1, ensure_ascii=False))
        return
    header = f"{'file':24s} {'metric':10s} {'n':>5s} {'err':>4s} {'AUC':>6s} {'F1':>6s} {'P':>6s} {'R':>6s} {'bal.acc':>7s} " \
             f"{'thr':>6s} {'span F1':>7s} {'rec/s':>7s}"
    print(header)
    for file, results in report.items():
        for name, r in results.items():
            spans = (r.get("spans") or {}).get("f1")
            print(f"{file:24s} {name:10s} {r['n']:5d} {r['errors']:4d} {fmt(r['auc']):>6s} {fmt(r['f1']):>6s} "
                  f"{fmt(r['precision']):>6s} {fmt(r['recall']):>6s} {fmt(r['balanced_accuracy']):>7s} "
                  f"{r['threshold']:6.3f} {fmt(spans):>7s} {r['records_per_s']:7.1f}")


if __name__ == "__main__":
    main()
