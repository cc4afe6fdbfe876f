"""LangChain v1 adapter: ``langchain.agents.create_agent`` with ``AgentMiddleware`` layers."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import _harness as h
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool


class ScriptedChatModel(BaseChatModel):
    """Asks for add(1, 2) unless the last message is the tool's answer, then says 'done'."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        return self  # the script already knows its one tool

    @staticmethod
    def _reply(messages: list[BaseMessage]) -> ChatResult:
        if isinstance(messages[-1], ToolMessage):
            msg = AIMessage(content="done")
        else:
            msg = AIMessage(content="", tool_calls=[{"name": "add", "args": {"a": 1, "b": 2}, "id": "call_1"}])
        return ChatResult(generations=[ChatGeneration(message=msg)])

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        return self._reply(messages)

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> Any:
        return self._reply(messages)


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return await h.atool_add(a, b)


def _layer(level: str, i: int, probe: bool) -> AgentMiddleware:
    """A distinct pass-through middleware class per layer (LangChain rejects duplicate names)."""
    ns: dict[str, Any] = {}
    if level == "turn":
        if probe:

            async def abefore_agent(self: Any, state: Any, runtime: Any) -> None:
                h.HITS["turn"] += 1
        else:

            async def abefore_agent(self: Any, state: Any, runtime: Any) -> None:
                return None

        async def aafter_agent(self: Any, state: Any, runtime: Any) -> None:
            return None

        ns = {"abefore_agent": abefore_agent, "aafter_agent": aafter_agent}
    elif level == "model":
        if probe:

            async def awrap_model_call(self: Any, request: Any, handler: Any) -> Any:
                h.HITS["model"] += 1
                return await handler(request)
        else:

            async def awrap_model_call(self: Any, request: Any, handler: Any) -> Any:
                return await handler(request)

        ns = {"awrap_model_call": awrap_model_call}
    else:
        if probe:

            async def awrap_tool_call(self: Any, request: Any, handler: Any) -> Any:
                h.HITS["tool"] += 1
                return await handler(request)
        else:

            async def awrap_tool_call(self: Any, request: Any, handler: Any) -> Any:
                return await handler(request)

        ns = {"awrap_tool_call": awrap_tool_call}
    cls = type(f"Pass{level.title()}{i}", (AgentMiddleware,), ns)
    return cls()


class Runner:
    def __init__(self, agent: Any) -> None:
        self.agent = agent

    async def turn(self, conv: int) -> None:
        out = await self.agent.ainvoke({"messages": [{"role": "user", "content": "go"}]})
        if out["messages"][-1].content != "done":
            raise AssertionError(out)

    async def close(self) -> None:
        return None


class LangChainAdapter(h.Adapter):
    def __init__(self) -> None:
        super().__init__(
            name="langchain v1",
            package="langchain",
            import_stmt="from langchain.agents import create_agent",
            levels={
                "turn": "AgentMiddleware with abefore_agent + aafter_agent returning None (graph nodes)",
                "model": "AgentMiddleware.awrap_model_call: `return await handler(request)`",
                "tool": "AgentMiddleware.awrap_tool_call: `return await handler(request)`",
            },
            fake_model="BaseChatModel subclass with _agenerate/_generate returning the scripted AIMessage; "
            "bind_tools returns self; passed as create_agent(model=...)",
            notes="agent.ainvoke({'messages': [user]}) per turn, no checkpointer (fresh history each turn); "
            "async tool via @tool",
        )

    async def make(self, layers: dict[str, int], probe: bool = False) -> Runner:
        middleware = [_layer(level, i, probe) for level, n in layers.items() for i in range(n)]
        return Runner(create_agent(model=ScriptedChatModel(), tools=[add], middleware=middleware))

    async def new_agent(self) -> Any:
        return create_agent(model=ScriptedChatModel(), tools=[add])


if __name__ == "__main__":
    h.main(LangChainAdapter())
