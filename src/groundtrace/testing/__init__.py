"""Test support, public like ``pandas.testing``: what groundtrace's tests, notebooks and benchmarks
share, and what a user's own tests may use. Not a backend: nothing else in groundtrace imports it.

- :func:`assert_grounded`: fail a test when an answer is not grounded in its contexts.
- :mod:`groundtrace.testing.llama_server`: a real llama.cpp judge on 127.0.0.1 (SmolLM2-135M).
"""

from groundtrace.testing.assertions import assert_grounded

__all__ = ["assert_grounded"]
