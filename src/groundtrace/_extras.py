"""One clear error for a missing optional dependency, naming the extra that installs it (used by backends,
sinks and sources alike, so none of them imports another layer just for this).

The errors themselves are public in groundtrace.errors; they are named here too, where the code of the house
and older user code import them from."""

from __future__ import annotations

import importlib
from types import ModuleType

from groundtrace.errors import HubUnreachableError, MissingExtraError, ModelUnavailableError, missing_extra


def require_extra(extra: str, what: str, module: str) -> ModuleType:
    """``module`` imported, or the MissingExtraError naming ``extra``: a command checks its extra with this
    before any work, not after an hour of scoring."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise missing_extra(extra, what, error) from None


__all__ = ["HubUnreachableError", "MissingExtraError", "ModelUnavailableError", "missing_extra", "require_extra"]
