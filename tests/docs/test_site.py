"""The docs site builds with --strict: every nav entry exists, every page is in the nav, every internal link and
anchor resolves, mkdocstrings finds every API object it is asked for."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.docs.snippets import ROOT


def test_site_builds_strict(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-6000:]
    assert (tmp_path / "site" / "index.html").exists()
