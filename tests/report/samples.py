"""Scored records made by hand, so that every value the report shows is known in advance."""

from __future__ import annotations

from groundtrace.record import Record
from groundtrace.score import Score, ScoredRecord, Span

# If the report let any of this through as markup, the page would set data-pwned on <body>.
XSS = "<script>document.body.setAttribute('data-pwned','1')</script><img src=x onerror=\"document.body.setAttribute('data-pwned','2')\">"

RU_ANSWER = "Общежитие стоит 2 500 рублей в месяц, оплата картой Сбербанка."
ZH_ANSWER = "学生可以在三十天内退款，运费为9.99美元。"
EN_ANSWER = f"The fee is 200 rubles. {XSS} Refunds take 5 days."


def span(answer: str, text: str, label: str = "unsupported", score: float | None = None) -> Span:
    start = answer.index(text)
    return Span(start=start, end=start + len(text), text=text, label=label, score=score)


def score(metric: str, value: float | None, *, higher_is_better: bool = False, threshold: float = 0.5,
          spans: list[Span] | None = None, reason: str = "", error: str | None = None, latency_ms: float = 10.0,
          details: dict | None = None) -> Score:
    hallucinated = None if value is None else (value < threshold if higher_is_better else value >= threshold)
    return Score(metric=metric, value=value, higher_is_better=higher_is_better, threshold=threshold,
                 hallucinated=hallucinated, reason=reason, spans=spans or [], error=error, latency_ms=latency_ms,
                 details=details or {})


def rows() -> list[ScoredRecord]:
    """Four records: ru, zh and two en; overlapping spans of two metrics, a failed metric, markup in
    every text field, gold labels and spans in metadata. Sorted by grounding (descending): ru-1,
    zh-1, en-ok, then en-xss (failed) last; lexical >= 0.4 keeps all but ru-1."""
    ru = Record(id="ru-1", question="Сколько стоит общежитие?", language="ru",
                contexts=["Плата за проживание в общежитии составляет 1 879 рублей в месяц.", "Оплата через личный кабинет."],
                answer=RU_ANSWER, metadata={"label": 1, "spans": [{"start": 16, "end": 28, "text": "2 500 рублей", "type": "Evident Conflict"}]})
    zh = Record(id="zh-1", question="退款需要多长时间？", language="zh", contexts=["退款在三十天内办理。"], answer=ZH_ANSWER,
                metadata={"label": 1})
    en_xss = Record(id=f"en-xss {XSS}", question=f"What is the fee? {XSS}", contexts=[f"The fee is 100 rubles. {XSS}", "Refunds take 5 days."],
                    answer=EN_ANSWER, metadata={"label": 0})
    en_ok = Record(id="en-ok", question="How long do refunds take?", contexts=["Refunds take 5 days."],
                   answer="Refunds take 5 days.", language="en", metadata={"label": 0})
    return [
        ScoredRecord(record=ru, scores=[
            score("grounding", 0.9, reason="the price “2 500 рублей” is not in the contexts", latency_ms=120.0,
                  spans=[span(RU_ANSWER, "стоит 2 500 рублей в месяц", score=0.9)]),
            score("lexical", 0.2, higher_is_better=True, threshold=0.4, reason="2 keyword(s) not found: рублей, сбербанка",
                  spans=[span(RU_ANSWER, "рублей в месяц, оплата", "unexpected word"), span(RU_ANSWER, "Сбербанка", "unexpected word")]),
        ]),
        ScoredRecord(record=zh, scores=[
            score("grounding", 0.7, reason="运费 is not in the contexts", spans=[span(ZH_ANSWER, "运费为9.99美元", score=0.7)],
                  latency_ms=300.0),
            score("lexical", 0.45, higher_is_better=True, threshold=0.4, reason="all keywords found"),
        ]),
        ScoredRecord(record=en_xss, scores=[
            score("grounding", None, error=f"detector crashed {XSS}", latency_ms=5.0),
            score("lexical", 0.8, higher_is_better=True, threshold=0.4, reason=f"fine {XSS}",
                  spans=[span(EN_ANSWER, "200 rubles", "unexpected number")],
                  details={"relevant_sentences": ["Refunds take 5 days."]}),
        ]),
        ScoredRecord(record=en_ok, scores=[
            score("grounding", 0.1, reason="all claims supported", details={"supporting_contexts": [0]}),
            score("lexical", 0.95, higher_is_better=True, threshold=0.4, reason="all keywords found"),
        ]),
    ]
