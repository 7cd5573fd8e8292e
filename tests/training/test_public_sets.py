"""The public-set converters (training/public_sets): each source's real file shape, on a few inline
rows, mapped to the record shape of ../shared/data with the documented labels and exact spans; the
split by source group is deterministic and keeps a group on one side; leaks are dropped."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from training.public_sets import begin, build, common, faithdial, lfqa, qags, sample, summedits, wice  # noqa: E402
from training.xe.jsonxz import read_xz  # noqa: E402

DOC = ("The council approved the new tram line on Monday after a long debate. Construction starts in March "
       "and should take two years. The line will cost 40 million euros, paid by the city and the region.")


def reader(files: dict[str, str]):
    return lambda path: files[path]


def assert_shape(record: dict) -> None:
    assert set(record) == {"id", "task", "language", "question", "contexts", "answer", "label", "spans", "dataset",
                           "split", "meta"}
    assert record["language"] == "en" and record["task"] in common.TASKS and record["label"] in (0, 1)
    for s in record["spans"]:
        assert record["answer"][s["start"]:s["end"]] == s["text"]
    assert record["label"] == 1 or not record["spans"]


# ------------------------------------------------------------------------------------------ converters


def test_summedits_inverts_the_consistency_label_and_keeps_the_edit_as_a_hint():
    seed = "The council approved a tram line that will cost 40 million euros."
    rows = [
        {"id": "n1_og", "doc": DOC, "summary": seed, "label": 1, "original_summary": seed, "edit_types": [],
         "split": "evaluation"},
        {"id": "n1_0", "doc": DOC, "summary": "The council backed a tram line that will cost 40 million euros.",
         "label": 1, "original_summary": seed, "edit_types": [], "split": "test"},
        {"id": "n1_1", "doc": DOC, "summary": "The council rejected a tram line that will cost 90 million euros.",
         "label": 0, "original_summary": seed, "edit_types": ["antonym_swap", "entity_modification"],
         "split": "test"},
    ]
    files = {f"data/summedits/summedits_{d}.json": "[]" for d in summedits.DOMAINS}
    files["data/summedits/summedits_news.json"] = json.dumps(rows)
    records = summedits.convert(reader(files)).records
    assert [r["label"] for r in records] == [0, 0, 1]
    for r in records:
        assert_shape(r)
        assert r["task"] == "summary" and r["contexts"] == [DOC] and r["spans"] == [] and r["question"] is None
    assert len({r["meta"]["source_id"] for r in records}) == 1
    assert records[0]["meta"]["seed_summary"] and records[0]["meta"]["edited"] == []
    assert [e["text"] for e in records[1]["meta"]["edited"]] == ["backed"]
    edited = records[2]["meta"]["edited"]
    assert [(e["text"], e["removed"]) for e in edited] == [("rejected", "approved"), ("90", "40")]
    assert all(records[2]["answer"][e["start"]:e["end"]] == e["text"] for e in edited)


def test_summedits_word_diff_marks_a_deletion_as_an_empty_range():
    [change] = summedits.word_diff("Prices will not rise next year.", "Prices will rise next year.")
    assert (change["start"], change["end"], change["text"], change["removed"]) == (12, 12, "", "not")


BEGIN_TSV = (
    "model_name\tdata_source\tknowledge\tmessage\tresponse\tbegin_label\n"
    "t5\twow\tcrayola soon shifted its focus to art products for home and school use.\tstrange name.\t"
    "crayola shifted its focus to art products\tFully attributable\n"
    "gpt2\twow\tcrayola soon shifted its focus to art products for home and school use.\tstrange name.\t"
    "crayola was founded in paris in 1950\tNot fully attributable\n"
    "ctrl\twow\tcrayola soon shifted its focus to art products for home and school use.\tstrange name.\t"
    "that's cool\tGeneric\n"
)


def test_begin_maps_attribution_and_leaves_generic_replies_out():
    header = BEGIN_TSV.splitlines(keepends=True)[0]
    files = {path: header for path in begin.FILES}
    files["wow/begin_test_wow.tsv"] = BEGIN_TSV
    conversion = begin.convert(reader(files))
    assert conversion.excluded == {"generic": 1}
    first, second = conversion.records
    assert (first["label"], second["label"]) == (0, 1)
    assert first["question"] == "strange name." and first["task"] == "dialogue"
    assert first["meta"]["source_id"] == second["meta"]["source_id"]
    assert first["meta"]["licence"] == "CC BY 4.0" and first["id"] == "begin-wow-test-0"
    for r in conversion.records:
        assert_shape(r)


def _csv(rows: list[list[str]]) -> str:
    import csv
    import io

    out = io.StringIO()
    csv.writer(out).writerows(rows)
    return out.getvalue()


def test_faithdial_reads_the_begin_taxonomy_with_its_typos():
    knowledge = "Blue is one of the three primary colours of pigments in painting."
    model = _csv([["knowledge", "history", "ctrl", "begin_label", "vrm_label"],
                  [knowledge, "", "Blue is a primary colour.", "entailment", "edification"],
                  [knowledge, "[]", "Blue was discovered in 1802.", "entailment,hallucination", "edification"],
                  [knowledge, "do you like blue?", "I do!", "generic", "ack."],
                  [knowledge, "do you like blue?", "Blue is a primary colour, yes.", "entailmentt,uncooperative", "ack."],
                  [knowledge, "do you like blue?", "Blue is nice.", "entailment. uncooperative", "ack."]])
    gold = _csv([["evidence", "history", "response", "BEGIN", "VRM"],
                 [knowledge, "what else?", "Painters mix blue with red.", "Partial Hallucination", "Edification"],
                 [knowledge, "what else?", "unlabelled reply", "", ""]])
    files = {path: _csv([["k", "h", "r", "b", "v"]]) for path in faithdial.FILES}
    files["data-audit/CTRL/ctrl_processed_wow.csv"] = model
    files["data-audit/gold/wow.csv"] = gold
    conversion = faithdial.convert(reader(files))
    assert conversion.excluded == {"generic": 1, "unlabelled": 1}
    labels = [(r["answer"], r["label"], r["meta"]["model"]) for r in conversion.records]
    assert labels == [("Blue is a primary colour.", 0, "ctrl"), ("Blue was discovered in 1802.", 1, "ctrl"),
                      ("Blue is a primary colour, yes.", 0, "ctrl"), ("Blue is nice.", 0, "ctrl"),
                      ("Painters mix blue with red.", 1, "human")]
    assert [r["question"] for r in conversion.records[:2]] == [None, None]
    for r in conversion.records:
        assert_shape(r)
    with pytest.raises(ValueError, match="unknown FaithDial label"):
        faithdial.label_of("contradiction")


def _wice_row(id: str, claim: str, label: str, **extra) -> str:
    row = {"label": label, "supporting_sentences": [[0]], "claim": claim,
           "evidence": ["(meta data) TITLE: Irene Hervey - Hollywood Star Walk", "July 11, 1909",
                        "Irene Hervey appeared in more than twenty films."],
           "meta": {"id": id, "claim_title": "Irene Hervey", "claim_section": "Abstract.", "claim_context": " "},
           **extra}
    return json.dumps(row) + "\n"


def test_wice_maps_claims_and_turns_non_supported_tokens_into_spans():
    claim = "Irene Hervey appeared in over fifty films and numerous television series."
    tokens = ["Irene", "Hervey", "appeared", "in", "over", "fifty", "films", "and", "numerous", "television",
              "series", "."]
    flags = [False, False, False, False, True, True, False, False, True, True, True, False]
    files = {
        "data/entailment_retrieval/claim/dev.jsonl": _wice_row("dev1", claim, "partially_supported"),
        "data/entailment_retrieval/claim/test.jsonl": _wice_row("test2", "Irene Hervey was born in 1909.",
                                                                "supported"),
        "data/non_supported_tokens/train.jsonl": "",
        "data/non_supported_tokens/dev.jsonl": _wice_row("dev1-0", claim, "partially_supported", claim_tokens=tokens,
                                                         non_supported_spans=flags),
        "data/non_supported_tokens/test.jsonl": "",
    }
    records = wice.convert(reader(files)).records
    assert [(r["dataset"], r["label"]) for r in records] == [("wice", 1), ("wice", 0), ("wice_tokens", 1)]
    assert [s["text"] for s in records[2]["spans"]] == ["over fifty", "numerous television series"]
    assert records[2]["spans"][0]["start"] == claim.index("over fifty")
    assert records[0]["contexts"][0].splitlines()[2] == "Irene Hervey appeared in more than twenty films."
    assert len({r["meta"]["source_id"] for r in records}) == 1  # one Wikipedia article: split together
    assert records[0]["meta"]["claim_context"] == ""
    for r in records:
        assert_shape(r)
    with pytest.raises(ValueError, match="not found"):
        wice.token_spans("Irene Hervey acted.", ["Irene", "Harvey", "acted", "."], [False, True, False, False])


def test_lfqa_sentence_majority_counts_partial_support_as_unsupported():
    docs = [{"question_id": 7, "question": "Why is the sky blue?",
             "docs": [{"doc_id": "webgpt:1", "title": "Rayleigh scattering (wiki)",
                       "text": "Blue light is scattered more than red light."}]}]
    annotated = [{"question_id": 7, "question": "Why is the sky blue?",
                  "answers": ["Blue light scatters more.", "It was discovered in 1871.", "Red scatters less.</s>"],
                  "annotations": [
                      {"labels": ["supported", "supported", "partially"], "answer": "Blue light scatters more."},
                      {"labels": ["partially", "not_supported", "supported"], "answer": "It was discovered in 1871."},
                      {"labels": ["supported", "supported", "supported"], "answer": "Red scatters less.</s>"}]}]
    files = {f"data/annotations/annotations-{s}.json": "[]" for s in lfqa.SETTINGS}
    files["data/annotations/annotations-gpt3.json"] = json.dumps(annotated)
    files[lfqa.DOCUMENTS] = json.dumps(docs)
    [record] = lfqa.convert(reader(files)).records
    assert_shape(record)
    assert record["answer"] == "Blue light scatters more. It was discovered in 1871. Red scatters less."
    assert record["label"] == 1 and [s["text"] for s in record["spans"]] == ["It was discovered in 1871."]
    assert record["spans"][0]["start"] == 26
    assert record["contexts"] == ["Rayleigh scattering (wiki)\nBlue light is scattered more than red light."]
    assert record["question"] == "Why is the sky blue?" and record["meta"]["domain"] == "gpt3"


def test_qags_majority_of_workers_and_mojibake_repair():
    def sentence(text, answers):
        return {"sentence": text, "responses": [{"worker_id": i, "response": a} for i, a in enumerate(answers)]}

    row = {"article": "It is understood the cash taken was in the region of \u00e2\u00a350,000. No-one was hurt.",
           "summary_sentences": [sentence("Cash of \u00e2\u00a350,000 was taken.", ["yes", "yes", "no"]),
                                 sentence("Two guards were hurt.", ["no", "no", "yes"])]}
    files = {"data/mturk_cnndm.jsonl": json.dumps(row) + "\n", "data/mturk_xsum.jsonl": ""}
    [record] = qags.convert(reader(files)).records
    assert_shape(record)
    assert "£50,000" in record["contexts"][0] and record["answer"] == "Cash of £50,000 was taken. Two guards were hurt."
    assert record["label"] == 1 and [s["text"] for s in record["spans"]] == ["Two guards were hurt."]
    assert qags.repair("caf\u00c3\u00a9 \u00e2\u0082\u00ac") == "café €" and qags.repair("naïve") == "naïve"


def test_make_record_rejects_a_span_that_does_not_select_its_text():
    with pytest.raises(common.SpanMismatch):
        common.make_record(id="x", task="claim", question=None, contexts=["c"], answer="abc", label=1,
                           spans=[{"start": 0, "end": 2, "text": "bc", "type": "t"}], dataset="d", source_id="s",
                           meta={})


# ---------------------------------------------------------------------------------- split and leaks


def _records(count: int) -> list[dict]:
    out = []
    for i in range(count):
        source = f"Document number {i} tells the long story of the town of Example and its bridges."
        for j in range(3):
            out.append(common.make_record(id=f"r{i}-{j}", task="summary", question=None, contexts=[source],
                                          answer=f"Answer {j}.", label=j % 2, spans=[], dataset="d",
                                          source_id=f"s{i}", meta={"domain": "ab"[i % 2]}))
    return out


def _grouped(records: list[dict]) -> list[dict]:
    groups = common.source_groups(records)
    for r in records:
        r["meta"]["source_group"] = groups[r["meta"]["source_id"]]
    return records


def test_split_is_deterministic_by_group_and_independent_of_order():
    records = _grouped(_records(50))
    held = common.held_out_groups(records, seed=3, min_records=0, stratum=lambda r: r["meta"]["domain"])
    shuffled = records[:]
    random.Random(1).shuffle(shuffled)
    assert common.held_out_groups(shuffled, seed=3, min_records=0, stratum=lambda r: r["meta"]["domain"]) == held
    assert len(held) == 10  # 20% of 25 per stratum, twice
    assert common.held_out_groups(records, seed=4, min_records=0) != held
    # the record floor: more groups until 45 records are held out, but never more than 35% of the groups
    assert len(common.held_out_groups(records, seed=3, min_records=45)) == 15
    assert len(common.held_out_groups(records, seed=3, min_records=1000)) == 17
    common.assign_split(records, held)
    for group in {r["meta"]["source_group"] for r in records}:
        assert len({r["split"] for r in records if r["meta"]["source_group"] == group}) == 1


def test_a_group_placed_by_one_set_stays_there_in_the_next():
    records = _grouped(_records(20))
    decided = {"s0": True, "s1": False}
    held = common.held_out_groups(records, decided=decided, seed=0, min_records=0)
    assert "s0" in held and "s1" not in held and decided["s5"] == ("s5" in held)


def test_sources_sharing_a_long_sentence_form_one_group_but_boilerplate_links_nothing():
    shared = "The museum of bridges opened its doors to the public in the spring of 1998."
    furniture = "Sign up for our newsletter to receive the best stories of the week by email."
    rows = [common.make_record(id=f"r{i}", task="claim", question=None, contexts=[text, furniture], answer="A.",
                               label=0, spans=[], dataset="d", source_id=f"s{i}", meta={})
            for i, text in enumerate([f"Intro one. {shared}", f"{shared} Other text.", "Unrelated page text."])]
    assert common.source_groups(rows, boilerplate=2) == {"s0": "s0", "s1": "s0", "s2": "s2"}
    assert common.source_groups(rows, boilerplate=3) == {"s0": "s0", "s1": "s0", "s2": "s0"}


def test_measurement_leaks_are_dropped(tmp_path):
    leaked = "The ferry to the island leaves every forty minutes from the northern pier."
    for name in build.MEASUREMENT_FILES:
        row = {"contexts": [f"Some context. {leaked}"] if "ragtruth" in name else ["other"], "answer": "short"}
        (tmp_path / name).write_text(json.dumps(row) + "\n", encoding="utf-8")
    index = build.measurement_index(tmp_path)
    rows = _records(2)
    rows[1]["contexts"] = [f"A new page.\n{leaked}"]
    kept, dropped = common.drop_sharing(rows, index)
    assert dropped == 1 and [r["id"] for r in kept] == ["r0-0", "r0-2", "r1-0", "r1-1", "r1-2"]
    # a short shared text ("short") is commonplace, not a leak
    rows[0]["answer"] = "short"
    assert common.drop_sharing(rows[:1], index)[1] == 0


def test_duplicates_kept_once_and_conflicting_ones_dropped():
    rows = _records(1)
    twin = dict(rows[0], id="twin")
    conflicting = dict(rows[1], id="conflict", label=1 - rows[1]["label"])
    kept, repeats, conflicts = common.drop_duplicates([*rows, twin, conflicting])
    assert [r["id"] for r in kept] == ["r0-0", "r0-2"] and (repeats, conflicts) == (1, 2)


def test_sample_is_fixed_and_order_free():
    rows = [{"id": f"x{i}", "label": i % 2} for i in range(50)]
    first = sample.sample(rows, 10)
    assert len(first) == 10 and sample.sample(rows[::-1], 10) == first[::-1]
    assert sample.sample(rows, 60) == rows


# ------------------------------------------------------------------------------------ the whole build


def _git_repo(path: Path, files: dict[str, str]) -> str:
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text, encoding="utf-8")
    git = ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "data"], check=True)
    return subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()


def test_build_writes_split_files_and_stats_from_a_pinned_commit(tmp_path):
    for name in build.MEASUREMENT_FILES:
        (tmp_path / name).write_text(json.dumps({"contexts": ["x"], "answer": "y"}) + "\n", encoding="utf-8")
    rows = [{"article": f"Article {i} says the bridge number {i} was opened to traffic in the year 19{i:02d}.",
             "summary_sentences": [{"sentence": f"Bridge {i} opened.", "responses": [
                 {"worker_id": 0, "response": "yes" if i % 3 else "no"}]}]} for i in range(30)]
    commit = _git_repo(tmp_path / "mirror" / "qags", {"data/mturk_cnndm.jsonl": "".join(json.dumps(r) + "\n" for r in rows),
                                                     "data/mturk_xsum.jsonl": ""})
    as_trainable = common.PublicSet(name="qags", repo="someone/qags", commit=commit, licence="test", trainable=True,
                                    licence_note="", convert=qags.convert)
    out = tmp_path / "out"
    report = build.build(tmp_path / "mirror", out, data_dir=tmp_path, seed=0, sets=(as_trainable,))
    train, heldout = read_xz(out / "qags_train.jsonl.xz"), read_xz(out / "qags_heldout.jsonl.xz")
    assert len(train) + len(heldout) == 30 and len(heldout) == 10  # 20% of 30 is 6 articles; 10 reached the cap
    assert {r["split"] for r in train} == {"train"} and {r["split"] for r in heldout} == {"heldout"}
    assert not {r["meta"]["source_group"] for r in train} & {r["meta"]["source_group"] for r in heldout}
    stats = report["sets"]["qags"]
    assert (stats["rows"], stats["heldout"], stats["hallucinated"]) == (30, 10, 10)
    assert json.loads((out / "stats.json").read_text())["sets"]["qags"]["commit"] == commit
    again = build.build(tmp_path / "mirror", tmp_path / "again", data_dir=tmp_path, seed=0, sets=(as_trainable,))
    assert read_xz(tmp_path / "again" / "qags_heldout.jsonl.xz") == heldout and again == report
