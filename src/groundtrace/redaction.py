"""Redaction: the one step that keeps secrets out of every text groundtrace composes.

Reasons and errors of Scores, log lines, exception messages groundtrace raises, span attributes and
the command line's output all pass through :func:`redact`, which replaces with ``[redacted]``:

- the secrets groundtrace was configured with (the judge's API key, the Langfuse, LangSmith and
  Phoenix keys, any key a sink or source was given): :class:`~groundtrace.config.Settings`
  registers those it read, and a sink, source or judge client registers a key passed to it;
- token shapes, whoever's they are: ``Bearer …``/``Basic …`` credentials, ``Authorization: …``
  headers, ``sk-…``/``pk-lf-…``/``lsv2_…`` keys, ``api_key=…``-style assignments and passwords
  in URLs.

The words around a secret stay, so a reason keeps its use ("HTTP 401: check OPENAI_API_KEY"), and a value in
a secret's place is removed only when it looks like a credential: advice such as "pass api_key=...",
"api_key=<your key>" or "api_key=$OPENAI_API_KEY" stays word for word.
The user's own question, contexts and answer are not redacted here: that is the mask's job
(:mod:`groundtrace.privacy`). This module imports nothing of groundtrace, so everything may use it.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable
from typing import Any

REDACTED = "[redacted]"
#: shorter values are not treated as secrets: redacting every "abc" would garble the text
MIN_SECRET_CHARS = 6

# Each pattern keeps its group 1 (the label) and replaces the group "value", when that value looks like a
# credential (see _is_credential): "pass api_key=...", "Bearer $TOKEN" and "OPENAI_API_KEY=<your key>" are advice.
_SHAPES = [
    # a header, wherever it is quoted: "Authorization: Bearer sk-...", "x-api-key: ..."
    re.compile(r"(?i)((?:proxy-)?authorization|x-api-key|api-key)(\"?\s*[:=]\s*\"?)(?!\[redacted)"
               r"(?:(?:bearer|basic|token)\s+)?(?P<value><[^<>\n]{1,60}>|[^\s\"'`,;]+)"),
    # a credential scheme with its token (one with a digit: "basic premise" is English)
    re.compile(r"(?i)\b(bearer|basic)\s+(?P<value>(?=[A-Za-z._~+/=-]*\d)[A-Za-z0-9._~+/=-]{6,})"),
    # an assignment to a secret-looking name: api_key=..., OPENAI_API_KEY="...", password: ...
    re.compile(r"(?i)([A-Za-z0-9_.-]*(?:api[_-]?key|secret[_-]?key|client[_-]?secret|"
               r"access[_-]?token|auth[_-]?token|refresh[_-]?token|password|passwd)[\"']?\s*[=:]\s*[\"']?)(?!\[redacted)"
               r"(?P<value><[^<>\n]{1,60}>|[^\s\"'`,;&)}\]]+)"),
    # a password in a URL: scheme://user:password@host
    re.compile(r"(://[^/\s:@]+:)(?P<value>[^/\s@]+)(?=@)"),
]
# values that stand for a credential without being one: "...", "***", "<your key>" (words in brackets), "$OPENAI_API_KEY",
# "${TOKEN}", "%API_KEY%", "YOUR_KEY", "your-key-here", an environment variable's name (OPENAI_API_KEY)
# or a bare scheme word ("Authorization: Bearer")
_PLACEHOLDER = re.compile(
    r"[.\u2026*xX-]+|<[^<>\d]*>|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|%[A-Za-z_][A-Za-z0-9_]*%|(?i:your)(?:[^a-z].*)?"
    r"|[A-Z]+|[A-Z][A-Z0-9]*(?:_[A-Z][A-Z0-9]*)+|(?i:bearer|basic|token)"
)
# keys whose shape names them, with no label around them
_KEYS = re.compile(r"\b(?:sk|pk|rk)-(?:[A-Za-z0-9]+-)*[A-Za-z0-9_]{8,}|\blsv2_[a-z]{2}_[A-Za-z0-9_]{8,}")
# a piece every match of a shape or key above contains, with the same case folding: a text without any
# is left as it is after one scan, instead of five (the third shape alone costs ~40 us on a Score's
# reason, and every Score's reason and error pass here)
_CLUES = re.compile(r"(?i)authori|api|secret|token|passw|bearer|basic|://|[spr]k-|lsv2_")


class Redactor:
    """The secrets known so far and the shapes of secrets in general; thread-safe."""

    def __init__(self) -> None:
        self._secrets: set[str] = set()
        self._lock = threading.Lock()
        self._pattern: re.Pattern[str] | None = None

    def register(self, values: Iterable[str | None]) -> None:
        """Remember secret values (None, blanks and values under MIN_SECRET_CHARS are ignored)."""
        new = {v.strip() for v in values if isinstance(v, str) and len(v.strip()) >= MIN_SECRET_CHARS}
        with self._lock:
            if new - self._secrets:
                self._secrets |= new
                # longest first, so a secret that contains another is replaced whole
                ordered = sorted(self._secrets, key=len, reverse=True)
                self._pattern = re.compile("|".join(map(re.escape, ordered)))

    def redact(self, text: str) -> str:
        if not text:
            return text
        pattern = self._pattern
        if pattern is not None:
            text = pattern.sub(REDACTED, text)
        if _CLUES.search(text) is None:
            return text
        for shape in _SHAPES:
            text = shape.sub(_keep_label, text)
        return _KEYS.sub(REDACTED, text)


def _is_credential(value: str) -> bool:
    """Whether a value in a secret's place is one: long enough (MIN_SECRET_CHARS, as for configured
    keys) and not a placeholder or a variable's name, which are advice to keep."""
    bare = value.rstrip(".:!?)]") or value  # the sentence's own stop is not the value's
    return len(bare) >= MIN_SECRET_CHARS and _PLACEHOLDER.fullmatch(bare) is None


