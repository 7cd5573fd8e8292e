"""WiCE (ryokamoi/wice): sentences of Wikipedia (claims) with the web pages they cite, labelled
supported / partially_supported / not_supported by those pages, and for sub-claims (claims split
into simpler ones) the tokens the pages do not support.

Two record sets, split together by Wikipedia article (``claim_title``), so an article is held out in
both or in neither:
- ``wice``: the claims of data/entailment_retrieval/claim/{dev,test}.jsonl (the train file is over
  4 MiB and not in the snapshot). Label: supported -> 0, partially_supported and not_supported -> 1.
  Spans: none (tokens are annotated for sub-claims only, whose text is not the claim's).
- ``wice_tokens``: the sub-claims of data/non_supported_tokens/{train,dev,test}.jsonl, all
  partially_supported (label 1), with spans from runs of consecutive non-supported tokens, located
  in the sub-claim's text token by token.
Context: the cited pages' sentences, one per line ("\\n"-joined, so ``meta.supporting_sentences``
indexes its lines). Question: none; the Wikipedia sentences before the claim are in
``meta.claim_context``.
"""

from __future__ import annotations

import json

from training.public_sets.common import Conversion, PublicSet, make_record, span

LABELS = {"supported": 0, "partially_supported": 1, "not_supported": 1}


def token_spans(claim: str, tokens: list[str], flags: list[bool]) -> list[dict]:
    """One span per run of flagged tokens, each token found in ``claim`` after the previous one with
    only whitespace between them; raises ValueError when the tokens do not spell the claim."""
    offsets = []
    position = 0
    for token in tokens:
        start = claim.find(token, position)
        if start < 0 or claim[position:start].strip():
            raise ValueError(f"token {token!r} not found after offset {position} in {claim!r}")
        offsets.append((start, start + len(token)))
        position = start + len(token)
    spans = []
    run: list[tuple[int, int]] = []
    for (start, end), flag in [*zip(offsets, flags, strict=True), ((0, 0), False)]:
        if flag:
            run.append((start, end))
        elif run:
            spans.append(span(claim, run[0][0], run[-1][1], "unsupported_tokens"))
            run = []
    return spans


def _record(row: dict, dataset: str, label: int, spans: list[dict], part: str) -> dict:
    meta = row["meta"]
    return make_record(
        id=f"{dataset}-{meta['id']}", task="claim", question=None, contexts=["\n".join(row["evidence"])],
        answer=row["claim"], label=label, spans=spans, dataset=dataset, source_id=f"wikipedia:{meta['claim_title']}",
        meta={"original_label": row["label"], "domain": "wikipedia", "source_split": part,
              "claim_title": meta["claim_title"], "claim_section": meta.get("claim_section"),
              "claim_context": (meta.get("claim_context") or "").strip(),
              "supporting_sentences": row.get("supporting_sentences", [])})


def convert(read) -> Conversion:
    records = []
    for part in ("dev", "test"):
        for line in read(f"data/entailment_retrieval/claim/{part}.jsonl").splitlines():
            if line.strip():
                row = json.loads(line)
                records.append(_record(row, "wice", LABELS[row["label"]], [], part))
    for part in ("train", "dev", "test"):
        for line in read(f"data/non_supported_tokens/{part}.jsonl").splitlines():
            if line.strip():
                row = json.loads(line)
                spans = token_spans(row["claim"], row["claim_tokens"], row["non_supported_spans"])
                records.append(_record(row, "wice_tokens", 1, spans, part))
    return Conversion(records, {})


SET = PublicSet(
    name="wice", repo="ryokamoi/wice", commit="ddeb6c183665e2a20c5f03c5aa07f03888b9870f",
    licence="annotations ODC-BY 1.0; text from Wikipedia (CC BY-SA) and Common Crawl pages (Common Crawl terms "
            "of use) (LICENSE.md)",
    trainable=True,
    licence_note="ODC-BY allows any use with attribution; the claims are Wikipedia sentences (CC BY-SA: "
                 "attribute, share alike) and the evidence is web pages archived by Common Crawl, whose terms "
                 "bind users of the dataset: name all three in a model card.",
    convert=convert)
