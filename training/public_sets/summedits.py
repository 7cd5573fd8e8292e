"""SummEdits (salesforce/factualNLG, data/summedits/): seed summaries of documents in 8 domains and
edits of them that annotators marked consistent or inconsistent with the document.

Label: SummEdits' ``label`` is 1 for a consistent summary (every seed summary, ``*_og``, is 1) and 0
for an inconsistent one, so ours is ``1 - label``. Spans: none. The annotators labelled whole
summaries; the words an edit changed (``meta.edited``, a word diff against the seed summary) hold the
error of an inconsistent edit but also its faithful rewordings, so they are kept as a hint, not as
spans.
"""

from __future__ import annotations

import difflib
import json
import re

from training.public_sets.common import Conversion, PublicSet, make_record, source_key

DOMAINS = ("ectsum", "news", "podcast", "qmsumm", "sales_call", "sales_email", "samsum", "scitldr")
# billsum and shakespeare are the two other domains of the paper; their files are over 4 MiB and not in
# the snapshot (the 4,681 summaries are these 8 domains).


def word_diff(seed: str, summary: str) -> list[dict]:
    """What ``summary`` changed in ``seed``, word by word: inserted or replaced words with their
    offsets in ``summary``; a deletion as an empty range at the point where words went missing."""
    old = [m.group() for m in re.finditer(r"\S+", seed)]
    new = list(re.finditer(r"\S+", summary))
    changes = []
    matcher = difflib.SequenceMatcher(a=old, b=[m.group() for m in new], autojunk=False)
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        if op == "equal":
            continue
        if b1 > b0:
            start, end = new[b0].start(), new[b1 - 1].end()
        else:
            start = end = new[b0].start() if b0 < len(new) else len(summary)
        changes.append({"start": start, "end": end, "text": summary[start:end], "removed": " ".join(old[a0:a1])})
    return changes


def convert(read) -> Conversion:
    records = []
    for domain in DOMAINS:
        for row in json.loads(read(f"data/summedits/summedits_{domain}.json")):
            summary, seed = row["summary"], row["original_summary"]
            records.append(make_record(
                id=f"summedits-{row['id']}", task="summary", question=None, contexts=[row["doc"]],
                answer=summary, label=1 - int(row["label"]), spans=[], dataset="summedits",
                source_id=source_key(row["doc"]),
                meta={"original_label": row["label"], "domain": domain, "edit_types": row["edit_types"],
                      "seed_summary": row["id"].endswith("_og"), "source_split": row["split"],
                      "edited": word_diff(seed, summary) if summary != seed else []}))
    return Conversion(records, {})


SET = PublicSet(
    name="summedits", repo="salesforce/factualNLG", commit="0da1dfa62c783218d26208c1796d3a2605bec745",
    licence="Apache-2.0 (LICENSE.txt)", trainable=True,
    licence_note="The repository's licence; the documents come from other corpora whose terms the repository "
                 "does not restate (e.g. SAMSum is CC BY-NC-ND 4.0, the Spotify podcast transcripts have their "
                 "own research terms): meta.domain lets a model card name or leave out a domain.",
    convert=convert, stratum=lambda r: r["meta"]["domain"])
