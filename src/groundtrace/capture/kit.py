"""The capture kit both framework integrations build on.

- :class:`Instrumentor`: process-wide capture with idempotent ``instrument()`` / ``uninstrument()``,
  the ``GROUNDTRACE_ENABLED`` switch, and the one answer to "who creates, owns and closes the
  Monitor". An integration subclasses it and writes only its framework hooks (``_install`` /
  ``_remove``); ``instrument()`` returns the Monitor in use, in every integration.
- The process-wide shared Monitor, configured from the environment: :func:`shared_monitor`, and
  :func:`acquire_shared_monitor` / :func:`release_shared_monitor` for integrations that share it.
- :func:`prepare_shared_capture`: for a handler that builds the shared Monitor lazily, the
  trace-link lookups its sinks need, registered before the first request is read.
- Request spans: :func:`start_request_span` / :func:`end_request_span`, the adapter's own
  ``invoke_workflow {name}`` span when the application has no span current but has installed a real
  OpenTelemetry SDK. Nothing here imports OpenTelemetry unless the application already has.

Sampling and exclusion are not here: the Monitor decides both (``Monitor.submit``, ``Monitor.excludes``).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from groundtrace.config import Settings
from groundtrace.monitor import Monitor
from groundtrace.redaction import get_logger, redact

log = get_logger("groundtrace.capture")

# the request span, as the GenAI conventions (v1.41) name a framework's run: "invoke_workflow {gen_ai.workflow.name}"
WORKFLOW_OPERATION = "invoke_workflow"

# who closes an instrumentor's Monitor: the caller (passed monitor=), us (built from options), or
# the last integration that lets go of the process-wide shared one
CALLER, OWN, SHARED = "caller", "own", "shared"


class Instrumentor:
    """Global capture for one framework. Subclasses set ``framework`` and implement the hooks.

    ``instrument(monitor=None, settings=None, **options)``: ``monitor=`` uses yours (never closed
    here); Monitor options (``metrics``, ``sinks``, ``sample_rate``, ``queue_size``, ``workers``,
    ``metric_timeout_s``, ``options``, ...) build one from the ``GROUNDTRACE_*`` settings overridden
    by them (closed by ``uninstrument()``); with neither, the process-wide shared Monitor is used
    (released by ``uninstrument()``, closed when no integration uses it any more). Options named in
    ``hook_options`` go to ``_install`` instead. A second call while instrumented changes nothing
    and returns the Monitor in use. With GROUNDTRACE_ENABLED explicitly off it does nothing and
    returns None, so code may call it unconditionally.
    """

    framework: ClassVar[str]
    hook_options: ClassVar[frozenset[str]] = frozenset()

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._monitor: Monitor | None = None
        self._ownership: str | None = None

    # ------------------------------------------------------------------------- what subclasses write
    def _install(self, monitor: Monitor, **hook_options: Any) -> None:
        """Attach the framework hooks that submit Records to ``monitor``."""
        raise NotImplementedError

    def _remove(self) -> None:
        """Detach them; runs in flight may still finish against the Monitor."""
        raise NotImplementedError

    # ------------------------------------------------------------------------------------ the kit
    @property
    def monitor(self) -> Monitor | None:
        return self._monitor

    @property
    def is_instrumented(self) -> bool:
        return self._monitor is not None

    def instrument(self, *, monitor: Monitor | None = None, settings: Settings | None = None,
                   **options: Any) -> Monitor | None:
        settings = settings or Settings.from_env()
        if settings.switched_off:
            log.info("groundtrace: GROUNDTRACE_ENABLED is off: %s is not instrumented", self.framework)
            return None
        hook_options = {name: options.pop(name) for name in list(options) if name in self.hook_options}
        options = {name: value for name, value in options.items()
                   if value is not None or name not in ("metrics", "sinks")}
        with self._lock:
            if self._monitor is not None:
                if options or monitor is not None or hook_options:
                    log.warning("groundtrace: %s is already instrumented; call uninstrument() first to change "
                                "the setup", self.framework)
                return self._monitor
            if monitor is not None and options:
                raise ValueError("instrument(): pass either monitor= or metrics/sinks/Monitor options, not both "
                                 f"(got {', '.join(sorted(options))})")
            monitor, ownership = self._take_monitor(monitor, options, settings)
            try:
                self._install(monitor, **hook_options)
            except BaseException:
                _let_go(monitor, ownership)
                raise
            self._monitor, self._ownership = monitor, ownership
        log.info("groundtrace: capturing %s (metrics: %s)", self.framework, ", ".join(m.name for m in monitor.metrics))
        return monitor

    def uninstrument(self) -> None:
        """Stop capturing; close the Monitor instrument() built, release the shared one, leave yours
        open. Twice is harmless."""
        with self._lock:
            monitor, ownership = self._monitor, self._ownership
            if monitor is None:
                return
            self._remove()
            self._monitor = self._ownership = None
        _let_go(monitor, ownership)

    @staticmethod
    def _take_monitor(monitor: Monitor | None, options: Mapping[str, Any], settings: Settings) -> tuple[Monitor, str]:
        if monitor is not None:
            return monitor, CALLER
        if not options:
            return acquire_shared_monitor(), SHARED
        return Monitor.from_settings(settings, **{"lazy": True, **options}), OWN


def _let_go(monitor: Monitor, ownership: str | None) -> None:
    if ownership == OWN:
        monitor.close()
    elif ownership == SHARED:
        release_shared_monitor()


# ------------------------------------------------------------------------- the shared Monitor
_shared: Monitor | None = None
_shared_failure: Exception | None = None  # why the shared Monitor cannot be built: a setting, built once like it
_shared_users = 0
_shared_lock = threading.Lock()


def shared_monitor() -> Monitor:
    """The process-wide Monitor configured from the environment, created on first use. A setting it cannot be
    built from (a verdict file that is missing or cut, an unknown metric name) is said once, in its own words,
    and its error raised again at every later call without building anew (fixed when the application restarts)."""
    global _shared, _shared_failure
    with _shared_lock:
        if _shared_failure is not None:
            raise _shared_failure.with_traceback(None)
        if _shared is None:
            try:
                # lazy: a process that imports the app and never records (a supervisor) starts no scoring process
                _shared = Monitor.from_settings(Settings.from_env(), lazy=True)
            except Exception as error:
                _shared_failure = error
                reason = error.args[0] if isinstance(error, KeyError) and error.args else error
                log.error("groundtrace: nothing is scored: the Monitor cannot be built from the GROUNDTRACE_* settings "
                          "(%s): %s. Fix the setting and restart the application", _named_settings(), reason)
                raise
        return _shared


def _named_settings() -> str:
    """The settings that choose the shared Monitor's metrics, as the environment has them."""
    from groundtrace.config import metrics_setting, verdict_file

    named = [f"GROUNDTRACE_{name}={value}" for name, value in (("METRICS", metrics_setting()),
                                                                ("VERDICT_FILE", verdict_file())) if value]
    return ", ".join(named) or "the defaults"


