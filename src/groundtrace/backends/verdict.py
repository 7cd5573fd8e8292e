"""The fitted verdict file that the `combined` metric asks (written by `groundtrace fit`, groundtrace.combine):
which metrics it combines, how, at which threshold, and when it escalates.

A component's value enters as the log-odds of its hallucination-oriented value (higher = more likely
unsupported, clipped away from 0 and 1), standardized; a logistic model with one offset per language
it was fitted on turns them into the probability that the answer is unsupported. A component that
failed on a record enters as its mean in the fit (said in the reason). The file is JSON: readable,
diffable, and loading it runs no code. It is read whole, once, by the process that builds the metric (a Monitor's
scoring process gets the verdict so read, not the file's name: a file rewritten while the application runs
changes nothing until the application restarts), and only a regular file of at most MAX_FILE_BYTES is read:
a FIFO or a device (``/dev/zero``) is refused before a byte is read. It is written to a temporary file beside
it and renamed into place: a failed write (a full disk) leaves the file that was there whole.
"""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from groundtrace.errors import GroundtraceError

FORMAT = "groundtrace-verdict/1"
_EDGE = 1e-4  # a value of exactly 0 or 1 has infinite log-odds: clipped, as any calibrated model does
#: the largest verdict file read (the shipped one is 3 KB; a fit with a cascade and many languages stays under 20 KB)
MAX_FILE_BYTES = 1 << 20
_REWRITE = "write it again with `groundtrace fit -o {path}`, or point GROUNDTRACE_VERDICT_FILE at another"


def log_odds(h: float) -> float:
    """The log-odds of a hallucination-oriented value in [0, 1]."""
    p = min(max(h, _EDGE), 1.0 - _EDGE)
    return math.log(p / (1.0 - p))


def sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


class VerdictFileError(GroundtraceError, ValueError):
    """A verdict file that cannot be used: says which file and what is wrong."""


@dataclass(frozen=True)
class Component:
    metric: str
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Contribution:
    metric: str
    value: float | None  # the component's hallucination-oriented value; None: it failed (its fit mean entered)
    weight: float  # what it added to the log-odds, against the fit's average record


@dataclass(frozen=True)
class LinearModel:
    """Logistic regression over standardized log-odds features, with per-language offsets."""

    features: list[str]
    mean: list[float]
    scale: list[float]
    coef: list[float]
    intercept: float
    language_offsets: dict[str, float] = field(default_factory=dict)

    def log_odds(self, values: Mapping[str, float | None], language: str | None) -> tuple[float, list[Contribution]]:
        z = self.intercept + self.language_offsets.get(language or "", 0.0)
        parts = []
        for name, mean, scale, coef in zip(self.features, self.mean, self.scale, self.coef, strict=True):
            value = values.get(name)
            x = mean if value is None else log_odds(value)
            weight = coef * (x - mean) / scale  # standardized: 0 for a value at the fit's mean
            z += weight
            parts.append(Contribution(name, value, weight))
        return z, parts

    def probability(self, values: Mapping[str, float | None], language: str | None) -> tuple[float, list[Contribution]]:
        z, parts = self.log_odds(values, language)
        return sigmoid(z), parts


@dataclass(frozen=True)
class Cascade:
    """Records whose combined probability lies in [low, high) are sent to ``metric`` (a judge, a Hub
    detector) and decided by ``model``, which reads its value beside the cheap ones."""

    metric: str
    low: float
    high: float
    model: LinearModel
    options: dict[str, Any] = field(default_factory=dict)
    share: float | None = None  # the share of the fit's records that fell in the band

    def covers(self, probability: float) -> bool:
        return self.low <= probability < self.high


@dataclass(frozen=True)
class VerdictModel:
    components: list[Component]
    model: LinearModel
    threshold: float
    target: str = "f1"
    cascade: Cascade | None = None
    fitted: dict[str, Any] = field(default_factory=dict)  # what it was fitted on: records, labels, file hash
    report: dict[str, Any] = field(default_factory=dict)  # the cross-validated figures `fit` printed

    @property
    def metric_names(self) -> list[str]:
        return [c.metric for c in self.components]

    # ------------------------------------------------------------------------------ the file
    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, **asdict(self)}

    def save(self, path: str | Path) -> None:
        """Write the file: to a temporary file beside it, then renamed into place. A write that fails (a full
        disk, a read-only folder) raises a VerdictFileError and leaves what was at ``path`` as it was."""
        path = Path(path)
        try:
            type(self).from_dict(self.to_dict())  # what could not be loaded back is not written
            text = json.dumps(self.to_dict(), indent=1, ensure_ascii=False, allow_nan=False) + "\n"
        except (KeyError, TypeError, ValueError) as error:
            raise VerdictFileError(f"verdict file {path} not written: the verdict is not one a file can hold: {error}") from None
        _write_whole(path, text.encode("utf-8"))

    @classmethod
    def load(cls, path: str | Path) -> VerdictModel:
        return cls.load_with_hash(path)[0]

    @classmethod
    def load_with_hash(cls, path: str | Path) -> tuple[VerdictModel, str]:
        """The verdict of ``path`` and the SHA-256 of the bytes it was read from; a VerdictFileError says which
        file, what is wrong with it and what to do."""
        path = Path(path)
        data = read_file(path)
        try:
            raw = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise VerdictFileError(f"verdict file {path} is not readable JSON ({error}): it was cut short or edited; "
                                   + _REWRITE.format(path=path)) from None
        return cls.from_raw(raw, path), hashlib.sha256(data).hexdigest()

    @classmethod
    def from_raw(cls, raw: Any, path: str | Path) -> VerdictModel:
        """:meth:`from_dict`, its refusal a VerdictFileError that names ``path``."""
        try:
            if not isinstance(raw, Mapping):
                raise ValueError(f"it holds a JSON {type(raw).__name__}, not an object")
            return cls.from_dict(raw)
        except KeyError as error:
            raise VerdictFileError(f"verdict file {path} is not a verdict written by `groundtrace fit`: it has no "
                                   f"field {error}; " + _REWRITE.format(path=path)) from None
        except (TypeError, ValueError) as error:
            raise VerdictFileError(f"verdict file {path} is not a verdict written by `groundtrace fit`: {error}; "
                                   + _REWRITE.format(path=path)) from None

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> VerdictModel:
        if raw.get("format") != FORMAT:
            raise ValueError(f"format {raw.get('format')!r}, expected {FORMAT!r}")
        model = _linear(raw["model"])
        components = [_component(c) for c in raw["components"]]
        if [c.metric for c in components] != model.features:
            raise ValueError("its components and its model's features differ")
        cascade = raw.get("cascade")
        threshold = _number(raw["threshold"], "threshold")
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold {threshold} is not in [0, 1]")
        return cls(
            components=components, model=model, threshold=threshold, target=str(raw.get("target", "f1")),
            cascade=None if cascade is None else Cascade(
                metric=cascade["metric"], low=_number(cascade["low"], "cascade.low"),
                high=_number(cascade["high"], "cascade.high"), model=_linear(cascade["model"], "cascade.model"),
                options=dict(cascade.get("options") or {}), share=cascade.get("share")),
            fitted=dict(raw.get("fitted") or {}), report=dict(raw.get("report") or {}),
        )


