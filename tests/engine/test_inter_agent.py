"""Inter-agent calls through ``ctx.agents`` (middleware) and ``ctx.runtime`` (tools) (digest §2.8)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

import goondan
import kit as k
from goondan import AgentRequestError
from kit import agent_doc, call, export, extension_doc, swarm_doc, text, tool_doc

# A step middleware that, at step 0, performs the request described in PROBE["plan"][agent_name]:
# {"op": "request"|"send", "target", "input", "kw": {...}}; results and errors go to PROBE[agent_name].
CALLER_EXT = """\
import kit
from goondan import AgentRequestError


def register(api):
    async def step(ctx):
        plan = kit.PROBE.get("plan", {}).get(ctx.agent_name)
        if plan and ctx.step_index == 0:
            out = kit.PROBE.setdefault(ctx.agent_name, {})
            out["auth"] = ctx.input_event.get("auth")
            out["trace_id"] = ctx.trace_id
            try:
                fn = getattr(ctx.agents, plan["op"])
                result = await fn(plan["target"], plan.get("input"), **plan.get("kw", {}))
                out["result"] = result
            except AgentRequestError as exc:
                out["error"] = exc
            except Exception as exc:
                out["other_error"] = exc
        kit.PROBE.setdefault("inputs", []).append((ctx.agent_name, ctx.instance_key, ctx.input_event))
        return await ctx.next()

    api.pipeline.register("step", step)
"""

# A tool whose handler calls another agent through ctx.runtime.
AGENT_TOOL = """\
import kit


async def ask(ctx, args):
    result = await ctx.runtime.request(args["target"], args["input"])
    kit.PROBE.setdefault("tool_results", []).append((ctx.agent_name, result))
    return result.response


async def catalog(ctx, args):
    return await ctx.runtime.catalog()


