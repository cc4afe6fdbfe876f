"""The ``python`` model provider (CONTRACT §3)."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path
from typing import Any

import pytest

import goondan
from goondan import ModelError
from goondan._modules import import_path
from goondan.models import ModelRequest, create_model_adapter


def adapter(tmp_path: Path, source: str) -> Any:
    (tmp_path / "model.py").write_text(textwrap.dedent(source), encoding="utf-8")
    return create_model_adapter("python", model="m-1", options={"entry": "./model.py"}, root=tmp_path)


def req(messages: list[dict[str, Any]] | None = None, **kw: Any) -> ModelRequest:
    base: dict[str, Any] = {
        "messages": messages if messages is not None else [{"role": "user", "content": "hi"}],
        "tools": [],
        "params": {},
        "model": "m-1",
        "agent_name": "a",
        "instance_key": "k",
    }
    base.update(kw)
    return ModelRequest(**base)


def test_sync_generate(tmp_path: Path) -> None:
    m = adapter(
        tmp_path,
        """
        def generate(request):
            return {"text": "sync:" + request.messages[-1]["content"],
                    "toolCalls": [{"id": "c1", "name": "t__x", "args": {"q": 1}}],
                    "usage": {"promptTokens": 3, "completionTokens": 4}}
        """,
    )
    out = asyncio.run(m.generate(req()))
    assert out.text == "sync:hi"
    [c] = out.tool_calls
    assert (c.id, c.name, c.args) == ("c1", "t__x", {"q": 1})
    assert out.usage == {"promptTokens": 3, "completionTokens": 4, "totalTokens": 7}


def test_async_generate(tmp_path: Path) -> None:
    m = adapter(
        tmp_path,
        """
        import asyncio

        async def generate(request):
            await asyncio.sleep(0)
            return {"text": "async:" + request.agent_name}
        """,
    )
    out = asyncio.run(m.generate(req()))
    assert out.text == "async:a"
    assert out.tool_calls == []


def test_tool_calls_without_id_get_one(tmp_path: Path) -> None:
    m = adapter(tmp_path, "def generate(request):\n    return {'toolCalls': [{'name': 't__x', 'args': {}}]}\n")
    out = asyncio.run(m.generate(req()))
    assert out.tool_calls[0].id
    assert out.text is None


@pytest.mark.parametrize(
    "bad",
    ["'just a string'", "None", "{'text': 5}", "{'toolCalls': {'name': 'x'}}", "[1, 2]"],
)
def test_bad_return_is_e_model_bad_response(tmp_path: Path, bad: str) -> None:
    m = adapter(tmp_path, f"def generate(request):\n    return {bad}\n")
    with pytest.raises(ModelError) as info:
        asyncio.run(m.generate(req()))
    assert info.value.code == "E_MODEL_BAD_RESPONSE"


def test_generate_raising_is_a_model_error(tmp_path: Path) -> None:
    m = adapter(tmp_path, "def generate(request):\n    raise KeyError('boom')\n")
    with pytest.raises(ModelError) as info:
        asyncio.run(m.generate(req()))
    assert "boom" in info.value.message


def test_module_without_generate_is_a_load_error(tmp_path: Path) -> None:
    m = adapter(tmp_path, "VALUE = 1\n")
    with pytest.raises(ModelError) as info:
        asyncio.run(m.generate(req()))
    assert info.value.code == "E_MODEL_LOAD"


def test_an_import_failure_names_the_line_of_the_users_file(tmp_path: Path) -> None:
    (tmp_path / "helper.py").write_text("X = 1\nraise RuntimeError('no config')\n", encoding="utf-8")
    m = adapter(tmp_path, "import json\nimport helper\n\ndef generate(request):\n    return {'text': 'x'}\n")
    with pytest.raises(ModelError) as info:
        asyncio.run(m.generate(req()))
    assert info.value.code == "E_MODEL_LOAD"
    assert "importing model.py failed at helper.py:2: RuntimeError: no config" in info.value.message
    assert info.value.suggestion and "gdn run -v" in info.value.suggestion


def test_an_entry_file_that_does_not_exist_is_a_load_error_naming_the_file_not_a_module(tmp_path: Path) -> None:
    # a gdn eval judge's entry is not checked by gdn validate: this message is all its author gets
    m = create_model_adapter("python", model="m-1", options={"entry": "./judge.py"}, root=tmp_path)
    with pytest.raises(ModelError) as info:
        asyncio.run(m.generate(req()))
    assert info.value.code == "E_MODEL_LOAD"
    assert str(tmp_path / "judge.py") in info.value.message and "does not exist" in info.value.message
    assert "goondan_bundle" not in info.value.message and "ModuleNotFoundError" not in info.value.message
    assert info.value.suggestion and "options.entry" in info.value.suggestion


# --- through the runtime ----------------------------------------------------------------------------

BUNDLE = """\
apiVersion: goondan.ai/v1
kind: Package
metadata:
  name: py-model
