"""pydantic-ai adapter: ``Agent`` with a ``FunctionModel`` and pass-through capabilities."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import _harness as h
from pydantic_ai import Agent
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel


async def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Asks for add(1, 2) unless the last request carries the tool's return, then says 'done'."""
    if any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
        return ModelResponse(parts=[TextPart("done")])
    return ModelResponse(parts=[ToolCallPart(tool_name="add", args={"a": 1, "b": 2}, tool_call_id="call_1")])


async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return await h.atool_add(a, b)


class PassRun(AbstractCapability[Any]):
    async def wrap_run(self, ctx: Any, *, handler: Any) -> Any:
        return await handler()


class PassModel(AbstractCapability[Any]):
    async def wrap_model_request(self, ctx: Any, *, request_context: Any, handler: Any) -> Any:
        return await handler(request_context)


class PassTool(AbstractCapability[Any]):
    async def wrap_tool_execute(self, ctx: Any, *, call: Any, tool_def: Any, args: Any, handler: Any) -> Any:
        return await handler(args)


class ProbeRun(AbstractCapability[Any]):
    async def wrap_run(self, ctx: Any, *, handler: Any) -> Any:
        h.HITS["turn"] += 1
        return await handler()


class ProbeModel(AbstractCapability[Any]):
    async def wrap_model_request(self, ctx: Any, *, request_context: Any, handler: Any) -> Any:
        h.HITS["model"] += 1
        return await handler(request_context)


class ProbeTool(AbstractCapability[Any]):
    async def wrap_tool_execute(self, ctx: Any, *, call: Any, tool_def: Any, args: Any, handler: Any) -> Any:
        h.HITS["tool"] += 1
        return await handler(args)


PASS = {"turn": PassRun, "model": PassModel, "tool": PassTool}
PROBE = {"turn": ProbeRun, "model": ProbeModel, "tool": ProbeTool}


class Runner:
    def __init__(self, agent: Any) -> None:
        self.agent = agent

    async def turn(self, conv: int) -> None:
        result = await self.agent.run("go")
        if result.output != "done":
            raise AssertionError(result)

    async def close(self) -> None:
        return None


class PydanticAIAdapter(h.Adapter):
    def __init__(self) -> None:
        super().__init__(
            name="pydantic-ai",
            package="pydantic-ai-slim",
            import_stmt="from pydantic_ai import Agent",
            levels={
                "turn": "capability overriding wrap_run: `return await handler()`",
                "model": "capability overriding wrap_model_request: `return await handler(request_context)`",
                "tool": "capability overriding wrap_tool_execute: `return await handler(args)`",
            },
            fake_model="pydantic_ai.models.function.FunctionModel(async scripted(messages, info)) passed as "
            "Agent(model=...)",
            notes="agent.run('go') per turn (fresh history each turn); async tool registered via tools=[add]",
        )

    async def make(self, layers: dict[str, int], probe: bool = False) -> Runner:
        kinds = PROBE if probe else PASS
        caps = [kinds[level]() for level, n in layers.items() for _ in range(n)]
        return Runner(Agent(FunctionModel(scripted), tools=[add], capabilities=caps))

    async def new_agent(self) -> Any:
        return Agent(FunctionModel(scripted), tools=[add])


if __name__ == "__main__":
    h.main(PydanticAIAdapter())
