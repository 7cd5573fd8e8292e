"""Public human-labelled grounding sets of other kinds of grounded text (summaries, dialogue replies,
long answers, claims) as groundtrace records, split by source document into train and held-out.

    python -m training.public_sets.build --out training/data/public [--mirror /work/.mirror] [--seed 0]

Reads each repository at its pinned commit from MIRROR (bare mirrors as the `fetch` tool leaves them,
MIRROR/owner+name/repo, or clones MIRROR/name/.git), writes DATASET_{train,heldout}.jsonl.xz and
stats.json into OUT, and prints the stats.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

from training.public_sets import begin, faithdial, lfqa, qags, summedits, wice
from training.public_sets.common import (PublicSet, TextIndex, assign_split, drop_duplicates, drop_sharing,
                                         held_out_groups, record_texts, source_groups)
from training.public_sets.snapshot import reader
from training.public_sets.stats import describe
from training.synth_sources import DATA_DIR, MEASUREMENT_FILES
from training.xe.jsonxz import write_xz

BENCHMARK_DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data"


def paraphrase_dev_files() -> tuple[Path, ...]:
    """The paraphrase dev pairs (benchmarks/data): they measure the detector too, so never trained on."""
    return tuple(sorted(BENCHMARK_DATA.glob("paraphrase_*.jsonl")))


SETS: tuple[PublicSet, ...] = (summedits.SET, begin.SET, faithdial.SET, wice.SET, lfqa.SET, qags.SET)


def measurement_index(data_dir: Path, extra: tuple[Path, ...] = ()) -> TextIndex:
    """The contexts and answers of the ../shared/data files kept for measurement, and of ``extra`` files."""
    rows: list[dict] = []
    for path in [*(data_dir / name for name in MEASUREMENT_FILES), *extra]:
        with open(path, encoding="utf-8") as f:
            rows.extend(json.loads(line) for line in f if line.strip())
    return TextIndex.of(record_texts(rows))


def convert(public: PublicSet, read, measurement: TextIndex) -> tuple[list[dict], dict]:
    """One set's records, deduplicated and free of measurement texts; and what was dropped, and why."""
    conversion = public.convert(read)
    records, repeats, conflicting = drop_duplicates(conversion.records)
    records, leaked = drop_sharing(records, measurement)
    return records, {**conversion.excluded, "duplicate": repeats, "conflicting_duplicate": conflicting,
                     "measurement_leak": leaked}


def _of_dataset(name: str, record: dict) -> bool:
    return record["dataset"] == name  # WiCE's held-out floor counts claims, not sub-claims


def split(by_set: dict[str, list[dict]], sets: tuple[PublicSet, ...], seed: int) -> None:
    """Group the sources of all sets (sets reuse corpora: BEGIN and FaithDial the same dialogue
    knowledge), then hold out whole groups: every group of a measurement-only set, then ~20% of each
    trainable set's; a group placed by one set keeps its place in the others."""
    everything = [r for rows in by_set.values() for r in rows]
    groups = source_groups(everything)
    for r in everything:
        r["meta"]["source_group"] = groups[r["meta"]["source_id"]]
    decided: dict[str, bool] = {}
    for public in sorted(sets, key=lambda p: p.trainable):  # measurement-only sets first: they take all theirs
        rows = by_set[public.name]
        if public.trainable:
            held = held_out_groups(rows, decided=decided, seed=seed, stratum=public.stratum,
                                   counted=functools.partial(_of_dataset, public.name))
        else:
            held = {r["meta"]["source_group"] for r in rows}
            decided.update(dict.fromkeys(held, True))
        assign_split(rows, held)
    mixed = {r["meta"]["source_group"] for r in everything if r["split"] == "train"} & \
        {r["meta"]["source_group"] for r in everything if r["split"] == "heldout"}
    if mixed:
        raise AssertionError(f"source groups in both splits: {sorted(mixed)[:5]}")


def build(mirror: Path, out: Path, data_dir: Path = DATA_DIR, seed: int = 0,
          sets: tuple[PublicSet, ...] = SETS) -> dict:
    measurement = measurement_index(data_dir, paraphrase_dev_files())
    by_set: dict[str, list[dict]] = {}
    dropped: dict[str, dict] = {}
    for public in sets:
        by_set[public.name], dropped[public.name] = convert(public, reader(mirror, public.repo, public.commit),
                                                            measurement)
    split(by_set, sets, seed)
    report: dict = {"seed": seed, "sets": {}}
    for public in sets:
        for dataset in sorted({r["dataset"] for r in by_set[public.name]}):
            rows = sorted((r for r in by_set[public.name] if r["dataset"] == dataset), key=lambda r: r["id"])
            for part in ("train", "heldout"):
                chosen = [r for r in rows if r["split"] == part]
                if chosen:
                    write_xz(chosen, out / f"{dataset}_{part}.jsonl.xz")
            report["sets"][dataset] = {
                "repo": public.repo, "commit": public.commit, "licence": public.licence,
                "trainable": public.trainable, "licence_note": public.licence_note,
                "dropped": dropped[public.name], **describe(rows)}
    (out / "stats.json").write_text(json.dumps(report, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--mirror", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR, help="../shared/data (its measurement files)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    report = build(args.mirror, args.out, args.data_dir, args.seed)
    print(json.dumps(report, ensure_ascii=False, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
