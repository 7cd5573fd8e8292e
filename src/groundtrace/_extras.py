"""One clear error for a missing optional dependency, naming the extra that installs it (used by
backends, sinks and sources alike, so none of them imports another layer just for this)."""

from __future__ import annotations


class MissingExtraError(ImportError):
    """An optional dependency is not installed; the message names the extra that provides it."""


def missing_extra(extra: str, what: str, error: ImportError) -> MissingExtraError:
    return MissingExtraError(
        f"{what} needs optional dependencies that are not installed ({error.name or error}): "
        f"pip install 'groundtrace[{extra}]' (in a clone of the repository: pip install -e './groundtrace[{extra}]')"
    )


class ModelUnavailableError(RuntimeError):
    """A model a metric needs cannot be had (not on disk, not in the Hugging Face cache and not downloadable,
    or broken); the message names the model and says how to get it. Permanent for the process: the metric
    cannot load until the user changes a setting, so retrying (the next record, the next batch) is no use."""

    #: read by whoever might retry (the Monitor): False, a setting must change first
    retryable = False


class HubUnreachableError(ModelUnavailableError):
    """The model is not on this machine and the Hugging Face Hub cannot be reached to fetch it (no network, a
    refused or timed-out connection, the Hub answering 5xx): the network, not the model, is named, with the
    fixes that need no network (HF_HUB_OFFLINE=1 and the local cache, or a folder)."""
