"""Masks as a user would write them, importable by name for GROUNDTRACE_MASK=tests.privacy_masks:..."""

from __future__ import annotations

import re

EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+")


def hide_emails(text: str) -> str:
    """Every e-mail address becomes <email> (which changes the text's length: offsets must follow)."""
    return EMAIL.sub("<email>", text)


def refuse(text: str) -> str:
    """A mask that fails, quoting the text in its message as real code might."""
    raise ValueError(f"cannot mask {text!r}")
