"""The import rules of the house (DESIGN.md), read from the source with `ast`, so an import inside a
function, or one made with importlib, counts as much as one at the top:
- the core imports no framework: no module under src/groundtrace imports LangChain, LlamaIndex,
  another agent framework or an integration package;
- arrows point down: each layer imports only the layers below it (text at the bottom; sinks and the
  report read Records and Scores and never import metrics); config.py, the data types and the
  trace context import nothing of groundtrace but the redaction step, which imports nothing of it;
- no circle: the parts of the core (its modules and packages) import each other one way only, so
  the batch engine choosing Ray by name (groundtrace.batch.stream) makes neither import the other back;
- outside metrics/, the metrics are reached through their packages' public names only;
- groundtrace.testing (test support) is imported by tests, notebooks and benchmarks, never by the core."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "groundtrace"
# top-level packages the core must not import: the frameworks, and the distributions beside it in integrations/
FORBIDDEN = {
    "langchain", "langchain_core", "langchain_community", "langchain_openai", "langchain_text_splitters",
    "langgraph", "llama_index", "haystack", "dspy", "crewai", "autogen", "semantic_kernel",
    "groundtrace_langchain", "groundtrace_llamaindex", "groundtrace_demo",
}
IMPORTERS = {"import_module", "__import__"}  # importlib.import_module("x"), __import__("x")


def imported_modules(source: str, package: str = "") -> list[tuple[int, str]]:
    """(line, module) of every import in the source: statements, and calls with a literal name.
    ``from a import b`` counts as ``a`` and as ``a.b`` (b may be a module); relative imports are
    resolved against ``package``, the dotted name of the source's package."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and (node.level == 0 or package):
            base = ".".join([*package.split(".")[:len(package.split(".")) - node.level + 1], *[node.module or ""]]) \
                if node.level else node.module
            base = base.strip(".")
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names if alias.name != "*"]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if name in IMPORTERS:
                found.append((node.lineno, node.args[0].value))
    return found


def package_of(path: Path, root: Path) -> str:
    """Dotted name of the package holding ``path`` (``root`` is the groundtrace package folder)."""
    return ".".join((root.name, *path.relative_to(root).parent.parts))


def imports_of(root: Path) -> list[tuple[str, int, str]]:
    """(file relative to root's parent, line, module) of every import under ``root``."""
    return [(str(path.relative_to(root.parent)), line, module)
            for path in sorted(root.rglob("*.py"))
            for line, module in imported_modules(path.read_text(encoding="utf-8"), package_of(path, root))]


def framework_imports(root: Path) -> list[str]:
    found = {(where, line): f"{where}:{line} imports {module}" for where, line, module in reversed(imports_of(root))
             if module.split(".")[0] in FORBIDDEN}  # one line per statement: `from a import b` is a and a.b
    return sorted(found.values())


