"""Models of the Hugging Face Hub (or folders on disk) for the hub metrics (`lettuce`, `nli`): where a model
is, one clear error when it cannot be had, and one loaded copy per process.

``locate`` answers "where is it" without importing torch: a folder on disk, else the Hub's cache (the
huggingface_hub cache, ``HF_HOME``/``HF_HUB_CACHE`` as huggingface_hub reads them), else a download by
transformers, which is never attempted when the Hub is switched off (``HF_HUB_OFFLINE=1``, read by
huggingface_hub itself) or the metric's ``local_files_only`` option is set. ``shared`` loads a model once per
process and key (model, device, options) and remembers a failure, so a Monitor's worker, its scoring
process or a Ray actor loads it once and a model that cannot be had costs one attempt, not one per record.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from groundtrace._extras import MissingExtraError, ModelUnavailableError, missing_extra

T = TypeVar("T")
# a Hub id: "name" or "owner/name" (letters, digits, - _ .), as the Hub allows them
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(?:/[\w.-]+)?")


@dataclass(frozen=True)
class ModelSource:
    """Where a model is: ``name`` as the user gave it, ``path`` for ``from_pretrained`` (a folder or the Hub
    id), ``local_only`` when nothing may be downloaded (a folder, a cached model, or the Hub switched off)."""

    name: str
    path: str
    local_only: bool


def hub_offline(extra: str) -> bool:
    """Whether huggingface_hub is told not to reach the Hub (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE)."""
    try:
        from huggingface_hub import constants
    except ImportError as error:
        raise missing_extra(extra, "models from the Hugging Face Hub", error) from None
    return bool(constants.is_offline_mode())


def locate(model: str, *, extra: str, local_files_only: bool = False, revision: str | None = None) -> ModelSource:
    """The folder or cached Hub model named ``model``; raises ModelUnavailableError when it is neither and
    may not be downloaded. Imports huggingface_hub only (no torch, no transformers)."""
    text = str(model).strip()
    folder = Path(text).expanduser()
    if folder.is_dir():
        if not (folder / "config.json").is_file():
            raise ModelUnavailableError(f"model folder {folder} has no config.json: point model= at the folder that "
                                        "save_pretrained() or `hf download` wrote (config.json, weights, tokenizer)")
        return ModelSource(text, str(folder), True)
    if not _HUB_ID.fullmatch(text) or text.startswith((".", "~")):
        raise ModelUnavailableError(f"model {text!r} is neither a folder on this machine nor a Hugging Face model id "
                                    "(owner/name)")
    offline = hub_offline(extra)
    from huggingface_hub import constants, try_to_load_from_cache

    if isinstance(try_to_load_from_cache(text, "config.json", revision=revision), str):
        return ModelSource(text, text, True)
    if offline or local_files_only:
        why = "HF_HUB_OFFLINE forbids downloading it" if offline else "local_files_only=true forbids downloading it"
        raise ModelUnavailableError(
            f"model '{text}' is not a folder on this machine and not in the Hugging Face cache "
            f"({constants.HF_HUB_CACHE}), and {why}: run `hf download {text}` where the Hub can be reached (it fills "
            "that cache; copy the cache or the folder here), or set model= to a folder holding the model")
    return ModelSource(text, text, False)


def from_pretrained_options(source: ModelSource, trust_remote_code: bool, revision: str | None) -> dict[str, Any]:
    """The keywords every ``from_pretrained`` call of a hub metric gets."""
    options: dict[str, Any] = {"local_files_only": source.local_only, "trust_remote_code": bool(trust_remote_code)}
    if revision:
        options["revision"] = revision
    return options


def check_remote_code(source: ModelSource, trust_remote_code: bool) -> None:
    """A folder whose config asks for code of its own (``auto_map``) loads only when the user opted in."""
    config = Path(source.path) / "config.json"
    if trust_remote_code or not config.is_file():
        return
    import json

    try:
        wanted = "auto_map" in json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # transformers will say what is wrong with it
    if wanted:
        raise ModelUnavailableError(
            f"model '{source.name}' runs Python code of its own (its config.json has an auto_map): it loads only "
            "with the option trust_remote_code=true, which runs that code on this machine; read it first")


@contextmanager
def quiet_loading(source: ModelSource) -> Iterator[None]:
    """transformers draws a "Loading weights" bar on stderr for every load; a model read from disk needs none
    (a download keeps its progress bars)."""
    from transformers.utils import logging as transformers_logging

    quiet = source.local_only and transformers_logging.is_progress_bar_enabled()
    if quiet:
        transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if quiet:
            transformers_logging.enable_progress_bar()


def torch_device(device: str | None, extra: str) -> Any:
    """A torch.device; CPU unless the user asks for another, which must exist on this machine."""
    try:
        import torch
    except ImportError as error:
        raise missing_extra(extra, "the Hugging Face models", error) from None
    name = (device or "cpu").strip() or "cpu"
    try:
        chosen = torch.device(name)
    except (RuntimeError, ValueError) as error:
        raise ModelUnavailableError(f"device {name!r} is not a torch device: {error}") from None
    if chosen.type == "cuda" and not torch.cuda.is_available():
        raise ModelUnavailableError(f"device {name!r} was asked for, but torch sees no CUDA GPU on this machine "
                                    "(torch.cuda.is_available() is False); use device=cpu")
    if chosen.type == "mps" and not torch.backends.mps.is_available():
        raise ModelUnavailableError(f"device {name!r} was asked for, but MPS is not available on this machine")
    return chosen


def load_failure(name: str, error: BaseException) -> ModelUnavailableError:
    """One clear error for a model transformers could not load, naming the model and what to do."""
    if isinstance(error, ModelUnavailableError):
        return error
    first = (str(error).strip().splitlines() or [type(error).__name__])[0]
    return ModelUnavailableError(
        f"model '{name}' could not be loaded ({type(error).__name__}: {first[:300]}): check that it is a "
        "transformers model of the right kind for this metric, or download it again with `hf download`")


_loaded: dict[tuple[Any, ...], Any] = {}
_failed: dict[tuple[Any, ...], ModelUnavailableError] = {}
_locks: dict[tuple[Any, ...], threading.Lock] = {}
_guard = threading.Lock()


def shared(key: tuple[Any, ...], name: str, load: Callable[[], T]) -> T:
    """``load()`` once per process and ``key``; every caller gets the same object. A load that fails is
    remembered as its ModelUnavailableError (a missing extra is not: installing it is the fix) and raised
    again at once: restart the process to try again."""
    with _guard:
        if key in _loaded:
            return _loaded[key]
        lock = _locks.setdefault(key, threading.Lock())
    with lock:
        if key in _loaded:
            return _loaded[key]
        if key in _failed:
            raise _failed[key]
        try:
            value = load()
        except MissingExtraError:
            raise
        except Exception as error:  # transformers raises OSError, ValueError, KeyError, ... for a bad model
            failure = load_failure(name, error)
            _failed[key] = failure
            raise failure from None
        _loaded[key] = value
        return value


def forget_models() -> None:
    """Drop every loaded model and remembered failure of this process (tests; a long process that changed
    its models on disk)."""
    with _guard:
        _loaded.clear()
        _failed.clear()
        _locks.clear()


class HubModel(Generic[T]):
    """A model of the Hub or a folder, loaded on first use and shared by every user in the process with the
    same key (model, device and the options that change what is loaded). Subclasses name their extra and
    the packages it brings, and build the loaded object in ``_create``."""

    extra: ClassVar[str]
    packages: ClassVar[tuple[str, ...]]
    what: ClassVar[str]  # "the nli metric", for the missing-extra message

    def __init__(self, model: str, *, device: str = "cpu", trust_remote_code: bool = False,
                 local_files_only: bool = False, revision: str | None = None) -> None:
        self.model = str(model)
        self.device = device or "cpu"
        self.trust_remote_code = bool(trust_remote_code)
        self.local_files_only = bool(local_files_only)
        self.revision = revision

    def check(self) -> None:
        """Raise when the extra is missing or the model cannot be had on this machine; loads nothing."""
        import importlib.util

        for package in self.packages:
            if importlib.util.find_spec(package) is None:
                raise missing_extra(self.extra, self.what, ImportError(name=package))
        self.source()

    def source(self) -> ModelSource:
        found = locate(self.model, extra=self.extra, local_files_only=self.local_files_only, revision=self.revision)
        check_remote_code(found, self.trust_remote_code)
        return found

    def pretrained_options(self, source: ModelSource) -> dict[str, Any]:
        return from_pretrained_options(source, self.trust_remote_code, self.revision)

    def torch_device(self) -> Any:
        return torch_device(self.device, self.extra)

    def key(self) -> tuple[Any, ...]:
        return (type(self).__name__, self.model, self.device, self.trust_remote_code, self.local_files_only,
                self.revision)

    def warm_up(self) -> None:
        self.load()

    def load(self) -> T:
        return shared(self.key(), self.model, self._create)

    def _create(self) -> T:
        raise NotImplementedError
