"""Arithmetic the evidence supports: a claim value that is a total, a difference, a per-unit price or a
share of values the evidence states ("12 and 30 seats" -> "42 seats"; "from 1978 to 1987" -> "9 years";
"$300 for 3 tickets" -> "$100 a ticket"; "30 of 120 people" -> "25%").

Only values of the claim's own evidence sentences take part, in the claim's unit (or one converting
to it exactly), and the result must equal the claim to the claim's written decimals: a sum that merely
rounds to "50" does not count.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from groundtrace.text.measures import convert, dimension, precision

if TYPE_CHECKING:
    from groundtrace.text.stated import Stated

# A computed value is read as computed only where the claim says so: without a cue, the sums and
# differences of a passage's many numbers hit most numbers by chance (measured: on the dev files they
# supported 15 hallucinated values and 1 faithful one).
_CUES = {
    "arithmetic_total": r"total|in all|altogether|combined|together|overall|sum|всего|в сумме|итого|вместе|суммарн|"
                        r"в общей сложности|общ[аеи][яйм]? (?:сумм|числ|количеств|стоимост)|共|总共|一共|合计|总计|累计|总数",
    "arithmetic_difference": r"difference|apart|gap|between|from|разниц|спустя|через|между|相差|差距|之差|相隔|间隔|从",
    "arithmetic_per_unit": r"\bper\b|each|total|in all|всего|итого|в сумме|共|总|apiece|a piece|an? (?:person|ticket|item|unit|night|day)|каждый|кажд|за штуку|"
                           r"на человека|в среднем|за одн|每|平均|人均|单价|均",
    "arithmetic_share": r"\bof\b|share|из |доля|дол[июе]|占|比例|其中",
}
_CUE_RE = {rule: re.compile(pattern, re.IGNORECASE) for rule, pattern in _CUES.items()}
_MAX_VALUES = 10  # 10 values: 45 pairs, 120 triples; more would let chance make any number


def computed(claim: Stated, values: Sequence[tuple[Stated, int]], allowed: frozenset[str],
             same_count: Callable[[Stated, Stated], bool], sentence: str = "", *, cued: bool = True
             ) -> tuple[str, Stated, str] | None:
    """(rule, an evidence fact used, the sum written out) when ``claim`` (a fact of ``sentence``) is computed
    from ``values``; with ``cued``, a rule applies only where ``sentence`` has its cue word ("in total", "per")."""
    a = claim.fact
    if a.kind != "number" or a.value is None or a.unit is None or claim.bounded:
        return None
    allowed = frozenset(r for r in allowed if not cued or r not in _CUE_RE or _CUE_RE[r].search(sentence))
    same = [(x, st) for x, st in _in_unit(a.unit, values) if same_count(claim, st)][:_MAX_VALUES]
    tolerance = precision(a.text, a.value, zeros=False) / 2
    v = a.value

    def close(x: float) -> bool:
        return abs(x - v) <= tolerance

    if "arithmetic_total" in allowed:
        for size in (2, 3):
            for combo in itertools.combinations(same, size):
                if close(sum(x for x, _ in combo)):
                    return "arithmetic_total", combo[0][1], " + ".join(_show(x) for x, _ in combo) + f" = {_show(v)}"
    if "arithmetic_difference" in allowed:
        pool = same + (_years(values) if a.unit in ("year", "decade") and dimension(a.unit) == "time" else [])
        for (x, sx), (y, _) in itertools.combinations(pool, 2):
            if close(abs(x - y)):
                return "arithmetic_difference", sx, f"{_show(max(x, y))} - {_show(min(x, y))} = {_show(v)}"
    if "arithmetic_per_unit" in allowed and dimension(a.unit) != "count":
        counts = _counts(values)
        for (x, sx), (n, _) in itertools.product(same, counts):
            if n and close(x / n):
                return "arithmetic_per_unit", sx, f"{_show(x)} / {_show(n)} = {_show(v)}"
            if close(x * n):
                return "arithmetic_per_unit", sx, f"{_show(x)} × {_show(n)} = {_show(v)}"
    if "arithmetic_share" in allowed and a.unit == "%":
        for unit in {st.fact.unit for st, _ in values if st.fact.unit not in (None, "%")}:
            pool = _in_unit(unit, values)[:_MAX_VALUES]
            for (x, sx), (y, _) in itertools.permutations(pool, 2):
                if 0 < x < y and close(100 * x / y):
                    return "arithmetic_share", sx, f"{_show(x)} / {_show(y)} = {_show(v)}%"
    return None


def _in_unit(unit: str | None, values: Sequence[tuple[Stated, int]]) -> list[tuple[float, Stated]]:
    out = []
    for st, _ in values:
        f = st.fact
        if f.kind != "number" or f.value is None or f.unit is None or st.bounded:
            continue
        if dimension(unit) == "count" and f.unit != unit:
            continue
        factor = convert(1.0, f.unit, unit)
        if factor is not None and factor[0] == factor[1]:
            out.append((f.value * factor[0], st))
    return out


def _years(values: Sequence[tuple[Stated, int]]) -> list[tuple[float, Stated]]:
    return [(st.fact.value, st) for st, _ in values if st.fact.kind == "year" and st.fact.value is not None]


def _counts(values: Sequence[tuple[Stated, int]]) -> list[tuple[float, Stated]]:
    return [(st.fact.value, st) for st, _ in values
            if st.fact.kind == "number" and st.fact.value and dimension(st.fact.unit) == "count" and not st.bounded]


def _show(x: float) -> str:
    return f"{x:.10g}"
