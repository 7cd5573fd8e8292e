"""Each fact of a claim against the evidence it rests on: supported, in conflict, or absent.

A claim fact is *supported* when the evidence states it in any written form or implies it: the same
value after normalisation (digits, number words, numerals, thousands separators), another unit
("two weeks" = 14 days), another date format, inside a stated bound or range ("5 floors or more"
holds 7), approximately ("about 50" for 49.7), rounded, or computed from stated values (a total, a
difference, a per-unit price, a share). It is in *conflict* when an evidence fact of the same kind and
dimension, about the same thing (a shared content word near both, the same counted noun), states a
different value ("opened in 1978" against "opened in 1987"). Otherwise it is *absent*.

Every decision names its rule (``RULES``); ``PRECISE`` are the conflict and absence rules measured
precise on the dev files (benchmarks/fact_conflicts.py). The arithmetic lives in text/arithmetic.py.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from groundtrace.text import anchors
from groundtrace.text.arithmetic import computed
from groundtrace.text.facts import Fact, FactIndex
from groundtrace.text.measures import Interval, convert, dimension, precision, rounds_to
from groundtrace.text.sentences import split_sentences
from groundtrace.text.stated import Stated, stated

Verdict = Literal["supported", "conflict", "absent"]

SUPPORT_RULES = ("same_value", "unit_conversion", "same_year", "same_date", "same_time", "same_name",
                 "within_range", "within_bound", "approximation", "rounding",
                 "arithmetic_total", "arithmetic_difference", "arithmetic_per_unit", "arithmetic_share")
CONFLICT_RULES = ("conflict_value", "conflict_bound", "conflict_year", "conflict_date", "conflict_time")
ABSENT_RULES = ("absent_number", "absent_year", "absent_date", "absent_time", "absent_name")
RULES = SUPPORT_RULES + CONFLICT_RULES + ABSENT_RULES
# Measured by benchmarks/fact_conflicts.py (docs/benchmarks/quality.md, "Fact conflicts"): a flagging rule
# outside this set flags more than 2% of the faithful answers of some dev file, a support rule outside it
# wrongly supports more than 2% of the planted errors of some language. Off unless asked for (rules=RULES).
PRECISE: frozenset[str] = frozenset(RULES) - {
    "absent_number", "absent_year", "absent_date", "absent_name",  # facts the contexts do not state (halluqa_zh, paraphrases)
    "within_bound",  # a planted value strictly inside a one-sided bound ("не больше 30%") reads as supported
}
APPROXIMATION = 0.1  # "about 50" holds 45..55: half its rounding step, never more than 10%
ROUNDING = 0.02  # "1.5 million" for 1,483,000: rounded to its own precision, at most 2% off


@dataclass(frozen=True, slots=True)
class FactCheck:
    """One claim fact's verdict; offsets of ``fact`` are in the claim, of ``evidence_fact`` in evidence[evidence_index]."""

    fact: Fact
    verdict: Verdict
    rule: str
    evidence_fact: Fact | None = None
    evidence_index: int | None = None
    detail: str = ""

    @property
    def reason(self) -> str:
        if self.verdict == "conflict" and self.evidence_fact is not None:
            return f"the contexts say {self.evidence_fact.text}; the answer says {self.fact.text}"
        if self.verdict == "absent":
            return f"the contexts do not state {self.fact.text}"
        return f"the contexts state {self.fact.text}" + (f" ({self.detail})" if self.detail else "")


@dataclass(frozen=True, slots=True)
class _Evidence:
    sentences: tuple[tuple[Stated, ...], ...]
    index: FactIndex
    words: tuple[frozenset[str], ...]  # content stems of each sentence


def check_claim(claim: str, evidence: Sequence[str], language: str = "en", *,
                rules: Iterable[str] = RULES) -> list[FactCheck]:
    """The verdict on every fact of ``claim`` (one sentence) against ``evidence`` (its context sentences).

    ``rules`` names the rules allowed to decide: a support rule left out supports nothing, a conflict
    rule left out leaves the fact absent, an absence rule left out drops its facts from the result.
    """
    allowed = frozenset(rules)
    ev = _evidence(tuple(evidence), language)
    out = []
    for fact in stated(claim, language, claim_side=True):
        check = _support(fact, ev, claim, allowed) or _conflict(fact, ev, allowed)
        if check is None:
            rule = f"absent_{fact.fact.kind}"
            check = FactCheck(fact.fact, "absent", rule) if rule in allowed else None
        if check is not None:
            out.append(check)
    return out


