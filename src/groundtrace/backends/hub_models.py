"""Models of the Hugging Face Hub (or folders on disk) for the hub metrics (`lettuce`, `nli`): where a model
is, one clear error when it cannot be had, and one loaded copy per process.

``locate`` answers "where is it" without importing torch: a folder on disk, else the Hub's cache (the
huggingface_hub cache, ``HF_HOME``/``HF_HUB_CACHE`` as huggingface_hub reads them), else a download by
transformers, which is never attempted when the Hub is switched off (``HF_HUB_OFFLINE=1``, read by
huggingface_hub itself) or the metric's ``local_files_only`` option is set. Before a download, the Hub is
asked once, within seconds and without retries, for the model's config.json (``reach_hub``): a model the Hub
does not have and a Hub that cannot be reached are each one clear error then, where transformers would retry
for most of a minute and blame the model. ``shared`` loads a model once per
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

from groundtrace._extras import HubUnreachableError, MissingExtraError, ModelUnavailableError, missing_extra

T = TypeVar("T")
# a Hub id: "name" or "owner/name" (letters, digits, - _ .), as the Hub allows them
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(?:/[\w.-]+)?")
#: seconds the Hub has to answer whether it has a model, unless the user set HF_HUB_ETAG_TIMEOUT
HUB_PROBE_TIMEOUT_S = 5.0
# names in an exception's classes that mean the network failed, whichever HTTP library raised it: httpx's
# TransportError (ConnectError, timeouts, proxy errors), requests' ConnectionError and Timeout, huggingface_hub's
# OfflineModeIsEnabled, the builtin ConnectionError, TimeoutError and socket.gaierror (a name lookup)
_NETWORK_ERRORS = frozenset({"TransportError", "ConnectionError", "Timeout", "TimeoutException", "TimeoutError",
                             "OfflineModeIsEnabled", "gaierror"})
# (model, revision) pairs the Hub answered for in this process: the preflight and the load ask once
_reached: set[tuple[str, str | None]] = set()


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


def locate(model: str, *, extra: str, local_files_only: bool = False, revision: str | None = None,
           metric: str = "METRIC") -> ModelSource:
    """The folder or cached Hub model named ``model``; raises ModelUnavailableError when it is neither and
    may not be downloaded, or the Hub does not have it, and HubUnreachableError when the Hub cannot be
    reached to fetch it. ``metric`` names the option in the advice. Imports huggingface_hub only (no torch,
    no transformers)."""
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
    reach_hub(text, revision, metric)
    return ModelSource(text, text, False)


def network_cause(error: BaseException) -> BaseException | None:
    """The exception in ``error``'s chain (itself, its causes and contexts) that says the network failed."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if any(cls.__name__ in _NETWORK_ERRORS for cls in type(current).__mro__):
            return current
        current = current.__cause__ or current.__context__
    return None


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [""])[0][:300]


def hub_unreachable(model: str, metric: str, why: str) -> HubUnreachableError:
    from huggingface_hub import constants

    return HubUnreachableError(
        f"cannot reach the Hugging Face Hub ({constants.ENDPOINT}) to fetch model '{model}' ({why}): set "
        f"HF_HUB_OFFLINE=1 to use the models in the local cache ({constants.HF_HUB_CACHE}), or pass a folder "
        f"holding the model: model=/path/to/model (on the command line -O {metric}.model=/path/to/model)")


def _not_found(model: str) -> ModelUnavailableError:
    from huggingface_hub import constants

    return ModelUnavailableError(
        f"model '{model}' was not found on the Hugging Face Hub ({constants.ENDPOINT}): check its id (owner/name), "
        "log in (`hf auth login`, or set HF_TOKEN) if it is private, or set model= to a folder holding the model")


