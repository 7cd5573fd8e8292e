"""Capture: what the framework integrations (and applications with no framework) use to turn a request
into one Record, on the application's side.

- :mod:`groundtrace.capture.kit`: the Instrumentor base, the shared Monitor, request spans;
- :mod:`groundtrace.capture.turn`: the one definition of a captured turn;
- :mod:`groundtrace.capture.stats`: where every turn went (``stats()``), and why some made no Record;
- :mod:`groundtrace.capture.session` and :mod:`groundtrace.capture.earlier_turns`: conversations, and the tool
  calls of earlier turns.

Nothing is imported here: ``import groundtrace`` loads only what it uses.
"""
