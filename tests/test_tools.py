"""Tool executor checks (digest §4.3), argument messages, error shaping and truncation."""

from __future__ import annotations

import asyncio
import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from goondan.tools import (
    ToolContext,
    ToolRegistry,
    execute_tool,
    result_output_part,
    split_tool_name,
    truncate_message,
)

SCHEMA = {
    "type": "object",
    "properties": {
        "command": {"type": "string"},
        "n": {"type": "integer"},
        "mode": {"enum": ["a", "b"]},
        "items": {"type": "array", "items": {"type": "object", "properties": {"b": {"type": "string"}}}},
    },
    "required": ["command"],
    "additionalProperties": False,
}


def _ctx() -> ToolContext:
    return ToolContext(
        agent_name="a",
        instance_key="k",
        turn_id="t",
        trace_id="x",
        tool_call_id="c",
        message=None,
        workdir=lambda: None,
        logger=logging.getLogger("t"),
        runtime=None,
    )  # type: ignore[arg-type,return-value]


def _registry(handler=None, limit=1000) -> tuple[ToolRegistry, list]:
    calls: list = []

    def default(ctx, args):
        calls.append(args)
        return {"ok": True}

    reg = ToolRegistry()
    reg.add_resource_tools(
        "bash",
        [{"name": "exec", "description": "run", "parameters": SCHEMA}],
        {"exec": handler or default},
        error_limit=limit,
    )
    return reg, calls


def _exec(reg, name, args, catalog=None):
    catalog = reg.catalog() if catalog is None else catalog
    return asyncio.run(execute_tool(reg, catalog, name, "call-1", args, _ctx))


def test_tool_not_in_catalog_is_refused_even_if_registered():
    reg, calls = _registry()
    result = _exec(reg, "bash__exec", {"command": "ls"}, catalog=[])
    assert result.status == "error"
    assert result.error["code"] == "E_TOOL_NOT_IN_CATALOG"
    assert result.error["message"] == "Tool 'bash__exec' is not available in the current Tool Catalog."
    assert calls == []


def test_missing_required_property_is_reported_precisely():
    reg, calls = _registry()
    result = _exec(reg, "bash__exec", {})
    assert result.error["code"] == "E_TOOL_INVALID_ARGS"
    assert "args.command: required property is missing" in result.error["message"]
    assert result.error["message"].startswith("Invalid arguments for tool 'bash__exec': ")
    assert "required=[command]" in result.error["suggestion"]
    assert calls == []


def test_wrong_type_distinguishes_integer_from_string_and_number():
    reg, _ = _registry()
    wrong_string = _exec(reg, "bash__exec", {"command": 123}).error["message"]
    assert "args.command: expected string but got integer" in wrong_string
    wrong_integer = _exec(reg, "bash__exec", {"command": "x", "n": 1.5}).error["message"]
    assert "args.n: expected integer but got number" in wrong_integer


def test_unexpected_property_and_enum_and_nested_paths():
    reg, _ = _registry()
    msg = _exec(reg, "bash__exec", {"command": "x", "extra": 1, "mode": "z", "items": [{"b": 1}]}).error["message"]
    assert "args.extra: unexpected property" in msg
    assert 'args.mode: must be one of ["a", "b"]' in msg
    assert "args.items[0].b: expected string but got integer" in msg


def test_more_than_five_issues_are_summarised():
    reg = ToolRegistry()
    schema = {"type": "object", "properties": {}, "additionalProperties": False}
    reg.add_resource_tools("t", [{"name": "x", "parameters": schema}], {"x": lambda c, a: None})
    msg = _exec(reg, "t__x", {f"k{i}": i for i in range(8)}).error["message"]
    assert msg.endswith("; +3 more issues")


def test_non_finite_numbers_are_rejected():
    reg, _ = _registry()
    msg = _exec(reg, "bash__exec", {"command": "x", "n": float("nan")}).error["message"]
    assert "args.n: must be a finite number" in msg


def test_valid_call_runs_handler_once():
    reg, calls = _registry()
    result = _exec(reg, "bash__exec", {"command": "ls"})
    assert result.status == "ok" and result.output == {"ok": True}
    assert calls == [{"command": "ls"}]


def test_missing_handler_is_tool_not_found():
    reg = ToolRegistry()
    reg.add_resource_tools("t", [{"name": "x"}], {})
    result = _exec(reg, "t__x", {})
    assert result.error["code"] == "E_TOOL_NOT_FOUND"


