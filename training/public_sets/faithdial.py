"""FaithDial's data audit (McGill-NLP/FaithDial, data-audit/): replies of GPT-2, DoHA and CTRL and the
human (gold) replies of Wizard of Wikipedia, CMU-DoG and TopicalChat, labelled by annotators in the
BEGIN taxonomy against the knowledge the reply should rest on.

Label (the ``begin_label`` / ``BEGIN`` column, lowercased; typos such as "entailmentt" and
"hallucinated" read as meant): any "hallucination" (alone, "entailment,hallucination", "Partial
Hallucination") -> 1; "entailment", "entailment,uncooperative" and "uncooperative" (entailed by the
knowledge, but not following the conversation) -> 0; "generic" (states nothing checkable) is left
out, as in BEGIN; rows without a label (792 of the gold TopicalChat file) are left out. Spans: none.
Question: the previous turn (``history``; empty or "[]" -> none); context: the knowledge.
"""

from __future__ import annotations

import csv
import io

from training.public_sets.common import Conversion, PublicSet, make_record, source_key

# file -> (the reply's author, the dialogue corpus)
FILES = {
    "data-audit/CTRL/ctrl_processed_cmu.csv": ("ctrl", "cmu"),
    "data-audit/CTRL/ctrl_processed_topicalchat.csv": ("ctrl", "topicalchat"),
    "data-audit/CTRL/ctrl_processed_wow.csv": ("ctrl", "wow"),
    "data-audit/DoHA/doha_processed_cmu.csv": ("doha", "cmu"),
    "data-audit/DoHA/doha_processed_topical.csv": ("doha", "topicalchat"),
    "data-audit/DoHA/doha_processed_wow.csv": ("doha", "wow"),
    "data-audit/GPT2/gpt2_processed_cmu.csv": ("gpt2", "cmu"),
    "data-audit/GPT2/gpt2_processed_topical.csv": ("gpt2", "topicalchat"),
    "data-audit/GPT2/gpt2_processed_wow.csv": ("gpt2", "wow"),
    "data-audit/gold/cmu.csv": ("human", "cmu"),
    "data-audit/gold/topical.csv": ("human", "topicalchat"),
    "data-audit/gold/wow.csv": ("human", "wow"),
}


def label_of(original: str) -> int | None:
    """1 hallucinated, 0 faithful, None for generic; raises on a label this mapping does not know."""
    text = original.strip().lower()
    if "hallucinat" in text:
        return 1
    if text == "generic":
        return None
    if {part.strip() for part in text.replace(".", ",").split(",")} <= {"entailment", "entailmentt", "uncooperative"}:
        return 0
    raise ValueError(f"unknown FaithDial label {original!r}")


def convert(read) -> Conversion:
    records, excluded = [], {"generic": 0, "unlabelled": 0}
    for path, (author, domain) in FILES.items():
        rows = list(csv.reader(io.StringIO(read(path))))
        for index, (knowledge, history, reply, original, _vrm) in enumerate(rows[1:]):
            if not original.strip():
                excluded["unlabelled"] += 1
                continue
            label = label_of(original)
            if label is None:
                excluded["generic"] += 1
                continue
            history = history.strip()
            records.append(make_record(
                id=f"faithdial-{author}-{domain}-{index}", task="dialogue",
                question=None if history in ("", "[]") else history, contexts=[knowledge.strip()],
                answer=reply.strip(), label=label, spans=[], dataset="faithdial", source_id=source_key(knowledge),
                meta={"original_label": original, "domain": domain, "model": author}))
    return Conversion(records, excluded)


SET = PublicSet(
    name="faithdial", repo="McGill-NLP/FaithDial", commit="25671c6e3aa7d667943b7744a2b91507e7187f83",
    licence="MIT (LICENSE, Copyright (c) 2022 Nouha Dziri; README: 'This work is licensed under the MIT license')",
    trainable=True,
    licence_note="The repository's licence covers the audit; the histories and knowledge come from Wizard of "
                 "Wikipedia (CC BY 4.0), CMU-DoG and Topical-Chat (CDLA-Sharing-1.0), as BEGIN's NOTICE files say.",
    convert=convert, stratum=lambda r: r["meta"]["domain"])
