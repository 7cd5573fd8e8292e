"""A number is read with its unit or measure word, in English, Russian and Chinese (text.units,
text.numerals): "5 years" is not "5 business days", and is "5-year", "five years", "пять лет", "五年"."""

import pytest

from groundtrace.text.facts import FactIndex, extract_facts
from groundtrace.text.numbers import find_quantities
from groundtrace.text.units import units_agree


@pytest.mark.parametrize(
    ("text", "language", "expected"),
    [
        ("Refunds arrive within 5 business days.", "en", [(5, "day", "5 business days")]),
        ("a 5-year warranty", "en", [(5, "year", "5-year")]),
        ("five years, twenty-five people", "en", [(5, "year", "five years"), (25, "person", "twenty-five people")]),
        ("5-10 days, 5 to 10 years", "en", [(5, "day", "5"), (10, "day", "10 days"), (5, "year", "5"),
                                            (10, "year", "10 years")]),
        ("rated 5 stars", "en", [(5, "count", "5 stars")]),
        ("Room 5 is open; 83°F, 10 mph, 42 percentage", "en",
         [(5, None, "5"), (83, "degree", "83°F"), (10, "speed", "10 mph"), (42, "%", "42 percentage")]),
        ("one day, Rome2rio", "en", [(2, None, "2")]),  # "one" is left out; a number inside a word has no unit
        ("возврат за 5 рабочих дней", "ru", [(5, "day", "5 рабочих дней")]),
        ("5-летняя гарантия", "ru", [(5, "year", "5-летняя")]),
        ("гарантия пять лет, 300 долларов, 12 сотрудников", "ru",
         [(5, "year", "пять лет"), (300, "usd", "300 долларов"), (12, "count", "12 сотрудников")]),
        ("保修期5年", "zh", [(5, "year", "5年")]),
        ("5个工作日内退款", "zh", [(5, "day", "5个工作日")]),
        ("三年，两千元，十五人，3家公司", "zh",
         [(3, "year", "三年"), (2000, "cny", "两千元"), (15, "person", "十五人"), (3, "count", "3家")]),
        ("五千米，5千米，三米", "zh", [(5, "km", "五千米"), (5, "km", "5千米"), (3, "m", "三米")]),
        ("百分之五十，百分之12.5", "zh", [(50, "%", "百分之五十"), (12.5, "%", "百分之12.5")]),
        ("第三年，一次性，同一年", "zh", []),  # an ordinal, an idiom, a lone 一
    ],
)
def test_quantities_carry_their_unit(text, language, expected):
    found = [(q.value, q.unit, text[q.start:q.end]) for q in find_quantities(text, language)]
    assert found == expected


@pytest.mark.parametrize(
    ("a", "b", "agree"),
    [("year", "year", True), ("year", "day", False), ("rub", "usd", False), ("year", None, True),
     (None, "%", True), ("person", "count", True), ("count", "time", True), ("count", "year", False),
     ("person", "time", False), ("km", "count", False)],
)
def test_units_agree(a, b, agree):
    assert units_agree(a, b) is agree
    assert units_agree(b, a) is agree


@pytest.mark.parametrize(
    ("context", "answer", "language", "supported"),
    [
        # the planted case of issue 23: same number, another unit
        ("Refunds arrive within 5 business days.", "The warranty is 5 years.", "en", {"5 year": False}),
        ("Every laptop comes with a 5-year warranty.", "The warranty lasts five years.", "en", {"5 year": True}),
        ("The fee is 300 dollars.", "The fee is 300 rubles.", "en", {"300 rub": False}),
        ("It has 5 stars.", "It takes 5 days.", "en", {"5 day": False}),
        ("The firm has 12 employees.", "The firm employs 12 people.", "en", {"12 person": True}),
        ("Деньги возвращаются в течение 5 рабочих дней.", "Гарантия действует 5 лет.", "ru", {"5 year": False}),
        ("На ноутбук даётся 5-летняя гарантия.", "Гарантия действует пять лет.", "ru", {"5 year": True}),
        ("Взнос составляет 300 долларов.", "Взнос составляет 300 рублей.", "ru", {"300 rub": False}),
        ("退款将在5个工作日内到账。", "保修期为5年。", "zh", {"5 year": False}),
        ("笔记本电脑享有5年保修。", "保修五年。", "zh", {"5 year": True}),
        ("会议有30人参加。", "会议持续30天。", "zh", {"30 day": False}),
        ("Room 5 is on the left.", "It takes 5 days.", "en", {"5 day": True}),  # a bare number is no unit
    ],
)
def test_a_fact_is_supported_only_in_a_unit_that_agrees(context, answer, language, supported):
    index = FactIndex.build(context, language)
    found = {f.key: index.supports(f) for f in extract_facts(answer, language) if f.kind == "number"}
    assert found == supported
