"""text.conflicts: each claim fact against its evidence, hand-computed cases for every rule in ru, zh and en."""

from __future__ import annotations

import pytest

from groundtrace.text.conflicts import PRECISE, RULES, check_answer, check_claim
from groundtrace.text.measures import convert, interval, precision, qualifier

# (language, claim, evidence sentences, [(claim fact text, verdict, rule, evidence fact text or None)])
CASES = [
    # conflicts: the same thing, another value
    ("en", "The museum opened in 1987.", ["The museum opened in 1978 after a long delay."],
     [("1987", "conflict", "conflict_year", "1978")]),
    ("ru", "Музей открылся в 1987 году.", ["Музей открылся в 1978 году."],
     [("1987 году", "conflict", "conflict_year", "1978 году")]),
    ("zh", "博物馆于1987年开放。", ["博物馆于1978年开放。"], [("1987年", "conflict", "conflict_year", "1978年")]),
    ("en", "The street has a 30 km/h limit.", ["The speed limit on the street is 50 km/h."],
     [("30 km/h", "conflict", "conflict_value", "50 km/h")]),
    ("ru", "Стоимость разрешения составляет 700 рублей в год.", ["Стоимость разрешения составляет 600 рублей в год."],
     [("700 рублей", "conflict", "conflict_value", "600 рублей")]),
    ("zh", "门票价格为80元。", ["门票价格为60元。"], [("80元", "conflict", "conflict_value", "60元")]),
    ("en", "The new building has 3 floors.", ["The new building must have at least 5 floors."],
     [("3 floors", "conflict", "conflict_bound", "5 floors")]),
    ("ru", "В новом здании 3 этажа.", ["В новом здании должно быть не менее 5 этажей."],
     [("3 этажа", "conflict", "conflict_bound", "5 этажей")]),
    ("zh", "这栋新楼有3层。", ["这栋新楼至少有5层。"], [("3层", "conflict", "conflict_bound", "5层")]),
    ("en", "The shop opens at 9:00.", ["The shop opens at 7:00 every day."], [("9:00", "conflict", "conflict_time", "7:00")]),
    ("ru", "Касса открывается в 9:00.", ["Касса открывается в 7:00."], [("9:00", "conflict", "conflict_time", "7:00")]),
    ("zh", "商店上午9点开门。", ["商店上午7点开门。"], [("上午9点", "conflict", "conflict_time", "上午7点")]),
    ("en", "The deal was signed on March 7, 2024.", ["The deal was signed on 5 March 2024."],
     [("March 7, 2024", "conflict", "conflict_date", "5 March 2024")]),
    ("ru", "Договор подписали 7 марта 2024 г.", ["Договор подписали 05.03.2024."],
     [("7 марта 2024 г.", "conflict", "conflict_date", "05.03.2024")]),
    ("zh", "协议于2024年3月7日签署。", ["协议于2024年3月5日签署。"], [("2024年3月7日", "conflict", "conflict_date", "2024年3月5日")]),
    ("en", "The museum opened in 1978.", ["Opened on 5 March 1978, the museum is the oldest."], [("1978", "supported", "same_year", None)]),
    # reformatting: digits, words, numerals, separators, dates in any order
    ("en", "The hall seats 1,200 people.", ["The hall seats 1.2 thousand people."], [("1,200 people", "supported", "same_value", "1.2 thousand people")]),
    ("ru", "Зал вмещает две тысячи человек.", ["Зал вмещает 2 000 человек."], [("две тысячи человек", "supported", "same_value", "2 000 человек")]),
    ("zh", "共有两千四百五十人参加。", ["参加人数为2450人。"], [("两千四百五十人", "supported", "same_value", "2450人")]),
    ("en", "It was signed on 2024-03-05.", ["The deal was signed on March 5, 2024."], [("2024-03-05", "supported", "same_date", None)]),
    ("ru", "Договор подписали 5 марта 2024 г.", ["Договор подписали 05.03.2024."], [("5 марта 2024 г.", "supported", "same_date", None)]),
    ("zh", "协议于2024年3月5日签署。", ["The deal was signed on 5 March 2024."], [("2024年3月5日", "supported", "same_date", None)]),
    ("en", "Rain is likely, 25 percent.", ["The chance of rain is 25%."], [("25 percent", "supported", "same_value", "25%")]),
    ("ru", "Ставка налога 4 процента.", ["Ставка налога составляет 4%."], [("4 процента", "supported", "same_value", "4%")]),
    ("zh", "税率为百分之四。", ["税率为4%。"], [("百分之四", "supported", "same_value", "4%")]),
    ("en", "The office opens at 9 am daily.", ["The office opens at 09:00."], [("9 am", "supported", "same_time", None)]),
    ("ru", "Смена начинается в 8 утра.", ["Смена начинается в 8:00."], [("8 утра", "supported", "same_time", None)]),
    # units and conversions
    ("en", "Returns are accepted within two weeks.", ["Returns are accepted within 14 days."],
     [("two weeks", "supported", "unit_conversion", "14 days")]),
    ("ru", "Маршрут длиной 1,5 км.", ["Длина маршрута 1500 метров."], [("1,5 км", "supported", "unit_conversion", "1500 метров")]),
    ("zh", "步行需要半小时。", ["步行需要30分钟。"], [("半小时", "supported", "unit_conversion", "30分钟")]),
    ("ru", "Поездка занимает полтора часа.", ["Поездка занимает 90 минут."], [("полтора часа", "supported", "unit_conversion", "90 минут")]),
    ("en", "It was 26 degrees Celsius.", ["It was 79 °F in the afternoon."], [("26 degrees", "supported", "unit_conversion", "79 °F")]),
    ("en", "The ticket costs 30 euros.", ["The ticket costs 30 dollars."], [("30 euros", "absent", "absent_number", None)]),
    # bounds and ranges
    ("en", "The building has 7 floors.", ["The building has 5 floors or more."], [("7 floors", "supported", "within_bound", "5 floors")]),
    ("en", "Refunds take up to 30 days.", ["Refunds take up to 30 days."], [("30 days", "supported", "same_value", "30 days")]),
    ("en", "A refund takes 14 days.", ["A refund takes up to 30 days."], [("14 days", "supported", "within_bound", "30 days")]),
    ("en", "The course takes 3 weeks.", ["The course takes between 2 and 4 weeks."], [("3 weeks", "supported", "within_range", "2")]),
    ("ru", "Брожение длится 4 дня.", ["Брожение длится от 3 до 5 дней."], [("4 дня", "supported", "within_range", "3")]),
    ("zh", "报名需要3天。", ["报名需要2至4天。"], [("3天", "supported", "within_range", "2")]),
    ("ru", "Дети младше 12 лет проходят бесплатно.", ["Дети до 12 лет проходят бесплатно."], [("12 лет", "supported", "same_value", "12 лет")]),
    # approximations and rounding
    ("en", "About 50 people came.", ["Exactly 49.7 people came, on average."], [("50 people", "supported", "approximation", "49.7 people")]),
    ("ru", "Пришло около 50 человек.", ["Пришло 48 человек."], [("50 человек", "supported", "approximation", "48 человек")]),
    ("zh", "大约50人参加了会议。", ["会议有48人参加。"], [("50人", "supported", "approximation", "48人")]),
    ("en", "About 50 people came.", ["Exactly 41 people came."], [("50 people", "conflict", "conflict_value", "41 people")]),
    ("en", "The fund holds $1.5 million in cash.", ["The fund holds $1,483,000 in cash."],
     [("$1.5 million", "supported", "rounding", "$1,483,000")]),
    # arithmetic the evidence supports
    ("en", "The hall holds 42 seats in total.", ["The hall has 12 seats in the balcony and 30 seats in the stalls."],
     [("42 seats", "supported", "arithmetic_total", "12 seats")]),
    ("ru", "Всего в зале 42 места.", ["В зале 12 мест на балконе и 30 мест в партере."], [("42 места", "supported", "arithmetic_total", "12 мест")]),
    ("zh", "公司共有42名员工。", ["公司有12名员工在北京，30名员工在上海。"], [("42名", "supported", "arithmetic_total", "12名")]),
    ("en", "Each ticket costs $100.", ["Three tickets cost $300, so 3 tickets in all."], [("$100", "supported", "arithmetic_per_unit", "$300")]),
    ("en", "The bridge took 9 years to build, between the two dates.", ["Building the bridge started in 1978 and the bridge opened in 1987."],
     [("9 years", "supported", "arithmetic_difference", "1978")]),
    ("ru", "В среднем за один билет 500 рублей.", ["Четыре билета стоят 2000 рублей, то есть 4 билета."],
     [("500 рублей", "supported", "arithmetic_per_unit", "2000 рублей")]),
    ("en", "The hall holds 42 seats.", ["The hall has 12 seats in the balcony and 30 seats in the stalls."],
     [("42 seats", "absent", "absent_number", None)]),  # no "total": a sum is not read as the claim's source
    # unrelated numbers do not conflict
    ("en", "The park has 3 lakes.", ["The park has 5 entrances and a 12 km trail."], [("3 lakes", "absent", "absent_number", None)]),
    ("ru", "В парке 3 озера.", ["В парке 5 входов и тропа длиной 12 км."], [("3 озера", "absent", "absent_number", None)]),
    ("zh", "公园里有3个湖。", ["公园有5个入口。"], [("3个", "absent", "absent_number", None)]),
    ("en", "The library opened in 1987.", ["The stadium was renovated in 1978."], [("1987", "absent", "absent_year", None)]),
    ("en", "It was 26 degrees.", ["The oven is set to 180 degrees."], [("26 degrees", "absent", "absent_number", None)]),
]


