"""docs/guides/testing.md (and the handbook's example) runs as written: its tests pass under pytest
with the plugin against examples/quickstart, and its cassette test records against a loopback OpenAI-compatible server,
then replays with the server stopped, no API key, and ``--goondan-record=none``."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

import kit
from models.providers.fake_http import FakeServer, Reply, Req

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guides" / "testing.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.DOTALL)


def readme_block() -> str:
    """The example of the handbook's "Testing and evaluating" section (moved there from the README)."""
    section = (ROOT / "docs" / "handbook.md").read_text(encoding="utf-8").split("## Testing and evaluating", 1)[1]
    return re.findall(r"```python\n(.*?)```", section, re.DOTALL)[0]


def test_the_guides_offline_tests_pass_against_the_quickstart(pytester: pytest.Pytester) -> None:
    offline = [b for b in python_blocks() if "examples/quickstart" in b]
    assert len(offline) == 2
    offline.append(readme_block())
    shutil.copytree(ROOT / "examples" / "quickstart", pytester.path / "examples" / "quickstart")
    for index, block in enumerate(offline):
        pytester.makepyfile(**{f"test_guide_{index}": block})
    result = pytester.runpytest()
    result.assert_outcomes(passed=3)


def chat(req: Req) -> Reply:
    last = req.json["messages"][-1]
    if last["role"] == "tool":
        message: dict[str, Any] = {"role": "assistant", "content": f"It is {json.loads(last['content'])['sum']}."}
    else:
        call = {"id": "c1", "type": "function", "function": {"name": "calc__add", "arguments": '{"a": 2, "b": 3}'}}
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls" if "tool_calls" in message else "stop"}
    return Reply(body={"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": [choice]})


def test_the_guides_cassette_test_records_once_and_replays_offline(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    block = next(b for b in python_blocks() if "goondan_cassette" in b)
    pytester.makepyfile(test_cassette_guide=block)
    add = kit.export("add", {"a": {"type": "number"}, "b": {"type": "number"}}, required=["a", "b"])
    with FakeServer(chat) as server:
        kit.write_bundle(
            pytester.path / "my-agent",
            kit.package_doc("my-agent"),
            kit.model_doc(
                "main", "openai", "gpt-test", endpoint=server.url + "/v1", apiKey={"valueFrom": {"env": "MY_KEY"}}
            ),
            kit.tool_doc("calc", "./calc.py", [add]),
            kit.agent_doc("helper", model="main", tools=["calc"]),
            kit.swarm_doc(["helper"]),
            files={"calc.py": "handlers = {'add': lambda ctx, a: {'sum': a['a'] + a['b']}}\n"},
        )
        monkeypatch.setenv("MY_KEY", "sk-guide-SECRET")
        recorded = pytester.runpytest()
        recorded.assert_outcomes(passed=1)
        assert len(server.requests) == 2
    cassette = pytester.path / "cassettes" / "test_cassette_guide" / "test_the_agent_answers_from_the_real_model.json"
    assert cassette.is_file() and "sk-guide-SECRET" not in cassette.read_text(encoding="utf-8")
    monkeypatch.delenv("MY_KEY")
    replayed = pytester.runpytest("--goondan-record=none")
    replayed.assert_outcomes(passed=1)
