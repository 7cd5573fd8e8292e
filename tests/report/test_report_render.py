import json

import numpy as np

from groundtrace.measure.classification import roc_auc
from groundtrace.record import Record
from groundtrace.report import render_report
from groundtrace.report.records import REASON_CHARS
from groundtrace.score import ScoredRecord
from tests.report.dom import marked_chars, parse
from tests.report.samples import RU_ANSWER, XSS, ZH_ANSWER, rows, score


def page(records=None, **kwargs):
    records = rows() if records is None else records
    return parse(render_report(records, **kwargs)), records


def section(doc, index):
    return doc.find("details", id=f"r{index}")


def test_the_table_has_one_row_per_record_with_each_metrics_value():
    doc, records = page()
    body = doc.find("table", id="records").find("tbody")
    trs = body.find_all("tr")
    assert len(trs) == len(records) == 4
    heads = [th.text for th in doc.find("table", id="records").find("thead").find_all("th")]
    assert heads == ["#", "question", "lang", "answer", "grounding", "lexical", "label", "ms"]
    cells = [[td.get("data-value") for td in tr.find_all("td")] for tr in trs]
    assert [c[4] for c in cells] == ["0.9", "0.7", "", "0.1"]  # "" = the failed metric
    assert [c[5] for c in cells] == ["0.2", "0.45", "0.8", "0.95"]
    assert [c[6] for c in cells] == ["1", "1", "0", "0"]
    assert [tr.get("data-flagged") for tr in trs] == ["1", "1", "0", "0"]
    assert trs[2].find_all("td")[4].text == "error"


def label_cells(doc):
    return [tr.find_all("td")[1] for tr in doc.find("table", id="records").find("tbody").find_all("tr")]


def test_a_row_shows_the_questions_first_words_and_keeps_the_id_for_hover_and_sorting():
    doc, records = page()
    cells = label_cells(doc)
    # the XSS question has no space after its fifth word within 60 characters: cut there, as markup text
    assert [c.text for c in cells] == ["Сколько стоит общежитие?", "退款需要多长时间？",
                                       "What is the fee? " + XSS[:43] + "…", "How long do refunds take?"]
    ids = [r.id for r in records]
    assert [c.get("title") for c in cells] == [c.get("data-id") for c in cells] == [c.get("data-value") for c in cells] == ids
    assert [c.find("a").get("href") for c in cells] == ["#r0", "#r1", "#r2", "#r3"]
    assert cells[2].find_all("script") == [] and cells[2].find_all("img") == []  # the question stayed text


def test_a_long_question_is_cut_after_a_word_and_a_record_without_one_shows_its_answer():
    question = "Which of the three campus dormitories is the cheapest one for first-year students?"
    rows = [ScoredRecord(record=Record(id="run-1", question=question, contexts=["c"], answer="a"),
                         scores=[score("lexical", 0.5)]),
            ScoredRecord(record=Record(id="run-2", contexts=["c"], answer="Refunds\n take five   days."),
                         scores=[score("lexical", 0.5)])]
    doc, _ = page(rows)
    assert [c.text for c in label_cells(doc)] == [
        "Which of the three campus dormitories is the cheapest one…", "Refunds take five days."]
    assert [c.get("title") for c in label_cells(doc)] == ["run-1", "run-2"]


def test_marks_cover_exactly_the_spans_of_each_metric_and_of_the_gold_labels():
    doc, records = page()
    for index, row in enumerate(records):
        answer = section(doc, index).find("p", cls="answer")
        assert answer.text == row.record.answer
        want = {}
        for scored in row.scores:
            for sp in scored.spans:
                want.setdefault(scored.metric, set()).update(range(sp.start, sp.end))
        for gold in row.record.metadata.get("spans", []):
            want.setdefault("gold", set()).update(range(gold["start"], gold["end"]))
        assert marked_chars(answer) == want


def test_overlapping_spans_are_cut_into_disjoint_marks_with_every_covering_metric():
    doc, _ = page()
    marks = [(m.text, m.get("data-sources"), m.get("class")) for m in section(doc, 0).find("p", cls="answer").find_all("mark")]
    assert marks == [
        ("стоит ", "grounding", "n1"),
        ("2 500 ", "grounding gold", "n1 gold"),
        ("рублей", "grounding lexical gold", "n2 gold"),
        (" в месяц", "grounding lexical", "n2"),
        (", оплата", "lexical", "n1"),
        ("Сбербанка", "lexical", "n1"),
    ]
    assert RU_ANSWER[16:28] == "2 500 рублей"


def test_the_tooltip_names_label_metric_probability_and_reason():
    doc, _ = page()
    both = section(doc, 0).find("p", cls="answer").find_all("mark")[2].get("title").split("\n")
    assert both == [
        "grounding: unsupported (p=0.90) — the price “2 500 рублей” is not in the contexts",
        "lexical: unexpected word — 2 keyword(s) not found: рублей, сбербанка",
        "gold: Evident Conflict",
    ]
    zh = section(doc, 1).find("p", cls="answer").find("mark")
    assert zh.text == "运费为9.99美元" and zh.get("title") == "grounding: unsupported (p=0.70) — 运费 is not in the contexts"


