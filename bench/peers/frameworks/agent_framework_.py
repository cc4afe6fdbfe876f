"""Microsoft Agent Framework adapter: ``agent_framework.Agent`` over a custom chat client."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import _harness as h
from agent_framework import (
    Agent,
    AgentMiddleware,
    BaseChatClient,
    ChatMiddleware,
    ChatMiddlewareLayer,
    ChatResponse,
    Content,
    FunctionInvocationLayer,
    FunctionMiddleware,
    Message,
    tool,
)
from agent_framework.observability import ChatTelemetryLayer


class _RawScriptedClient(BaseChatClient):
    """Asks for add(1, 2) unless the last message carries the function result, then says 'done'."""

    async def _inner_get_response(self, *, messages: Any, stream: bool, options: Any, **kwargs: Any) -> Any:
        if stream:
            raise NotImplementedError("the benchmark does not stream")
        last = messages[-1]
        if any(c.type == "function_result" for c in last.contents):
            reply = Message(role="assistant", contents=[Content.from_text("done")])
        else:
            call = Content.from_function_call("call_1", "add", arguments={"a": 1, "b": 2})
            reply = Message(role="assistant", contents=[call])
        return ChatResponse(messages=[reply])


class ScriptedClient(  # type: ignore[misc]
    FunctionInvocationLayer[Any], ChatMiddlewareLayer[Any], ChatTelemetryLayer[Any], _RawScriptedClient
):
    """The layer stack the shipped clients use: tool loop, chat middleware, telemetry, raw client."""


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return await h.atool_add(a, b)


class PassAgent(AgentMiddleware):
    async def process(self, context: Any, call_next: Any) -> None:
        await call_next()


class PassChat(ChatMiddleware):
    async def process(self, context: Any, call_next: Any) -> None:
        await call_next()


class PassFunction(FunctionMiddleware):
    async def process(self, context: Any, call_next: Any) -> None:
        await call_next()


class ProbeAgent(AgentMiddleware):
    async def process(self, context: Any, call_next: Any) -> None:
        h.HITS["turn"] += 1
        await call_next()


class ProbeChat(ChatMiddleware):
    async def process(self, context: Any, call_next: Any) -> None:
        h.HITS["model"] += 1
        await call_next()


class ProbeFunction(FunctionMiddleware):
    async def process(self, context: Any, call_next: Any) -> None:
        h.HITS["tool"] += 1
        await call_next()


PASS = {"turn": PassAgent, "model": PassChat, "tool": PassFunction}
PROBE = {"turn": ProbeAgent, "model": ProbeChat, "tool": ProbeFunction}


def build(layers: dict[str, int], probe: bool) -> Agent:
    kinds = PROBE if probe else PASS
    middleware = [kinds[level]() for level, n in layers.items() for _ in range(n)]
    return Agent(client=ScriptedClient(), name="a", instructions="bench", tools=[add], middleware=middleware or None)


class Runner:
    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    async def turn(self, conv: int) -> None:
        response = await self.agent.run("go")
        if response.text != "done":
            raise AssertionError(response)

    async def close(self) -> None:
        return None


class AgentFrameworkAdapter(h.Adapter):
    def __init__(self) -> None:
        super().__init__(
            name="agent-framework",
            package="agent-framework-core",
            import_stmt="from agent_framework import Agent",
            levels={
                "turn": "AgentMiddleware.process: `await call_next()`",
                "model": "ChatMiddleware.process: `await call_next()`",
                "tool": "FunctionMiddleware.process: `await call_next()`",
            },
            fake_model="BaseChatClient subclass implementing _inner_get_response, composed with "
            "FunctionInvocationLayer + ChatMiddlewareLayer + ChatTelemetryLayer like the shipped clients; passed "
            "as Agent(client=...)",
            notes="agent.run('go') per turn without a session (fresh history each turn); async @tool",
        )

    async def make(self, layers: dict[str, int], probe: bool = False) -> Runner:
        return Runner(build(layers, probe))

    async def new_agent(self) -> Any:
        return build({}, False)


if __name__ == "__main__":
    h.main(AgentFrameworkAdapter())
