"""The guard as LangChain v1 agent middleware: ``create_agent(model, tools, middleware=[GuardMiddleware(guard)])``
checks the agent's final answer against its tools' results (the contexts capture reads for an agent) once the agent
is done, and puts the delivered text in the final message's place (same id: the state's reducer replaces it).

The hook runs after the model wrote its answer: a caller that streams the agent's tokens (``stream_mode="messages"``)
has seen them by then. To guard a stream, wrap the agent instead: ``guard.wrap(agent).stream(...)`` checks each
sentence before it is sent.
"""

from __future__ import annotations

from typing import Any

from groundtrace.guards.guard import Guard
from groundtrace.record import Record
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from groundtrace_langchain.extract import message_text, tool_output_text
from groundtrace_langchain.guarded import with_answer


class GuardMiddleware(AgentMiddleware):
    """Check a ``create_agent`` agent's final answer with ``guard`` (its policy decides what the state keeps)."""

    def __init__(self, guard: Guard) -> None:
        super().__init__()
        self.guard = guard

    def after_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        record, last = final_answer(state)
        if record is None:
            return None
        return {"messages": [with_answer(last, self.guard.check_record(record), None)]}

    async def aafter_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        record, last = final_answer(state)
        if record is None:
            return None
        return {"messages": [with_answer(last, await self.guard.acheck_record(record), None)]}


def final_answer(state: Any) -> tuple[Record | None, Any]:
    """The Record of the agent's last turn (the user's last message, the tools' results since, the final answer)
    and its final message; (None, None) when the agent did not end on an answer."""
    messages: list[BaseMessage] = list(state.get("messages") or ())
    if not messages or not isinstance(messages[-1], AIMessage) or messages[-1].tool_calls:
        return None, None
    asked = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=-1)
    contexts = [text for m in messages[asked + 1:] if isinstance(m, ToolMessage) and m.status != "error"
                and (text := tool_output_text(m))]
    question = message_text(messages[asked]) if asked >= 0 else None
    return Record(question=question, contexts=contexts, answer=message_text(messages[-1])), messages[-1]
