"""The review app's API through Starlette's test client: the page's token and Host guard the labels file, a
decision is on disk when the answer says saved, a record comes with its flagged claims and the passages
they were checked against (the real offline metrics), a trace link is built safely, fit runs on the labels."""

from __future__ import annotations

import json
import re

import pytest

pytest.importorskip("starlette")

from starlette.testclient import TestClient  # noqa: E402

from groundtrace import Record  # noqa: E402
from groundtrace.metrics import get_metric  # noqa: E402
from groundtrace.review.app import Review, create_app  # noqa: E402
from groundtrace.io.labels import read_decisions  # noqa: E402
from groundtrace.score import ScoredRecord  # noqa: E402
from tests.review.samples import XSS, many, row  # noqa: E402


def client_for(review: Review) -> tuple[TestClient, dict[str, str]]:
    client = TestClient(create_app(review, host="testserver"))
    page = client.get("/")
    assert page.status_code == 200
    token = json.loads(re.search(r"const TOKEN = (\"[^\"]+\");", page.text).group(1))
    return client, {"X-Groundtrace-Token": token}


def test_a_decision_is_on_disk_when_the_page_is_told_it_is_saved(tmp_path) -> None:
    labels = tmp_path / "labels.jsonl"
    client, token = client_for(Review(many(12), labels, reviewer="ana"))

    answer = client.post("/api/label", json={"id": "r003", "label": "unsupported", "note": "fee is wrong"}, headers=token)
    assert answer.status_code == 200
    assert answer.json()["saved"]["label"] == "unsupported"
    assert answer.json()["progress"]["sentence"] == "1 labelled: 1 unsupported; `fit` needs 30 with 8 of each"
    [line] = labels.read_text().splitlines()
    assert {k: v for k, v in json.loads(line).items() if k != "at"} == {"id": "r003", "label": "unsupported",
                                                                         "note": "fee is wrong", "reviewer": "ana"}
    queue = client.get("/api/queue", headers=token).json()
    assert [item["label"] for item in queue["items"] if item["id"] == "r003"] == ["unsupported"]

    # refused, and nothing written: an unknown record, an unknown label
    assert client.post("/api/label", json={"id": "nope", "label": "skip"}, headers=token).status_code == 404
    assert client.post("/api/label", json={"id": "r003", "label": "maybe"}, headers=token).status_code == 400
    assert len(labels.read_text().splitlines()) == 1


def test_only_the_page_may_call_the_api(tmp_path) -> None:
    labels = tmp_path / "labels.jsonl"
    client, token = client_for(Review(many(3), labels))
    # another site's page can send a form or a simple request, never this header
    assert client.post("/api/label", json={"id": "r000", "label": "skip"}).status_code == 403
    assert client.post("/api/label", json={"id": "r000", "label": "skip"},
                       headers={"X-Groundtrace-Token": "guess"}).status_code == 403
    assert client.get("/api/queue").status_code == 403
    # a page on another name that resolves here (DNS rebinding) is turned away by its Host
    assert client.get("/", headers={"Host": "evil.example"}).status_code == 400
    assert not labels.exists()


def test_a_record_shows_the_passage_each_flagged_claim_was_checked_against(tmp_path) -> None:
    record = Record(id="dorm", question="Сколько стоит общежитие?",
                    contexts=["Плата за проживание в общежитии составляет 1 879 рублей в месяц.",
                              "Библиотека работает до 20:00."],
                    answer="Общежитие стоит 2 500 рублей в месяц.")
    scored = ScoredRecord(id="dorm", record=record, scores=[get_metric(m).score(record) for m in ("grounding", "facts")])
    assert all(s.hallucinated for s in scored.scores)
    client, token = client_for(Review([scored], tmp_path / "labels.jsonl"))

    shown = client.get("/api/record", params={"id": "dorm"}, headers=token).json()
    [claim] = shown["claims"]
    assert claim["text"] == "Общежитие стоит 2 500 рублей в месяц." and claim["metrics"] == ["facts", "grounding"]
    # the dormitory fee sentence, not the library's hours, is what the claim was read against
    assert claim["passages"][0] == {"context": 0, "start": 0, "end": 64,
                                    "text": "Плата за проживание в общежитии составляет 1 879 рублей в месяц."}
    assert {s["metric"]: s["hallucinated"] for s in shown["scores"]} == {"grounding": True, "facts": True}