def reach_hub(model: str, revision: str | None, metric: str) -> None:
    """Ask the Hub once, within HUB_PROBE_TIMEOUT_S and without retries, for ``model``'s config.json;
    raise the one error that says why it cannot be fetched (the Hub does not have it, or cannot be reached)."""
    if (model, revision) in _reached:
        return
    from huggingface_hub import constants, errors, get_hf_file_metadata, hf_hub_url

    # the user's own HF_HUB_ETAG_TIMEOUT (a slow link) wins over ours
    user_set = constants.HF_HUB_ETAG_TIMEOUT != constants.DEFAULT_ETAG_TIMEOUT
    timeout = constants.HF_HUB_ETAG_TIMEOUT if user_set else HUB_PROBE_TIMEOUT_S
    try:
        get_hf_file_metadata(hf_hub_url(model, "config.json", revision=revision), timeout=timeout)
    except errors.GatedRepoError:
        raise ModelUnavailableError(
            f"model '{model}' is gated on the Hugging Face Hub: accept its terms on its page, then log in "
            "(`hf auth login`, or set HF_TOKEN)") from None
    except errors.RepositoryNotFoundError:
        raise _not_found(model) from None
    except errors.RevisionNotFoundError:
        raise ModelUnavailableError(f"model '{model}' has no revision {revision!r} on the Hugging Face Hub") from None
    except errors.EntryNotFoundError:  # RemoteEntryNotFoundError in huggingface_hub 1.x
        raise ModelUnavailableError(f"model '{model}' on the Hugging Face Hub has no config.json: it is not a "
                                    "transformers model") from None
    except Exception as error:
        status = getattr(getattr(error, "response", None), "status_code", None)
        cause = network_cause(error)
        if cause is not None:
            raise hub_unreachable(model, metric, f"no network: {type(cause).__name__}: {_first_line(cause)}") from None
        if isinstance(status, int) and (status >= 500 or status == 429):
            raise hub_unreachable(model, metric, f"the Hub answered HTTP {status}") from None
        if status in (401, 404):  # a mirror that answers without the Hub's error codes
            raise _not_found(model) from None
        raise ModelUnavailableError(f"the Hugging Face Hub could not say whether it has model '{model}' "
                                    f"({type(error).__name__}: {_first_line(error)})") from None
    _reached.add((model, revision))


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


def load_failure(name: str, error: BaseException, metric: str = "METRIC") -> ModelUnavailableError:
    """One clear error for a model transformers could not load, naming the model and what to do."""
    if isinstance(error, ModelUnavailableError):
        return error
    cause = network_cause(error)
    if cause is not None:  # the Hub went away during the download: the network, not the model, is to blame
        return hub_unreachable(name, metric, f"no network: {type(cause).__name__}: {_first_line(cause)}")
    first = (str(error).strip().splitlines() or [type(error).__name__])[0]
    return ModelUnavailableError(
        f"model '{name}' could not be loaded ({type(error).__name__}: {first[:300]}): check that it is a "
        "transformers model of the right kind for this metric, or download it again with `hf download`")


_loaded: dict[tuple[Any, ...], Any] = {}
_failed: dict[tuple[Any, ...], ModelUnavailableError] = {}
_locks: dict[tuple[Any, ...], threading.Lock] = {}
_guard = threading.Lock()


def shared(key: tuple[Any, ...], name: str, load: Callable[[], T], metric: str = "METRIC") -> T:
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
            failure = load_failure(name, error, metric)
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
        _reached.clear()
        _locks.clear()


class HubModel(Generic[T]):
    """A model of the Hub or a folder, loaded on first use and shared by every user in the process with the
    same key (model, device and the options that change what is loaded). Subclasses name their extra and
    the packages it brings, and build the loaded object in ``_create``."""

    extra: ClassVar[str]
    packages: ClassVar[tuple[str, ...]]
    what: ClassVar[str]  # "the nli metric", for the missing-extra message
    metric: ClassVar[str] = "METRIC"  # the metric's name, for the advice "-O nli.model=/path/to/model"

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
        found = locate(self.model, extra=self.extra, local_files_only=self.local_files_only, revision=self.revision,
                       metric=self.metric)
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
        return shared(self.key(), self.model, self._create, self.metric)

    def _create(self) -> T:
        raise NotImplementedError
