"""One rule for what a Monitor built from arguments takes from the environment, the same for every setting of its
constructor: an argument passed wins; a setting not passed is the given Settings' value, and without Settings
the environment's (GROUNDTRACE_*), as for the shared Monitor. ``Monitor(["lexical"])`` honours
GROUNDTRACE_TELEMETRY as it honours GROUNDTRACE_MASK (docs/reference/environment.md states the rule)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from groundtrace.config import Settings
from groundtrace.monitor import Monitor


def shout(text: str) -> str:
    return text.upper()


def whisper(text: str) -> str:
    return text.lower()


# variable, its value, what the Monitor then has, an argument that wins over it, what the Monitor then has
Read = Callable[[Monitor], Any]
CASES: list[tuple[str, str, Read, Any, dict[str, Any], Any]] = [
    ("GROUNDTRACE_METRICS", "lexical", lambda m: [x.name for x in m.metrics], ["lexical"],
     {"metrics": ["lexical", "grounding"]}, ["lexical", "grounding"]),
    ("GROUNDTRACE_SINKS", "jsonl:{tmp}/scores.jsonl", lambda m: (m.default_store, [type(s).__name__ for s in m.sinks]),
     (None, ["JsonlSink"]), {"sinks": "none"}, (None, [])),
    ("GROUNDTRACE_SAMPLE_RATE", "0.5", lambda m: m.sample_rate, 0.5, {"sample_rate": 1.0}, 1.0),
    ("GROUNDTRACE_QUEUE_SIZE", "7", lambda m: m._queue_bounds[0], 7, {"queue_size": 9}, 9),
    ("GROUNDTRACE_WORKERS", "2", lambda m: m._worker_count, 2, {"workers": 1}, 1),
    ("GROUNDTRACE_METRIC_TIMEOUT_S", "5", lambda m: m.metric_timeout_s, 5.0, {"metric_timeout_s": 9.0}, 9.0),
    ("GROUNDTRACE_OPTIONS", '{"lexical": {"bleu_weight": 0.2, "keyword_weight": 0.8}}',
     lambda m: m.metrics[0].bleu_weight, 0.2, {"options": {}}, 0.6),
    ("GROUNDTRACE_ISOLATION", "thread", lambda m: m.isolation, "thread", {"isolation": "thread"}, "thread"),
    ("GROUNDTRACE_RAY_ADDRESS", "127.0.0.1:6379", lambda m: m._ray_address, "127.0.0.1:6379",
     {"ray_address": "127.0.0.1:6380"}, "127.0.0.1:6380"),
    ("GROUNDTRACE_MASK", "tests.test_monitor_settings:shout", lambda m: m.mask and m.mask("Ab"), "AB",
     {"mask": whisper}, "ab"),
    ("GROUNDTRACE_CAPTURE_TEXT", "false", lambda m: m.capture_text, False, {"capture_text": True}, True),
    ("GROUNDTRACE_CPU_BUDGET", "0.5", lambda m: m._budget_share, 0.5, {"cpu_budget": 2.0}, 2.0),
    ("GROUNDTRACE_TELEMETRY", "prometheus:127.0.0.1:0", lambda m: m.telemetry is not None and
     m.telemetry.endpoint is not None, True, {"telemetry": "none"}, False),
    ("GROUNDTRACE_EXIT_FLUSH_S", "3", lambda m: m.exit_flush_s, 3.0, {"exit_flush_s": 7.0}, 7.0),
]
IDS = [case[0] for case in CASES]
#: what a case leaves out for its variable to decide (every other case passes metrics and isolation)
LEFT_OUT = {"GROUNDTRACE_METRICS": {"metrics": None}, "GROUNDTRACE_ISOLATION": {"isolation": None}}


def build(**arguments: Any) -> Monitor:
    # lexical (no model) in this process, unless the case is about the metrics or the isolation
    arguments.setdefault("metrics", ["lexical"])
    arguments.setdefault("isolation", "thread")
    return Monitor(**arguments)


@pytest.fixture
def env(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    return lambda name, value: monkeypatch.setenv(name, value.replace("{tmp}", str(tmp_path)))


@pytest.mark.parametrize(("name", "value", "read", "from_env", "arguments", "from_argument"), CASES, ids=IDS)
def test_a_setting_not_passed_is_the_environments(env, name, value, read, from_env, arguments, from_argument) -> None:
    env(name, value)
    with build(**LEFT_OUT.get(name, {})) as monitor:
        assert read(monitor) == from_env


@pytest.mark.parametrize(("name", "value", "read", "from_env", "arguments", "from_argument"), CASES, ids=IDS)
def test_an_argument_passed_wins(env, name, value, read, from_env, arguments, from_argument) -> None:
    env(name, value if name != "GROUNDTRACE_ISOLATION" else "process")
    with build(**arguments) as monitor:
        assert read(monitor) == from_argument


@pytest.mark.parametrize(("name", "value", "read", "from_env", "arguments", "from_argument"), CASES, ids=IDS)
def test_given_settings_the_environment_is_not_read(env, name, value, read, from_env, arguments,
                                                    from_argument) -> None:
    env(name, value)
    with build(settings=Settings(), **LEFT_OUT.get(name, {})) as monitor:
        assert read(monitor) != from_env


def test_a_monitor_given_its_metrics_takes_the_configured_options_of_those(env) -> None:
    env("GROUNDTRACE_OPTIONS", '{"facts": {"mode": "seed"}, "lexical": {"bleu_weight": 0.3, "keyword_weight": 0.7}}')
    with build() as monitor:  # facts' options are for a Monitor that scores facts
        assert [(m.name, m.bleu_weight) for m in monitor.metrics] == [("lexical", 0.3)]
    with pytest.raises(ValueError, match="options given for metrics that are not selected: facts"):
        Monitor.from_settings(metrics=["lexical"], isolation="thread")  # the configuration as a whole: all of it
