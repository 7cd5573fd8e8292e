"""Units and measure words of quantities, and when two of them can name the same thing.

A number is compared together with what it counts: "5 years" and "5 business days" are two facts,
"5 years", "5-year" and "five years" one. Three kinds of unit:

    measures   year, day, usd, rub, km, % ...      comparable only with the same measure
    counts     person, time (occurrences), credit, and "count": a number followed by any other
               noun ("5 stars", "12 employees"); counts agree with each other, never with a measure
    none       a bare number ("Room 5", "5."): agrees with anything, as before units were read

Everything is table-driven: a language is added by extending the tables, not the code.
"""

from __future__ import annotations

import re
from functools import lru_cache

from groundtrace.text.stopwords import stopwords

# Canonical unit -> the words that name it, in English, Russian and Chinese. Word forms, not stems:
# a regex alternation of whole words is both exact and fast.
UNITS: dict[str, tuple[str, ...]] = {
    "%": ("%", "％", "percent", "per cent", "pct", "percentage", "процент", "процента", "процентов", "проц"),
    "usd": ("$", "usd", "dollar", "dollars", "доллар", "доллара", "долларов", "долл", "美元"),
    "eur": ("€", "eur", "euro", "euros", "евро", "欧元"),
    "rub": ("₽", "rub", "rubles", "roubles", "рубль", "рубля", "рублей", "руб", "р", "卢布"),
    "cny": ("¥", "cny", "rmb", "yuan", "юань", "юаня", "юаней", "元", "人民币", "块"),
    "gbp": ("£", "gbp", "pound", "pounds", "фунт", "фунта", "фунтов", "英镑"),
    "decade": ("decade", "decades", "десятилетие", "десятилетия", "десятилетий"),
    "year": ("year", "years", "yr", "yrs", "год", "года", "лет", "годам", "годами", "岁", "周年", "年"),
    "month": ("month", "months", "месяц", "месяца", "месяцев", "мес", "个月"),
    "week": ("week", "weeks", "неделя", "недели", "недель", "неделю", "нед", "周", "星期", "个星期"),
    "day": ("day", "days", "день", "дня", "дней", "сутки", "суток", "天", "日", "工作日", "个工作日"),
    "hour": ("hour", "hours", "hr", "hrs", "h", "час", "часа", "часов", "ч", "小时", "个小时"),
    "minute": ("minute", "minutes", "min", "mins", "минута", "минуты", "минут", "мин", "分钟"),
    "second": ("second", "seconds", "sec", "secs", "s", "секунда", "секунды", "секунд", "сек", "秒", "秒钟"),
    "km": ("km", "kilometer", "kilometers", "kilometre", "kilometres", "км", "километр", "километра", "километров",
           "公里", "千米"),
    "m": ("m", "meter", "meters", "metre", "metres", "м", "метр", "метра", "метров", "米"),
    "cm": ("cm", "centimeter", "centimeters", "см", "сантиметр", "сантиметра", "сантиметров", "厘米"),
    "mile": ("mile", "miles", "миля", "мили", "миль", "英里"),
    "inch": ("inch", "inches", "дюйм", "дюйма", "дюймов", "英寸"),
    "foot": ("ft", "foot", "feet", "фут", "фута", "футов", "英尺"),
    "speed": ("mph", "km/h", "kmh", "км/ч", "m/s", "м/с"),
    "degree": ("°", "°c", "°f", "℃", "℉", "degree", "degrees", "градус", "градуса", "градусов"),
    "kg": ("kg", "kilogram", "kilograms", "кг", "килограмм", "килограмма", "килограммов", "公斤", "千克"),
    "g": ("g", "gram", "grams", "г", "грамм", "грамма", "граммов", "克"),
    "t": ("t", "ton", "tons", "tonne", "tonnes", "т", "тонна", "тонны", "тонн", "吨"),
    "l": ("l", "liter", "liters", "litre", "litres", "л", "литр", "литра", "литров", "升"),
    "gb": ("gb", "gigabyte", "gigabytes", "гб", "гигабайт", "гигабайта", "гигабайтов"),
    "mb": ("mb", "megabyte", "megabytes", "мб", "мегабайт", "мегабайта", "мегабайтов"),
    # counts
    "person": ("people", "persons", "person", "человек", "чел", "人", "名", "位", "个人"),
    "time": ("times", "раз", "раза", "次", "遍", "倍"),
    "credit": ("credit", "credits", "кредит", "кредита", "кредитов", "学分"),
}
# "5 stars", "12 сотрудников", "3个": a counted thing the tables do not name.
COUNT = "count"
COUNT_UNITS = frozenset({"person", "time", "credit", COUNT})
UNIT_OF = {word: unit for unit, forms in UNITS.items() for word in forms}
# Chinese measure words of things (个 generic, 家 firms, 所 schools, 项 items ...): a count.
ZH_CLASSIFIERS = "个家所项件条种台辆座张本部场间层只艘架"
for _classifier in ZH_CLASSIFIERS:
    UNIT_OF.setdefault(_classifier, COUNT)
