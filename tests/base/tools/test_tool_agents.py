"""agents: argument handling and result shapes over a recording ctx.runtime (digest §4.4, §9.2 tools).

Routing itself (spawning, replies, cycles) is proven end to end in test_tools_end_to_end.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tools_testkit import FakeCtx, run

from goondan import AgentRequestError
from goondan.base.tools import agents
from goondan.base.tools._common import ToolExecutionError, ToolInputError


@dataclass
class _Reply:
    target: str
    response: str
    correlation_id: str
    accepted: bool = True
    async_: bool = False
    event_id: str = "evt-1"
    instance_key: str = "key-1"


@dataclass
class _Sent:
    accepted: bool
    target: str = ""
    event_id: str = ""


class RecordingRuntime:
    """Mimics goondan.runtime ToolRuntime: async methods, dataclass results, AgentRequestError failures."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.fail: AgentRequestError | None = None
        self.spawned: list[dict[str, Any]] = []

    async def request(self, target: str, input: str | None = None, **kw: Any) -> _Reply:
        self.calls.append(("request", (target, input), kw))
        if self.fail:
            raise self.fail
        key = kw.get("instance_key") or "key-1"
        return _Reply(
            target, "" if kw["async_"] else f"reply to {input}", "corr_1", async_=kw["async_"], instance_key=key
        )

    async def send(self, target: str, input: str | None = None, **kw: Any) -> _Sent:
        self.calls.append(("send", (target, input), kw))
        if target not in ("worker", "observer", "agent-a"):
            return _Sent(False, target)
        return _Sent(True, target, "evt-2")

    async def spawn(self, target: str, *, instance_key: str | None = None, cwd: str | None = None) -> dict[str, Any]:
        self.calls.append(("spawn", (target,), {"instance_key": instance_key, "cwd": cwd}))
        record = {"target": target, "instanceKey": instance_key or "worker-instance-x", "cwd": cwd}
        self.spawned.append(record)
        return {**record, "spawned": True}

    async def list(self, *, include_all: bool = False) -> dict[str, Any]:
        self.calls.append(("list", (), {"include_all": include_all}))
        return {"agents": list(self.spawned)}

    async def catalog(self) -> dict[str, Any]:
        return {
            "swarmName": "brain",
            "entryAgent": "agent-a",
            "selfAgent": "agent-a",
            "availableAgents": ["agent-a", "observer", "reviewer", "worker"],
            "callableAgents": ["observer", "reviewer", "worker"],
        }


@pytest.fixture
def rt_ctx(workdir: Path) -> tuple[FakeCtx, RecordingRuntime]:
    runtime = RecordingRuntime()
    return FakeCtx(workdir=workdir, runtime=runtime), runtime


def test_request_passes_defaults_and_returns_the_reply(rt_ctx: tuple[FakeCtx, RecordingRuntime]) -> None:
    ctx, runtime = rt_ctx
    out = run(agents.request, ctx, {"target": "worker", "input": "do it"})
    assert out == {
        "target": "worker",
        "instanceKey": "key-1",
        "eventId": "evt-1",
        "correlationId": "corr_1",
        "accepted": True,
        "async": False,
        "response": "reply to do it",
    }
    assert runtime.calls == [
        ("request", ("worker", "do it"), {"instance_key": None, "timeout_ms": 60000, "async_": False, "metadata": None})
    ]


def test_request_options_are_forwarded(rt_ctx: tuple[FakeCtx, RecordingRuntime]) -> None:
    ctx, runtime = rt_ctx
    out = run(
        agents.request,
        ctx,
        {"target": "worker", "input": "x", "instanceKey": "k9", "timeoutMs": 1500, "async": True, "metadata": {"m": 1}},
    )
    assert out["async"] is True
    assert out["response"] is None
    assert out["instanceKey"] == "k9"
    assert runtime.calls[0][2] == {"instance_key": "k9", "timeout_ms": 1500, "async_": True, "metadata": {"m": 1}}


def test_request_validation_messages(rt_ctx: tuple[FakeCtx, RecordingRuntime]) -> None:
    ctx, runtime = rt_ctx
    with pytest.raises(ToolInputError, match="'input' must be a non-empty string"):
        run(agents.request, ctx, {"target": "worker"})
    with pytest.raises(ToolInputError, match="'target' must be a non-empty string"):
        run(agents.request, ctx, {"target": "", "input": "x"})
    with pytest.raises(ToolInputError, match="'async' must be a boolean"):
        run(agents.request, ctx, {"target": "worker", "input": "x", "async": "yes"})
    with pytest.raises(ToolInputError, match="unexpected argument\\(s\\) 'eventtype'"):
        run(agents.request, ctx, {"target": "worker", "input": "x", "eventtype": "y"})
    assert runtime.calls == []


def test_request_failures_keep_the_runtime_error_code(rt_ctx: tuple[FakeCtx, RecordingRuntime]) -> None:
    ctx, runtime = rt_ctx
    runtime.fail = AgentRequestError("AGENT_REQUEST_TIMEOUT", "timed out")
    with pytest.raises(AgentRequestError) as info:
        run(agents.request, ctx, {"target": "worker", "input": "x"})
    assert info.value.code == "AGENT_REQUEST_TIMEOUT"


def test_send_returns_event_id_and_unknown_targets_are_errors(rt_ctx: tuple[FakeCtx, RecordingRuntime]) -> None:
    ctx, runtime = rt_ctx
    assert run(agents.send, ctx, {"target": "worker", "input": "fyi"}) == {
        "target": "worker",
        "eventId": "evt-2",
        "accepted": True,
    }
    assert runtime.calls[0] == ("send", ("worker", "fyi"), {"instance_key": None, "metadata": None})
    with pytest.raises(ToolExecutionError) as info:
        run(agents.send, ctx, {"target": "ghost", "input": "fyi"})
    assert info.value.code == "AGENT_NOT_FOUND"
    assert "worker" in (info.value.suggestion or "")


def test_spawn_list_and_catalog(rt_ctx: tuple[FakeCtx, RecordingRuntime]) -> None:
    ctx, runtime = rt_ctx
    out = run(agents.spawn, ctx, {"target": "worker", "instanceKey": "w1", "cwd": "/srv/x"})
    assert out == {"target": "worker", "instanceKey": "w1", "cwd": "/srv/x", "spawned": True}
    run(agents.spawn, ctx, {"target": "reviewer"})
    listed = run(agents.list_agents, ctx, {})
    assert listed["count"] == 2
    assert [a["target"] for a in listed["agents"]] == ["worker", "reviewer"]
    run(agents.list_agents, ctx, {"includeAll": True})
    assert runtime.calls[-1] == ("list", (), {"include_all": True})
    cat = run(agents.catalog, ctx, {})
    assert cat["availableCount"] == 4
    assert cat["callableCount"] == 3
    assert cat["swarmName"] == "brain"
    assert cat["selfAgent"] == "agent-a"


def test_missing_runtime_is_a_clear_error(ctx: FakeCtx) -> None:
    with pytest.raises(ToolExecutionError) as info:
        run(agents.catalog, ctx, {})
    assert info.value.code == "E_AGENTS_RUNTIME_UNAVAILABLE"