def _linear(raw: Mapping[str, Any], where: str = "model") -> LinearModel:
    offsets = raw.get("language_offsets") or {}
    model = LinearModel(features=[str(f) for f in raw["features"]], mean=_floats(raw["mean"], f"{where}.mean"),
                        scale=_floats(raw["scale"], f"{where}.scale"), coef=_floats(raw["coef"], f"{where}.coef"),
                        intercept=_number(raw["intercept"], f"{where}.intercept"),
                        language_offsets={str(k): _number(v, f"{where}.language_offsets.{k}") for k, v in offsets.items()})
    n = len(model.features)
    if not n or not len(model.mean) == len(model.scale) == len(model.coef) == n:
        raise ValueError("a model needs one mean, scale and coefficient per feature")
    if any(s <= 0 for s in model.scale):
        raise ValueError(f"{where}.scale: a feature scale must be positive")
    return model


def _number(value: Any, field: str) -> float:
    """A finite number, or a ValueError naming the field: a NaN intercept makes every record an error, an
    infinite offset flags (or passes) every answer of its language."""
    try:
        if isinstance(value, bool):
            raise TypeError
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{field} is {value!r}, not a number") from None
    if not math.isfinite(number):
        raise ValueError(f"{field} is {number!r}, not finite: a verdict's numbers must be finite")
    return number


def _floats(values: Sequence[Any], field: str) -> list[float]:
    return [_number(v, f"{field}[{i}]") for i, v in enumerate(values)]


def read_file(path: Path, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of ``path``, a regular file of at most ``limit`` bytes. Opened without waiting (a FIFO with no
    writer would hold the thread that builds the Monitor, and the lock the application's requests wait on),
    and refused before a byte is read when it is no regular file or too large."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise VerdictFileError(f"verdict file {path} does not exist: write one with `groundtrace fit -o {path}`, or "
                               "point GROUNDTRACE_VERDICT_FILE at the one it wrote") from None
    except OSError as error:
        raise VerdictFileError(f"verdict file {path} cannot be opened: {error.strerror or error}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "a FIFO" if stat.S_ISFIFO(info.st_mode) else \
                "a device" if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode) else "not a regular file"
            raise VerdictFileError(f"verdict file {path} is {kind}: only a regular file is read (the file "
                                   f"`groundtrace fit -o` wrote, not a pipe, a process substitution or a device)")
        if info.st_size > limit:
            raise VerdictFileError(f"verdict file {path} is {info.st_size:,} bytes, over the {limit:,} a verdict file "
                                   "may have: it is not a file `groundtrace fit` wrote")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:  # it grew while it was read
            raise VerdictFileError(f"verdict file {path} grew past the {limit:,} bytes a verdict file may have")
        return b"".join(chunks)
    except OSError as error:
        raise VerdictFileError(f"verdict file {path} cannot be read: {error.strerror or error}") from None
    finally:
        os.close(fd)


def _write_whole(path: Path, data: bytes) -> None:
    """``data`` in ``path`` whole, or nothing changed there: written and synced to a file of its own in the same
    folder, then renamed over ``path`` (a rename within a file system is atomic)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError as error:
        raise VerdictFileError(f"verdict file {path} not written: {_said(error)}") from None
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except OSError as error:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        kept = "the file there is as it was" if path.exists() else "nothing was left there"
        raise VerdictFileError(f"verdict file {path} not written: {_said(error)}; {kept}") from None


def _said(error: OSError) -> str:
    name = errno.errorcode.get(error.errno or 0)
    return f"{error.strerror or error}" + (f" ({name})" if name else "")


def _component(raw: Mapping[str, Any]) -> Component:
    options = dict(raw.get("options") or {})
    if raw["metric"] == "grounding":  # a file that does not say was fitted before grounding-5, on the cross-encoder alone
        options.setdefault("claims", "xe")
    return Component(raw["metric"], options)