def test_a_long_reason_is_cut_in_the_tooltip_but_whole_in_the_scores_table():
    records = rows()
    long_reason = "x" * (REASON_CHARS + 50)
    records[0].scores[0].reason = long_reason
    doc, _ = page(records)
    assert section(doc, 0).find("mark").get("title").endswith("x" * REASON_CHARS + "…")
    assert section(doc, 0).find("tr", data_metric="grounding").find("td", cls="reason").text.strip() == long_reason


def test_markup_in_any_text_is_shown_as_text_never_run():
    html = render_report(rows())
    assert XSS not in html and "<img src=x" not in html
    doc = parse(html)
    # the report's own scripts (the shared views' and the table's) and the views' data, which is JSON, not code
    scripts = doc.find_all("script")
    assert [s.get("type") for s in scripts] == ["application/json", None, None] and not doc.find_all("img")
    blob = scripts[0].text
    assert "<" not in blob and json.loads(blob)["rows"][2]["id"] == f"en-xss {XSS}"  # tojson escapes < > & '
    xss = section(doc, 2)
    assert XSS in xss.find("p", cls="answer").text
    assert XSS in xss.find("div", cls="question").text
    assert XSS in xss.find("li", cls="context").text
    assert XSS in xss.find("tr", data_metric="grounding").find("span", cls="error").text
    assert XSS in xss.find("tr", data_metric="lexical").find("td", cls="reason").text
    assert XSS in doc.find("section", id="errors").text


def test_each_score_shows_value_verdict_reason_and_error():
    doc, _ = page()
    scores = {tr.get("data-metric"): tr for tr in section(doc, 2).find_all("tr", cls="score")}
    failed, ok = scores["grounding"], scores["lexical"]
    assert failed.find("td", cls="value").text == "—" and failed.find("td", cls="verdict").text == "error"
    assert ok.find("td", cls="value").text == "0.800" and ok.find("td", cls="verdict").text == "grounded"
    assert section(doc, 0).find("tr", data_metric="grounding").find("td", cls="verdict").text == "hallucinated"


def test_texts_carry_their_language_and_direction():
    doc, _ = page()
    assert section(doc, 0).find("p", cls="answer").get("lang") == "ru"
    assert section(doc, 1).find("p", cls="answer").get("lang") == "zh"
    assert section(doc, 1).find("li", cls="context").get("lang") == "zh"
    assert section(doc, 2).find("p", cls="answer").get("lang") is None  # unknown: no guess
    assert all(p.get("dir") == "auto" for p in doc.find_all("p", cls="answer"))
    assert ZH_ANSWER in doc.find("table", id="records").text


def test_context_passages_are_marked_only_where_a_metric_names_them():
    doc, _ = page()
    relevant = section(doc, 2).find_all("li", cls="context")[1].find("mark")
    assert (relevant.text, relevant.get("class"), relevant.get("data-sources")) == ("Refunds take 5 days.", "support", "lexical")
    assert section(doc, 3).find("li", cls="context").find("mark").text == "Refunds take 5 days."
    assert not section(doc, 0).find_all("li", cls="context")[0].find_all("mark")


def test_summary_counts_flags_errors_and_slowest_records():
    doc, _ = page()
    summary = {tr.get("data-metric"): [c.text for c in tr.find_all("td")] for tr in doc.find("table", cls="metrics").find("tbody").find_all("tr")}
    # direction, threshold, records, errors, flagged, mean, mean ms, AUC, precision, recall, F1
    assert summary["grounding"][:6] == ["higher = hallucinated", "0.500", "4", "1", "2/3 (67%)", f"{(0.9 + 0.7 + 0.1) / 3:.3f}"]
    assert summary["lexical"][:6] == ["higher = grounded", "0.400", "4", "0", "1/4 (25%)", f"{(0.2 + 0.45 + 0.8 + 0.95) / 4:.3f}"]
    assert summary["grounding"][7:] == ["1.000", "1.000", "1.000", "1.000"]
    slow = [li.find("a").get("title") for li in doc.find("section", id="slowest").find_all("li")]
    assert slow == ["zh-1", "ru-1", "en-ok", f"en-xss {XSS}"]  # 310, 130, 20 and 15 ms
    # labelled like the table's rows: the question's first words, the id on hover
    assert doc.find("section", id="slowest").find("a").text == "退款需要多长时间？"
    assert [a.text for a in doc.find("section", id="errors").find_all("a")] == ["What is the fee? " + XSS[:43] + "…"]
    assert doc.find("section", id="errors").find("h3").text == "Errors: 1"