def _table(checks):
    return [(c.fact.text, c.verdict, c.rule, c.evidence_fact.text if c.evidence_fact else None) for c in checks]


@pytest.mark.parametrize(("language", "claim", "evidence", "expected"), CASES, ids=[c[1][:40] for c in CASES])
def test_each_rule(language: str, claim: str, evidence: list[str], expected: list) -> None:
    checks = [c for c in check_claim(claim, evidence, language) if c.fact.kind != "name"]
    assert _table(checks) == expected


def test_every_rule_has_a_case() -> None:
    ruled = {rule for *_, expected in CASES for _, _, rule, _ in expected}
    assert set(RULES) - ruled <= {"same_name", "absent_name", "absent_date", "absent_time", "arithmetic_share"}


def test_reason_names_both_values_and_offsets_point_at_them() -> None:
    claim, evidence = "The museum opened in 1987.", ["Built in 1970, the museum opened in 1978."]
    (check,) = check_claim(claim, evidence, "en")
    assert check.reason == "the contexts say 1978; the answer says 1987"
    assert claim[check.fact.start:check.fact.end] == "1987"
    assert check.evidence_index == 0
    assert evidence[0][check.evidence_fact.start:check.evidence_fact.end] == "1978"


def test_share_names_its_sum() -> None:
    (check,) = check_claim("A quarter of them, 25% of the group, passed.", ["30 students of the 120 students in the group passed."], "en")
    assert (check.verdict, check.rule, check.detail) == ("supported", "arithmetic_share", "30 / 120 = 25%")