def reset_shared_monitor() -> None:
    """Close and forget the shared Monitor, or why it could not be built (tests, and the last
    release_shared_monitor())."""
    global _shared, _shared_failure
    with _shared_lock:
        monitor, _shared, _shared_failure = _shared, None, None
    if monitor is not None:
        monitor.close()


def acquire_shared_monitor() -> Monitor:
    """shared_monitor() for an integration that gives it back with release_shared_monitor(), so
    that uninstrumenting one framework does not close the Monitor another one still uses."""
    global _shared_users
    monitor = shared_monitor()
    with _shared_lock:
        _shared_users += 1
    return monitor


def release_shared_monitor() -> None:
    """Close the shared Monitor when the last integration using it lets go."""
    global _shared_users
    with _shared_lock:
        _shared_users = max(0, _shared_users - 1)
        last = _shared_users == 0
    if last:
        reset_shared_monitor()


def prepare_shared_capture() -> None:
    """Before a handler captures requests for the shared Monitor it will build lazily: register the
    trace-link lookups of the environment's sinks now, so the first Record carries their ids."""
    from groundtrace.sinks import register_trace_links

    try:
        register_trace_links(Settings.from_env().sinks)
    except Exception as error:  # a bad setting fails where the Monitor is built, not in the app's constructor
        log.debug("groundtrace: trace links of the configured sinks not registered: %s", error)


