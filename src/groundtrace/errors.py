"""The errors groundtrace raises on purpose, under one base: ``except groundtrace.GroundtraceError`` catches
every one of them and nothing else. Each also keeps the built-in base it always had (ValueError, ImportError,
RuntimeError), so code written as ``except ValueError`` before the base existed keeps working.

This module imports nothing of groundtrace: every layer may raise these."""

from __future__ import annotations


class GroundtraceError(Exception):
    """Base of the errors groundtrace raises on purpose; the message says what is wrong and what to do."""


class ConfigError(GroundtraceError, ValueError):
    """A setting groundtrace cannot use: a GROUNDTRACE_* / OPENAI_* / OTEL_* variable, or the argument that
    stands for one; the message names the setting and the value it had."""


class MissingExtraError(GroundtraceError, ImportError):
    """An optional dependency is not installed; the message names the extra that provides it."""


class ModelUnavailableError(GroundtraceError, RuntimeError):
    """A model a metric needs cannot be had (not on disk, not in the Hugging Face cache and not downloadable,
    or broken); the message names the model and says how to get it. Permanent for the process: the metric
    cannot load until the user changes a setting, so retrying (the next record, the next batch) is no use."""

    #: read by whoever might retry (the Monitor): False, a setting must change first
    retryable = False


class HubUnreachableError(ModelUnavailableError):
    """The model is not on this machine and the Hugging Face Hub cannot be reached to fetch it (no network, a
    refused or timed-out connection, the Hub answering 5xx): the network, not the model, is named, with the
    fixes that need no network (HF_HUB_OFFLINE=1 and the local cache, or a folder)."""


def missing_extra(extra: str, what: str, error: ImportError) -> MissingExtraError:
    """The MissingExtraError for ``what`` when importing one of its dependencies failed with ``error``."""
    return MissingExtraError(
        f"{what} needs optional dependencies that are not installed ({error.name or error}): {install_hint(extra)}")


def install_hint(extra: str) -> str:
    """The command that installs ``extra`` into this installation: from its folder where groundtrace is installed
    from one (pip's direct_url.json: an editable or a local install), else from the package index."""
    import json
    import shlex
    from importlib import metadata
    from urllib.parse import unquote, urlparse

    try:
        direct = json.loads(metadata.distribution("groundtrace").read_text("direct_url.json") or "{}")
    except Exception:  # not installed (a source tree on sys.path), or metadata pip did not write
        direct = {}
    url = urlparse(str(direct.get("url", "")))
    if url.scheme == "file" and url.path:
        editable = "-e " if direct.get("dir_info", {}).get("editable") else ""
        return f"pip install {editable}{shlex.quote(f'{unquote(url.path)}[{extra}]')}"
    return f"pip install 'groundtrace[{extra}]'"


__all__ = ["ConfigError", "GroundtraceError", "HubUnreachableError", "MissingExtraError", "ModelUnavailableError",
           "install_hint", "missing_extra"]
