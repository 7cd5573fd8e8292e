"""Hypothesis strategies for what real inputs contain when they go wrong: any unicode, lone surrogates,
control characters, right-to-left and combining marks, empty and huge fields, wrong types, nesting."""

from __future__ import annotations

from hypothesis import strategies as st

ODD = ["\x00", "\x07", "\x1b", "\x7f", "\x85", "\x9f", "\ud800", "\udfff", "\ud83d", "\u200b", "\u200f",
       "\u202e", "\u2028", "\u2029", "\ufeff", "\ufffd", "\u0301", "\r", "\n", "\t", " ", "\u3000",
       "😀", "👩\u200d💻", "ß", "İ", "ﬁ", "Ⅻ", "١٢٣", "²", "1 879", "2,5", "-", "'", '"', "\\", "{", "["]
WORDS = ["Paris", "is", "the", "capital", "of", "France", "Москва", "столица", "России", "рублей", "1889",
         "北京", "是", "中国", "的", "首都", "1 879", "2 500", "in", "месяц", "built", "tower", "not", "2024-03-05"]

odd_text = st.lists(st.one_of(st.sampled_from(ODD), st.characters()), max_size=30).map("".join)
word_text = st.lists(st.sampled_from(WORDS), min_size=1, max_size=15).map(" ".join)
# just over the default answer limit (100,000): the metrics must refuse it, fast
huge_text = st.integers(min_value=100_001, max_value=110_000).map(lambda n: ("Paris 1889 " * (n // 11 + 1))[:n])
ordinary_text = st.one_of(word_text, odd_text, st.just(""), word_text.flatmap(lambda w: odd_text.map(lambda o: w + o + w)))
#: text as it comes: mostly words (so metrics get to work), often odd, sometimes empty, rarely huge
#: (the last branch, so that shrinking moves away from it)
text = st.integers(min_value=0, max_value=19).flatmap(lambda i: huge_text if i == 19 else ordinary_text)

scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                    st.floats(allow_nan=True, allow_infinity=True), text)
#: JSON-like values of any shape, nested
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                      st.dictionaries(st.one_of(st.sampled_from(
                                                          ["text", "page_content", "content", "id", "answer",
                                                           "question", "role", "messages"]), odd_text),
                                                          inner, max_size=4)),
                      max_leaves=12)
#: what JSON can carry (no NaN or infinity, no surrogates in keys it must encode)
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**63), max_value=2**63),
                         st.floats(allow_nan=False, allow_infinity=False), text)
json_values = st.recursive(json_scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                                st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                           max_leaves=12)

contexts = st.one_of(st.lists(text, max_size=4), st.lists(st.one_of(text, values), max_size=4), values)
#: a record as a mapping: usually the right fields with odd text, sometimes wrong types or missing fields
record_fields = {
    "id": st.one_of(st.none(), st.text(max_size=8), st.integers(), values),
    "question": st.one_of(text, values),
    "contexts": contexts,
    "answer": st.one_of(text, text, text, values),
    "reference": st.one_of(st.none(), text),
    "language": st.one_of(st.none(), st.sampled_from(["en", "ru", "zh", "EN-us", "", "xx", "1"]), values),
    "metadata": st.one_of(st.just({}), values),
}
records = st.fixed_dictionaries({}, optional=record_fields)
well_formed_records = st.fixed_dictionaries({"question": text, "contexts": st.lists(text, min_size=1, max_size=3),
                                             "answer": text}, optional={"language": st.sampled_from(["en", "ru", "zh"])})
#: what a caller may hand a batch: mostly mappings, or anything at all
inputs = st.one_of(records, records, well_formed_records, values)
