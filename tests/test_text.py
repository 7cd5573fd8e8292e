import pytest

from groundtrace.text import guess_language, split_sentences, stopwords, terms, tokenize, words
from groundtrace.text.facts import FactIndex, extract_facts
from groundtrace.text.numbers import find_dates, find_quantities, parse_number


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("Студент может пересдать экзамен два раза.", "ru"),
        ("The student may retake the exam twice.", "en"),
        ("学生可以补考两次。", "zh"),
        ("学生可以在 iPhone 上补考两次。", "zh"),
        ("Der Student darf die Prüfung zweimal wiederholen und das ist gut.", "de"),
        ("", "en"),
        ("12345 !!!", "en"),
    ],
)
def test_guess_language(text, language):
    assert guess_language(text) == language


def test_tokens_keep_punctuation_off_words_and_carry_offsets():
    text = "Hello, world! State-of-the-art (really) don't: 3,5 and 1 879."
    tokens = tokenize(text)
    assert [t.text for t in tokens] == ["Hello", "world", "State-of-the-art", "really", "don't", "3,5", "and", "1 879"]
    assert all(text[t.start : t.end] == t.text for t in tokens)


def test_russian_words_fold_case_and_yo():
    assert words("Ёлка, ЁЖИК и «ель».", "ru") == ["елка", "ежик", "и", "ель"]


def test_chinese_is_segmented_by_jieba_with_offsets():
    text = "学生可以借阅图书。"
    tokens = tokenize(text, "zh")
    assert [t.text for t in tokens] == ["学生", "可以", "借阅", "图书"]
    assert all(text[t.start : t.end] == t.text for t in tokens)


def test_stopwords_come_from_stopwords_iso():
    assert {"и", "в", "не"} <= stopwords("ru")
    assert {"the", "and"} <= stopwords("en")
    assert {"的", "了"} <= stopwords("zh")
    assert stopwords("xx") == frozenset()


def test_sentences_respect_abbreviations_decimals_and_cjk():
    text = "Dr. Smith paid $3.5 million. Was it worth it? J. Smith said yes."
    assert [s.text for s in split_sentences(text)] == [
        "Dr. Smith paid $3.5 million.", "Was it worth it?", "J. Smith said yes."]
    assert [s.text for s in split_sentences("Это сказал проф. Иванов. Т.е. да.")] == ["Это сказал проф. Иванов.", "Т.е. да."]
    assert [s.text for s in split_sentences("北京是首都。上海很大！对吗？")] == ["北京是首都。", "上海很大！", "对吗？"]
    for s in split_sentences(text):
        assert text[s.start : s.end] == s.text


@pytest.mark.parametrize(
    ("written", "language", "value"),
    [("1 879", "ru", 1879), ("1\u00a0879", "ru", 1879), ("1879", "en", 1879), ("1,879", "en", 1879),
     ("1,879", "ru", 1.879), ("3,5", "ru", 3.5), ("1,879.50", "en", 1879.5), ("1.879,50", "de", 1879.5),
     ("1.879.000", "ru", 1879000), ("0.25", "en", 0.25), ("1.2.3", "en", None)],
)
def test_parse_number(written, language, value):
    assert parse_number(written, language) == value


def test_thousands_written_differently_compare_equal():
    assert [t.text for t in terms("стоит 1 879 рублей", "ru")] == ["стоит", "1879", "рублей"]
    assert [t.text for t in terms("costs 1,879 rubles", "en")] == ["costs", "1879", "rubles"]


def test_a_digit_run_too_long_for_a_float_is_a_term_not_a_crash():
    # 400 digits parse as infinity (a WiCE web page held such a run; evidence selection tokenizes every context)
    assert [t.text for t in terms("id " + "7" * 400, "en")] == ["id", "inf"]


def test_quantities_in_three_languages_share_one_form():
    ru = find_quantities("срок 30 дней, 3,5 млн руб., 45 %", "ru")
    en = find_quantities("within 30 days, 3.5 million rubles, 45 percent", "en")
    zh = find_quantities("30天内，350万卢布，45％", "zh")
    expected = [(30, "day"), (3_500_000, "rub"), (45, "%")]
    for found in (ru, en, zh):
        assert [(q.value, q.unit) for q in found] == expected


def test_dates_in_three_languages_share_one_form():
    for text, language in [("5 марта 2024 года", "ru"), ("March 5, 2024", "en"), ("5 March 2024", "en"),
                           ("2024-03-05", "en"), ("05.03.2024", "ru"), ("2024年3月5日", "zh")]:
        assert [d.key for d in find_dates(text, language)] == ["2024-03-05"], text
    assert [d.key for d in find_dates("в марте 2024 г.", "ru")] == ["2024-03"]


def test_facts_are_numbers_dates_names_and_acronyms():
    text = "In Alaska, technicians earn $23.70 per hour, says the BLS. The Fair Labor Standards Act of 1938 applies."
    facts = [(f.kind, f.key) for f in extract_facts(text, "en")]
    assert facts == [("name", "alaska"), ("number", "23.7 usd"), ("name", "bls"),
                     ("name", "fair labor standards act"), ("year", "1938")]


def test_sentence_initial_words_prompt_references_and_list_numbers_are_not_facts():
    text = "According to Passage 2, the fee is low.\n1. What matters is speed."
    assert extract_facts(text, "en") == []


def test_russian_names_match_across_inflection_and_chinese_names_by_substring():
    index = FactIndex.build("Жители Верхнеозёрска оформляют разрешение в МФЦ.", "ru")
    facts = {f.key: index.supports(f) for f in extract_facts("Разрешение в Верхнеозёрске дают в МФЦ и в Сбербанке.", "ru")}
    assert facts == {"верхнеозерске": True, "мфц": True, "сбербанке": False}
    zh = FactIndex.build("巴勒斯坦解放组织21日宣布成立委员会。", "zh")
    assert [zh.supports(f) for f in extract_facts("巴勒斯坦解放组织宣布了决定。", "zh") if f.kind == "name"] == [True]


def test_a_year_is_supported_by_a_full_date_and_a_month_by_a_day():
    index = FactIndex.build("The law took effect on 5 March 2024.", "en")
    found = {f.key: index.supports(f) for f in extract_facts("It passed in 2024, in March 2024, not in 2023.", "en")}
    assert found == {"2024": True, "2024-03": True, "2023": False}
