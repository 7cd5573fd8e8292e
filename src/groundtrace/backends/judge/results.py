"""What a judge call ends in: a :class:`JudgeResult` of validated objects, or a :class:`JudgeError` that says
what went wrong and what to do; the structured-output modes, and the token count of one call."""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, Field

from groundtrace.errors import GroundtraceError
from groundtrace.redaction import redact
from groundtrace.score import Cost

T = TypeVar("T", bound=BaseModel)
Mode = Literal["json_schema", "json_object", "text"]
MODES: tuple[Mode, ...] = ("json_schema", "json_object", "text")


class JudgeError(GroundtraceError, RuntimeError):
    """Anything that kept the judge from returning a validated answer.

    ``kind`` is one of: config, connection, timeout, rate_limit, server, http, refusal, truncated,
    parse, validation, unavailable (the circuit breaker refused the call: the judge failed too often just
    now). ``status`` is the HTTP status where there was one. ``fault``: the judge itself failed (down, slow,
    failing, an unreadable reply), which the circuit breaker counts; a refusal of one request does not.
    """

    def __init__(self, message: str, *, kind: str, status: int | None = None, fault: bool | None = None) -> None:
        super().__init__(redact(message))  # it quotes the server, which may echo our key
        self.kind = kind
        self.status = status
        self.fault = kind in FAULTS if fault is None else fault


#: the kinds of JudgeError that say the judge is down, slow or failing (the circuit breaker counts them)
FAULTS = frozenset({"connection", "timeout", "server", "rate_limit"})


# ---------------------------------------------------------------------------------------- results


class JudgeResult(BaseModel, Generic[T]):
    """What :meth:`JudgeClient.complete` returns: one validated object per sample.

    ``cost`` counts every request made for this result (repairs included). On a cache hit
    (``cached=True``) nothing was spent now; ``cost`` is what the answer cost when it was computed.
    """

    parsed: list[T]
    raw: list[str]
    cost: Cost
    mode: Mode
    model: str
    cached: bool = False
    latency_ms: float
    requests: int = Field(default=0, description="HTTP requests made, retries and repairs included")

    @property
    def value(self) -> T:
        """The first (with ``n=1``, the only) sample."""
        return self.parsed[0]


class Usage:
    """Tokens and HTTP requests of one call, repairs and retries included."""

    def __init__(self) -> None:
        self.input_tokens = 0
        self.output_tokens = 0
        self.requests = 0

    def add(self, response: Any) -> None:
        usage = getattr(response, "usage", None)
        if usage is not None:
            self.input_tokens += int(getattr(usage, "prompt_tokens", 0) or 0)
            self.output_tokens += int(getattr(usage, "completion_tokens", 0) or 0)

