"""Training reads records as the metric does (training/xe --reading all | select | auto): the windows
an example is featurized with are the windows `grounding` scores for the same record, under every
reading; `run.py tokenize` writes them and the reading; the default is what the metric ships."""

from __future__ import annotations

import inspect
import pickle
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "training"))

from xe import run, train as xe_train  # noqa: E402
from xe.jsonxz import write_xz  # noqa: E402

from groundtrace import Record  # noqa: E402
from groundtrace.detector import reading  # noqa: E402
from groundtrace.detector.crossencoder import CrossEncoder, shared_crossencoder  # noqa: E402
from groundtrace.detector.windows import Window  # noqa: E402
from groundtrace.metrics.grounding import GroundingMetric  # noqa: E402

PILE = [f"Branch {i} of the library on street {i} opens at {i % 9 + 8} am and lends {i + 2} books per reader."
        for i in range(100)]
SHORT = {"id": "short", "language": "en", "question": "When does the museum open?", "label": 0, "spans": [],
         "contexts": ["The museum opens at 9 am.", "   ", "Tickets cost 12 euros."],
         "answer": "The museum opens at 9 am and tickets cost 12 euros."}
LONG = {"id": "pile", "language": "en", "question": "When does branch 7 open?", "label": 1, "spans": [[35, 60]],
        "contexts": PILE, "answer": "Branch 7 of the library opens at 3 pm and lends 9 books per reader."}


class Recording(CrossEncoder):
    """The shipped model, keeping the windows each call of the metric scored."""

    def __init__(self) -> None:
        super().__init__()
        self.read: list[list[Window]] = []

    def window_probabilities(self, windows):
        self.read.append(list(windows))
        return super().window_probabilities(windows)


def _same(a: list[Window], b: list[Window]) -> bool:
    return len(a) == len(b) and all(
        np.array_equal(x.ids, y.ids) and x.answer_offset == y.answer_offset
        and np.array_equal(x.answer_tokens, y.answer_tokens) for x, y in zip(a, b, strict=True))


@pytest.fixture(scope="module")
def tokenizer():
    return shared_crossencoder().tokenizer


@pytest.mark.parametrize("evidence", ["all", "select", "auto"])
@pytest.mark.parametrize("example", [SHORT, LONG], ids=["short", "pile"])
def test_featurize_reads_what_the_metric_reads(tokenizer, evidence, example):
    model = Recording()
    metric = GroundingMetric(model=model, evidence=evidence)
    metric.score(Record(question=example["question"], contexts=example["contexts"], answer=example["answer"],
                        language="en"))
    assert len(model.read) == 1
    item = xe_train.featurize(tokenizer, example, evidence)
    assert _same(item.windows, model.read[0])
    record = xe_train.featurize_record(tokenizer, example, evidence)
    assert _same(record.windows, model.read[0])


def test_the_readings_differ_where_they_should(tokenizer):
    full = xe_train.featurize(tokenizer, LONG, "all")
    selected = xe_train.featurize(tokenizer, LONG, "select")
    auto = xe_train.featurize(tokenizer, LONG, "auto")
    assert len(full.windows) > 4  # the pile needs many windows read in full
    assert len(selected.windows) == 1 and _same(auto.windows, selected.windows)  # auto selects beyond 2 a chunk
    short = xe_train.featurize(tokenizer, SHORT, "auto")
    assert _same(short.windows, xe_train.featurize(tokenizer, SHORT, "all").windows)  # cheap: read in full
    # the blank context is dropped as the metric drops it: one separator between the two others
    text_ids = short.windows[0].ids[:short.windows[0].answer_offset]
    joined = tokenizer.encode("The museum opens at 9 am.\nTickets cost 12 euros.").ids
    assert np.array_equal(text_ids[-(len(joined) + 2):-2], joined)
    with pytest.raises(ValueError, match="reading must be one of"):
        xe_train.featurize(tokenizer, SHORT, "everything")


def test_the_default_reading_is_what_the_metric_ships():
    shipped = inspect.signature(GroundingMetric.__init__).parameters["evidence"].default
    assert run.DEFAULT_READING == reading.DEFAULT_EVIDENCE == shipped
    assert xe_train.READINGS == reading.MODES


def test_tokenize_writes_the_metric_windows_and_the_reading(tmp_path, tokenizer):
    tok = tmp_path / "tok"
    tok.mkdir()
    detector = ROOT / "src" / "groundtrace" / "detector"
    (tok / "tokenizer.model").write_bytes((detector / "grounding-xe.spm").read_bytes())
    (tok / "normalizer.json").write_bytes((detector / "grounding-xe-normalizer.json").read_bytes())
    write_xz([{**LONG, "source": "toy"}, {**SHORT, "source": "toy"}], tmp_path / "examples" / "base.jsonl.xz")
    write_xz([{**SHORT, "source": "ragtruth", "fold": 2}], tmp_path / "examples" / "ragtruth.jsonl.xz")
    write_xz([{**LONG, "claims": [[0, len(LONG["answer"])]], "meta": {"source_group": "g7"}}],
             tmp_path / "eval" / "toy.jsonl.xz")
    run.tokenize(tmp_path, 1, "select", "items_select.pkl")
    with open(tmp_path / "items_select.pkl", "rb") as f:
        items = pickle.load(f)
    assert items["_reading"] == "select"
    assert _same(items["base"][1][0].windows, xe_train.featurize(tokenizer, LONG, "select").windows)
    meta, (eval_item, claim_of, *_rest) = items["eval/toy"][0][0], items["eval/toy"][1][0]
    assert meta["group"] == "g7" and items["ragtruth"][0][0]["fold"] == 2
    assert _same(eval_item.windows, xe_train.featurize(tokenizer, LONG, "select").windows)
    assert (claim_of >= 0).any()
