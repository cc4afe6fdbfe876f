"""goondan.testing against the real examples: chosen Models replaced, every other part real (tools,
extensions, state files), and assertions whose failures show what happened."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import kit
from goondan.errors import GoondanError
from goondan.testing import AgentRunner, AsyncAgentRunner, is_subset, text, tool_call

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
QUICKSTART = EXAMPLES / "quickstart"


def test_a_scripted_list_drives_the_examples_real_calculator_tool(tmp_path: Path) -> None:
    replies = [tool_call("calc__add", {"a": 2, "b": 40}), "The sum is 42"]
    with AgentRunner(QUICKSTART, override_models={"scripted": replies}, state_root=tmp_path) as runner:
        turn = runner.request("add them")
    turn.assert_tool_called("calc__add", {"a": 2})
    turn.assert_tool_called("calc__add", times=1)
    # the result comes from examples/quickstart/tools/calc.py, not from the test
    turn.assert_tool_result("calc__add", equals={"sum": 42})
    turn.assert_text("42", regex=r"^The sum is \d+$")
    turn.assert_finished("text_response")
    turn.assert_max_steps(2)
    turn.assert_event("tool.completed", toolName="calc__add", status="ok")
    assert [c.name for c in turn.tool_calls] == ["calc__add"]
    assert turn.steps == 2


def test_a_function_model_sees_the_catalog_the_extensions_left_and_the_tool_results(tmp_path: Path) -> None:
    seen: list[Any] = []

    def model(request: Any) -> Any:
        seen.append(request)
        if request.messages[-1]["role"] == "tool":
            return text("done: " + json.dumps(request.messages[-1]["content"][0]["output"]["value"]))
        return tool_call("turn-counter__stats")

    with AgentRunner(QUICKSTART, override_models={"scripted": model}, state_root=tmp_path) as runner:
        turn = runner.request("how many turns?")
    names = {t["name"] for t in seen[0].tools}
    # the real tool-guard extension removed shell__wipe; the real turn-counter added its tool
    assert "turn-counter__stats" in names and "calc__add" in names and "shell__wipe" not in names
    turn.assert_tool_called("turn-counter__stats")
    turn.assert_text("done:")
    assert len(seen) == 2


def test_an_async_model_function_works_with_the_async_runner(tmp_path: Path) -> None:
    async def model(request: Any) -> str:
        await asyncio.sleep(0)
        return "async " + request.messages[0]["content"]

    async def main() -> Any:
        async with AsyncAgentRunner(QUICKSTART, override_models={"scripted": model}, state_root=tmp_path) as runner:
            return await runner.request("hello")

    turn = asyncio.run(main())
    turn.assert_text(equals="async hello")
    turn.assert_not_called()


def test_a_failed_assertion_says_what_was_expected_and_shows_the_transcript(tmp_path: Path) -> None:
    replies = [tool_call("calc__add", {"a": 1, "b": 2}, text="Adding."), "It is 3"]
    with AgentRunner(QUICKSTART, override_models={"scripted": replies}, state_root=tmp_path) as runner:
        turn = runner.request("add")
    with pytest.raises(AssertionError) as info:
        turn.assert_tool_called("calc__add", {"a": 5})
    message = str(info.value)
    assert 'calc__add was called but never with arguments containing {"a": 5}' in message
    assert 'assistant -> calc__add({"a": 1, "b": 2})' in message
    assert 'tool calc__add result: {"sum": 3}' in message
    assert "assistant: It is 3" in message
    with pytest.raises(AssertionError, match="tools called: calc__add"):
        turn.assert_tool_called("shell__wipe")
    with pytest.raises(AssertionError, match="expected no call to calc__add"):
        turn.assert_not_called("calc__add")
    with pytest.raises(AssertionError, match="expected the final text to contain 'four'"):
        turn.assert_text("four")
    with pytest.raises(AssertionError, match=r"event types seen: .*turn\.completed"):
        turn.assert_event("tool.failed")


def test_the_conversation_is_read_back_from_the_stored_files(tmp_path: Path) -> None:
    with AgentRunner(QUICKSTART, override_models={"scripted": ["one", "two"]}, state_root=tmp_path) as runner:
        runner.request("first")
        turn = runner.request("second")
    stored = [m.data for m in turn.conversation]
    assert [m["role"] for m in stored] == ["user", "system", "assistant", "user", "assistant"]
    assert stored[-1]["content"] == "two"
    # a later runner on the same state root sees the same history, as a restart would
    with AgentRunner(QUICKSTART, override_models={"scripted": ["three"]}, state_root=tmp_path) as runner:
        assert [m.data for m in runner.conversation()] == stored
    turn.assert_conversation(["user", "system", "assistant", "user", "assistant"], contains="two")
    with pytest.raises(AssertionError, match=r"have roles \['user'\]; it has \['user', 'system'"):
        turn.assert_conversation(["user"])
    with pytest.raises(AssertionError, match="no stored message contains 'three'"):
        turn.assert_conversation(contains="three")
    instance = kit.instance_dir(tmp_path, "assistant", "quickstart")
    assert len(kit.read_jsonl(instance / "messages" / "base.jsonl")) == 5


def test_running_out_of_scripted_replies_fails_the_turn_with_a_clear_code(tmp_path: Path) -> None:
    with AgentRunner(QUICKSTART, override_models={"scripted": [tool_call("calc__add", {"a": 1, "b": 1})]}) as r:
        turn = r.request("add")
    assert turn.finish_reason == "error"
    assert turn.result.error is not None and turn.result.error["code"] == "E_MODEL_SCRIPT_EXHAUSTED"
    assert "called 2 times but the test scripted 1 replies" in turn.result.error["message"]


def test_overriding_a_model_the_bundle_lacks_names_the_ones_it_has() -> None:
    runner = AgentRunner(QUICKSTART, override_models={"scriptd": ["x"]})
    with pytest.raises(GoondanError) as info:
        runner.start()
    runner.close()
    assert info.value.code == "E_MODEL_OVERRIDE"
    assert "did you mean 'scripted'" in (info.value.suggestion or "")


@pytest.mark.parametrize(
    ("value", "fragment"),
    [("gpt-4o", "is not provider/model"), ("nosuch/model", "unknown provider 'nosuch'"), (42, "is a int")],
)
def test_a_malformed_override_is_a_clear_error(value: Any, fragment: str) -> None:
    runner = AgentRunner(QUICKSTART, override_models={"scripted": value})
    with pytest.raises(GoondanError, match=fragment) as info:
        runner.start()
    runner.close()
    assert info.value.code == "E_MODEL_OVERRIDE"


def test_the_throwaway_state_root_is_removed_and_a_kept_one_stays(tmp_path: Path) -> None:
    with AgentRunner(QUICKSTART, override_models={"scripted": ["hi"]}) as runner:
        runner.request("x")
        root = runner.state_root
        assert any(root.rglob("base.jsonl"))
    assert not root.exists()
    with AgentRunner(QUICKSTART, override_models={"scripted": ["hi"]}, keep_state=True) as runner:
        runner.request("x")
        kept = runner.state_root
    assert any(kept.rglob("runtime-events.jsonl"))
    import shutil

    shutil.rmtree(kept.parent)


def test_structured_output_is_checked_against_a_subset_and_a_schema(tmp_path: Path) -> None:
    agent = kit.agent_doc("a")
    agent["spec"]["output"] = {"schema": {"type": "object", "properties": {"n": {"type": "integer"}}}}
    bundle = kit.write_bundle(
        tmp_path / "b",
        kit.package_doc(),
        kit.python_model_doc(),
        agent,
        kit.swarm_doc(["a"]),
        files={"model.py": "def generate(request):\n    raise RuntimeError('replaced by the test')\n"},
    )
    with AgentRunner(bundle, override_models={"m": ['{"n": 3, "why": "x"}']}) as runner:
        turn = runner.request("count")
    turn.assert_output({"n": 3})
    turn.assert_output(schema={"type": "object", "required": ["n", "why"]})
    with pytest.raises(AssertionError, match="does not match the schema"):
        turn.assert_output(schema={"type": "object", "required": ["missing"]})
    with pytest.raises(AssertionError, match=re.escape('expected the output to contain {"n": 4}')):
        turn.assert_output({"n": 4})


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=10,
)


@given(json_values, st.dictionaries(st.text(max_size=3), json_values, max_size=3))
def test_a_value_is_a_subset_of_itself_and_a_dict_of_any_superset(value: Any, extra: dict[str, Any]) -> None:
    assert is_subset(value, value)
    if isinstance(value, dict):
        assert is_subset(value, {**extra, **value})
        if extra.keys() - value.keys():
            assert not is_subset({**value, **extra}, value)


def test_overrides_refuse_an_executor_that_would_load_the_bundle_again() -> None:
    runner = AgentRunner(QUICKSTART, override_models={"scripted": ["x"]}, executor="process")
    with pytest.raises(GoondanError, match="need executor='inline'") as info:
        runner.start()
    runner.close()
    assert info.value.code == "E_MODEL_OVERRIDE"