# What each part of the core may import of groundtrace (the first name after "groundtrace."). The
# redaction step sits under everything (every text groundtrace composes passes it) and imports nothing
# of it; so do the public errors (groundtrace.errors: every layer raises them); the data types, config.py and
# trace_context.py sit just above, importing nothing else. privacy.py (the mask, text-free delivery) reads
# Records and Scores, like the sinks that use it. The jobs stand on them: scoring (a record's metrics, here or
# in a child process), io (every file and platform read), then batch, measure and the live monitor.
BOTTOM = {"redaction", "errors"}
MAY_IMPORT = {part: allowed | BOTTOM for part, allowed in {
    "text": {"text"},
    "detector": {"detector", "text"},
    "backends": {"backends", "text", "_extras", "config", "record", "score"},
    "metrics": {"metrics", "backends", "detector", "text", "_extras", "config", "record", "score"},
    "sinks": {"sinks", "_extras", "config", "privacy", "record", "score", "trace_context"},
    # the Monitor's own metrics read Records and Scores (and the Monitor, duck-typed: it imports them)
    "telemetry": {"telemetry", "_extras", "config", "record", "score"},
    # sources read platforms the sinks write to (one client builder each, the sinks' ids of a score)
    "sources": {"sources", "sinks", "_extras", "config", "record", "score"},
    # reading files in every layout, labels files and platforms' labels: never a metric
    "io": {"io", "_extras", "record", "score", "sources"},
    "scoring": {"scoring", "_extras", "config", "metrics", "privacy", "record", "score", "sinks", "telemetry"},
    "ray": {"ray", "scoring", "metrics", "_extras", "record", "score"},
    # files and frames in batch, backfills, the CI gate: never the live monitor nor the measurements
    "batch": {"batch", "scoring", "ray", "io", "metrics", "sources", "sinks", "privacy", "_extras", "config",
              "record", "score"},
    # metrics against labels: never the live monitor
    "measure": {"measure", "batch", "scoring", "io", "metrics", "backends", "text", "_extras", "record", "score"},
    # fitting a verdict: labelled files read and scored as the bench does; the file itself is a backend
    "combine": {"combine", "backends", "measure", "metrics", "score", "text", "_extras"},
    "monitor": {"monitor", "scoring", "ray", "sinks", "telemetry", "metrics", "privacy", "_extras", "config",
                "record", "score"},
    "report": {"report", "measure", "io", "record", "score"},
    # people look: the review app reads files through io, shows the report's pieces, fits through combine
    "review": {"review", "io", "report", "combine", "detector", "record", "score"},
    # what applications and integrations call: turns and retrievals handed to a Monitor, or a sink
    "capture": {"capture", "monitor", "sinks", "privacy", "config", "record", "score", "trace_context"},
    # guard mode: the metrics staging runs, checked on the answer's path, the Scores handed to a Monitor, each
    # decision on the request's span and in the Monitor's metrics; capture reads a step's passages
    "guards": {"guards", "monitor", "telemetry", "capture", "metrics", "privacy", "trace_context", "text", "config",
               "record", "score"},
    "testing": {"testing", "metrics", "record", "score"},
    "privacy.py": {"record", "score"},
    # metrics where users evaluate: LangSmith's and MLflow's evaluation loops
    "evaluators.py": {"_extras", "metrics", "record", "score", "sinks", "sources"},
    "record.py": set(), "score.py": {"record"}, "config.py": set(), "trace_context.py": set(), "_extras.py": set(),
}.items()}
MAY_IMPORT["redaction.py"] = set()
MAY_IMPORT["errors.py"] = set()
PUBLIC_METRICS = {"groundtrace.metrics", "groundtrace.metrics.judged"}


def layer_violations(root: Path) -> list[str]:
    """One line per (file, line, rule) broken under ``root``, the groundtrace package folder."""
    found: dict[tuple[str, int, str], str] = {}
    for where, line, module in imports_of(root):
        parts = module.split(".")
        if parts[0] != root.name or len(parts) == 1:
            continue
        part, target = where.split("/")[1], parts[1]
        allowed = MAY_IMPORT.get(part)
        if allowed is not None and target not in allowed | {part.removesuffix(".py")}:
            found.setdefault((where, line, "layer"), f"{where}:{line} imports {module} (below {part}: {sorted(allowed) or 'nothing'})")
        is_module = root.joinpath(*parts[1:]).with_suffix(".py").is_file() or root.joinpath(*parts[1:]).is_dir()
        if part != "metrics" and target == "metrics" and module not in PUBLIC_METRICS and is_module:
            found.setdefault((where, line, "public"), f"{where}:{line} imports {module}, not a public name of groundtrace.metrics(.judged)")
        if part != "testing" and target == "testing":
            found.setdefault((where, line, "testing"), f"{where}:{line} imports {module}: test support is not for the core")
    return list(found.values())


def part_imports(root: Path) -> dict[str, set[str]]:
    """The parts of the core each part imports (a part: a module or package right under ``root``)."""
    graph: dict[str, set[str]] = {}
    for where, _, module in imports_of(root):
        part, parts = where.split("/")[1].removesuffix(".py"), module.split(".")
        if parts[0] == root.name and len(parts) > 1 and parts[1] != part:
            graph.setdefault(part, set()).add(parts[1])
    return graph