handlers = {"ask": ask, "catalog": catalog}
"""


def swarm_bundle(tmp_path: Path, agents: tuple[str, ...] = ("a", "b", "worker"), **kw: Any) -> Path:
    ask_schema = {"target": {"type": "string"}, "input": {"type": "string"}}
    return k.simple_bundle(
        tmp_path,
        agents=[agent_doc(name, tools=["agents"], extensions=["caller"]) for name in agents],
        tools=[
            tool_doc(
                "agents",
                "./tools/agents.py",
                [export("ask", ask_schema, required=["target", "input"]), export("catalog")],
            )
        ],
        extensions=[extension_doc("caller", "./ext/caller.py")],
        swarm=swarm_doc(list(agents), entry=agents[0], **kw),
        files={"ext/caller.py": CALLER_EXT, "tools/agents.py": AGENT_TOOL},
    )


def last_user_text(request: Any) -> str:
    for message in reversed(list(request.messages)):
        if message["role"] == "user" and isinstance(message["content"], str):
            return message["content"]
    return ""


def default_model(request: Any) -> dict[str, Any]:
    """Every agent answers ``<agent> got: <last user text>``."""
    return text(f"{request.agent_name} got: {last_user_text(request)}")


async def _session(root: Path, state_root: Path, body: Any) -> Any:
    events: list[dict[str, Any]] = []
    async with goondan.Runtime(root, state_root=state_root, isolation="inline") as rt:
        rt.on_runtime_event(events.append)
        out = await body(rt)
        await rt.wait_idle()
    return out, events


def session(root: Path, state_root: Path, body: Any) -> tuple[Any, list[dict[str, Any]]]:
    return k.run(_session(root, state_root, body))


# --- successful calls ----------------------------------------------------------------------------------


def test_step_middleware_request_returns_the_callee_reply(tmp_path: Path, state_root: Path) -> None:
    root = swarm_bundle(tmp_path)
    k.MODEL = default_model
    k.PROBE["plan"] = {"a": {"op": "request", "target": "worker", "input": "hi"}}
    (result, _events) = session(root, state_root, lambda rt: rt.request("start", instance_key="room"))
    res = k.PROBE["a"]["result"]
    assert res.response == "worker got: hi"
    assert res.target == "worker"
    assert res.accepted is True
    assert isinstance(res.correlation_id, str) and res.correlation_id
    assert result.text == "a got: start"
    # the callee ran on the caller's instance key
    worker_calls = [r for r in k.REQUESTS if r.agent_name == "worker"]
    assert [r.instance_key for r in worker_calls] == ["room"]


def test_tool_handler_can_request_another_agent(tmp_path: Path, state_root: Path) -> None:
    root = swarm_bundle(tmp_path)

    def model(request: Any) -> dict[str, Any]:
        if request.agent_name == "a" and request.messages[-1]["role"] == "user":
            return call("agents__ask", {"target": "worker", "input": "x"})
        return default_model(request)

    k.MODEL = model
    session(root, state_root, lambda rt: rt.request("start"))
    [(caller, res)] = k.PROBE["tool_results"]
    assert caller == "a"
    assert res.response == "worker got: x"
    a_last = [r for r in k.REQUESTS if r.agent_name == "a"][-1]
    assert a_last.messages[-1]["content"][0]["output"] == {"type": "text", "value": "worker got: x"}


def test_tool_runtime_catalog_lists_callable_agents(tmp_path: Path, state_root: Path) -> None:
    root = swarm_bundle(tmp_path)

    def model(request: Any) -> dict[str, Any]:
        if request.messages[-1]["role"] == "user":
            return call("agents__catalog", {})
        return text("done")

    k.MODEL = model
    session(root, state_root, lambda rt: rt.request("start"))
    output = k.REQUESTS[-1].messages[-1]["content"][0]["output"]["value"]
    assert output["selfAgent"] == "a"
    assert output["availableAgents"] == ["a", "b", "worker"]
    assert output["callableAgents"] == ["b", "worker"]


# --- failures -------------------------------------------------------------------------------------------


def test_cycle_through_middleware_fails_at_once_with_circular_call_detected(tmp_path: Path, state_root: Path) -> None:
    root = swarm_bundle(tmp_path)
    k.MODEL = default_model
    k.PROBE["plan"] = {
        "a": {"op": "request", "target": "b", "input": "to b"},
        "b": {"op": "request", "target": "a", "input": "back to a"},
    }
    t0 = time.monotonic()
    session(root, state_root, lambda rt: rt.request("start", instance_key="k"))
    assert time.monotonic() - t0 < 5
    err = k.PROBE["b"]["error"]
    assert isinstance(err, AgentRequestError)
    assert err.code == "CIRCULAR_CALL_DETECTED"
    assert "a@k -> b@k -> a@k" in err.message
    # b handled the error and still answered a
    assert k.PROBE["a"]["result"].response == "b got: to b"


def test_cycle_through_tools_fails_at_once_with_a_circular_call_tool_error(tmp_path: Path, state_root: Path) -> None:
    root = swarm_bundle(tmp_path)

    def model(request: Any) -> dict[str, Any]:
        last = request.messages[-1]
        if last["role"] == "user" and request.agent_name == "a" and last["content"] == "start":
            return call("agents__ask", {"target": "b", "input": "to b"})
        if last["role"] == "user" and request.agent_name == "b":
            return call("agents__ask", {"target": "a", "input": "back to a"})
        if last["role"] == "tool":
            return text(f"{request.agent_name} saw {last['content'][0]['output']['type']}")
        return default_model(request)

    k.MODEL = model
    t0 = time.monotonic()
    (result, _events) = session(root, state_root, lambda rt: rt.request("start", instance_key="k"))
    assert time.monotonic() - t0 < 5
    b_after_tool = [r for r in k.REQUESTS if r.agent_name == "b" and r.messages[-1]["role"] == "tool"]
    [b_req] = b_after_tool
    output = b_req.messages[-1]["content"][0]["output"]
    assert output["type"] == "error-json"
    assert output["value"]["code"] == "CIRCULAR_CALL_DETECTED"
    assert "a@k -> b@k -> a@k" in output["value"]["message"]
    assert result.finish_reason == "text_response"


def test_self_call_fails(tmp_path: Path, state_root: Path) -> None:
    root = swarm_bundle(tmp_path)
    k.MODEL = default_model
    k.PROBE["plan"] = {"a": {"op": "request", "target": "a", "input": "me?", "kw": {"timeout_ms": 3000}}}
    t0 = time.monotonic()
    session(root, state_root, lambda rt: rt.request("start"))
    assert time.monotonic() - t0 < 2
    err = k.PROBE["a"]["error"]
    assert isinstance(err, AgentRequestError)
    assert err.code == "CIRCULAR_CALL_DETECTED"


def test_unknown_target_is_agent_not_found(tmp_path: Path, state_root: Path) -> None:
    root = swarm_bundle(tmp_path)
    k.MODEL = default_model
    k.PROBE["plan"] = {"a": {"op": "request", "target": "ghost", "input": "boo"}}
    session(root, state_root, lambda rt: rt.request("start"))
    err = k.PROBE["a"]["error"]
    assert err.code == "AGENT_NOT_FOUND"
    assert err.target == "ghost"


def test_send_to_unknown_target_is_not_accepted(tmp_path: Path, state_root: Path) -> None:
    root = swarm_bundle(tmp_path)
    k.MODEL = default_model
    k.PROBE["plan"] = {"a": {"op": "send", "target": "ghost", "input": "boo"}}
    session(root, state_root, lambda rt: rt.request("start"))
    assert k.PROBE["a"]["result"].accepted is False


def test_request_timeout_on_a_slow_callee(tmp_path: Path, state_root: Path) -> None:
    root = swarm_bundle(tmp_path)

    async def model(request: Any) -> dict[str, Any]:
        if request.agent_name == "worker":
            await asyncio.sleep(0.4)
        return default_model(request)

    k.MODEL = model
    k.PROBE["plan"] = {"a": {"op": "request", "target": "worker", "input": "slow", "kw": {"timeout_ms": 50}}}
    t0 = time.monotonic()
    session(root, state_root, lambda rt: rt.request("start"))
    err = k.PROBE["a"]["error"]
    assert err.code == "AGENT_REQUEST_TIMEOUT"
    assert "50ms" in err.message
    assert "worker" in err.message
    assert time.monotonic() - t0 < 5


def test_callee_that_fails_to_start_raises_agent_request_error(tmp_path: Path, state_root: Path) -> None:
    ask_ext = CALLER_EXT
    root = k.simple_bundle(
        tmp_path,
        agents=[agent_doc("a", extensions=["caller"]), agent_doc("broken", extensions=["bad"])],
        extensions=[extension_doc("caller", "./ext/caller.py"), extension_doc("bad", "./ext/bad.py")],
        swarm=swarm_doc(["a", "broken"], entry="a"),
        files={"ext/caller.py": ask_ext, "ext/bad.py": "def register(api):\n    raise RuntimeError('no')\n"},
    )
    k.MODEL = default_model
    k.PROBE["plan"] = {"a": {"op": "request", "target": "broken", "input": "hi", "kw": {"timeout_ms": 3000}}}
    session(root, state_root, lambda rt: rt.request("start"))
    out = k.PROBE["a"]
    assert "other_error" not in out, f"ctx.agents.request raised {out.get('other_error')!r}, not AgentRequestError"
    assert isinstance(out["error"], AgentRequestError)
    assert out["error"].target == "broken"


# --- context carried to the callee -------------------------------------------------------------------


def test_callee_shares_the_trace_and_its_turn_parent_is_the_caller_span(tmp_path: Path, state_root: Path) -> None:
    root = swarm_bundle(tmp_path)
    k.MODEL = default_model
    k.PROBE["plan"] = {"a": {"op": "request", "target": "worker", "input": "hi"}}
    _, events = session(root, state_root, lambda rt: rt.request("start"))
    a_turn = next(e for e in events if e["type"] == "turn.started" and e["agentName"] == "a")
    a_spans = {e["spanId"] for e in events if e["agentName"] == "a"}
    w_turn = next(e for e in events if e["type"] == "turn.started" and e["agentName"] == "worker")
    assert w_turn["traceId"] == a_turn["traceId"]
    assert w_turn["parentSpanId"] in a_spans
    assert {e["traceId"] for e in events} == {a_turn["traceId"]}


def test_callee_turn_started_from_a_tool_is_parented_to_the_tool_span(tmp_path: Path, state_root: Path) -> None:
    root = swarm_bundle(tmp_path)

    def model(request: Any) -> dict[str, Any]:
        if request.agent_name == "a" and request.messages[-1]["role"] == "user":
            return call("agents__ask", {"target": "worker", "input": "x"})
        return default_model(request)

    k.MODEL = model
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    _, events = session(root, state_root, lambda rt: rt.request("start", trace_id=trace))
    tool_called = next(e for e in events if e["type"] == "tool.called" and e["agentName"] == "a")
    w_turn = next(e for e in events if e["type"] == "turn.started" and e["agentName"] == "worker")
    assert w_turn["parentSpanId"] == tool_called["spanId"]
    assert {e["traceId"] for e in events} == {trace}


def test_auth_is_copied_unchanged_into_the_callee_input_event(tmp_path: Path, state_root: Path) -> None:
    root = swarm_bundle(tmp_path)
    k.MODEL = default_model
    auth = {"principal": {"type": "user", "id": "u-42", "roles": ["admin"]}, "scopes": ["read"]}
    k.PROBE["plan"] = {"a": {"op": "request", "target": "worker", "input": "hi"}}
    session(root, state_root, lambda rt: rt.request("start", auth=auth))
    worker_events = [ev for (agent, _key, ev) in k.PROBE["inputs"] if agent == "worker"]
    assert worker_events and worker_events[0]["auth"] == auth
    assert worker_events[0]["source"] == {"kind": "agent", "name": "a"}
    assert worker_events[0]["metadata"]["callerAgent"] == "a"


def test_callee_inbound_message_names_the_calling_agent(tmp_path: Path, state_root: Path) -> None:
    root = swarm_bundle(tmp_path)
    k.MODEL = default_model
    k.PROBE["plan"] = {"a": {"op": "request", "target": "worker", "input": "hi"}}
    session(root, state_root, lambda rt: rt.request("start", instance_key="r1"))
    base = k.read_jsonl(k.instance_dir(state_root, "worker", "r1") / "messages" / "base.jsonl")
    assert base[0]["data"] == {"role": "user", "content": "hi"}
    assert base[0]["metadata"]["__goondanInbound"] == {
        "sourceKind": "agent",
        "sourceName": "a",
        "eventName": "agent.request",
        "instanceKey": "r1",
    }


def test_send_is_accepted_and_the_callee_runs(tmp_path: Path, state_root: Path) -> None:
    root = swarm_bundle(tmp_path)
    k.MODEL = default_model
    k.PROBE["plan"] = {"a": {"op": "send", "target": "worker", "input": "fyi"}}
    session(root, state_root, lambda rt: rt.request("start"))
    assert k.PROBE["a"]["result"].accepted is True
    worker_calls = [r for r in k.REQUESTS if r.agent_name == "worker"]
    assert len(worker_calls) == 1
    assert last_user_text(worker_calls[0]) == "fyi"


def test_runtime_send_runs_the_target_in_the_background(tmp_path: Path, state_root: Path) -> None:
    root = swarm_bundle(tmp_path)
    k.MODEL = default_model

    async def body(rt: Any) -> bool:
        accepted = await rt.send("note", agent="worker", instance_key="k1")
        await rt.wait_idle()
        return accepted

    accepted, events = session(root, state_root, body)
    assert accepted is True
    assert [e["type"] for e in events if e["agentName"] == "worker"][-1] == "turn.completed"
    assert [r.instance_key for r in k.REQUESTS] == ["k1"]


@pytest.mark.parametrize("bad_timeout", [0, -1, 1.5, None])
def test_invalid_timeouts_fall_back_to_the_default(tmp_path: Path, state_root: Path, bad_timeout: Any) -> None:
    root = swarm_bundle(tmp_path)
    k.MODEL = default_model
    k.PROBE["plan"] = {"a": {"op": "request", "target": "worker", "input": "hi", "kw": {"timeout_ms": bad_timeout}}}
    session(root, state_root, lambda rt: rt.request("start"))
    assert k.PROBE["a"]["result"].response == "worker got: hi"


# --- async requests ----------------------------------------------------------------------------------

ASYNC_CALLER = """\
import asyncio
import kit