def test_histograms_always_and_roc_and_reliability_per_metric_when_labelled():
    doc, _ = page()
    for metric in ("grounding", "lexical"):
        figure = doc.find("figure", data_metric=metric)
        assert figure.find_all("svg", cls="histogram") and figure.find_all("svg", cls="roc")
        assert figure.find_all("svg", cls="reliability")
    lexical = doc.find("figure", data_metric="lexical")
    bars = lexical.find("svg", cls="histogram").find_all("g", cls="bar")
    assert sum(int(b.find("title").text.split(": ")[1].split()[0]) for b in bars) == 4
    # lexical, oriented as hallucination = 1 - value, against labels 1, 1, 0, 0
    auc = roc_auc(np.array([1, 1, 0, 0]), np.array([0.8, 0.55, 0.2, 0.05]))
    assert lexical.find("svg", cls="roc").find("text", cls="auc").text == f"AUC {auc:.3f}"
    points = lexical.find("svg", cls="roc").find("polyline").get("points").split()
    assert len(points) == 5  # (0, 0) and one point per distinct score


def test_without_labels_there_is_no_roc():
    records = rows()
    for row in records:
        row.record.metadata = {}
    doc, _ = page(records)
    assert doc.find_all("svg", cls="histogram") and not doc.find_all("svg", cls="roc")
    assert "label" not in [th.text for th in doc.find("table", id="records").find_all("th")]


def test_labels_from_a_labelled_file_are_joined_by_id():
    records = rows()
    for row in records:
        row.record.metadata = {}
    labelled = {"ru-1": {"label": 1, "spans": [{"start": 0, "end": 9, "text": "Общежитие", "type": "x"}]},
                "en-ok": {"label": 0}}
    doc, _ = page(records, labelled=labelled)
    trs = doc.find("table", id="records").find("tbody").find_all("tr")
    assert [tr.find_all("td")[6].text for tr in trs] == ["1", "—", "—", "0"]
    assert marked_chars(section(doc, 0).find("p", cls="answer"))["gold"] == set(range(9))


def test_an_empty_file_gives_a_page_that_says_so():
    doc, _ = page([])
    assert doc.find("section", id="empty").find("h2").text == "No records"
    assert not doc.find_all("table")


def with_sessions(sessions):
    records = rows()
    for row, session in zip(records, sessions, strict=True):
        row.record.session_id = session
    return records


def test_conversations_count_turns_and_flags_per_metric_and_the_table_gets_a_session_column():
    doc, _ = page(with_sessions(["chat-1", "chat-1", "chat-2", None]))
    table = doc.find("section", id="conversations").find("table")
    heads = [th.text for th in table.find("thead").find_all("th")]
    assert heads == ["session", "turns", "flagged turns", "grounding flagged", "lexical flagged"]
    found = [[tr.find("th").text, *(td.text for td in tr.find_all("td"))] for tr in table.find("tbody").find_all("tr")]
    # chat-1: both turns flagged by grounding (0.9, 0.7 >= 0.5), one by lexical (0.2 < 0.4); chat-2's grounding failed
    assert found == [["chat-1", "2", "2", "2/2 (100%)", "1/2 (50%)"], ["chat-2", "1", "0", "0/0", "0/1 (0%)"]]
    assert table.find("a").get("href") == "#session=chat-1"  # shows that conversation's turns in the table

    records = doc.find("table", id="records")
    assert [th.text for th in records.find("thead").find_all("th")][:4] == ["#", "question", "lang", "session"]
    trs = records.find("tbody").find_all("tr")
    assert [tr.get("data-session") for tr in trs] == ["chat-1", "chat-1", "chat-2", ""]
    assert [tr.find_all("td")[3].get("data-value") for tr in trs] == ["chat-1", "chat-1", "chat-2", ""]
    options = [o.get("value") for o in doc.find("select", name="session").find_all("option")]
    assert options == ["", "chat-1", "chat-2"]


def test_without_sessions_there_is_no_conversations_section_and_no_session_column():
    doc, _ = page()
    assert not doc.find_all("section", id="conversations") and not doc.find_all("select", name="session")
    assert "session" not in [th.text for th in doc.find("table", id="records").find("thead").find_all("th")]


def test_a_session_id_is_shown_as_text_never_run():
    doc, _ = page(with_sessions([XSS, None, None, None]))
    assert doc.find("section", id="conversations").find("th", scope="row").text == XSS
    assert len(doc.find_all("script")) == 3  # the views' data and script, the table's script: no other


def test_a_flagged_share_is_rounded_one_way_in_the_summary_and_the_views():
    """3 of 24 is 12.5%: the summary (Python) and the views (the page's script, toFixed) both say 13%."""
    from groundtrace.report.templates import percent

    assert (percent(3 / 24), percent(1 / 8), percent(0.145), percent(0.0), percent(None)) == \
        ("13%", "13%", "14%", "0%", "—")
    records = [ScoredRecord(record=Record(id=f"r{i}", question="Q?", contexts=["Refunds take 5 days."],
                                          answer="Refunds take 5 days."),
                            scores=[score("lexical", 0.9 if i < 3 else 0.1)]) for i in range(24)]
    doc, _ = page(records)
    [cell] = [node for node in doc.iter() if node.tag == "td" and "flagged-share" in node.classes]
    assert cell.text == "3/24 (13%)"
