"""groundtrace for LlamaIndex: score every query, chat, agent and workflow answer for hallucination, in the background.

    import groundtrace_llamaindex
    groundtrace_llamaindex.instrument(metrics=["lexical"], sinks=["otel"])

    # or inside LlamaIndex's own evaluation loop (BatchEvalRunner):
    evaluator = groundtrace_llamaindex.GroundtraceEvaluator("grounding")

See docs/integrations/llamaindex.md for what is captured, streaming and chat behaviour, errors and environment variables.
"""

from groundtrace.capture.stats import CaptureStats

from groundtrace_llamaindex.evaluator import GroundtraceEvaluator
from groundtrace_llamaindex.exclusion import exclude
from groundtrace_llamaindex.handlers import GroundtraceEventHandler, GroundtraceSpanHandler
from groundtrace_llamaindex.instrumentation import instrument, is_instrumented, stats, uninstrument
from groundtrace_llamaindex.tracker import RootTracker

__version__ = "0.1.0"

__all__ = [
    "CaptureStats",
    "GroundtraceEvaluator",
    "GroundtraceEventHandler",
    "GroundtraceSpanHandler",
    "RootTracker",
    "exclude",
    "instrument",
    "is_instrumented",
    "stats",
    "uninstrument",
]