def register(api):
    def on_done(event):
        if event["agentName"] == "worker":
            kit.PROBE["worker_done"] = True

    api.events.on("turn.completed", on_done)

    async def step(ctx):
        if ctx.agent_name == "a" and ctx.step_index == 0:
            kit.PROBE["async_result"] = await ctx.agents.request("worker", "background job", async_=True)
        return await ctx.next()

    api.pipeline.register("step", step)
"""

WAIT_TOOL = """\
import asyncio
import kit


async def wait(ctx, args):
    for _ in range(400):
        if kit.PROBE.get("worker_done"):
            break
        await asyncio.sleep(0.005)
    for _ in range(50):  # let the response task hand the message to the caller's inbox
        await asyncio.sleep(0)
    return "waited"


handlers = {"wait": wait}
"""


def async_bundle(tmp_path: Path) -> Path:
    return k.simple_bundle(
        tmp_path,
        agents=[agent_doc(n, tools=["w"], extensions=["caller"]) for n in ("a", "worker")],
        tools=[tool_doc("w", "./tools/w.py", [export("wait")])],
        extensions=[extension_doc("caller", "./ext/caller.py")],
        swarm=swarm_doc(["a", "worker"], entry="a"),
        files={"ext/caller.py": ASYNC_CALLER, "tools/w.py": WAIT_TOOL},
    )


def _inter_agent_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    import json

    out = []
    for m in messages:
        if m["role"] == "user" and isinstance(m["content"], str) and "inter_agent_response" in m["content"]:
            out.append(json.loads(m["content"]))
    return out


def test_async_request_response_is_injected_before_the_next_step(tmp_path: Path, state_root: Path) -> None:
    root = async_bundle(tmp_path)

    def model(request: Any) -> dict[str, Any]:
        if request.agent_name == "a" and request.messages[-1] == {"role": "user", "content": "start"}:
            return call("w__wait", {})
        return default_model(request)

    k.MODEL = model
    (result, _events) = session(root, state_root, lambda rt: rt.request("start"))
    accepted = k.PROBE["async_result"]
    assert accepted.accepted is True
    assert accepted.response == ""
    a_calls = [r for r in k.REQUESTS if r.agent_name == "a"]
    assert len(a_calls) == 2
    assert _inter_agent_messages(a_calls[0].messages) == []
    [injected] = _inter_agent_messages(a_calls[1].messages)
    assert injected["status"] == "ok"
    assert injected["response"] == "worker got: background job"
    assert injected["fromAgentId"] == "worker"
    assert injected["toAgentId"] == "a"
    assert injected["requestId"] == accepted.correlation_id
    assert result.finish_reason == "text_response"


def test_async_response_arriving_after_the_turn_is_committed_not_dropped(tmp_path: Path, state_root: Path) -> None:
    root = async_bundle(tmp_path)
    k.MODEL = default_model  # "a" answers at once; the worker finishes after a's turn ended

    async def body(rt: Any) -> Any:
        result = await rt.request("start")
        await rt.wait_idle()
        return result, k.history(rt)

    (result, hist), _ = session(root, state_root, body)
    assert result.text == "a got: start"
    [injected] = _inter_agent_messages(hist)
    assert injected["response"] == "worker got: background job"
    base = k.read_jsonl(k.instance_dir(state_root, "a", "default") / "messages" / "base.jsonl")
    marker = [
        r["metadata"]["__goondanInterAgentResponse"] for r in base if "__goondanInterAgentResponse" in r["metadata"]
    ]
    assert len(marker) == 1
    assert marker[0]["status"] == "ok"
    assert marker[0]["async"] is True
    assert marker[0]["fromAgentId"] == "worker"