class CodedError(Exception):
    code = "E_MY_TOOL"
    suggestion = "try again later"
    helpUrl = "https://example.invalid/help"


def test_handler_exception_copies_code_suggestion_help_url():
    def boom(ctx, args):
        raise CodedError("disk on fire")

    reg, _ = _registry(boom)
    err = _exec(reg, "bash__exec", {"command": "x"}).error
    trace = err.pop("traceback")  # kept for the runtime event and -v, never sent to the model
    assert "raise CodedError" in trace
    assert err == {
        "name": "CodedError",
        "message": "disk on fire",
        "code": "E_MY_TOOL",
        "suggestion": "try again later",
        "helpUrl": "https://example.invalid/help",
    }


def test_handler_exception_message_is_truncated_at_error_message_limit():
    def boom(ctx, args):
        raise RuntimeError("x" * 2000)

    reg, _ = _registry(boom, limit=100)
    message = _exec(reg, "bash__exec", {"command": "x"}).error["message"]
    assert len(message) == 100 and message.endswith("... (truncated)")


def test_async_handler_is_awaited():
    async def handler(ctx, args):
        await asyncio.sleep(0)
        return "done"

    reg, _ = _registry(handler)
    assert _exec(reg, "bash__exec", {"command": "x"}).output == "done"


def test_truncate_rules():
    assert truncate_message("short", 50) == "short"
    assert truncate_message("a" * 200, 50) == "a" * 35 + "... (truncated)"
    assert truncate_message("abcdefghij", 5) == "abcde"
    assert truncate_message("a" * 50, 50) == "a" * 50


@given(st.text(max_size=300), st.integers(1, 300))
def test_truncation_never_exceeds_limit(message, limit):
    out = truncate_message(message, limit)
    assert len(out) <= limit
    if len(message) <= limit:
        assert out == message


def test_tool_result_output_shapes():
    from goondan.results import ToolCallResult

    assert result_output_part(ToolCallResult("c", "t", "hi")) == {"type": "text", "value": "hi"}
    assert result_output_part(ToolCallResult("c", "t", {"a": 1})) == {"type": "json", "value": {"a": 1}}
    err = ToolCallResult("c", "t", None, "error", {"code": "E_X", "message": "bad", "suggestion": "fix"})
    assert result_output_part(err) == {
        "type": "error-json",
        "value": {"code": "E_X", "message": "bad", "suggestion": "fix"},
    }


@pytest.mark.parametrize(
    "name,ok",
    [("a__b", True), ("a__b__c", False), ("__b", False), ("a__", False), ("ab", False), ("my-ext__do_it", True)],
)
def test_tool_names_need_exactly_one_double_underscore(name, ok):
    assert (split_tool_name(name) is not None) is ok


def test_dynamic_registration_enforces_extension_prefix_and_later_wins():
    reg = ToolRegistry()
    with pytest.raises(Exception) as info:
        reg.register_dynamic("myext", {"name": "other__x", "parameters": {"type": "object"}}, lambda c, a: 1)
    assert getattr(info.value, "code", None) == "E_TOOL_NAME_INVALID"
    reg.register_dynamic("myext", {"name": "myext__x", "description": "v1"}, lambda c, a: 1)
    reg.register_dynamic("myext", {"name": "myext__x", "description": "v2"}, lambda c, a: 2)
    (item,) = reg.catalog()
    assert item["description"] == "v2"
    assert _exec(reg, "myext__x", {}).output == 2


def test_catalog_items_are_fresh_per_step():
    reg, _ = _registry()
    first = reg.catalog()
    first[0]["description"] = "mutated"
    first.clear()
    assert reg.catalog()[0]["description"] == "run"


def test_removing_a_tool_takes_it_out_of_later_catalogs_only():
    reg, calls = _registry()
    reg.register_dynamic("mcp", {"name": "mcp__x", "description": "x"}, lambda c, a: "x ran")
    before = reg.catalog()
    version = reg.version
    assert reg.remove("mcp__x") is True
    assert reg.version > version  # so a cached catalog is rebuilt
    assert [item["name"] for item in reg.catalog()] == ["bash__exec"]
    # a catalog built after the removal refuses the call; one built before finds no handler
    assert _exec(reg, "mcp__x", {}).error["code"] == "E_TOOL_NOT_IN_CATALOG"
    assert _exec(reg, "mcp__x", {}, catalog=before).error["code"] == "E_TOOL_NOT_FOUND"
    assert _exec(reg, "bash__exec", {"command": "ls"}).status == "ok" and calls == [{"command": "ls"}]


