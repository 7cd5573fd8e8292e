"""Imported at interpreter start when ``groundtrace-run`` puts this folder on PYTHONPATH."""

import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))


def _chain_to_the_applications_sitecustomize() -> None:
    # We shadowed any sitecustomize the application had; import it too, as it expects.
    import importlib

    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    sys.modules.pop("sitecustomize", None)
    try:
        importlib.import_module("sitecustomize")
    except ImportError:
        pass


try:
    from groundtrace.autoinstrument import instrument_all

    instrument_all()
except Exception as error:  # the application must start whatever happens here
    sys.stderr.write(f"groundtrace: auto-instrumentation failed: {error}\n")
_chain_to_the_applications_sitecustomize()
