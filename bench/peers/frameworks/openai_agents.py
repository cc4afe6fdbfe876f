"""OpenAI Agents SDK adapter: ``Agent`` + ``Runner.run`` with a custom ``Model`` implementation."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import _harness as h
from agents import (
    Agent,
    GuardrailFunctionOutput,
    InputGuardrail,
    Model,
    ModelResponse,
    Runner,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrail,
    function_tool,
    set_tracing_disabled,
)
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

set_tracing_disabled(True)  # the default exporter would send traces to the network


def _is_tool_output(item: Any) -> bool:
    kind = item.get("type") if isinstance(item, dict) else getattr(item, "type", None)
    return kind == "function_call_output"


class ScriptedModel(Model):
    """Asks for add(1, 2) unless the last input item is the tool's output, then says 'done'."""

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
        if isinstance(input, list) and input and _is_tool_output(input[-1]):
            item: Any = ResponseOutputMessage(
                id="msg_1",
                type="message",
                role="assistant",
                status="completed",
                content=[ResponseOutputText(type="output_text", text="done", annotations=[])],
            )
        else:
            item = ResponseFunctionToolCall(
                id="fc_1", type="function_call", call_id="call_1", name="add", arguments='{"a": 1, "b": 2}'
            )
        return ModelResponse(output=[item], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the benchmark does not stream")


class PassModel(Model):
    """The SDK has no model-call middleware: a delegating Model wrapper is the way to wrap a call."""

    def __init__(self, inner: Model, probe: bool) -> None:
        self.inner = inner
        self.probe = probe

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        if self.probe:
            h.HITS["model"] += 1
        return await self.inner.get_response(*args, **kwargs)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.stream_response(*args, **kwargs)


async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return await h.atool_add(a, b)


async def pass_input(ctx: Any, agent: Any, input: Any) -> GuardrailFunctionOutput:
    return GuardrailFunctionOutput(output_info=None, tripwire_triggered=False)


async def probe_input(ctx: Any, agent: Any, input: Any) -> GuardrailFunctionOutput:
    h.HITS["turn"] += 1
    return GuardrailFunctionOutput(output_info=None, tripwire_triggered=False)


async def pass_tool(data: Any) -> ToolGuardrailFunctionOutput:
    return ToolGuardrailFunctionOutput.allow()


async def probe_tool(data: Any) -> ToolGuardrailFunctionOutput:
    h.HITS["tool"] += 1
    return ToolGuardrailFunctionOutput.allow()


class Runner_:
    def __init__(self, agent: Agent[Any]) -> None:
        self.agent = agent

    async def turn(self, conv: int) -> None:
        result = await Runner.run(self.agent, "go")
        if result.final_output != "done":
            raise AssertionError(result)

    async def close(self) -> None:
        return None


def build(layers: dict[str, int], probe: bool) -> Agent[Any]:
    model: Model = ScriptedModel()
    for _ in range(layers.get("model", 0)):
        model = PassModel(model, probe)
    guards = [
        ToolInputGuardrail(guardrail_function=probe_tool if probe else pass_tool, name=f"t{i}")
        for i in range(layers.get("tool", 0))
    ]
    tool = function_tool(add, tool_input_guardrails=guards or None)
    inputs = [
        InputGuardrail(guardrail_function=probe_input if probe else pass_input, name=f"g{i}")
        for i in range(layers.get("turn", 0))
    ]
    return Agent(name="a", instructions="bench", model=model, tools=[tool], input_guardrails=inputs)


class OpenAIAgentsAdapter(h.Adapter):
    def __init__(self) -> None:
        super().__init__(
            name="openai-agents",
            package="openai-agents",
            import_stmt="from agents import Agent, Runner",
            levels={
                "turn": "input guardrail returning tripwire_triggered=False (run in parallel with the first "
                "model call, the SDK default)",
                "model": "no framework mechanism (RunHooks/AgentHooks observe, one per run/agent): a delegating "
                "Model wrapper (plain Python)",
                "tool": "tool input guardrail returning ToolGuardrailFunctionOutput.allow()",
            },
            fake_model="agents.Model subclass whose get_response returns a ResponseFunctionToolCall, then a "
            "ResponseOutputMessage; passed as Agent(model=...); tracing disabled",
            notes="Runner.run(agent, 'go') per turn (fresh history each turn); async function_tool",
        )

    async def make(self, layers: dict[str, int], probe: bool = False) -> Runner_:
        return Runner_(build(layers, probe))

    async def new_agent(self) -> Any:
        return build({}, False)


if __name__ == "__main__":
    h.main(OpenAIAgentsAdapter())