# ---------------------------------------------------------------------------------- request spans
_UNKNOWN = object()
_tracers: dict[str, tuple[Any, Any]] = {}  # tracer name -> (provider, tracer): get_tracer is not free


def _sdk_tracer(trace: Any, tracer_name: str) -> Any:
    """The global tracer, if a real TracerProvider is installed (not the API's proxy or no-op one)."""
    if getattr(trace, "_TRACER_PROVIDER", _UNKNOWN) is None:
        # no provider set: get_tracer_provider() would only look in os.environ (on every request of
        # an app that has the API loaded, as langsmith does, but no provider) for one to load
        return None
    provider = trace.get_tracer_provider()
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        return None
    cached = _tracers.get(tracer_name)
    if cached is not None and cached[0] is provider:
        return cached[1]
    tracer = provider.get_tracer(tracer_name)
    _tracers[tracer_name] = (provider, tracer)
    return tracer


def start_request_span(tracer_name: str, attributes: Mapping[str, Any] | Callable[[], Mapping[str, Any]], *,
                       workflow: str | None = None, start_time: int | None = None, new_trace: bool = False) -> Any:
    """A started ``invoke_workflow {workflow}`` span (INTERNAL, ``gen_ai.operation.name`` and
    ``gen_ai.workflow.name`` set; ``invoke_workflow`` alone without a name) from the global SDK tracer, or None when
    OpenTelemetry is not loaded or no real TracerProvider is installed. The caller ends it with
    :func:`end_request_span`. It is never made current: a request's start and end may run in
    different contexts. ``new_trace``: the root of a trace of its own, whatever is current.
    ``attributes`` may be a function that makes them, called only when a span is started (this
    runs on every request; most have no SDK installed)."""
    # the module itself, not an import statement: this runs on every request
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    tracer = _sdk_tracer(trace, tracer_name)
    if tracer is None:
        return None
    extra: dict[str, Any] = {}
    if start_time is not None:
        extra["start_time"] = start_time
    if new_trace:
        extra["context"] = sys.modules["opentelemetry.context"].Context()
    made = dict(attributes() if callable(attributes) else attributes)
    made["gen_ai.operation.name"] = WORKFLOW_OPERATION
    if workflow:
        made["gen_ai.workflow.name"] = workflow
    return tracer.start_span(request_span_name(workflow), kind=trace.SpanKind.INTERNAL, attributes=made, **extra)


def request_span_name(workflow: str | None) -> str:
    return f"{WORKFLOW_OPERATION} {workflow}" if workflow else WORKFLOW_OPERATION


def end_request_span(span: Any, error: BaseException | None = None, *, end_time: int | None = None,
                     mask: Callable[[str], str] | None = None) -> None:
    """End a span from :func:`start_request_span` (None is fine), with error status if ``error``: its description
    the exception's type and message, through ``mask`` (the capture's or the Monitor's): an exception's message
    often quotes what the user sent. A mask that fails leaves the type alone."""
    if span is None:
        return
    if error is not None:
        from opentelemetry.trace import Status, StatusCode

        span.set_status(Status(StatusCode.ERROR, error_description(error, mask)))
    span.end(end_time=end_time)


def error_description(error: BaseException, mask: Callable[[str], str] | None = None) -> str:
    """``Type: message``, masked, secrets redacted, at most 200 characters; ``Type`` alone if the mask fails."""
    text = f"{type(error).__name__}: {error}"
    if mask is not None:
        try:
            text = str(mask(text))
        except Exception:
            text = type(error).__name__
    return redact(text)[:200]
