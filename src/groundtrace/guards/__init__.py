"""Guard mode: an answer checked against its contexts before the caller gets it (groundtrace/guards/guard.py)."""

from groundtrace.guards.decision import Action, Decision, GuardBlocked
from groundtrace.guards.guard import FALLBACK, ON_TIMEOUT, POLICIES, Guard, guard, passages
from groundtrace.guards.streams import AsyncGuardedStream, GuardedStream, SentenceGate

__all__ = ["Action", "AsyncGuardedStream", "Decision", "FALLBACK", "Guard", "GuardBlocked", "GuardedStream",
           "ON_TIMEOUT", "POLICIES", "SentenceGate", "guard", "passages"]
