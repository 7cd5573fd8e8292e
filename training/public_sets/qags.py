"""QAGS (W4ngatang/qags, data/mturk_{cnndm,xsum}.jsonl): model summaries of CNN/DailyMail (Bottom-Up)
and XSum (BART) articles, each summary sentence judged by three crowd workers: is it supported by
the article?

Label: a sentence is unsupported when most of its workers (2 or 3 of 3) answered "no"; the summary
is 1 when any sentence is. Spans: the unsupported sentences. The answer is the sentences joined by
single spaces. Text repair: some articles carry UTF-8 read as Latin-1 and then lowercased
("â£50,000" for "£50,000"); such runs are decoded back.
"""

from __future__ import annotations

import json
import re

from training.public_sets.common import Conversion, PublicSet, join_sentences, make_record, source_key

FILES = {"cnndm": "data/mturk_cnndm.jsonl", "xsum": "data/mturk_xsum.jsonl"}
_MOJIBAKE = re.compile(r"[\u00c2-\u00f4][\u0080-\u00bf\u0152-\u2122]+")


def repair(text: str) -> str:
    """Undo UTF-8 bytes read as cp1252/Latin-1 (and lowercased), run by run; other text stays."""

    def fix(match: re.Match[str]) -> str:
        run = match.group()
        for candidate in (run, run[0].upper() + run[1:]):
            for codec in ("cp1252", "latin-1"):
                try:
                    return candidate.encode(codec).decode("utf-8")
                except (UnicodeEncodeError, UnicodeDecodeError):
                    continue
        return run

    return _MOJIBAKE.sub(fix, text)


def convert(read) -> Conversion:
    records = []
    for domain, path in FILES.items():
        for index, line in enumerate(read(path).splitlines()):
            if not line.strip():
                continue
            row = json.loads(line)
            article = repair(row["article"])
            sentences = [repair(s["sentence"]).strip() for s in row["summary_sentences"]]
            votes = [[r["response"] for r in s["responses"]] for s in row["summary_sentences"]]
            unsupported = [v.count("no") * 2 > len(v) for v in votes]
            answer, spans = join_sentences(sentences, unsupported, "unsupported_sentence")
            records.append(make_record(
                id=f"qags-{domain}-{index}", task="summary", question=None, contexts=[article], answer=answer,
                label=int(any(unsupported)), spans=spans, dataset="qags", source_id=source_key(article),
                meta={"original_label": votes, "domain": domain}))
    return Conversion(records, {})


SET = PublicSet(
    name="qags", repo="W4ngatang/qags", commit="47798e9b63344e2d3fb4df2def6edc18e9402d30",
    licence="none stated: the repository has no licence file for its code or data (fairseq/LICENSE covers only "
            "the bundled fairseq copy); the README asks for a citation",
    trainable=False,
    licence_note="No licence grants use of the annotations, and the articles are CNN/DailyMail and BBC (XSum) "
                 "news: measurement only, every record held out.",
    convert=convert)
