"""Structured output (``Agent.spec.output``) in every executor: the final answer is validated against
the agent's schema, an invalid one goes back to the model with the validation errors, a turn whose
answers never validate fails with ``E_OUTPUT_INVALID``, ``TurnResult.output`` holds the parsed value,
and an inter-agent request to such an agent carries it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import goondan
import kit

SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer"}, "label": {"type": "string"}},
    "required": ["n"],
    "additionalProperties": False,
}

# Agent s has the schema. It answers from its input: "retry" gives an invalid answer first and a
# valid one once the runtime's correction is the last message; "never" never gives JSON; "fenced"
# wraps valid JSON in a code fence. Agent a has no schema and asks s through agents__request.
MODEL = """\
import json

SCHEMA = @SCHEMA@


def _text(message):
    content = message["content"]
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content if p.get("type") == "text")


def generate(request):
    last = request.messages[-1]
    if request.agent_name == "a":
        if last["role"] == "tool":
            part = last["content"][0]
            return {"text": json.dumps(part["output"]["value"])}
        if request.output_schema is not None:
            return {"text": "agent a must not get a schema"}
        if _text(last) == "plain":
            return {"text": "just text"}
        if _text(last).startswith('{"type": "inter_agent_response"'):
            return {"text": "noted"}
        is_async = _text(last) == "ask-async"
        args = {"target": "s", "input": "retry", "async": is_async}
        return {"toolCalls": [{"name": "agents__request", "args": args}]}
    assert request.output_schema == SCHEMA, request.output_schema
    users = [m for m in request.messages if m["role"] == "user"]
    first = _text(users[0])
    corrected = "did not" in _text(last)
    if first == "never":
        return {"text": "I refuse to write JSON"}
    if first == "fenced":
        return {"text": '```json\\n{"n": 7}\\n```'}
    if corrected:
        return {"text": json.dumps({"n": 3, "label": "fixed"})}
    return {"text": json.dumps({"n": "three", "extra": True})}
""".replace("@SCHEMA@", repr(SCHEMA))


def bundle(root: Path, retries: int | None = None, max_steps: int | None = None) -> Path:
    s = kit.agent_doc("s")
    s["spec"]["output"] = {"schema": SCHEMA, **({"retries": retries} if retries is not None else {})}
    docs = [
        kit.package_doc(),
        kit.python_model_doc(),
        kit.agent_doc("a", tools=[kit.base_ref("Tool", "agents")]),
        s,
        kit.swarm_doc(["a", "s"], max_steps=max_steps),
    ]
    return kit.write_bundle(root, *docs, files={"model.py": MODEL})


def run(root: Path, state_root: Path, executor: str, text: str, agent: str) -> tuple[Any, list[dict[str, Any]]]:
    async def main() -> tuple[Any, list[dict[str, Any]]]:
        async with goondan.Runtime(root, state_root=state_root, executor=executor) as rt:
            result = await rt.request(text, agent=agent, instance_key="k")
            await rt.wait_idle()
            return result, kit.history(rt, agent, "k")

    return asyncio.run(main())


def test_invalid_output_is_sent_back_with_its_errors_and_the_valid_retry_is_parsed(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    result, history = run(bundle(tmp_path / "b"), state_root, executor, "retry", "s")
    assert result.finish_reason == "text_response", result.error
    assert result.output == {"n": 3, "label": "fixed"}
    assert json.loads(result.text) == result.output
    assert result.to_dict()["output"] == {"n": 3, "label": "fixed"}
    assert kit.roles(history) == ["user", "assistant", "user", "assistant"]
    feedback = history[2]["content"]
    text = feedback if isinstance(feedback, str) else "".join(p.get("text", "") for p in feedback)
    assert "output.n: expected integer but got string" in text
    assert "output.extra: unexpected property" in text


def test_a_fenced_json_answer_is_accepted(tmp_path: Path, state_root: Path, executor: str) -> None:
    result, history = run(bundle(tmp_path / "b"), state_root, executor, "fenced", "s")
    assert result.output == {"n": 7}
    assert kit.roles(history) == ["user", "assistant"]


def test_output_that_never_validates_ends_the_turn_with_e_output_invalid(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    result, history = run(bundle(tmp_path / "b", retries=1), state_root, executor, "never", "s")
    assert result.finish_reason == "error"
    assert result.output is None
    assert result.error["code"] == "E_OUTPUT_INVALID"
    assert "after 2 attempts" in result.error["message"]
    assert "not valid JSON" in result.error["message"]
    assert result.error["suggestion"]
    # what the turn emitted is committed: both answers and the one correction between them
    assert kit.roles(history) == ["user", "assistant", "user", "assistant"]


def test_an_agent_without_output_schema_has_no_output(tmp_path: Path, state_root: Path, executor: str) -> None:
    result, _ = run(bundle(tmp_path / "b"), state_root, executor, "plain", "a")
    assert result.text == "just text"
    assert result.output is None
    assert result.to_dict()["output"] is None


def test_inter_agent_request_to_a_structured_agent_returns_its_json(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    result, history = run(bundle(tmp_path / "b"), state_root, executor, "ask", "a")
    assert result.finish_reason == "text_response", result.error
    (tool_result,) = kit.tool_results(history)
    value = tool_result["output"]["value"]
    assert value["output"] == {"n": 3, "label": "fixed"}
    assert json.loads(value["response"]) == {"n": 3, "label": "fixed"}
    assert json.loads(result.text)["output"] == {"n": 3, "label": "fixed"}


def test_an_async_inter_agent_response_from_a_structured_agent_carries_its_output(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    root = bundle(tmp_path / "b")

    async def main() -> list[dict[str, Any]]:
        async with goondan.Runtime(root, state_root=state_root, executor=executor) as rt:
            await rt.request("ask-async", agent="a", instance_key="k")
            for _ in range(100):  # the response arrives after the caller's turn
                await rt.wait_idle()
                history = kit.history(rt, "a", "k")
                if any("inter_agent_response" in json.dumps(m) for m in history):
                    return history
                await asyncio.sleep(0.05)
            return kit.history(rt, "a", "k")

    history = asyncio.run(main())
    responses = [
        json.loads(m["content"] if isinstance(m["content"], str) else m["content"][0]["text"])
        for m in history
        if m["role"] == "user" and "inter_agent_response" in json.dumps(m)
    ]
    assert len(responses) == 1
    assert responses[0]["status"] == "ok"
    assert responses[0]["output"] == {"n": 3, "label": "fixed"}
    assert json.loads(responses[0]["response"]) == {"n": 3, "label": "fixed"}


def test_a_structured_agent_stopped_at_max_steps_gives_callers_no_unvalidated_output(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    # s answers invalid JSON, gets its correction, and has no step left to fix it
    result, history = run(bundle(tmp_path / "b", max_steps=1), state_root, executor, "ask", "a")
    assert result.finish_reason == "max_steps"
    (tool_result,) = kit.tool_results(history)
    value = tool_result["output"]["value"]
    assert json.loads(value["response"]) == {"n": "three", "extra": True}
    assert "output" not in value