# Russian adjectives of a hyphenated quantity ("5-летний", "3-дневный"), by their stem.
ADJECTIVE_STEMS = {"летн": "year", "годичн": "year", "месячн": "month", "недельн": "week", "дневн": "day",
                   "суточн": "day", "часов": "hour", "минутн": "minute", "секундн": "second", "процентн": "%",
                   "километров": "km", "метров": "m", "кратн": "time"}
# Words that may stand between a number and its unit: "5 business days", "3 рабочих дня".
MODIFIERS = frozenset(
    "more full whole additional extra further business working calendar consecutive straight long short"
    " school bank banking trading clear"
    " рабочих рабочий рабочие рабочего календарных календарный календарные полных полный полные"
    " дополнительных дополнительные банковских банковские последовательных целых долгих лишних еще ещё".split()
)
_NEXT_WORD = re.compile(r"(?:[ \t\u00a0]-?[ \t\u00a0]?|-[ \t\u00a0]?)(?P<word>[A-Za-zА-Яа-яЁё]+)")


def units_agree(a: str | None, b: str | None) -> bool:
    """Can a quantity in unit ``a`` and one in unit ``b`` (same value) state the same fact?"""
    if a is None or b is None or a == b:
        return True
    return (a == COUNT and b in COUNT_UNITS) or (b == COUNT and a in COUNT_UNITS)


def is_unit_word(word: str) -> bool:
    return word.casefold() in UNIT_OF


@lru_cache(maxsize=None)
def _function_words(language: str) -> frozenset[str]:
    return stopwords(language) | stopwords("en")


def unit_after(text: str, position: int, language: str) -> tuple[str | None, int]:
    """The unit of a number that ends at ``position`` when no unit follows it directly: one found
    past at most two modifiers ("5 business days"), a Russian adjective ("5-летний"), a counted
    noun ("5 stars": COUNT), or None; with the end of what was read."""
    stop = _function_words(language)
    counted: int | None = None
    at = position
    for step in range(3):
        m = _NEXT_WORD.match(text, at)
        if m is None:
            break
        word = m.group("word").casefold().replace("ё", "е")
        unit = UNIT_OF.get(word)
        if unit is not None:
            return unit, m.end()
        if "-" in m.group() and step == 0:
            adjective = next((u for stem, u in ADJECTIVE_STEMS.items() if word.startswith(stem)), None)
            if adjective is not None:
                return adjective, m.end()
        lower = m.group("word").islower()
        content = lower and len(word) >= 3 and word not in stop
        if step == 0 and content and word not in MODIFIERS:
            counted = m.end()
        if not (word in MODIFIERS or content):
            break
        at = m.end()
    return (COUNT, counted) if counted is not None else (None, position)