def circles(root: Path) -> list[str]:
    """One line per import between two parts that lies on a circle (each reaches the other)."""
    graph = part_imports(root)

    def reaches(start: str) -> set[str]:
        seen: set[str] = set()
        todo = [start]
        while todo:
            for target in graph.get(todo.pop(), ()):
                if target not in seen:
                    seen.add(target)
                    todo.append(target)
        return seen

    return sorted(f"{part} imports {target}, which leads back to {part}"
                  for part, targets in graph.items() for target in targets if part in reaches(target))


def test_nothing_under_src_groundtrace_imports_a_framework_or_an_integration() -> None:
    assert len(list(SRC.rglob("*.py"))) > 40  # the walk found the package
    assert framework_imports(SRC) == []


def test_arrows_point_down_sinks_and_report_never_import_metrics_and_the_core_never_imports_testing() -> None:
    assert layer_violations(SRC) == []


def test_the_parts_of_the_core_import_each_other_one_way_only() -> None:
    graph = part_imports(SRC)
    assert {"scoring", "ray", "batch", "monitor"} <= set(graph)  # the walk sees the engines
    assert "ray" in graph["batch"] and "scoring" in graph["ray"] and "ray" not in graph["scoring"]
    assert "batch" not in graph["ray"] and "monitor" not in graph["ray"]
    assert circles(SRC) == []


@pytest.mark.parametrize(("files", "circle"), [
    # the engine naming Ray, however late, while Ray builds on the engine
    ({"engine.py": "def score(engine):\n    from groundtrace.ray import score_records",
      "ray/__init__.py": "from groundtrace.ray.batch import run", "ray/batch.py": "from groundtrace.engine import Evaluator"},
     ["engine imports ray, which leads back to engine", "ray imports engine, which leads back to ray"]),
    # a longer way round
    ({"a.py": "import groundtrace.b", "b.py": "from groundtrace import c", "c.py": "importlib.import_module('groundtrace.a')"},
     ["a imports b, which leads back to a", "b imports c, which leads back to b", "c imports a, which leads back to c"]),
    ({"a.py": "import groundtrace.b", "b.py": "import groundtrace.c", "c.py": "import json"}, []),
])
def test_the_circle_walk_sees_a_circle_of_any_length(tmp_path: Path, files: dict[str, str], circle: list[str]) -> None:
    package = tmp_path / "groundtrace"
    for where, source in files.items():
        (package / where).parent.mkdir(parents=True, exist_ok=True)
        (package / where).write_text(source + "\n")
    assert circles(package) == circle


@pytest.mark.parametrize("line", [
    "import langchain_core.documents",
    "from llama_index.core import VectorStoreIndex",
    "from groundtrace_langchain import GroundtraceCallbackHandler",
    "def run():\n    import groundtrace_demo.runner",
    "importlib.import_module('langgraph.graph')",
])
def test_the_walk_sees_each_kind_of_import(tmp_path: Path, line: str) -> None:
    package = tmp_path / "groundtrace"
    package.mkdir()
    (package / "ok.py").write_text("import json\nfrom groundtrace.score import Score\nfrom . import ok\n")
    (package / "bad.py").write_text(line + "\n")
    assert [found.split(":")[0] for found in framework_imports(package)] == ["groundtrace/bad.py"]