spec:
  version: 0.1.0
---
apiVersion: goondan.ai/v1
kind: Model
metadata:
  name: py
spec:
  provider: python
  model: my-model-v2
  options:
    entry: ./model.py
---
apiVersion: goondan.ai/v1
kind: Tool
metadata:
  name: t
spec:
  entry: ./tool.py
  exports:
    - name: look
      description: Look something up.
      parameters:
        type: object
        properties:
          q: { type: string }
        required: [q]
---
apiVersion: goondan.ai/v1
kind: Agent
metadata:
  name: helper
spec:
  modelConfig:
    modelRef: Model/py
    params:
      temperature: 0.25
      maxTokens: 321
  prompt:
    system: SYSTEM PROMPT
  tools:
    - ref: Tool/t
---
apiVersion: goondan.ai/v1
kind: Swarm
metadata:
  name: default
spec:
  entryAgent: Agent/helper
  agents: [Agent/helper]
"""

RECORDING_MODEL = """\
import collections.abc
import json

SEEN = []
LIVE = []


def generate(request):
    LIVE.append(request.messages)
    SEEN.append({
        "messages": json.loads(json.dumps(list(request.messages))),
        "messages_is_sequence": isinstance(request.messages, collections.abc.Sequence),
        "tools": json.loads(json.dumps(list(request.tools))),
        "params": dict(request.params),
        "model": request.model,
        "agent_name": request.agent_name,
        "instance_key": request.instance_key,
    })
    if len(SEEN) == 1:
        return {"toolCalls": [{"id": "c1", "name": "t__look", "args": {"q": "x"}}]}
    return {"text": "done"}
"""


def run_bundle(tmp_path: Path, model_source: str = RECORDING_MODEL) -> tuple[Any, Any]:
    root = tmp_path / "bundle"
    root.mkdir()
    (root / "goondan.yaml").write_text(BUNDLE, encoding="utf-8")
    (root / "model.py").write_text(model_source, encoding="utf-8")
    (root / "tool.py").write_text("handlers = {'look': lambda ctx, args: 'found ' + args['q']}\n", encoding="utf-8")
    result = goondan.run(root, "question?", state_root=tmp_path / "state", instance_key="inst-7", isolation="inline")
    return result, import_path(root / "model.py")


def test_request_attributes_seen_by_generate(tmp_path: Path) -> None:
    result, module = run_bundle(tmp_path)
    assert result.text == "done"
    first = module.SEEN[0]
    assert first["model"] == "my-model-v2"
    assert first["agent_name"] == "helper"
    assert first["instance_key"] == "inst-7"
    assert first["params"]["temperature"] == 0.25
    assert first["params"]["maxTokens"] == 321
    assert first["tools"] == [
        {
            "name": "t__look",
            "description": "Look something up.",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
        }
    ]
    assert {"role": "user", "content": "question?"} in first["messages"]
    assert {"role": "system", "content": "SYSTEM PROMPT"} in first["messages"]


def test_request_messages_is_a_snapshot_sequence_of_the_step_input(tmp_path: Path) -> None:
    # an O(1) read-only Sequence (copy-on-write underneath), not a list copy per step
    _result, module = run_bundle(tmp_path)
    first_live, second_live = module.LIVE
    assert module.SEEN[0]["messages_is_sequence"] is True
    # what step 0 was given must not change when later steps add messages
    assert list(first_live) == module.SEEN[0]["messages"]
    assert len(second_live) > len(first_live)


def test_bad_model_output_fails_the_turn_with_e_model_bad_response(tmp_path: Path) -> None:
    result, _ = run_bundle(tmp_path, "def generate(request):\n    return 'plain string'\n")
    assert result.finish_reason == "error"
    assert result.error["code"] == "E_MODEL_BAD_RESPONSE"
