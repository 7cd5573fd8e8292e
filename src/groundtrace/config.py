"""Configuration: the one module that reads ``GROUNDTRACE_*`` and ``OPENAI_*`` environment variables.

Everything else receives a :class:`Settings` (or plain arguments) and reads no environment itself.

    GROUNDTRACE_ENABLED          1/true/yes/on turns capture on (the launcher and auto-instrumentation);
                                 0/false/no/off makes every integration's instrument() a no-op
    GROUNDTRACE_METRICS          comma-separated metric names (default: combined when GROUNDTRACE_VERDICT_FILE
                                 is set; else grounding; grounding,faithfulness when GROUNDTRACE_JUDGE_MODEL is set)
    GROUNDTRACE_SAMPLE_RATE      fraction of traces scored, 0..1 (default 1)
    GROUNDTRACE_SINKS            comma-separated sink names: otel, jsonl (or jsonl:PATH), langsmith, mlflow,
                                 phoenix, langfuse, or module:Class of your own; none: no sink at all. Unset:
                                 live capture writes to the local default store (jsonl at GROUNDTRACE_JSONL_PATH)
    GROUNDTRACE_QUEUE_SIZE       records waiting for a worker before new ones are dropped (default 1000)
    GROUNDTRACE_WORKERS          background scoring threads (default 1)
    GROUNDTRACE_CPU_BUDGET       the CPU groundtrace may take, as a share of one core (0.25: a quarter core);
                                 past it records are counted over_budget and not scored (default: no bound)
    GROUNDTRACE_METRIC_TIMEOUT_S seconds one metric may take on one record (default 30)
    GROUNDTRACE_OPTIONS          metric options as JSON, e.g. {"facts": {"mode": "seed"}}
    GROUNDTRACE_ISOLATION        auto (default), process, thread or ray: where the metrics run (see Monitor)
    GROUNDTRACE_RAY_ADDRESS      a Ray cluster (auto, HOST:PORT or ray://HOST:PORT): the Monitor scores on
                                 its actors (isolation "ray" unless GROUNDTRACE_ISOLATION says otherwise)
    GROUNDTRACE_JSONL_PATH       where the jsonl sink writes, and the default store of live capture with no
                                 sink configured, which `groundtrace watch` follows (default
                                 groundtrace-scores.jsonl in the working directory)
    GROUNDTRACE_VERDICT_FILE     the verdict file of the `combined` metric (written by `groundtrace fit`;
                                 default: the one shipped with groundtrace): a regular file of at most 1 MiB,
                                 read once when the Monitor is built
    GROUNDTRACE_PROGRESS         1: the command line shows progress bars even when not on a terminal
    GROUNDTRACE_TRACE_URL        `groundtrace report`'s link per record to its trace, a URL template such as
                                 http://localhost:6006/redirects/traces/{trace_id} (its --trace-url wins)
    GROUNDTRACE_CONTEXT_KEYS     comma-separated keys an app's state or prompt holds its contexts under, beyond
                                 the words groundtrace knows (context, documents, sources, ...)
    GROUNDTRACE_JUDGE_MODEL      the LLM judge's model; setting it adds faithfulness to the default metrics
    OPENAI_BASE_URL              the OpenAI-compatible endpoint of the judge and the openai embedder
    OPENAI_API_KEY               its key (a local server needs none)
    GROUNDTRACE_JUDGE_CACHE_DIR  the judge's answer cache (default $XDG_CACHE_HOME/groundtrace/judge,
                                 else ~/.cache/groundtrace/judge)
    GROUNDTRACE_MASK             module:function, a str -> str mask applied to every question, context and
                                 answer before any metric, judge or sink sees it (see groundtrace.privacy)
    GROUNDTRACE_CAPTURE_TEXT     false: sinks get scores, verdicts and span offsets, no text (default true)
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT (+ /v1/traces): where the otel
                                 sink sends its spans when the process has no tracer provider of its own
                                 (the command line: score --from ... --sinks otel)
    GROUNDTRACE_TELEMETRY        where the Monitor's own metrics go (groundtrace.telemetry): auto (default: the
                                 application's MeterProvider, else OTLP when the variables below ask for it),
                                 otlp, prometheus, prometheus:PORT, prometheus:HOST:PORT, or none
    OTEL_EXPORTER_OTLP_METRICS_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT (+ /v1/metrics) when
                                 OTEL_METRICS_EXPORTER names otlp: where the metrics go over OTLP/HTTP when the
                                 application has no MeterProvider; OTEL_METRICS_EXPORTER=none: nowhere
    OTEL_EXPORTER_PROMETHEUS_HOST, OTEL_EXPORTER_PROMETHEUS_PORT: the scrape endpoint of telemetry "prometheus"
                                 (default localhost:9464)
    PROMETHEUS_MULTIPROC_DIR     prometheus_client's multiprocess directory: where the processes of a server
                                 keep their series for the one scrape (default: one of groundtrace's own under
                                 the temp directory; see groundtrace.telemetry.multiprocess)
The SDK sinks' own variables (LANGSMITH_*, LANGFUSE_*, PHOENIX_*, MLFLOW_*) are their SDKs' business,
except that the keys among them (SECRET_VARIABLES) are read here too, only to be registered with the
redactor (groundtrace.redaction): no text groundtrace writes ever shows them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from groundtrace.errors import ConfigError
from groundtrace.redaction import get_logger, register_secrets

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
DEFAULT_JSONL_PATH = "groundtrace-scores.jsonl"
#: how long (at most) a Monitor settles what it holds when the process exits (GROUNDTRACE_EXIT_FLUSH_S): a short
#: script's record waited 0.9 s at most on an idle 2-core machine, 30 s with both cores busy (the scoring process
#: runs at the lowest priority): twice that (benchmarks/exit_flush.py, docs/how-to/servers.md)
DEFAULT_EXIT_FLUSH_S = 60.0
#: the keys groundtrace or the SDKs of its sinks and sources may use: never shown in any text groundtrace writes
SECRET_VARIABLES = ("OPENAI_API_KEY", "LANGSMITH_API_KEY", "LANGCHAIN_API_KEY", "LANGFUSE_SECRET_KEY",
                    "LANGFUSE_PUBLIC_KEY", "PHOENIX_API_KEY")


def _environ(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    return environ if environ is not None else os.environ


def parse_flag(raw: str | None) -> bool | None:
    """True for 1/true/yes/on, False for 0/false/no/off, None when unset or anything else."""
    value = (raw or "").strip().lower()
    return True if value in _TRUE else False if value in _FALSE else None


def _split(value: str | None) -> list[str]:
    return [part.strip() for part in (value or "").split(",") if part.strip()]


def _text(env: Mapping[str, str], name: str) -> str | None:
    return (env.get(name) or "").strip() or None


def _sinks(raw: str | None) -> list[str] | None:
    """GROUNDTRACE_SINKS: None when unset (nothing configured: live capture uses the default store),
    [] for ``none``, else the names."""
    names = _split(raw)
    if not names:
        return None
    return [] if [name.lower() for name in names] == ["none"] else names


def register_environment_secrets(environ: Mapping[str, str] | None = None) -> None:
    """Register with the redactor the keys among SECRET_VARIABLES that are set: whoever builds a Monitor from
    arguments alone still never writes them (a scoring process reads them from the same environment, and
    an SDK's error may quote one)."""
    env = _environ(environ)
    register_secrets(*(value for name in SECRET_VARIABLES if (value := _text(env, name))))


@dataclass(frozen=True)
class JudgeSettings:
    """The LLM judge's endpoint: model, OpenAI-compatible base URL and key, answer cache folder.

    The base URL and key are the OpenAI SDK's own variables, so the openai embedder uses them too.
    """

    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    cache_dir: Path = Path("~/.cache/groundtrace/judge").expanduser()

    def __post_init__(self) -> None:
        register_secrets(self.api_key)

    @property
    def configured(self) -> bool:
        """A judge is configured when GROUNDTRACE_JUDGE_MODEL names one: an OPENAI_API_KEY that happens
        to be set must not start spending money on every answer."""
        return bool(self.model)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> JudgeSettings:
        env = _environ(environ)
        cache_dir = _text(env, "GROUNDTRACE_JUDGE_CACHE_DIR")
        if cache_dir is None:
            base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
            cache_dir = os.path.join(base, "groundtrace", "judge")
        return cls(model=_text(env, "GROUNDTRACE_JUDGE_MODEL"), base_url=env.get("OPENAI_BASE_URL") or None,
                   api_key=env.get("OPENAI_API_KEY") or None, cache_dir=Path(cache_dir))


def default_metrics(settings: Settings | JudgeSettings | Mapping[str, str] | None = None,
                    environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """What runs when nobody chose: the verdict ``groundtrace fit`` wrote (``combined``) when
    GROUNDTRACE_VERDICT_FILE names one; else the offline detector, plus judge faithfulness when a judge is
    configured. ``settings``: Settings, JudgeSettings, an environment mapping, or None (os.environ)."""
    env = settings if isinstance(settings, Mapping) else environ
    if verdict_file(env):  # setting the verdict file is choosing the fitted verdict: one step, nothing else to set
        return ("combined",)
    if isinstance(settings, Settings):
        judge = settings.judge
    elif isinstance(settings, JudgeSettings):
        judge = settings
    else:
        judge = JudgeSettings.from_env(settings)
    return ("grounding", "faithfulness") if judge.configured else ("grounding",)


def _chosen_metrics(env: Mapping[str, str], judge: JudgeSettings) -> list[str]:
    named = _split(env.get("GROUNDTRACE_METRICS"))
    if named and verdict_file(env) and "combined" not in named:
        get_logger("groundtrace.config").warning(
            "groundtrace: GROUNDTRACE_VERDICT_FILE is set, but GROUNDTRACE_METRICS=%s does not name combined: the "
            "fitted verdict is not applied (add combined, or unset GROUNDTRACE_METRICS to score with it alone)",
            ",".join(named))
    return named or list(default_metrics(judge, env))


def context_keys(environ: Mapping[str, str] | None = None) -> list[str]:
    """GROUNDTRACE_CONTEXT_KEYS: comma-separated keys an application holds its contexts under, beyond the words
    groundtrace knows (groundtrace.capture.carried.CONTEXT_WORDS)."""
    return _split(_environ(environ).get("GROUNDTRACE_CONTEXT_KEYS")) or []


def verdict_file(environ: Mapping[str, str] | None = None) -> str | None:
    """GROUNDTRACE_VERDICT_FILE: the `combined` metric's fitted file, when no ``file`` option names one (a regular
    file of at most groundtrace.backends.verdict.MAX_FILE_BYTES, read once where the metric is built)."""
    return _text(_environ(environ), "GROUNDTRACE_VERDICT_FILE")


def metrics_setting(environ: Mapping[str, str] | None = None) -> str | None:
    """GROUNDTRACE_METRICS as it is set (None when unset), for a message that names what chose the metrics."""
    return _text(_environ(environ), "GROUNDTRACE_METRICS")


def trace_url(environ: Mapping[str, str] | None = None) -> str | None:
    """GROUNDTRACE_TRACE_URL: the report's URL template of a record's trace (groundtrace.report.trace_links)."""
    return _text(_environ(environ), "GROUNDTRACE_TRACE_URL")


def demo_llm(environ: Mapping[str, str] | None = None) -> tuple[str | None, str | None]:
    """GROUNDTRACE_DEMO_MODEL and GROUNDTRACE_DEMO_LLM_URL: the model and the LLM server `groundtrace demo` asks
    (groundtrace_demo.llms), each None when unset."""
    env = _environ(environ)
    return _text(env, "GROUNDTRACE_DEMO_MODEL"), _text(env, "GROUNDTRACE_DEMO_LLM_URL")


def _exit_flush_s(seconds: float) -> float:
    if not 0 <= seconds < float("inf"):
        raise ConfigError(f"GROUNDTRACE_EXIT_FLUSH_S={seconds!r} is not a number of seconds, 0 or more")
    return seconds


def _cpu_budget(env: Mapping[str, str]) -> float | None:
    raw = _text(env, "GROUNDTRACE_CPU_BUDGET")
    if raw is None:
        return None
    try:
        share = float(raw)
    except ValueError:
        share = float("nan")
    if not 0 < share < float("inf"):  # 0 is no budget but no scoring at all: that is GROUNDTRACE_SAMPLE_RATE=0
        raise ConfigError(f"GROUNDTRACE_CPU_BUDGET={raw!r} is not a share of one core above 0 (e.g. 0.25)")
    return share


def _otlp_traces_endpoint(env: Mapping[str, str]) -> str | None:
    """The OTLP/HTTP traces URL the OpenTelemetry variables name, as the SDK's exporter reads them."""
    traces = _text(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    if traces:
        return traces
    base = _text(env, "OTEL_EXPORTER_OTLP_ENDPOINT")
    return base.rstrip("/") + "/v1/traces" if base else None


def _otlp_metrics_endpoint(env: Mapping[str, str]) -> str | None:
    """The OTLP/HTTP metrics URL, when the OpenTelemetry variables ask for metrics over OTLP: the
    metrics endpoint itself, or the base endpoint when OTEL_METRICS_EXPORTER names otlp. A base endpoint
    alone is not enough: it often points at a traces-only backend, which would refuse metrics."""
    exporters = {name.lower() for name in _split(env.get("OTEL_METRICS_EXPORTER"))}
    if "none" in exporters:
        return None
    metrics = _text(env, "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
    if metrics:
        return metrics
    base = _text(env, "OTEL_EXPORTER_OTLP_ENDPOINT")
    return base.rstrip("/") + "/v1/metrics" if base and "otlp" in exporters else None


def check_telemetry(spec: str) -> str:
    """``spec`` if it names a telemetry target (see groundtrace.telemetry), else a ConfigError (a ValueError) that says which do."""
    head, _, address = spec.partition(":")
    if spec in ("auto", "otlp", "none") or head == "prometheus" and (not address or address.rpartition(":")[2].isdigit()):
        return spec
    raise ConfigError(f"telemetry {spec!r} is not one of auto, otlp, none, prometheus, prometheus:PORT, "
                     "prometheus:HOST:PORT")


def _prometheus_port(env: Mapping[str, str]) -> int:
    raw = _text(env, "OTEL_EXPORTER_PROMETHEUS_PORT") or "9464"
    if not raw.isdigit():
        raise ConfigError(f"OTEL_EXPORTER_PROMETHEUS_PORT={raw!r} is not a port number")
    return int(raw)


@dataclass
class Settings:
    """Everything groundtrace reads from the environment, read once by :meth:`from_env`.

    ``enabled``: GROUNDTRACE_ENABLED is on (the launcher and auto-instrumentation capture);
    ``switched_off``: it is explicitly off, which makes instrument() a no-op. Unset is neither.
    """

    enabled: bool = False
    switched_off: bool = False
    metrics: list[str] = field(default_factory=lambda: list(default_metrics(JudgeSettings())))
    sample_rate: float = 1.0
    #: the sinks named by GROUNDTRACE_SINKS; None: not configured (live capture then writes to
    #: :attr:`store_path`, see groundtrace.sinks.live_sinks); []: ``none``, no sink at all
    sinks: list[str] | None = None
    queue_size: int = 1000
    workers: int = 1
    metric_timeout_s: float = 30.0
    #: how long (at most) the Monitors settle what they hold at exit or on SIGTERM (GROUNDTRACE_EXIT_FLUSH_S)
    exit_flush_s: float = DEFAULT_EXIT_FLUSH_S
    #: a share of one core (GROUNDTRACE_CPU_BUDGET); None: no bound
    cpu_budget: float | None = None
    options: dict[str, dict[str, Any]] = field(default_factory=dict)
    isolation: str = "auto"
    ray_address: str | None = None
    jsonl_path: str = DEFAULT_JSONL_PATH
    progress: bool = False
    judge: JudgeSettings = field(default_factory=JudgeSettings)
    otlp_traces_endpoint: str | None = None
    #: ``module:function`` of the mask (GROUNDTRACE_MASK), loaded by groundtrace.privacy.load_mask
    mask: str | None = None
    #: False: sinks get no text (GROUNDTRACE_CAPTURE_TEXT=false)
    capture_text: bool = True
    #: where the Monitor's own metrics go (GROUNDTRACE_TELEMETRY; see groundtrace.telemetry)
    telemetry: str = "auto"
    #: OTLP/HTTP metrics URL when the OpenTelemetry variables ask for metrics over OTLP
    otlp_metrics_endpoint: str | None = None
    #: the scrape endpoint of telemetry "prometheus" with no address of its own
    prometheus_host: str = "localhost"
    prometheus_port: int = 9464
    #: PROMETHEUS_MULTIPROC_DIR: the directory the processes of a server share their series in (None: groundtrace's own)
    prometheus_multiproc_dir: str | None = None
    #: the values of SECRET_VARIABLES that are set, registered with the redactor
    secrets: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        register_secrets(*self.secrets)

    @property
    def store_path(self) -> Path:
        """The jsonl sink's file as an absolute path (GROUNDTRACE_JSONL_PATH, else groundtrace-scores.jsonl
        in the working directory): the default store of live capture, and what `groundtrace watch` follows."""
        return Path(self.jsonl_path or DEFAULT_JSONL_PATH).expanduser().absolute()

    def to_json(self) -> str:
        """These settings as JSON, for a scoring process of groundtrace's own (over its pipe, never its
        command line: the secrets are in here)."""
        return json.dumps(asdict(self), default=str)

    @classmethod
    def from_json(cls, text: str) -> Settings:
        """The settings :meth:`to_json` wrote."""
        values = json.loads(text)
        judge = values.pop("judge")
        return cls(**{**values, "secrets": tuple(values["secrets"]),
                      "judge": JudgeSettings(**{**judge, "cache_dir": Path(judge["cache_dir"])})})

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = _environ(environ)
        defaults = cls()

        def number(name: str, default: float, kind: type) -> Any:
            raw = env.get(name)
            if raw is None or not raw.strip():
                return default
            try:
                return kind(raw)
            except ValueError:
                raise ConfigError(f"{name}={raw!r} is not a valid {kind.__name__}") from None

        options = env.get("GROUNDTRACE_OPTIONS")
        try:
            parsed_options = json.loads(options) if options else {}
        except json.JSONDecodeError as error:
            raise ConfigError(f"GROUNDTRACE_OPTIONS is not valid JSON: {error}") from None
        enabled = parse_flag(env.get("GROUNDTRACE_ENABLED"))
        capture_text = parse_flag(env.get("GROUNDTRACE_CAPTURE_TEXT"))
        if capture_text is None and _text(env, "GROUNDTRACE_CAPTURE_TEXT"):  # a typo must not send the text
            raise ConfigError(f"GROUNDTRACE_CAPTURE_TEXT={env['GROUNDTRACE_CAPTURE_TEXT']!r} is not a flag: use true or false")
        judge = JudgeSettings.from_env(env)
        return cls(
            enabled=enabled is True,
            switched_off=enabled is False,
            metrics=_chosen_metrics(env, judge),
            sample_rate=number("GROUNDTRACE_SAMPLE_RATE", 1.0, float),
            sinks=_sinks(env.get("GROUNDTRACE_SINKS")),
            queue_size=number("GROUNDTRACE_QUEUE_SIZE", defaults.queue_size, int),
            workers=number("GROUNDTRACE_WORKERS", defaults.workers, int),
            metric_timeout_s=number("GROUNDTRACE_METRIC_TIMEOUT_S", defaults.metric_timeout_s, float),
            exit_flush_s=_exit_flush_s(number("GROUNDTRACE_EXIT_FLUSH_S", defaults.exit_flush_s, float)),
            cpu_budget=_cpu_budget(env),
            options=parsed_options,
            isolation=_text(env, "GROUNDTRACE_ISOLATION") or defaults.isolation,
            ray_address=_text(env, "GROUNDTRACE_RAY_ADDRESS"),
            jsonl_path=env.get("GROUNDTRACE_JSONL_PATH") or defaults.jsonl_path,
            progress=parse_flag(env.get("GROUNDTRACE_PROGRESS")) is True,
            judge=judge,
            otlp_traces_endpoint=_otlp_traces_endpoint(env),
            mask=_text(env, "GROUNDTRACE_MASK"),
            capture_text=capture_text is not False,
            telemetry=check_telemetry(_text(env, "GROUNDTRACE_TELEMETRY") or defaults.telemetry),
            otlp_metrics_endpoint=_otlp_metrics_endpoint(env),
            prometheus_host=_text(env, "OTEL_EXPORTER_PROMETHEUS_HOST") or defaults.prometheus_host,
            prometheus_port=_prometheus_port(env),
            prometheus_multiproc_dir=_text(env, "PROMETHEUS_MULTIPROC_DIR"),
            secrets=tuple(value for name in SECRET_VARIABLES if (value := _text(env, name))),
        )
