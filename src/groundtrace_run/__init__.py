"""``groundtrace-run``: run a Python program with groundtrace switched on, no code change.

    groundtrace-run [--metrics grounding,facts] [--sinks otel,jsonl] [--sample-rate 0.1] python app.py ...

In the spirit of ``opentelemetry-instrument``: it sets ``GROUNDTRACE_*`` variables, puts a
``sitecustomize`` on PYTHONPATH that instruments each installed integration when the program imports its
framework (and not before: see ``groundtrace/monitor/_bootstrap/groundtrace_import_hook.py``), and replaces
itself with the command.

A package of its own, beside ``groundtrace``: the command imports none of groundtrace (whose import takes
a third of a second), so that it costs a program's start next to nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import sys
from pathlib import Path

#: integrations: ``name = module:instrument``, instrumented at start unless ON_IMPORT names their framework
INSTRUMENTORS = "groundtrace.instrumentors"
#: ``framework_module = module:instrument``: instrumented when the program imports that module
ON_IMPORT = "groundtrace.instrument_on_import"


def _bootstrap() -> Path:
    """groundtrace's folder of the sitecustomize, found without importing groundtrace."""
    spec = importlib.util.find_spec("groundtrace")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("groundtrace-run: the groundtrace package is not installed here")
    return Path(list(spec.submodule_search_locations)[0]).resolve() / "monitor" / "_bootstrap"


BOOTSTRAP = _bootstrap()


def installed_entry_points(groups: tuple[str, ...]) -> dict[str, list[tuple[str, str]]]:
    """``(name, value)`` of each entry point of ``groups`` of the distributions on sys.path, read from their
    ``entry_points.txt`` as importlib.metadata reads them (sys.path in order, the first distribution of a name
    wins), without importing importlib.metadata: that import alone would double what the command costs. A
    zipped entry on sys.path is left to importlib.metadata."""
    found: dict[str, list[tuple[str, str]]] = {group: [] for group in groups}
    seen: set[str] = set()
    for folder in sys.path:
        if os.path.isfile(folder):
            return _entry_points_by_importlib(groups)
        try:
            names = os.listdir(folder or ".")
        except OSError:
            continue
        for name in names:
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            project = re.sub(r"[-_.]+", "_", name.rsplit(".", 1)[0].split("-", 1)[0]).lower()
            if project in seen:
                continue
            seen.add(project)
            try:
                with open(os.path.join(folder or ".", name, "entry_points.txt"), encoding="utf-8") as text:
                    lines = text.read().splitlines()
            except OSError:
                continue
            group = None
            for line in (line.strip() for line in lines):
                if line.startswith("[") and line.endswith("]"):
                    group = line[1:-1].strip()
                elif group in found and "=" in line and not line.startswith(("#", ";")):
                    entry, value = line.split("=", 1)
                    found[group].append((entry.strip(), value.strip()))
    return found


def _entry_points_by_importlib(groups: tuple[str, ...]) -> dict[str, list[tuple[str, str]]]:
    from importlib.metadata import entry_points

    installed = entry_points()
    return {group: [(entry.name, entry.value) for entry in installed.select(group=group)] for group in groups}


def instrument_on_import() -> str:
    """``GROUNDTRACE_INSTRUMENT_ON_IMPORT``: the installed integrations, resolved here once, so that no process
    under the launcher scans the installed distributions at its start."""
    installed = installed_entry_points((ON_IMPORT, INSTRUMENTORS))
    pairs = sorted(set(installed[ON_IMPORT]))
    lazy = {target for _, target in pairs}
    # an integration that names no framework is instrumented at start, as every one was before
    pairs += sorted({("*", target) for _, target in installed[INSTRUMENTORS] if target not in lazy})
    return ",".join(f"{module}={target}" for module, target in pairs)


def environment(args: argparse.Namespace, base: dict[str, str]) -> dict[str, str]:
    env = dict(base)
    env["GROUNDTRACE_ENABLED"] = "1"
    env["GROUNDTRACE_INSTRUMENT_ON_IMPORT"] = instrument_on_import()
    for name, value in (("GROUNDTRACE_METRICS", args.metrics), ("GROUNDTRACE_SINKS", args.sinks),
                        ("GROUNDTRACE_SAMPLE_RATE", args.sample_rate)):
        if value is not None:
            env[name] = str(value)
    paths = [str(BOOTSTRAP)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


class _Version(argparse.Action):
    """--version, read only when asked (the installed distribution's, never the package's import)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        from importlib.metadata import version

        print(f"{parser.prog} {version('groundtrace')}")  # on stdout, as argparse's own version action
        parser.exit(0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="groundtrace-run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    parser.add_argument("--metrics", help="comma-separated metric names (GROUNDTRACE_METRICS)")
    parser.add_argument("--sinks", help="comma-separated sink names (GROUNDTRACE_SINKS)")
    parser.add_argument("--sample-rate", type=float, help="fraction of traces scored (GROUNDTRACE_SAMPLE_RATE)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the program to run, e.g. python app.py")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if not args.command:
        parser.error("give the command to run, e.g. groundtrace-run python app.py")
    env = environment(args, dict(os.environ))
    try:
        os.execvpe(args.command[0], args.command, env)
    except FileNotFoundError:
        parser.exit(127, f"groundtrace-run: command not found: {args.command[0]}\n")