def _keep_label(match: re.Match[str]) -> str:
    if not _is_credential(match.group("value")):
        return match.group(0)
    label = match.group(1)
    if match.re is _SHAPES[0]:
        return f"{label}{match.group(2)}{REDACTED}"
    if match.re is _SHAPES[1]:
        return f"{label} {REDACTED}"
    return f"{label}{REDACTED}"


_redactor = Redactor()


def redact(text: str) -> str:
    """``text`` with every known secret and every token shape replaced by ``[redacted]``."""
    return _redactor.redact(text)


def redact_optional(text: str | None) -> str | None:
    return None if text is None else _redactor.redact(text)


def register_secrets(*values: str | None) -> None:
    """Make these values known secrets of this process: from now on they never appear in a text
    groundtrace composes. Called by config for the keys it reads, and by the sinks, sources and the
    judge client for keys passed to them."""
    _redactor.register(values)


class RedactingFilter(logging.Filter):
    """Redacts a log record's message, and the text of its exception, before any handler sees it."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string is the handler's to report, as always
            return True
        record.msg, record.args = redact(message), ()
        if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        return True


_FILTER = RedactingFilter()


def get_logger(name: str) -> logging.Logger:
    """``logging.getLogger(name)`` whose records are redacted: every groundtrace module logs
    through one of these (a filter on a parent logger would not see its children's records)."""
    logger = logging.getLogger(name)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
    return logger


def failure_text(error: BaseException | None) -> str:
    """A failure said without its message: the exception's type and where it was raised (each frame's file,
    line and function, innermost last). For failures on the application's side of the mask (reading a request,
    building its Record), whose messages may quote the very text the mask was to hide (a validation error
    quotes its input)."""
    import traceback

    if error is None:
        return "an unknown failure"
    frames = traceback.extract_tb(error.__traceback__)[-6:]
    where = " <- ".join(f"{frame.filename.rsplit('/', 1)[-1]}:{frame.lineno} in {frame.name}" for frame in reversed(frames))
    return f"{type(error).__name__}" + (f" at {where}" if where else "") + " (its message is not shown: it may quote the text)"


class RateLimitedWarning:
    """A failure that may repeat for every record (a sink that cannot write, a full queue, a scoring process
    that cannot start) said as a rate, not a line per record: the first one at WARNING with its cause, then
    at most one summary per ``every_s`` ("sink jsonl failed 181 times in the last 60 s; last: ...").
    :meth:`settle` says what is still uncounted (a Monitor's close calls it). Thread-safe; the clock is
    injectable for the tests."""

    def __init__(self, logger: logging.Logger, what: str, every_s: float = 60.0, clock: Any = None) -> None:
        import time

        self.logger, self.what, self.every_s = logger, what, every_s
        self._clock = clock or time.monotonic
        self._lock = threading.Lock()
        self._since: float | None = None  # when the last line was said
        self._unsaid = 0
        self._last = ""
        self.total = 0

    def failed(self, cause: str, times: int = 1) -> None:
        with self._lock:
            self.total += times
            now = self._clock()
            self._last = cause
            if self._since is None:
                self._since = now
                first = True
            else:
                self._unsaid += times
                first = False
                if now - self._since < self.every_s:
                    return
            said, self._unsaid, window = self._unsaid, 0, now - (self._since or now)
            self._since = now
        if first:
            self.logger.warning("groundtrace: %s: %s (said once, then as a count at most every %.0f s)", self.what,
                                cause, self.every_s)
        else:
            self.logger.warning("groundtrace: %s: %d more in the last %.0f s (last: %s)", self.what, said, window,
                                cause)

    def settle(self) -> None:
        """Say what failed since the last line, if anything did."""
        with self._lock:
            said, self._unsaid, last = self._unsaid, 0, self._last
        if said:
            self.logger.warning("groundtrace: %s: %d more (last: %s)", self.what, said, last)


__all__ = ["REDACTED", "RateLimitedWarning", "failure_text", "RedactingFilter", "Redactor", "get_logger", "redact", "redact_optional",
           "register_secrets"]