def test_removing_an_unknown_tool_changes_nothing():
    reg, _ = _registry()
    version = reg.version
    assert reg.remove("nope__x") is False
    assert reg.version == version
    assert [item["name"] for item in reg.catalog()] == ["bash__exec"]


def test_a_synchronous_handler_runs_in_a_worker_thread_when_asked_and_its_output_is_still_captured(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    import threading

    seen: list[str] = []
    daemon: list[bool] = []

    def handler(ctx, args):
        seen.append(threading.current_thread().name)
        daemon.append(threading.current_thread().daemon)
        print("printed by the tool")
        return {"ok": True}

    reg, _ = _registry(handler)

    async def both() -> list:
        catalog = reg.catalog()
        lone = await execute_tool(reg, catalog, "bash__exec", "c1", {"command": "ls"}, _ctx)
        threaded = await execute_tool(reg, catalog, "bash__exec", "c2", {"command": "ls"}, _ctx, in_thread=True)
        return [lone, threaded]

    with caplog.at_level(logging.INFO, logger="t"):
        results = asyncio.run(both())
    assert [r.status for r in results] == ["ok", "ok"]
    assert seen[0] == threading.main_thread().name and seen[1] != threading.main_thread().name
    assert daemon[1] is True  # a tool stuck in a blocking call cannot keep the host from exiting
    assert "printed by the tool" not in capsys.readouterr().out
    assert caplog.text.count("printed by the tool") == 2


def test_an_async_handler_is_never_sent_to_a_thread_and_sys_exit_in_a_thread_is_an_error() -> None:
    import sys
    import threading

    async def coro_handler(ctx, args):
        return threading.current_thread().name

    def exiting(ctx, args):
        sys.exit(3)

    reg, _ = _registry(coro_handler)
    out = asyncio.run(execute_tool(reg, reg.catalog(), "bash__exec", "c", {"command": "ls"}, _ctx, in_thread=True))
    assert out.output == threading.main_thread().name
    reg, _ = _registry(exiting)
    out = asyncio.run(execute_tool(reg, reg.catalog(), "bash__exec", "c", {"command": "ls"}, _ctx, in_thread=True))
    assert out.status == "error" and out.error["code"] == "E_USER_CODE_EXIT"


def test_parallel_false_is_kept_for_config_and_extension_tools() -> None:
    reg = ToolRegistry()
    reg.add_resource_tools(
        "t",
        [
            {"name": "a", "description": "", "parameters": SCHEMA, "parallel": False},
            {"name": "b", "description": "", "parameters": SCHEMA},
        ],
        {"a": lambda c, i: 1, "b": lambda c, i: 2},
    )
    reg.register_dynamic("ext", {"name": "ext__c", "parallel": False}, lambda c, i: 3)
    reg.register_dynamic("ext", {"name": "ext__d"}, lambda c, i: 4)
    assert {n: reg.get(n).parallel for n in reg.names()} == {
        "t__a": False,
        "t__b": True,
        "ext__c": False,
        "ext__d": True,
    }


def test_tool_worker_threads_are_reused_never_queue_behind_a_busy_one_and_leave_when_idle() -> None:
    import threading
    import time

    from goondan.tools import _ToolThreads

    pool = _ToolThreads()
    pool.IDLE_SECONDS = 0.2
    names: list[str] = []
    release = threading.Event()
    done = [threading.Event() for _ in range(3)]

    def job(i: int, wait: bool):
        def work() -> None:
            names.append(threading.current_thread().name + str(threading.get_ident()))
            if wait:
                release.wait(5)
            done[i].set()

        return work

    pool.submit(job(0, True))  # busy until released
    pool.submit(job(1, False))  # must not wait for job 0
    assert done[1].wait(2) and not done[0].is_set()
    time.sleep(0.05)
    pool.submit(job(2, False))  # the idle worker of job 1 takes it
    assert done[2].wait(2)
    assert names[2] == names[1] and names[0] != names[1]
    release.set()
    assert done[0].wait(2)
    deadline = time.monotonic() + 3
    while pool._idle and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pool._idle == 0  # idle workers left
