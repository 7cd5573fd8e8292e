"""Scripted metrics for the combined metric's tests: a costly metric (a judge's verdicts, scripted by
answer, with a price) and a metric with overlapping spans. Registered per test by the fixture."""

from groundtrace.metrics.base import Metric, Result
from groundtrace.score import Cost, Span

CONTEXT = "The museum opens at 9:00 and closes at 17:00. Entry costs 12 euros; children under 12 enter free."
SUPPORTED = {"question": "When does it open?", "contexts": [CONTEXT], "answer": "It opens at 9:00 and entry costs 12 euros."}
INVENTED = {"question": "When does it open?", "contexts": [CONTEXT],
            "answer": "It opens at 7:00 on weekdays, parking is 5 euros, and the café serves breakfast."}

# a costly metric whose answers are scripted: what a judge would say, and what it cost
JUDGED = {SUPPORTED["answer"]: 0.05, INVENTED["answer"]: 0.95}


class ScriptedJudge(Metric):
    name = "scripted_judge"
    higher_is_better = False
    default_threshold = 0.5
    calls: list[str] = []

    def compute(self, record, language):
        ScriptedJudge.calls.append(record.answer)
        if record.answer not in JUDGED:
            raise RuntimeError("the judge is down")
        return Result(JUDGED[record.answer], "scripted", cost=Cost(input_tokens=100, output_tokens=10, usd=0.01))


class SpanMaker(Metric):
    """Flags two overlapping spans of every answer: the union must merge them."""

    name = "span_maker"
    higher_is_better = False
    default_threshold = 0.5

    def compute(self, record, language):
        answer = record.answer
        return Result(0.9, "spans", spans=[Span(start=0, end=8, text=answer[0:8]), Span(start=3, end=12, text=answer[3:12])])
