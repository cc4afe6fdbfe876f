"""Inter-agent calls behave the same inline and across processes (digest §2.8, issue 3 §4). Every
test runs with every executor; in process mode each agent instance is its own OS process and
every call goes through the orchestrator."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import proc_kit as pk
from proc_kit import call

import goondan


async def _session(root: Path, state_root: Path, executor: str, body: Any) -> tuple[Any, list[dict[str, Any]]]:
    events: list[dict[str, Any]] = []
    async with goondan.Runtime(root, state_root=state_root, executor=executor) as rt:
        rt.on_runtime_event(events.append)
        result = await body(rt)
        await rt.wait_idle()
    return result, events


def session(root: Path, state_root: Path, executor: str, body: Any) -> tuple[Any, list[dict[str, Any]]]:
    return asyncio.run(_session(root, state_root, executor, body))


def test_tool_request_returns_the_callee_reply_from_its_own_process(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    root = pk.bundle(tmp_path / "b")
    result, _ = session(
        root, state_root, executor, lambda rt: rt.request(call("ask", target="b", input="hi"), instance_key="room")
    )
    assert result.text == 'a tool: {"type": "text", "value": "b@room got: hi"}'
    pids = {(r["agent"], r["key"]): r["pid"] for r in pk.out(root, "model")}
    assert set(pids) == {("a", "room"), ("b", "room")}
    if executor != "inline":  # process and ray: one OS process per instance
        assert pids[("a", "room")] != pids[("b", "room")]
        assert os.getpid() not in pids.values()
    else:
        assert set(pids.values()) == {os.getpid()}


def test_middleware_request_returns_the_callee_reply(tmp_path: Path, state_root: Path, executor: str) -> None:
    root = pk.bundle(tmp_path / "b")
    result, _ = session(root, state_root, executor, lambda rt: rt.request("mw-ask c hello", instance_key="k"))
    [mw] = pk.out(root, "mw")
    assert mw["response"] == "c@k got: hello"
    assert result.text == "a@k got: mw-ask c hello"


def _assert_circular(record: dict[str, Any], chain: str) -> None:
    assert record.get("error") == "CIRCULAR_CALL_DETECTED", record
    assert chain in record["message"]


def test_cycle_a_b_a_through_tools_fails_at_once(tmp_path: Path, state_root: Path, executor: str) -> None:
    root = pk.bundle(tmp_path / "b")
    inner = call("ask", target="a", input="back")
    t0 = time.monotonic()
    result, _ = session(
        root, state_root, executor, lambda rt: rt.request(call("ask", target="b", input=inner), instance_key="k")
    )
    assert time.monotonic() - t0 < 10
    asks = {r["agent"]: r for r in pk.out(root, "ask")}
    _assert_circular(asks["b"], "a@k -> b@k -> a@k")
    assert result.finish_reason == "text_response"


def test_cycle_a_b_a_through_middleware_fails_at_once(tmp_path: Path, state_root: Path, executor: str) -> None:
    root = pk.bundle(tmp_path / "b")
    session(root, state_root, executor, lambda rt: rt.request("mw-ask b mw-ask a again", instance_key="k"))
    mws = {r["agent"]: r for r in pk.out(root, "mw")}
    _assert_circular(mws["b"], "a@k -> b@k -> a@k")
    assert mws["a"]["response"] == "b@k got: mw-ask a again"


def test_cycle_mixing_tool_and_middleware_fails_at_once(tmp_path: Path, state_root: Path, executor: str) -> None:
    root = pk.bundle(tmp_path / "b")
    session(
        root,
        state_root,
        executor,
        lambda rt: rt.request(call("ask", target="b", input="mw-ask a x"), instance_key="k"),
    )
    [mw] = pk.out(root, "mw")
    _assert_circular(mw, "a@k -> b@k -> a@k")


def test_cycle_a_b_c_a_names_the_whole_chain(tmp_path: Path, state_root: Path, executor: str) -> None:
    root = pk.bundle(tmp_path / "b")
    to_a = call("ask", target="a", input="loop")
    to_c = call("ask", target="c", input=to_a)
    session(root, state_root, executor, lambda rt: rt.request(call("ask", target="b", input=to_c), instance_key="k"))
    asks = {r["agent"]: r for r in pk.out(root, "ask")}
    _assert_circular(asks["c"], "a@k -> b@k -> c@k -> a@k")
    assert "error" not in asks["a"] and "error" not in asks["b"]


def test_self_call_fails(tmp_path: Path, state_root: Path, executor: str) -> None:
    root = pk.bundle(tmp_path / "b")
    session(root, state_root, executor, lambda rt: rt.request("mw-ask a me", instance_key="k"))
    [mw] = pk.out(root, "mw")
    _assert_circular(mw, "a@k -> a@k")


def test_request_times_out_and_the_callee_keeps_running(tmp_path: Path, state_root: Path, executor: str) -> None:
    root = pk.bundle(tmp_path / "b")
    slow = call("sleep", seconds=0.5)
    t0 = time.monotonic()
    session(
        root,
        state_root,
        executor,
        lambda rt: rt.request(call("ask", target="b", input=slow, timeoutMs=100), instance_key="k"),
    )
    [ask] = pk.out(root, "ask")
    assert ask["error"] == "AGENT_REQUEST_TIMEOUT"
    assert "timed out after 100ms" in ask["message"]
    # (bounded by the session, not by the callee's 0.5 s; a Ray session also starts two actors,
    # each a worker process that imports goondan: seconds on a loaded machine)
    assert time.monotonic() - t0 < (10 if executor != "ray" else 40)
    # the callee finished its turn anyway (wait_idle waited for it)
    b_turns = [r for r in pk.out(root, "model") if r["agent"] == "b"]
    assert b_turns[-1]["messages"][-1]["role"] == "tool"


def test_async_response_is_injected_before_the_next_step(tmp_path: Path, state_root: Path, executor: str) -> None:
    root = pk.bundle(tmp_path / "b")
    # step 0: a's tool asks b asynchronously, then keeps working for 0.4 s while b answers; the reply
    # must be in the model input of a's step 1, right after the tool result
    # (a Ray actor for b needs a worker process and its imports first: about a second, not the fork
    # server's milliseconds)
    first = call("ask", target="b", input="ping", thenSleep=0.4 if executor != "ray" else 4.0, **{"async": True})
    result, _ = session(root, state_root, executor, lambda rt: rt.request(first, instance_key="k"))
    assert result.finish_reason == "text_response"
    [ask] = pk.out(root, "ask")
    assert ask["async_"] is True
    a_calls = [r["messages"] for r in pk.out(root, "model") if r["agent"] == "a"]
    assert len(a_calls) == 2
    step1 = a_calls[1]
    assert [m["role"] for m in step1] == ["user", "assistant", "tool", "user"]
    content = json.loads(step1[-1]["content"])
    assert content["type"] == "inter_agent_response"
    assert content["response"] == "b@k got: ping"
    assert content["fromAgentId"] == "b" and content["toAgentId"] == "a" and content["status"] == "ok"
    base = pk.read_jsonl(pk.instance_dir(state_root, "a", "k") / "messages" / "base.jsonl")
    [injected] = [m for m in base if "__goondanInterAgentResponse" in m["metadata"]]
    marker = injected["metadata"]["__goondanInterAgentResponse"]
    assert marker["status"] == "ok" and marker["async"] is True and marker["requestId"] == content["requestId"]


def test_async_response_after_the_turn_ended_is_delivered(tmp_path: Path, state_root: Path, executor: str) -> None:
    root = pk.bundle(tmp_path / "b")
    slow = call("sleep", seconds=0.3)
    first = call("ask", target="b", input=slow, **{"async": True})

    async def body(rt: Any) -> Any:
        result = await rt.request(first, instance_key="k")
        await rt.wait_idle()
        return result

    result, _ = session(root, state_root, executor, body)
    assert result.text is not None and result.text.startswith("a tool:")
    base = pk.read_jsonl(pk.instance_dir(state_root, "a", "k") / "messages" / "base.jsonl")
    assert "__goondanInterAgentResponse" in base[-1]["metadata"]
    assert json.loads(base[-1]["data"]["content"])["response"].startswith("b tool:")


def test_trace_is_kept_and_the_callee_turn_is_parented_to_the_tool_span(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    root = pk.bundle(tmp_path / "b")
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    _, events = session(
        root,
        state_root,
        executor,
        lambda rt: rt.request(call("ask", target="b", input="x"), instance_key="k", trace_id=trace),
    )
    tool_called = next(e for e in events if e["type"] == "tool.called" and e["agentName"] == "a")
    b_turn = next(e for e in events if e["type"] == "turn.started" and e["agentName"] == "b")
    assert b_turn["parentSpanId"] == tool_called["spanId"]
    assert {e["traceId"] for e in events} == {trace}
    assert [e["type"] for e in events if e["agentName"] == "b"][-1] == "turn.completed"


def test_auth_is_copied_unchanged_and_the_caller_is_named(tmp_path: Path, state_root: Path, executor: str) -> None:
    root = pk.bundle(tmp_path / "b")
    auth = {"principal": {"type": "user", "id": "u-42"}, "scopes": ["read"]}
    session(
        root,
        state_root,
        executor,
        lambda rt: rt.request(call("ask", target="c", input="x"), instance_key="k", auth=auth),
    )
    [c_event] = [r["event"] for r in pk.out(root, "event") if r["agent"] == "c"]
    assert c_event["auth"] == auth
    assert c_event["source"] == {"kind": "agent", "name": "a"}
    assert c_event["metadata"]["callerAgent"] == "a"
    assert c_event["replyTo"]["target"] == "a"


def test_spawn_then_list_shows_the_spawned_instance(tmp_path: Path, state_root: Path, executor: str) -> None:
    root = pk.bundle(tmp_path / "b")

    async def body(rt: Any) -> Any:
        first = await rt.request(call("spawn", target="b", instanceKey="side"), instance_key="k")
        second = await rt.request(call("list"), instance_key="k")
        return first, second

    (first, second), _ = session(root, state_root, executor, body)
    assert '"spawned": true' in first.text and '"instanceKey": "side"' in first.text
    assert '"target": "b"' in second.text and '"ownerAgent": "a"' in second.text


def test_unknown_target_is_agent_not_found(tmp_path: Path, state_root: Path, executor: str) -> None:
    root = pk.bundle(tmp_path / "b")
    session(root, state_root, executor, lambda rt: rt.request("mw-ask ghost boo", instance_key="k"))
    [mw] = pk.out(root, "mw")
    assert mw["error"] == "AGENT_NOT_FOUND"


def test_callee_that_cannot_start_is_a_delivery_failure(tmp_path: Path, state_root: Path, executor: str) -> None:
    root = pk.bundle(tmp_path / "b", crash_at_start=["c"])
    # c's extension raises at register: the caller gets an error at once, never a hang
    (root / "crash_ext.py").write_text("def register(api):\n    raise RuntimeError('no')\n", encoding="utf-8")
    session(root, state_root, executor, lambda rt: rt.request("mw-ask c hi", instance_key="k"))
    [mw] = pk.out(root, "mw")
    assert mw["error"] == "IPC_DELIVERY_FAILED"
    assert "E_EXT_INIT" in mw["message"]
