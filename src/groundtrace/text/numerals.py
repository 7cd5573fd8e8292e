"""Numbers written in words ("five years", "пять лет", "三年"), read only where a unit follows them:
a bare "one" or "一" is a pronoun or a word part far more often than a fact.

One is left out in every language ("one day", "有一天", "同一年" are idioms, not durations).
"""

from __future__ import annotations

import re

_EN_SMALL = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen"
             " sixteen seventeen eighteen nineteen").split()
_EN_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
WORD_VALUES: dict[str, int] = {w: i for i, w in enumerate(_EN_SMALL)}
WORD_VALUES.update({w: 20 + 10 * i for i, w in enumerate(_EN_TENS)})
WORD_VALUES["hundred"] = 100
for _value, _forms in {
    2: "два две двух двум двумя", 3: "три трёх трех трём трем тремя",
    4: "четыре четырёх четырех четырём четырем четырьмя", 5: "пять пяти пятью", 6: "шесть шести шестью",
    7: "семь семи", 8: "восемь восьми восемью", 9: "девять девяти девятью", 10: "десять десяти десятью",
    11: "одиннадцать одиннадцати", 12: "двенадцать двенадцати", 13: "тринадцать тринадцати",
    14: "четырнадцать четырнадцати", 15: "пятнадцать пятнадцати", 16: "шестнадцать шестнадцати",
    17: "семнадцать семнадцати", 18: "восемнадцать восемнадцати", 19: "девятнадцать девятнадцати",
    20: "двадцать двадцати", 30: "тридцать тридцати", 40: "сорок сорока", 50: "пятьдесят пятидесяти",
    60: "шестьдесят шестидесяти", 70: "семьдесят семидесяти", 80: "восемьдесят восьмидесяти",
    90: "девяносто девяноста", 100: "сто ста",
}.items():
    for _form in _forms.split():
        WORD_VALUES[_form] = _value
_TENS = {w for w, v in WORD_VALUES.items() if v >= 20 and v % 10 == 0 and v < 100}
_ONES = {w for w, v in WORD_VALUES.items() if 1 <= v <= 9}
_LEFT_OUT = {"zero", "one"}


def _alternation(words: set[str] | list[str]) -> str:
    return "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))


_INITIALS = "".join(sorted({w[0] for w in WORD_VALUES} | {w[0].upper() for w in WORD_VALUES}))
# "twenty-five", "двадцать пять", "five"; never inside a longer word. The class of initials is a
# cheap filter: the alternation is tried only where a number word can start (2x faster).
WORD_NUMBER = re.compile(
    rf"\b(?=[{_INITIALS}])(?:(?P<tens>{_alternation(_TENS)})(?:[\s-](?P<ones>{_alternation(_ONES)}))?"
    rf"|(?P<small>{_alternation([w for w in WORD_VALUES if w not in _LEFT_OUT])}))(?![^\W\d_])",
    re.IGNORECASE,
)
_ZH_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_ZH_POWERS = {"十": 10, "百": 100, "千": 1000}
_ZH_NUMERAL = f"[{''.join(_ZH_DIGITS)}{''.join(_ZH_POWERS)}]+"
# an ordinal ("第三年") is no quantity
ZH_NUMBER = re.compile(rf"(?<!第)(?P<zh>{_ZH_NUMERAL})")
# 百分之五十, 百分之50: fifty per cent
ZH_PERCENT = re.compile(rf"百分之(?:(?P<digits>\d+(?:\.\d+)?)|(?P<zh>{_ZH_NUMERAL}))")


def word_value(match: re.Match[str]) -> int:
    if match.group("small"):
        return WORD_VALUES[match.group("small").lower()]
    value = WORD_VALUES[match.group("tens").lower()]
    return value + (WORD_VALUES[match.group("ones").lower()] if match.group("ones") else 0)


def zh_value(numeral: str, lone_one: bool = False) -> int | None:
    """三 -> 3, 十五 -> 15, 二十 -> 20, 一百零五 -> 105, 二〇二四 -> 2024; None for a lone 一
    (unless ``lone_one``: 百分之一 is one per cent)."""
    if numeral == "一" and not lone_one:
        return None
    if numeral.startswith("十"):  # 十五 = 15 (the 1 of 一十五 is left out)
        numeral = "一" + numeral
    if not any(c in _ZH_POWERS for c in numeral):
        return int("".join(str(_ZH_DIGITS[c]) for c in numeral))
    total = current = 0
    for c in numeral:
        if c in _ZH_DIGITS:
            current = _ZH_DIGITS[c]
        else:
            total += (current or 1) * _ZH_POWERS[c]
            current = 0
    return total + current
