"""``groundtrace-run``: run a Python program with groundtrace switched on, no code change.

    groundtrace-run [--metrics grounding,facts] [--sinks otel,jsonl] [--sample-rate 0.1] python app.py ...

In the spirit of ``opentelemetry-instrument``: it sets ``GROUNDTRACE_*`` variables, puts a
``sitecustomize`` on PYTHONPATH that instruments every installed integration at start-up, and
replaces itself with the command.
"""

from __future__ import annotations

import argparse
import os
import sys
from importlib.metadata import version
from pathlib import Path

BOOTSTRAP = Path(__file__).resolve().parent / "_bootstrap"


def environment(args: argparse.Namespace, base: dict[str, str]) -> dict[str, str]:
    env = dict(base)
    env["GROUNDTRACE_ENABLED"] = "1"
    for name, value in (("GROUNDTRACE_METRICS", args.metrics), ("GROUNDTRACE_SINKS", args.sinks),
                        ("GROUNDTRACE_SAMPLE_RATE", args.sample_rate)):
        if value is not None:
            env[name] = str(value)
    paths = [str(BOOTSTRAP)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="groundtrace-run", description=__doc__.split("\n\n")[0])
    # the installed distribution's version: this entry point never imports the package face above it
    parser.add_argument("--version", action="version", version=f"%(prog)s {version('groundtrace')}")
    parser.add_argument("--metrics", help="comma-separated metric names (GROUNDTRACE_METRICS)")
    parser.add_argument("--sinks", help="comma-separated sink names (GROUNDTRACE_SINKS)")
    parser.add_argument("--sample-rate", type=float, help="fraction of traces scored (GROUNDTRACE_SAMPLE_RATE)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the program to run, e.g. python app.py")
    args = parser.parse_args(argv)
    if not args.command:
        parser.error("give the command to run, e.g. groundtrace-run python app.py")
    env = environment(args, dict(os.environ))
    try:
        os.execvpe(args.command[0], args.command, env)
    except FileNotFoundError:
        parser.exit(127, f"groundtrace-run: command not found: {args.command[0]}\n")


if __name__ == "__main__":
    main(sys.argv[1:])
