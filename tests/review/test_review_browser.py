"""A reviewer in a real headless Chromium (Selenium with Debian's chromedriver) labels ten answers by keyboard,
closes the browser, reopens it and resumes where they stopped; the labels file holds exactly those decisions."""

from __future__ import annotations

import json
import shutil

import pytest

pytest.importorskip("selenium")
pytest.importorskip("starlette")
CHROMEDRIVER = shutil.which("chromedriver")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(not (CHROMEDRIVER and CHROMIUM),
                                reason="the browser test needs Debian's chromium and chromium-driver: "
                                       "apt-get install -y chromium chromium-driver")

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from groundtrace.review.queue import Filters, queue  # noqa: E402
from tests.review.samples import XSS, many, row, write  # noqa: E402
from tests.review.server import review_server  # noqa: E402


def browser(tmp_path):
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(flag)
    # the driver Debian installed, never one Selenium Manager would download
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)


def wait(driver) -> WebDriverWait:
    # the page re-renders the record after each label: an element read mid-render is looked up again
    return WebDriverWait(driver, 20, ignored_exceptions=(StaleElementReferenceException, NoSuchElementException))


def current_id(driver) -> str:
    return driver.find_element(By.CSS_SELECTOR, "#record .meta").text.split(" · ")[0]


def wait_saved(driver, count: int) -> None:
    wait(driver).until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-saved") == str(count))


def test_label_ten_by_keyboard_close_reopen_and_resume(tmp_path) -> None:
    rows = [*many(24), row("xss", 0.2, session=XSS)]
    scores, labels = write(rows, tmp_path / "scores.jsonl"), tmp_path / "labels.jsonl"
    order = [item.id for item in queue(rows, Filters(), {})]
    keys = "uusxuusuus"  # unsupported, supported, skip
    expected = dict(zip(order[:10], [{"u": "unsupported", "s": "supported", "x": "skip"}[k] for k in keys], strict=True))

    with review_server(scores, labels) as server:
        driver = browser(tmp_path)
        try:
            driver.get(server.url + "/")
            wait(driver).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#record .answer"))
            body = driver.find_element(By.TAG_NAME, "body")
            for count, key in enumerate(keys, 1):
                wait(driver).until(lambda d, i=count - 1: current_id(d) == order[i])
                body.send_keys(key)
                wait_saved(driver, count)
            assert driver.find_element(By.ID, "progress").text == "9 labelled: 6 unsupported, 1 skipped; " \
                "`fit` needs 30 with 8 of each"
            assert body.get_attribute("data-pwned") is None  # the session id, markup, stayed text
        finally:
            driver.quit()

        driver = browser(tmp_path)  # the browser closed and opened again: the page resumes at the first undecided
        try:
            driver.get(server.url + "/")
            wait(driver).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#record .meta"))
            wait(driver).until(lambda d: current_id(d) == order[10])
            labelled = driver.find_elements(By.CSS_SELECTOR, "#queue li[data-label]")
            assert len(labelled) == 10
        finally:
            driver.quit()

    decisions = [json.loads(line) for line in labels.read_text().splitlines()]
    assert {d["id"]: d["label"] for d in decisions} == expected and len(decisions) == 10


def test_the_rates_page_slider_counts_as_bench_and_a_cell_lists_its_answers(tmp_path) -> None:
    from groundtrace.report.views import confusion_at

    rows = many(30)
    scores, labels = write(rows, tmp_path / "scores.jsonl"), tmp_path / "labels.jsonl"
    from groundtrace.io.labels import append, decide

    for scored in rows[:20]:  # labels that disagree with the default threshold now and then
        append(labels, decide(scored.id, "unsupported" if scored.scores[0].value < 0.5 else "supported"))
    decided = {scored.id: int(scored.scores[0].value < 0.5) for scored in rows[:20]}

    with review_server(scores, labels) as server:
        driver = browser(tmp_path)
        try:
            driver.get(server.url + "/views")
            wait(driver).until(lambda d: d.find_element(By.ID, "views").get_attribute("data-ready") == "1")
            script = """
                const card = [...document.querySelectorAll('.gt-metric')].find(c => c.dataset.metric === 'lexical');
                const range = card.querySelector('[data-gt="range"]');
                range.value = arguments[0]; range.dispatchEvent(new Event('input'));
                const read = k => card.querySelector('[data-gt="' + k + '"]').dataset.value;
                return {flagged: read('flagged'), tp: read('tp'), fp: read('fp'), fn: read('fn'), tn: read('tn')};"""
            for threshold in ("0.3", "0.55"):
                shown = driver.execute_script(script, threshold)
                expected = confusion_at(rows, "lexical", float(threshold), decided)
                assert {k: int(v) for k, v in shown.items()} == {k: expected[k] for k in ("flagged", "tp", "fp", "fn", "tn")}
            # a cell lists its answers, each a link back to it in the queue
            driver.execute_script("""
                const card = [...document.querySelectorAll('.gt-metric')].find(c => c.dataset.metric === 'lexical');
                card.querySelector('[data-cell="tp"]').click();""")
            expected = confusion_at(rows, "lexical", 0.55, decided)
            wait(driver).until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-selected") == str(expected["tp"]))
            links = driver.find_elements(By.CSS_SELECTOR, "#selected a")
            assert [a.text for a in links] == [rows[i].id for i in expected["cells"]["tp"]]
            links[0].click()
            wait(driver).until(lambda d: current_id(d) == rows[expected["cells"]["tp"][0]].id)
        finally:
            driver.quit()