def check_answer(answer: str, contexts: Sequence[str], language: str = "en", *,
                 rules: Iterable[str] = RULES) -> list[tuple[int, FactCheck]]:
    """Every sentence of ``answer`` checked against every sentence of ``contexts``: (claim start, check)."""
    evidence = [s.text for c in contexts for s in split_sentences(c)]
    return [(s.start, check) for s in split_sentences(answer) for check in check_claim(s.text, evidence, language,
                                                                                        rules=rules)]


@lru_cache(maxsize=256)
def _evidence(sentences: tuple[str, ...], language: str) -> _Evidence:
    read = tuple(stated(s, language) for s in sentences)
    facts = [st.fact for group in read for st in group]
    index = FactIndex.build("\n".join(sentences), language, facts=facts)
    words = tuple(frozenset(w.stem for w in anchors.content_words(s, language)) for s in sentences)
    return _Evidence(read, index, words)


# ------------------------------------------------------------------------------ support

def _support(claim: Stated, ev: _Evidence, text: str, allowed: frozenset[str]) -> FactCheck | None:
    fact = claim.fact
    if fact.kind != "number":
        rule: str | None = {"year": "same_year", "date": "same_date", "time": "same_time", "name": "same_name"}[fact.kind]
        if rule in allowed and ev.index.supports(fact):
            return FactCheck(fact, "supported", rule)
        return None
    best: FactCheck | None = None
    for i, group in enumerate(ev.sentences):
        for other in group:
            rule = _number_rule(claim, other)
            if rule is not None and rule in allowed and (best is None or RULES.index(rule) < RULES.index(best.rule)):
                detail = f"{other.span.low:g} to {other.span.high:g}" if rule.startswith("within") and other.span else ""
                best = FactCheck(fact, "supported", rule, other.fact, i, detail)
                if rule == "same_value":
                    return best
    if best is not None:
        return best
    if fact.value is not None and fact.unit is None and "same_value" in allowed and ev.index.supports(fact):
        return FactCheck(fact, "supported", "same_value")  # a bare number the evidence has as a year
    return _arithmetic(claim, ev, text, allowed)


def _number_rule(claim: Stated, other: Stated) -> str | None:
    """The support rule by which ``other`` (an evidence fact) implies ``claim``, or None."""
    a, b = claim.fact, other.fact
    if b.kind not in ("number", "year") or a.value is None or b.value is None or claim.span is None:
        return None
    if b.kind == "year" and a.unit is not None:
        return None
    factor = (1.0, 1.0) if b.unit is None or a.unit is None or b.unit == a.unit else convert(1.0, b.unit, a.unit)
    if factor is None or (dimension(a.unit) == "count" and dimension(b.unit) == "count" and not _same_count(claim, other)):
        return None
    span, mine = other.span or Interval(b.value, b.value), claim.span
    exact = factor[0] == factor[1]
    value = b.value * factor[0]
    # the same value said with the same bound words, or both as plain values: "within 2 weeks" is "within 14 days"
    # a claim range's ends are stated values of their own: "30-45 minutes" from "30 minutes ... 45 minutes"
    same_words = _side(claim.bounded) == _side(other.bounded) or "approx" in (claim.bounded, other.bounded) \
        or claim.bounded == "range"
    if a.unit == b.unit == "degree" and claim.scale and other.scale and claim.scale != other.scale:
        return _temperature(claim, other)
    if same_words and exact and abs(a.value - value) <= 1e-9 * max(1.0, abs(a.value)):
        return "same_value" if factor == (1.0, 1.0) else "unit_conversion"
    if not (mine.bounded or span.bounded) and not exact and factor[0] * b.value - 1e-9 <= a.value <= factor[1] * b.value + 1e-9:
        return "unit_conversion"  # "6 months" for "182 days": a month is 28..31 days
    if a.unit is None or b.unit is None or not claim.near & other.near:
        # a bare number bounds nothing ("до 55 на 40 на 20 сантиметров"), and a bound, an approximation or a
        # rounding holds only for the same thing: "3 days" is not "at least 4 hours" of something else
        return None
    low, high = span.low * factor[0], span.high * factor[1]
    # "7 floors" from "5 floors or more", "3 days" from "2-3 days"; strictly inside a one-sided bound only
    # for a thing named twice near both (measured: one shared word let "3 days" hold "at least 4 hours")
    inside = low - 1e-9 <= a.value <= high + 1e-9
    endpoint = any(abs(a.value - end) <= 1e-9 * max(1.0, abs(end)) for end in (low, high) if math.isfinite(end))
    if span.bounded and not mine.bounded and inside and (endpoint or other.bounded == "range"):
        return "within_range"
    if span.bounded and not mine.bounded and inside and len(claim.near & other.near) >= 2:
        return "within_bound"
    if mine.bounded and claim.bounded != "range" and mine.low - 1e-9 <= low and high <= mine.high + 1e-9 \
            and (not span.bounded or endpoint):
        return "within_bound"  # "more than 1000 people" from "1,200 people", "до пяти дней" from "3-5 дней"
    if mine.bounded or span.bounded:
        return None
    if _approximately(claim, other, value):
        return "approximation"
    step = precision(a.text, a.value)
    if exact and value and rounds_to(value, a.value, step) and abs(a.value - value) <= ROUNDING * abs(value) \
            and step > precision(b.text, b.value) * factor[0]:
        return "rounding"
    return None


