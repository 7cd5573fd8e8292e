"""`fit --labels` and `bench --labels`: records joined by id with a review labels file give exactly the
figures of the same records in a labelled file; what was skipped or never labelled is left out and counted."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from groundtrace.cli import app
from groundtrace.io.labelled import labelled_from_file
from groundtrace.io.labels import append, decide

RAGTRUTH = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "ragtruth_qa_dev.jsonl"
runner = CliRunner()


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """110 RAGTruth answers without labels; a review labels file deciding 100 of them (5 skipped, 3 changed
    once, one id not among the records) and leaving 10 undecided; the labelled file those decisions make."""
    folder = tmp_path_factory.mktemp("review-labels")
    rows = [json.loads(line) for line in RAGTRUTH.read_text(encoding="utf-8").splitlines()[:110]]
    records = write_jsonl(folder / "records.jsonl", [{k: v for k, v in row.items() if k != "label"} for row in rows])
    labels = folder / "labels.jsonl"
    kept = []
    for i, row in enumerate(rows[:100]):
        truth = "unsupported" if row["label"] == 1 else "supported"
        if i in (3, 17, 40):  # a first decision, changed: the last one counts
            append(labels, decide(row["id"], "supported" if truth == "unsupported" else "unsupported"))
        if i % 20 == 7:
            append(labels, decide(row["id"], "skip", note="not sure"))
            continue
        append(labels, decide(row["id"], truth, reviewer="ana"))
        kept.append(row)
    append(labels, decide("ragtruth:not-here", "unsupported"))
    labelled = write_jsonl(folder / "labelled.jsonl", kept)
    return {"folder": folder, "records": records, "labels": labels, "labelled": labelled, "kept": kept}


def test_the_join_keeps_the_decided_records_in_order_and_counts_the_rest(files):
    items, count = labelled_from_file(files["records"], files["labels"])
    assert [(i.raw["id"], i.label) for i in items] == [(r["id"], r["label"]) for r in files["kept"]]
    assert count.as_dict() == {"origin": "labels.jsonl", "records": 110, "labelled": 95,
                               "unsupported": sum(r["label"] for r in files["kept"]), "skipped": 5,
                               "undecided": 10, "strays": 1}
    assert count.line() == (f"labels from labels.jsonl: 95 of 110 records labelled ({count.unsupported} unsupported); "
                            "5 skipped and 10 without a label left out; 1 labels name records not read here")


def fit_json(*args: str) -> tuple[dict, str]:
    result = runner.invoke(app, ["fit", *args, "-m", "lexical", "--json"])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    printed.pop("file")
    return printed, result.stderr


def test_fit_on_the_review_labels_gives_the_labelled_files_figures(files):
    folder = files["folder"]
    from_review, said = fit_json(str(files["records"]), "--labels", str(files["labels"]), "-o", str(folder / "a.json"))
    from_file, _ = fit_json(str(files["labelled"]), "-o", str(folder / "b.json"))
    assert from_review == from_file
    assert from_review["combined"]["auc"] is not None and from_review["learning_curve"][-1]["labels"] == 95
    assert "labels from labels.jsonl: 95 of 110 records labelled" in " ".join(said.split())
    a, b = (json.loads((folder / name).read_text()) for name in ("a.json", "b.json"))
    assert a["threshold"] == b["threshold"] and a["model"] == b["model"]
    assert a["fitted"]["trained_on"][0]["sha256"] == b["fitted"]["trained_on"][0]["sha256"]  # the same records


def test_bench_on_the_review_labels_gives_the_labelled_files_figures(files):
    def bench(*args: str) -> dict:
        result = runner.invoke(app, ["bench", *args, "-m", "lexical", "--json", "--by", "language"])
        assert result.exit_code == 0, result.output
        figures = json.loads(result.stdout)["lexical"]
        for timing in ("records_per_s", "latency_ms"):
            figures.pop(timing)
        for group in figures["groups"].values():
            group.pop("records_per_s")
        return figures

    from_review = bench(str(files["records"]), "--labels", str(files["labels"]))
    assert from_review == bench(str(files["labelled"]))
    assert (from_review["n"], from_review["positives"]) == (95, sum(r["label"] for r in files["kept"]))


def test_a_missing_labels_file_and_records_without_ids_say_so(files, tmp_path):
    missing = runner.invoke(app, ["fit", str(files["records"]), "--labels", str(tmp_path / "nope.jsonl")])
    assert missing.exit_code == 2
    assert "labels file" in missing.output and "does not exist (`groundtrace review` writes one" in " ".join(missing.output.split())
    no_ids = write_jsonl(tmp_path / "no-ids.jsonl", [{"question": "q", "contexts": ["c"], "answer": "a"}] * 3)
    result = runner.invoke(app, ["bench", str(no_ids), "--labels", str(files["labels"]), "-m", "lexical"])
    assert result.exit_code == 2 and "have no id: labels are joined by record id" in " ".join(result.output.split())
    unlabelled = runner.invoke(app, ["bench", str(files["records"]), "-m", "lexical"])
    assert unlabelled.exit_code == 2 and "or give the labels apart: --labels FILE" in " ".join(unlabelled.output.split())
    platform_only = runner.invoke(app, ["fit", str(files["records"]), "--label-name", "correctness"])
    assert platform_only.exit_code == 2 and "--label-name reads a platform's labels: it goes with --from" in " ".join(platform_only.output.split())