def test_trace_links_fill_the_template_url_encoded_and_only_over_http(tmp_path) -> None:
    rows = [row("a b/c", 0.2, session=XSS)]
    review = Review(rows, tmp_path / "l.jsonl", trace_url="http://localhost:6006/traces/{trace_id}?session={session_id}")
    client, token = client_for(review)
    shown = client.get("/api/record", params={"id": "a b/c"}, headers=token).json()
    assert shown["trace_link"] == ("http://localhost:6006/traces/4bf92f3577b34da6a3ce929d0e0e4736?session="
                                   "%3Cimg%20src%3Dx%20onerror%3D%22document.body.dataset.pwned%3D1%22%3E")
    with pytest.raises(ValueError, match="must start with http"):  # refused before the app starts
        Review(rows, tmp_path / "l.jsonl", trace_url="javascript:alert(1)//{trace_id}")
    # a template naming an id the record lacks gives no link rather than a broken one
    assert Review(rows, tmp_path / "l.jsonl", trace_url="http://x/{run_id}").trace_link(review.items[0]) is None


def test_fit_runs_on_what_is_labelled(tmp_path) -> None:
    pytest.importorskip("sklearn")
    labels = tmp_path / "labels.jsonl"
    rows = many(40)
    client, token = client_for(Review(rows, labels))
    for scored in rows:  # the label follows the value, with a few disagreements
        value = scored.scores[0].value
        unsupported = (value < 0.45) != (scored.id in {"r001", "r002", "r005"})
        client.post("/api/label", json={"id": scored.id, "label": "unsupported" if unsupported else "supported"},
                    headers=token)
    assert len(read_decisions(labels)) == 40

    done = client.post("/api/fit", headers=token).json()
    assert done["ok"], done.get("output")
    assert done["labelled"] == 40
    assert [row["scorer"] for row in done["rows"]] == ["combined", "lexical alone"]
    assert all(0.0 <= row["auc"] <= 1.0 for row in done["rows"])
    # saved beside the labels file, with the one setting that applies it
    assert done["verdict"] == str(tmp_path / "labels.verdict.json") and (tmp_path / "labels.verdict.json").exists()
    assert done["use"] == f"GROUNDTRACE_VERDICT_FILE={tmp_path / 'labels.verdict.json'}"


def test_fit_with_too_few_labels_says_why(tmp_path) -> None:
    pytest.importorskip("sklearn")
    client, token = client_for(Review(many(12), tmp_path / "labels.jsonl"))
    client.post("/api/label", json={"id": "r000", "label": "unsupported"}, headers=token)
    done = client.post("/api/fit", headers=token).json()
    assert not done["ok"] and "error" in done["output"]


def test_the_rates_page_draws_the_shared_views_over_the_labels_decided_so_far(tmp_path) -> None:
    from groundtrace.report.views import views_data

    rows = many(12)
    review = Review(rows, tmp_path / "labels.jsonl")
    client, token = client_for(review)
    for key, label in (("r000", "unsupported"), ("r001", "supported"), ("r002", "skip")):
        client.post("/api/label", json={"id": key, "label": label}, headers=token)

    page = client.get("/views")
    assert page.status_code == 200 and page.headers["content-security-policy"].startswith("default-src 'self'")
    assert review.labels() == {"r000": 1, "r001": 0}  # the skip is no label
    # the page carries the same blob the report's views draw from, with these labels
    blob = views_data(rows, review.labels())
    assert json.dumps(blob["rows"][0]["label"]) == "1" and blob["rows"][2]["label"] is None
    assert 'id="views"' in page.text and "3 labelled" not in page.text and "2 labelled: 1 unsupported, 1 skipped" in page.text