def _temperature(claim: Stated, other: Stated) -> str | None:
    """26 °C for 79 °F: the other scale, to the claim's precision (a degree)."""
    a, b = claim.fact, other.fact
    if a.value is None or b.value is None:
        return None
    value = b.value * 9 / 5 + 32 if other.scale == "C" else (b.value - 32) * 5 / 9
    return "unit_conversion" if abs(value - a.value) <= max(0.5, precision(a.text, a.value, zeros=False) / 2) else None


def _side(bounded: str | None) -> str | None:
    """Bound words of one side say the same: "up to 12" is "under 12" is "в пределах 12"."""
    return {"ge": "low", "gt": "low", "le": "high", "lt": "high"}.get(bounded or "", bounded)


def _approximately(claim: Stated, other: Stated, value: float) -> bool:
    """Does an approximate number hold ``value`` (the evidence's, in the claim's unit)? Within half the step
    it was rounded to ("about 50": 45..55), at least 1% and at most ``APPROXIMATION`` of it."""
    a, b = claim.fact, other.fact
    marked = [(f.text, f.value) for st, f in ((claim, a), (other, b)) if st.bounded == "approx" and f.value is not None]
    if not marked or a.value is None:
        return False
    step = max(precision(text, v) for text, v in marked)
    size = max(abs(a.value), abs(value))
    return abs(a.value - value) <= min(max(step / 2, 0.01 * size), APPROXIMATION * size)


def _same_count(claim: Stated, other: Stated) -> bool:
    """Two counts count the same thing when their counted nouns share a stem ("3 floors", "5 этажей" do not)."""
    if claim.fact.unit != other.fact.unit and "count" not in (claim.fact.unit, other.fact.unit):
        return False
    if claim.fact.unit != "count" or other.fact.unit != "count":
        return True  # people, times, credits: the unit says what is counted
    return bool(claim.counts & other.counts) or not claim.counts or not other.counts


def _arithmetic(claim: Stated, ev: _Evidence, text: str, allowed: frozenset[str]) -> FactCheck | None:
    if not any(r.startswith("arithmetic_") and r in allowed for r in RULES):
        return None
    found = _computed(claim, ev, allowed, sentence=text)
    if found is None:
        return None
    rule, used, detail = found
    return FactCheck(claim.fact, "supported", rule, used.fact, None, detail)


# ------------------------------------------------------------------------------ conflict

def _computed(claim: Stated, ev: _Evidence, allowed: frozenset[str], sentence: str = "", cued: bool = True
              ) -> tuple[str, Stated, str] | None:
    related = [i for i, sw in enumerate(ev.words) if sw & claim.near]  # sentences about the same thing
    values = [(st, i) for i in related for st in ev.sentences[i] if st.fact.kind in ("number", "year")]
    return computed(claim, values, allowed, _same_count, sentence, cued=cued)


def _conflict(claim: Stated, ev: _Evidence, allowed: frozenset[str]) -> FactCheck | None:
    best = _closest_conflict(claim, ev, allowed)
    if best is None:
        return None
    check, beside = best
    if not beside and _computed(claim, ev, frozenset(RULES), cued=False) is not None:
        # "42 seats" where the evidence has 12 and 30: a total not said to be one, no conflict; but where the words
        # right beside both are the same ("造成3人死亡" against "造成1人死亡"), the evidence states another value
        return None
    return check