@pytest.mark.parametrize(("where", "line", "broken"), [
    ("sinks/x.py", "from groundtrace.metrics import get_metric", "below sinks"),
    ("report/x.py", "from groundtrace import metrics", "below report"),
    ("text/x.py", "from groundtrace.backends.judge import JudgeClient", "below text"),
    ("config.py", "def monitor():\n    from groundtrace.monitor import Monitor", "below config.py"),
    ("cli/score.py", "from groundtrace.metrics.judged.prompts import render", "not a public name"),
    ("cli/bench.py", "from groundtrace.metrics.judged import prompts", "not a public name"),
    ("cli/__init__.py", "from groundtrace.testing.llama_server import LlamaServer", "test support"),
    ("metrics/judged/x.py", "from ...sinks import Sink", "below metrics"),
    ("redaction.py", "from groundtrace.record import Record", "below redaction.py"),
    ("errors.py", "from groundtrace.config import Settings", "below errors.py"),
])
def test_the_layer_walk_sees_each_kind_of_upward_import(tmp_path: Path, where: str, line: str, broken: str) -> None:
    package = tmp_path / "groundtrace"
    (package / "metrics" / "judged").mkdir(parents=True)
    for module in ("metrics/__init__.py", "metrics/judged/__init__.py", "metrics/judged/prompts.py"):
        (package / module).write_text("")
    (package / where).parent.mkdir(parents=True, exist_ok=True)
    (package / "ok.py").write_text("from groundtrace.metrics import get_metric\nfrom groundtrace.metrics.judged import render_prompt\n")
    (package / where).write_text(line + "\n")
    found = layer_violations(package)
    assert len(found) == 1 and found[0].startswith(f"groundtrace/{where}:") and broken in found[0], found


# Heavy optional libraries and the only modules that may import them (DESIGN.md: inside the backend that uses them).
HEAVY = {"torch", "transformers", "tokenizers", "lettucedetect", "huggingface_hub", "sentence_transformers"}
HEAVY_IMPORTERS = {"groundtrace/backends/hub_models.py", "groundtrace/backends/lettuce.py",
                   "groundtrace/backends/nli.py", "groundtrace/backends/embedders.py"}


def heavy_imports(root: Path) -> list[str]:
    found = {(where, line): f"{where}:{line} imports {module}" for where, line, module in imports_of(root)
             if module.split(".")[0] in HEAVY and where not in HEAVY_IMPORTERS}
    return sorted(found.values())


def test_torch_transformers_and_lettucedetect_are_imported_only_by_their_backends() -> None:
    assert heavy_imports(SRC) == []
    # the walk sees them where they are
    assert {where for where, _, module in imports_of(SRC) if module.split(".")[0] in HEAVY} == HEAVY_IMPORTERS


def test_the_walk_sees_a_heavy_import_outside_the_backends(tmp_path: Path) -> None:
    package = tmp_path / "groundtrace"
    (package / "metrics").mkdir(parents=True)
    (package / "metrics" / "x.py").write_text("def f():\n    import torch\n")
    assert [line.split(":")[0] for line in heavy_imports(package)] == ["groundtrace/metrics/x.py"]


def test_building_and_listing_the_hub_metrics_imports_no_heavy_library(tmp_path: Path) -> None:
    """`import groundtrace`, `groundtrace metrics` and building `lettuce` and `nli` (what a Monitor's parent
    process does) load no model and import neither torch nor transformers nor lettucedetect."""
    import subprocess
    import sys

    script = (
        "import sys, groundtrace\n"
        "from groundtrace.cli import app\n"
        "from typer.testing import CliRunner\n"
        "assert CliRunner().invoke(app, ['metrics', '--json']).exit_code == 0\n"
        "from groundtrace.metrics import get_metric\n"
        f"get_metric('lettuce', model={str(tmp_path)!r}); get_metric('nli', model={str(tmp_path)!r})\n"
        f"print(sorted(m for m in {sorted(HEAVY)!r} if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_groundtrace_monitor_is_exported_and_imported_only_when_used() -> None:
    """`groundtrace.Monitor` works (the docs use it), yet `import groundtrace` alone does not bring the
    Monitor's queue, workers and process machinery in."""
    import subprocess
    import sys

    script = (
        "import sys, groundtrace\n"
        "before = 'groundtrace.monitor' in sys.modules\n"
        "from groundtrace.monitor import Monitor\n"
        "print(before, groundtrace.Monitor is Monitor, 'Monitor' in groundtrace.__all__)\n"
        "from groundtrace import *\n"
        "print(Monitor.__name__, hasattr(groundtrace, 'Nothing'))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["False True True", "Monitor False"]
