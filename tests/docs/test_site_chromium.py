"""The docs site in a real browser: Debian's headless Chromium renders built pages (the Material theme's scripts
run), the test reads the DOM it left (--dump-dom) and checks that a screenshot was drawn. Skipped, saying so,
where Chromium is absent, as tests/report/test_report_chromium.py is."""

from __future__ import annotations

import html
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.snippets import ROOT
from tests.report.test_report_chromium import CHROMIUM, FLAGS

pytestmark = pytest.mark.skipif(not CHROMIUM, reason="headless browser tests need Debian's chromium: apt-get install -y chromium")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("site")
    # not --strict: tests/docs/test_site.py holds the site to that; here the pages' rendering is the question
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--no-strict", "--site-dir", str(folder)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return folder


def chromium(tmp_path: Path, *args: str) -> str:
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    result = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
                            check=False, capture_output=True, text=True, timeout=90)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def rendered_text(dom: str) -> str:
    """The page's text as the browser left it: tags out, entities decoded, whitespace folded."""
    text = re.sub(r"<(script|style)\b.*?</\1>", " ", dom, flags=re.DOTALL)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", text)))


def screenshot(tmp_path: Path, page: Path, name: str) -> bytes:
    shot = tmp_path / f"{name}.png"
    chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,1400", page.as_uri())
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", data[16:24]) == (1280, 1400)  # IHDR width, height
    return data


def test_the_home_page_renders_with_its_example(site: Path, tmp_path: Path) -> None:
    page = site / "index.html"
    dom = chromium(tmp_path, "--dump-dom", page.as_uri())
    assert "<title>groundtrace</title>" in dom
    text = rendered_text(dom)
    assert "groundtrace scores the answers of retrieval-augmented (RAG) applications" in text
    assert "groundtrace.evaluate(" in text  # the example's code, highlighted into spans and read back whole
    assert 'flagged text: "30 days"' in text  # and its output
    # the theme's script ran: its copy buttons are not in the built HTML, Material's JavaScript adds one per block
    assert "data-clipboard-target" not in (site / "index.html").read_text(encoding="utf-8")
    assert dom.count("data-clipboard-target=") >= 2, dom[:2000]
    assert 'class="js-focus-visible js"' in dom
    data = screenshot(tmp_path, page, "home")
    assert len(data) > 30_000  # a blank or unstyled page compresses to a few kilobytes


def test_a_metric_page_renders(site: Path, tmp_path: Path) -> None:
    page = site / "metrics" / "grounding" / "index.html"
    dom = chromium(tmp_path, "--dump-dom", page.as_uri())
    assert re.search(r"<title>grounding - groundtrace</title>", dom), re.findall(r"<title>.*?</title>", dom)
    assert "grounding" in rendered_text(dom).split("Skip to content", 1)[-1]
    data = screenshot(tmp_path, page, "grounding")
    assert len(data) > 30_000
