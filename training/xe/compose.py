"""RAG-format training examples composed from human-labelled sentence pairs (../shared/data/pairs).

A pair says whether a premise supports a hypothesis (NLI, paraphrase, fact verification; ru, zh, en).
One pair alone is not the detector's input: an answer is several sentences, the contexts are several
passages, and a sentence can be supported by any of them. So an example is composed:

    answer   = 2-5 hypotheses, joined the way answers join sentences ("Also, ...", "Кроме того, ...",
               "此外，..."), sometimes two merged into one sentence; all supported (label 0), or all but
               one, which is contradicted or not stated (label 1, its characters are the span)
    contexts = the premises of those hypotheses (the unsupported one's premise too: the topic is
               there, the support is not) among 1-3 distractor premises, shuffled, in 1-3 passages

Every answer character then carries a human label, and the faithful side is human rewording (an
entailed or paraphrased hypothesis), never a copy of the context.

FActScore (real LLM biographies, atomic facts judged against Wikipedia) gives the same on real LLM
text twice: facts composed into answers against the Wikipedia premise, and each whole response with
its sentences labelled by the facts aligned to them.

Pairs are split by premise into train and held-out (``is_heldout``): held-out pairs measure the pair
accuracy per language and are never composed into training examples.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import defaultdict
from pathlib import Path

from groundtrace.text.sentences import split_sentences
from groundtrace.text.stopwords import stopwords
from groundtrace.text.tokenize import terms

HELDOUT_SHARE = 0.05
# Paraphrase and fact-verification sets whose "not" side is often still entailed (a shorter
# question, a related claim) are composed less often than NLI.
_DATASET_WEIGHT = {"afqmc": 0.3, "bustm": 0.5, "paraphraser": 0.7, "climate_fever": 0.5, "healthver": 0.7}
_JOINERS = {
    "en": ["", "", "", "Also, ", "In addition, ", "Moreover, ", "Besides, ", "Furthermore, "],
    "ru": ["", "", "", "Кроме того, ", "Также ", "При этом ", "Помимо этого, ", "Вдобавок "],
    "zh": ["", "", "", "此外，", "同时，", "而且", "另外，", "并且"],
}
_MERGE = {"en": [", and ", "; ", ", while "], "ru": [", и ", "; ", ", а "], "zh": ["，", "；", "，同时"]}
_END = {"en": ".", "ru": ".", "zh": "。"}


def fingerprint(text: str) -> int:
    return int(hashlib.sha256(text.strip().encode("utf-8")).hexdigest()[:8], 16)


def is_heldout(premise: str) -> bool:
    return fingerprint(premise) % 1000 < HELDOUT_SHARE * 1000


def read_pairs(directory: Path) -> list[dict]:
    """Every decided pair (label 0 or 1) of the sentence-pair files, texts cleaned of tokeniser spaces."""
    rows = []
    for path in sorted(directory.glob("*.jsonl")):
        if path.name == "en_factscore.jsonl":
            continue
        for line in open(path, encoding="utf-8"):
            r = json.loads(line)
            if r.get("label") is None or not r["premise"].strip() or not r["hypothesis"].strip():
                continue
            rows.append({**r, "premise": detokenize(r["premise"]), "hypothesis": detokenize(r["hypothesis"])})
    return rows


def detokenize(text: str) -> str:
    """SNLI/FEVER-style "word , word ." back to written text."""
    text = re.sub(r"\s+([.,!?;:%)\]}])", r"\1", text.strip())
    text = re.sub(r"([(\[{])\s+", r"\1", text)
    text = re.sub(r"\s+(n't|'s|'re|'ve|'ll|'d|'m)\b", r"\1", text)
    text = re.sub(r"-LRB-\s*", "(", text)
    return re.sub(r"\s*-RRB-", ")", text)


def sentence_of(text: str, language: str) -> str:
    text = text.strip()
    if text and text[-1] not in ".!?。！？…\"'”»）)":
        text += _END[language]
    return text


def _lower_first(text: str) -> str:
    # "Also, two women ..." and "Also, a man ..." but never "Also, iPhone", "I" or an acronym
    if len(text) > 1 and text[0].isupper() and text[0] != "I" and (text[1].islower() or text[1] == " "):
        return text[0].lower() + text[1:]
    return text


def assemble(sentences: list[tuple[str, bool]], language: str, rng: random.Random) -> tuple[str, list[list[int]]]:
    """The answer text of ``(sentence, unsupported)`` items, and the spans of the unsupported ones."""
    parts: list[tuple[str, bool]] = []  # text pieces, the flag says whether a piece is a span
    i = 0
    first = True
    while i < len(sentences):
        text, bad = sentences[i]
        joiner = "" if first else rng.choice(_JOINERS[language])
        if joiner:
            parts.append((joiner, False))
            text = _lower_first(text) if language != "zh" else text
        merge = i + 1 < len(sentences) and rng.random() < 0.2
        if merge:
            body = text.rstrip(".!?。！？")
            nxt, nbad = sentences[i + 1]
            parts += [(body, bad), (rng.choice(_MERGE[language]), False),
                      ((_lower_first(nxt) if language != "zh" else nxt), nbad)]
            i += 2
        else:
            parts.append((text, bad))
            i += 1
        parts.append(("" if language == "zh" else " ", False))
        first = False
    answer, spans, position = "", [], 0
    for text, bad in parts:
        if bad:
            body = text.rstrip(".!?。！？")
            spans.append([position, position + len(body)])
        answer += text
        position += len(text)
    answer = answer.rstrip()
    return answer, [s for s in spans if s[1] <= len(answer)]


def compose(pairs: list[dict], language: str, count: int, rng: random.Random, seed_id: str,
            heldout: bool = False) -> list[dict]:
    """``count`` composed examples of one language from its training pairs (``heldout``: from the
    held-out pairs instead, for measurement)."""
    by_dataset: dict[str, dict[int, list[dict]]] = defaultdict(lambda: {0: [], 1: []})
    for p in pairs:
        if p["language"] == language and is_heldout(p["premise"]) == heldout:
            by_dataset[p["dataset"]][p["label"]].append(p)
    datasets = sorted(d for d, v in by_dataset.items() if len(v[0]) >= 6 and len(v[1]) >= 3)
    weights = [len(by_dataset[d][0]) * _DATASET_WEIGHT.get(d, 1.0) for d in datasets]
    all_premises = sorted({p["premise"] for d in datasets for lab in (0, 1) for p in by_dataset[d][lab]})
    out = []
    for n in range(count):
        dataset = rng.choices(datasets, weights)[0]
        pool = by_dataset[dataset]
        k = rng.choice([2, 3, 3, 4, 4, 5])
        hallucinated = rng.random() < 0.5
        chosen = [(p, False) for p in rng.sample(pool[0], k - int(hallucinated))]
        if hallucinated:
            chosen.insert(rng.randrange(len(chosen) + 1), (rng.choice(pool[1]), True))
        premises = list(dict.fromkeys(p["premise"] for p, _ in chosen))
        distractors = [d for d in rng.sample(all_premises, rng.randint(1, 3)) if d not in premises]
        passages = premises + distractors
        rng.shuffle(passages)
        cuts = sorted(rng.sample(range(1, len(passages)), min(len(passages) - 1, rng.randint(0, 2))))
        joiner = "" if language == "zh" else " "
        contexts = [joiner.join(sentence_of(t, language) for t in passages[a:b])
                    for a, b in zip([0, *cuts], [*cuts, len(passages)], strict=False)]
        answer, spans = assemble([(sentence_of(p["hypothesis"], language), bad) for p, bad in chosen], language, rng)
        out.append({"id": f"compose-{seed_id}-{language}-{n}", "source": f"pairs/{dataset}", "language": language,
                    "question": None, "contexts": contexts, "answer": answer, "label": int(hallucinated),
                    "spans": spans})
    return out


def raw_pairs(pairs: list[dict], per_language: int, rng: random.Random) -> list[dict]:
    """Pairs as they are, one premise and one hypothesis: the relation without the format."""
    out = []
    for language in ("en", "ru", "zh"):
        pool = [p for p in pairs if p["language"] == language and not is_heldout(p["premise"])]
        for p in rng.sample(pool, min(per_language, len(pool))):
            answer = p["hypothesis"]
            out.append({"id": p["id"], "source": f"raw/{p['dataset']}", "language": language, "question": None,
                        "contexts": [p["premise"]], "answer": answer, "label": p["label"],
                        "spans": [[0, len(answer)]] if p["label"] else []})
    return out


def heldout_pairs(pairs: list[dict], per_language: int, rng: random.Random) -> list[dict]:
    out = []
    for language in ("en", "ru", "zh"):
        pool = [p for p in pairs if p["language"] == language and is_heldout(p["premise"])]
        for p in rng.sample(pool, min(per_language, len(pool))):
            out.append({"id": p["id"], "dataset": p["dataset"], "language": language, "question": None,
                        "contexts": [p["premise"]], "answer": p["hypothesis"], "label": p["label"]})
    return out


# --- FActScore: real LLM biographies ---------------------------------------------------------------

def read_factscore(path: Path) -> list[dict]:
    return [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]


def factscore_heldout(bio: dict) -> bool:
    return fingerprint(bio["id"]) % 10 == 0


def _content(text: str) -> set[str]:
    stop = stopwords("en")
    return {t.text for t in terms(text, "en") if t.text not in stop and len(t.text) > 1}


def premise_passages(premise: str) -> list[str]:
    return [p.strip() for p in re.split(r"\n\s*\n", premise) if p.strip()]


def factscore_responses(bios: list[dict], heldout: bool) -> list[dict]:
    """Each response, its sentences labelled by the facts aligned to them (most shared content words):
    a sentence is a span when a contradicted fact belongs to it."""
    out = []
    for bio in bios:
        if factscore_heldout(bio) != heldout:
            continue
        sentences = split_sentences(bio["response"])
        if not sentences:
            continue
        words = [_content(s.text) for s in sentences]
        bad = [False] * len(sentences)
        for fact in bio["facts"]:
            fw = _content(fact["fact"])
            overlap = [len(fw & w) for w in words]
            best = max(range(len(sentences)), key=lambda i: overlap[i])
            if overlap[best] and fact["label"] == 1:
                bad[best] = True
        spans = [[s.start, s.end] for s, b in zip(sentences, bad, strict=False) if b]
        out.append({"id": bio["id"], "source": "factscore/response", "language": "en",
                    "question": f"Tell me a bio of {bio['premise'].split(chr(10))[0].split('(')[0].strip()[:60]}.",
                    "contexts": premise_passages(bio["premise"]), "answer": bio["response"],
                    "label": int(bool(spans)), "spans": spans})
    return out


def factscore_composed(bios: list[dict], per_bio: int, rng: random.Random) -> list[dict]:
    """Atomic facts of one biography as an answer, against its Wikipedia text."""
    out = []
    for bio in bios:
        if factscore_heldout(bio):
            continue
        good = [f for f in bio["facts"] if f["label"] == 0]
        bad = [f for f in bio["facts"] if f["label"] == 1]
        for n in range(per_bio):
            k = rng.choice([2, 3, 4, 5])
            hallucinated = bool(bad) and rng.random() < 0.5
            if len(good) < k - int(hallucinated):
                continue
            chosen = [(f["fact"], False) for f in rng.sample(good, k - int(hallucinated))]
            if hallucinated:
                chosen.insert(rng.randrange(len(chosen) + 1), (rng.choice(bad)["fact"], True))
            answer, spans = assemble([(sentence_of(t, "en"), b) for t, b in chosen], "en", rng)
            out.append({"id": f"{bio['id']}:facts{n}", "source": "factscore/facts", "language": "en",
                        "question": None, "contexts": premise_passages(bio["premise"]), "answer": answer,
                        "label": int(hallucinated), "spans": spans})
    return out
