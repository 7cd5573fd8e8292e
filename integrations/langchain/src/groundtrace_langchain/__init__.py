"""groundtrace for LangChain and LangGraph: score every RAG answer for grounding, off the request path.

    from groundtrace_langchain import GroundtraceCallbackHandler
    chain.invoke(question, config={"callbacks": [GroundtraceCallbackHandler(metrics=["lexical"], sinks=["otel"])]})

or, for the whole process: ``groundtrace_langchain.instrument()``.
"""

from groundtrace.capture.stats import CaptureStats
from groundtrace_langchain.handler import GroundtraceCallbackHandler
from groundtrace_langchain.instrumentation import instrument, instrumented_handler, uninstrument

__version__ = "0.1.0"

__all__ = ["CaptureStats", "GroundtraceCallbackHandler", "instrument", "instrumented_handler", "uninstrument"]
