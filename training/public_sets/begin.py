"""BEGIN (google/BEGIN-dataset): replies of four dialogue models (GPT-2, T5, CTRL-Dialog, DoHA)
trained on Wizard of Wikipedia, CMU-DoG and TopicalChat, each with the knowledge snippet it should
rest on, and a human label of attribution to that snippet.

Label: "Fully attributable" -> 0, "Not fully attributable" -> 1. "Generic" replies ("that's cool",
"do you like football?") state nothing that could be checked against the knowledge: neither
faithful content nor unsupported content, so they are left out (counted). Spans: none.
Question: the previous turn (``message``); context: the knowledge snippet.
"""

from __future__ import annotations

import csv
import io

from training.public_sets.common import Conversion, PublicSet, make_record, source_key

FILES = ("cmu-dog/begin_dev_cmu.tsv", "topicalchat/begin_dev_tc.tsv", "wow/begin_dev_wow.tsv",
         "wow/begin_test_wow.tsv")
# cmu-dog/begin_test_cmu.tsv and topicalchat/begin_test_tc.tsv are over 4 MiB and not in the snapshot.
LABELS = {"fully attributable": 0, "not fully attributable": 1}
LICENCES = {"cmu": "CC BY 4.0", "wow": "CC BY 4.0", "tc": "CDLA-Sharing-1.0"}


def convert(read) -> Conversion:
    records, excluded = [], {"generic": 0}
    for path in FILES:
        rows = csv.DictReader(io.StringIO(read(path)), delimiter="\t", quoting=csv.QUOTE_NONE)
        part = path.rsplit("_", 2)[1]  # dev | test
        for index, row in enumerate(rows):
            original = row["begin_label"].strip()
            if original.lower() == "generic":
                excluded["generic"] += 1
                continue
            label = LABELS[original.lower()]
            records.append(make_record(
                id=f"begin-{row['data_source']}-{part}-{index}", task="dialogue", question=row["message"].strip(),
                contexts=[row["knowledge"].strip()], answer=row["response"].strip(), label=label, spans=[],
                dataset="begin", source_id=source_key(row["knowledge"]),
                meta={"original_label": original, "domain": row["data_source"], "model": row["model_name"],
                      "source_split": part, "licence": LICENCES[row["data_source"]]}))
    return Conversion(records, excluded)


SET = PublicSet(
    name="begin", repo="google/BEGIN-dataset", commit="6e65f0d5a1ed1b9574643a7640ff1678d4e979b5",
    licence="CC BY 4.0 (cmu-dog/LICENSE, wow/LICENSE); CDLA-Sharing-1.0 (topicalchat/LICENSE)", trainable=True,
    licence_note="Per folder (the top LICENSE points to them); each NOTICE names the dialogue corpus the "
                 "histories and knowledge come from (CMU-DoG, Wizard of Wikipedia, Topical-Chat). meta.licence "
                 "holds each record's.",
    convert=convert, stratum=lambda r: r["meta"]["domain"])