def _closest_conflict(claim: Stated, ev: _Evidence, allowed: frozenset[str]) -> tuple[FactCheck, int] | None:
    """The evidence fact nearest the claim's in words that states another value, and how many words right beside
    both, other than what they count, they share."""
    best: tuple[tuple[int, int], FactCheck, int] | None = None
    for i, group in enumerate(ev.sentences):
        for other in group:
            rule = _conflict_rule(claim, other)
            if rule is None or rule not in allowed:
                continue
            shared = len(claim.near & other.near)
            if rule == "conflict_bound" and shared < 2:
                continue  # a bound is often a condition on something else ("strikes announced more than 7 days")
            score = (len(claim.close & other.close), shared)  # "built in 1970, opened in 1978": the nearer words decide
            if shared and (best is None or score > best[0]) and not _holds_elsewhere(claim, group):
                beside = len((claim.close & other.close) - claim.counts - other.counts)
                best = (score, FactCheck(claim.fact, "conflict", rule, other.fact, i), beside)
    return None if best is None else (best[1], best[2])


def _holds_elsewhere(claim: Stated, group: tuple[Stated, ...]) -> bool:
    """Does another fact of the same sentence hold the claim's value? "For 15-29 minutes ... for 30-59 minutes"
    lists bands: a 45-minute delay conflicts with none of them."""
    a = claim.fact
    if a.kind != "number" or a.value is None:
        return False
    for other in group:
        b = other.fact
        if b.kind == "number" and other.span is not None and dimension(b.unit) == dimension(a.unit):
            factor = convert(1.0, b.unit, a.unit) or (1.0, 1.0)
            if other.span.low * factor[0] - 1e-9 <= a.value <= other.span.high * factor[1] + 1e-9:
                return True
    return False


def _conflict_rule(claim: Stated, other: Stated) -> str | None:
    """The conflict rule by which ``other`` states a different value for ``claim``'s kind of fact, or None.
    Whether both are about the same thing is decided by the caller."""
    a, b = claim.fact, other.fact
    if a.kind == "year":
        year = _year_of(b)
        return "conflict_year" if year is not None and a.value is not None and year != int(a.value) else None
    if a.kind == "date" and b.kind in ("date", "year"):
        return "conflict_date" if _dates_differ(a.key, b.key) else None
    if a.kind == "time" and b.kind == "time":
        return "conflict_time" if a.key != b.key else None
    if a.kind != "number" or b.kind != "number" or a.unit is None or b.unit is None or claim.span is None:
        return None
    if dimension(a.unit) != dimension(b.unit) or (dimension(a.unit) == "count" and not _counts_match(claim, other)):
        return None
    if claim.bounded == "range" or (a.unit == "degree" and (not claim.scale or claim.scale != other.scale)):
        # a claim's range is compared end by end; a temperature only on one stated scale (79 °F is 26 °C)
        return None
    factor = convert(1.0, b.unit, a.unit) if dimension(a.unit) != "count" else (1.0, 1.0)
    if factor is None or other.span is None:
        return None
    theirs = Interval(other.span.low * factor[0], other.span.high * factor[1])
    if theirs.meets(claim.span):
        return None
    if _approximately(claim, other, theirs.low):
        return None
    return "conflict_bound" if theirs.bounded or claim.span.bounded else "conflict_value"


def _counts_match(claim: Stated, other: Stated) -> bool:
    if claim.fact.unit != "count" or other.fact.unit != "count":
        return claim.fact.unit == other.fact.unit
    return bool(claim.counts & other.counts)


def _year_of(fact: Fact) -> int | None:
    if fact.kind == "year" and fact.value is not None:
        return int(fact.value)
    if fact.kind == "date" and fact.key[:4].isdigit():
        return int(fact.key[:4])
    return None


def _dates_differ(a: str, b: str) -> bool:
    """Do two date keys ('2024-03-05', '2024-03', '--03-05', '2024') disagree on a field both state?"""
    fa, fb = _fields(a), _fields(b)
    shared = [k for k in ("year", "month", "day") if fa.get(k) is not None and fb.get(k) is not None]
    return bool(shared) and any(fa[k] != fb[k] for k in shared)


def _fields(key: str) -> dict[str, str | None]:
    if key.startswith("---"):
        return {"day": key[3:]}
    if key.startswith("--"):
        parts = key[2:].split("-")
        return {"month": parts[0], "day": parts[1] if len(parts) > 1 else None}
    parts = key.split("-")
    return {"year": parts[0], "month": parts[1] if len(parts) > 1 else None, "day": parts[2] if len(parts) > 2 else None}
