"""The heavy things metrics call (embedders, the detector runtime, judge clients), each imported
only when first used so that ``import groundtrace`` stays fast."""

from __future__ import annotations


class MissingExtraError(ImportError):
    """An optional dependency is not installed; the message names the extra that provides it."""


def missing_extra(extra: str, what: str, error: ImportError) -> MissingExtraError:
    return MissingExtraError(
        f"{what} needs optional dependencies that are not installed ({error.name or error}): "
        f"pip install 'groundtrace[{extra}]'"
    )
