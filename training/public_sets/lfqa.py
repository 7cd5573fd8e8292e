"""LFQA-Verification (timchen0618/LFQA-Verification): long answers to ELI5 questions by WebGPT, GPT-3
and Alpaca (with the WebGPT documents, with human-picked documents, or with none in the prompt),
each sentence judged by three annotators against the WebGPT documents of its question (the
documents the repository's own evaluation, src/Automatic/input_file.json, pairs with every setting).

Label: an annotator's vote counts against a sentence when it is "not_supported" or "partially"
(partly unsupported content is unsupported content); a sentence is unsupported when most of its
three votes are; the answer is 1 when any sentence is. Spans: the unsupported sentences. The answer
is the annotated sentences joined by single spaces (Alpaca's end-of-text marker "</s>" removed).
Contexts: each WebGPT document as "title\\ntext". Question: the ELI5 question.
"""

from __future__ import annotations

import json

from training.public_sets.common import Conversion, PublicSet, join_sentences, make_record

SETTINGS = ("alpaca", "alpaca_wdoc", "gpt3", "gpt3_wdoc", "gpt3_whudoc", "webgpt")
DOCUMENTS = "data/docs/docs-webgpt.json"
AGAINST = frozenset({"not_supported", "partially"})


def convert(read) -> Conversion:
    documents = {q["question_id"]: [f"{d['title']}\n{d['text']}".strip() for d in q["docs"]]
                 for q in json.loads(read(DOCUMENTS))}
    records = []
    for setting in SETTINGS:
        for row in json.loads(read(f"data/annotations/annotations-{setting}.json")):
            votes = [a["labels"] for a in row["annotations"]]
            unknown = {v for vs in votes for v in vs} - AGAINST - {"supported"}
            if unknown:
                raise ValueError(f"unknown LFQA-Verification labels {sorted(unknown)}")
            sentences = [a["answer"].replace("</s>", "").strip() for a in row["annotations"]]
            unsupported = [sum(v in AGAINST for v in vs) * 2 > len(vs) for vs in votes]
            kept = [(s, u) for s, u in zip(sentences, unsupported, strict=True) if s]
            answer, spans = join_sentences([s for s, _ in kept], [u for _, u in kept], "unsupported_sentence")
            qid = row["question_id"]
            records.append(make_record(
                id=f"lfqa-{setting}-{qid}", task="long_answer", question=row["question"].strip(),
                contexts=documents[qid], answer=answer, label=int(bool(spans)), spans=spans, dataset="lfqa",
                source_id=f"eli5-{qid}", meta={"original_label": votes, "domain": setting}))
    return Conversion(records, {})


SET = PublicSet(
    name="lfqa", repo="timchen0618/LFQA-Verification", commit="4e905be93fbe919082d62faa77ee32c68e90237c",
    licence="none stated: the repository has no licence file and its README names none", trainable=False,
    licence_note="Without a licence the annotations are not ours to train on; the documents are web pages "
                 "(WebGPT's retrievals): measurement only, every record held out.",
    convert=convert)
