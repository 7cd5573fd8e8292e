"""Imported at interpreter start when ``groundtrace-run`` puts this folder on PYTHONPATH.

Every Python process under the launcher runs this (a server's supervisor and workers, multiprocessing's helpers),
so it does next to nothing: it imports no groundtrace and no framework, only sets an import hook that instruments
a framework when the application imports it (groundtrace_import_hook).
"""

import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))


def _chain_to_the_applications_sitecustomize() -> None:
    # We shadowed any sitecustomize the application had; run it too, as it expects. It is found and run
    # by hand: emptying sys.modules["sitecustomize"] while this module is still being imported makes the
    # import system fail with KeyError: 'sitecustomize' when the application has none.
    import importlib.machinery
    import importlib.util

    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module  # the application's, as if it alone had been imported
    spec.loader.exec_module(module)


try:
    import groundtrace_import_hook  # type: ignore[import-not-found]  # beside this file, on PYTHONPATH here

    if not groundtrace_import_hook.install_from_environment():  # set by hand, without the launcher's variable
        from groundtrace.monitor.autoinstrument import instrument_all

        instrument_all()
except Exception as error:  # the application must start whatever happens here
    sys.stderr.write(f"groundtrace: auto-instrumentation failed: {error}\n")
_chain_to_the_applications_sitecustomize()
