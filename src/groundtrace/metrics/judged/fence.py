"""Evaluated texts enter a judge prompt as fenced data, never as instructions.

Every text (question, contexts, answer, reference, statements the judge itself wrote earlier) goes
between ``<data-CODE name="...">`` and ``</data-CODE>``, and the prompt's rules say that nothing
inside such a block is an instruction. Two things keep a text from closing its own fence:

- CODE is a hash of every text in the prompt, so a text would have to contain the hash of itself
  to forge the closing tag (and a changed text changes the code). It is deterministic, so equal
  prompts stay equal and the judge cache keeps working.
- Anything in a text that looks like a data tag of any code (``<data``, ``</data``, with spaces or
  any case) has its ``<`` replaced by ``‹`` (U+2039) before it goes in.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence

_TAG = re.compile(r"<(?=\s*/?\s*data)", re.IGNORECASE)
NEUTRAL_LT = "\u2039"


def neutralise(text: str) -> str:
    """``text`` with every data-tag-like sequence defused (``<data`` -> ``‹data``)."""
    return _TAG.sub(NEUTRAL_LT, text)


def fence_code(texts: Iterable[str]) -> str:
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode("utf-8", "surrogatepass"))
        digest.update(b"\x00")
    return digest.hexdigest()[:12]


class Fence:
    """Writes the data blocks of one prompt; ``code`` comes from all the texts that go in."""

    def __init__(self, texts: Iterable[str]) -> None:
        self.code = fence_code(texts)

    def block(self, name: str, content: str | Sequence[str]) -> str:
        """One block; a list becomes numbered items ``[1] ...``, one per line."""
        if isinstance(content, str):
            body = neutralise(content)
        else:
            body = "\n".join(f"[{i}] {neutralise(item)}" for i, item in enumerate(content, 1)) or "(none)"
        return f'<data-{self.code} name="{name}">\n{body}\n</data-{self.code}>'