def test_names_are_supported_or_absent_never_in_conflict() -> None:
    checks = check_claim("The bridge was designed by Anna Keller.", ["The bridge was designed by Maria Lind."], "en")
    assert [(c.fact.text, c.verdict, c.rule) for c in checks] == [("Anna Keller", "absent", "absent_name")]


def test_rules_switch_off() -> None:
    claim, evidence = "The building has 7 floors.", ["The building has 5 floors or more."]
    assert check_claim(claim, evidence, "en", rules=PRECISE) == []  # within_bound off, absent_number off: no verdict
    assert "within_bound" not in PRECISE and "conflict_year" in PRECISE
    (check,) = check_claim(claim, evidence, "en", rules=set(RULES) - {"within_bound"})
    assert (check.verdict, check.rule) == ("absent", "absent_number")


def test_prompt_references_are_no_facts() -> None:
    assert check_claim("The rain chance is 40% (based on passages 1, 2, and 3).", ["The chance of rain is 40%."], "en")[0].rule \
        == "same_value"
    assert len(check_claim("The rain chance is 40% (based on passages 1, 2, and 3).", ["The chance of rain is 40%."], "en")) == 1


def test_a_band_that_holds_the_value_is_no_conflict() -> None:
    evidence = ["For delays of 15-29 minutes you get 25%; for delays of 30-59 minutes, 50%."]
    checks = check_claim("A 45-minute delay pays 50%.", evidence, "en")
    assert [(c.fact.text, c.verdict) for c in checks] == [("45-minute", "supported"), ("50%", "supported")]


def test_check_answer_offsets_are_in_the_answer() -> None:
    answer = "The museum is large. It opened in 1987."
    [(start, check)] = [(s, c) for s, c in check_answer(answer, ["The museum opened in 1978."], "en") if c.fact.kind == "year"]
    assert answer[start + check.fact.start:start + check.fact.end] == "1987"
    assert check.verdict == "conflict"


def test_normalisation_helpers() -> None:
    assert convert(2, "week", "day") == (14, 14)
    assert convert(1, "month", "day") == (28, 31)
    assert convert(1, "year", "month") == (12, 12)
    assert convert(1, "km", "usd") is None
    assert precision("50", 50) == 10 and precision("1.5 million", 1.5e6) == 100000 and precision("3,5", 3.5) == 0.1
    text = "at least 5 floors, 5 floors or more, up to 30 days, около 50, 50人左右, 不少于3天"
    marks = [qualifier(text, text.index(n), text.index(n) + len(n)) for n in ("5 floors,", "5 floors or", "30 days",
                                                                            "50,", "50人", "3天")]
    assert marks == ["ge", None, "le", "approx", "approx", "ge"]
    assert interval(5, "ge").holds(7) and not interval(5, "ge").holds(3) and interval(30, "le").holds(14)
