"""``groundtrace-run``, as it was named before it became a package of its own (``groundtrace_run``, which the
command imports without importing groundtrace): the same names, for code that imports them from here."""

from __future__ import annotations

import sys

from groundtrace_run import BOOTSTRAP, INSTRUMENTORS, ON_IMPORT, environment, instrument_on_import, main

__all__ = ["BOOTSTRAP", "INSTRUMENTORS", "ON_IMPORT", "environment", "instrument_on_import", "main"]

if __name__ == "__main__":
    main(sys.argv[1:])
