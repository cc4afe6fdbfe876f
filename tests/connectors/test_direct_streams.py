"""Direct streams (``executors/process/_direct_stream``, ``connectors/_direct``): a streamed webhook
turn running in an agent process sends its text deltas straight to the connector host, not through
the host's ``on_text_delta``. Real pieces: a Runtime with agent processes (or inline), the real
connector supervisor and host process running the webhook in ``replyMode: stream``, an httpx client
reading the Server-Sent Events, and a ``python`` model that streams its answer."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from cn_testkit import free_port
from test_connector_approvals import STREAMING_MODEL

import goondan
from goondan.connectors._supervisor import ConnectionPlan, ConnectorProcess
from kit.approvals import approval_bundle
from kit.bundles import write_bundle
from kit.docs import agent_doc, base_ref, package_doc, python_model_doc, swarm_doc

# Agent b answers "SUB-1 SUB-2"; agent a streams "<text>-0 ... <text>-4 ", or asks b first
# ("delegate") and then streams "after the helper", or ("die") streams one piece and is SIGKILLed.
MODEL = """\
import asyncio
import os
import signal


async def generate(request):
    emit = request.on_text_delta

    async def say(*pieces):
        for piece in pieces:
            if emit is not None:
                emit(piece)
            await asyncio.sleep(0.002)
        return {"text": "".join(pieces)}

    if request.agent_name == "b":
        return await say("SUB-1 ", "SUB-2")
    last = request.messages[-1]
    if last["role"] == "tool":
        return await say("after ", "the ", "helper")
    content = last["content"]
    said = content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
    if said == "delegate":
        return {"toolCalls": [{"id": "c1", "name": "agents__request", "args": {"target": "b", "input": "help"}}]}
    if said == "die":
        if emit is not None:
            emit("before ")
        await asyncio.sleep(0.2)
        os.kill(os.getpid(), signal.SIGKILL)
    return await say(*[f"{said}-{i} " for i in range(5)])
"""


def bundle(root: Path) -> Path:
    return write_bundle(
        root,
        package_doc(),
        python_model_doc(),
        agent_doc("a", tools=[base_ref("Tool", "agents")]),
        agent_doc("b"),
        swarm_doc(["a", "b"]),
        files={"model.py": MODEL},
    )


class Swarm:
    def __init__(self, rt: Any, proc: ConnectorProcess, url: str) -> None:
        self.rt = rt
        self.proc = proc
        self.url = url
        self.host_deltas = 0  # deltas the supervisor forwarded to the connector host
        forward = proc._on_delta

        def counting(payload: Any) -> None:
            if str(payload.get("traceId")) in proc._streams:
                self.host_deltas += 1
            forward(payload)

        proc._on_delta = counting  # type: ignore[method-assign]

    async def ask(self, text: str, key: str) -> list[tuple[str, Any]]:
        """The SSE events of one streamed request, as (event, data)."""
        events: list[tuple[str, Any]] = []
        async with (
            httpx.AsyncClient(trust_env=False) as client,
            client.stream("POST", self.url, json={"text": text, "instanceKey": key}, timeout=30) as response,
        ):
            assert response.headers["content-type"].startswith("text/event-stream")
            name = ""
            async for line in response.aiter_lines():
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: "):
                    events.append((name, json.loads(line[6:])))
        return events


@contextlib.asynccontextmanager
async def swarm(tmp_path: Path, executor: str, root: Path | None = None) -> AsyncIterator[Swarm]:
    import goondan.base.connectors.webhook as webhook

    port = free_port()
    root = root if root is not None else bundle(tmp_path / "b")
    rt = goondan.Runtime(root, state_root=tmp_path / "state", executor=executor)
    await rt.start()
    plan = ConnectionPlan("hook", "webhook", Path(webhook.__file__), {"port": str(port), "replyMode": "stream"}, {}, ())
    proc = ConnectorProcess(plan, rt, entry_agent="a")
    try:
        await proc.start()
        yield Swarm(rt, proc, f"http://127.0.0.1:{port}/")
    finally:
        await proc.stop()
        await rt.close()


def deltas(events: list[tuple[str, Any]]) -> list[str]:
    return [data["text"] for name, data in events if name == "delta"]


def test_streamed_turns_in_agent_processes_send_their_deltas_straight_to_the_connector_in_order(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        async with swarm(tmp_path, "process") as s:
            # concurrent streamed requests on two instances, two each
            asks = [("cats", "k1"), ("dogs", "k2"), ("owls", "k1"), ("bees", "k2")]
            results = await asyncio.wait_for(asyncio.gather(*(s.ask(t, k) for t, k in asks)), 60)
            for (text, _key), events in zip(asks, results, strict=True):
                pieces = [f"{text}-{i} " for i in range(5)]
                assert "".join(deltas(events)) == "".join(pieces), events  # in order, none lost or twice
                assert events[-1] == ("done", {"ok": True, "text": "".join(pieces), "finishReason": "text_response"})
                assert [name for name, _ in events].count("done") == 1
            # none of it crossed the host: the supervisor never subscribed, and sent no delta record
            assert s.proc._off_deltas is None
            assert s.host_deltas == 0
            orch = s.rt.executor.orchestrator
            assert orch is not None and not orch.delta_listeners
            assert not s.rt.executor._direct  # every target was taken by its turn

    asyncio.run(main())


def test_a_sub_agents_deltas_stay_out_and_host_listeners_still_see_every_delta(tmp_path: Path) -> None:
    async def main() -> None:
        async with swarm(tmp_path, "process") as s:
            seen: list[tuple[str, str]] = []
            s.rt.on_text_delta(lambda payload: seen.append((payload["agentName"], payload["delta"])))
            events = await asyncio.wait_for(s.ask("delegate", "k1"), 60)
            assert "".join(deltas(events)) == "after the helper", events
            assert events[-1][1]["text"] == "after the helper"
            # b streamed under the same trace (the host's listener saw it), the client did not get it
            assert ("b", "SUB-1 ") in seen and ("b", "SUB-2") in seen
            assert [d for agent, d in seen if agent == "a"] == ["after ", "the ", "helper"]
            assert s.host_deltas == 0  # with forwarding on, the connector's deltas still went direct

    asyncio.run(main())


def test_the_inline_executor_still_streams_through_the_host(tmp_path: Path) -> None:
    async def main() -> None:
        async with swarm(tmp_path, "inline") as s:
            events = await asyncio.wait_for(s.ask("cats", "k1"), 60)
            assert "".join(deltas(events)) == "".join(f"cats-{i} " for i in range(5)), events
            assert events[-1][0] == "done"
            assert s.proc._off_deltas is not None
            assert s.host_deltas == 5

    asyncio.run(main())


def test_an_agent_process_killed_mid_stream_ends_the_stream_with_its_error_without_a_hang(tmp_path: Path) -> None:
    async def main() -> None:
        async with swarm(tmp_path, "process") as s:
            events = await asyncio.wait_for(s.ask("die", "k1"), 20)
            assert deltas(events) == ["before "], events
            name, data = events[-1]
            assert name == "error" and data["error"]["code"] == "E_AGENT_PROCESS_EXITED", events
            # the next process of that instance streams again, on a new connection
            events = await asyncio.wait_for(s.ask("cats", "k1"), 30)
            assert "".join(deltas(events)) == "".join(f"cats-{i} " for i in range(5)), events
            assert s.host_deltas == 0

    asyncio.run(main())


def test_a_connector_socket_that_cannot_be_reached_does_not_hold_the_reply(tmp_path: Path) -> None:
    async def main() -> None:
        async with swarm(tmp_path, "process") as s:
            assert s.proc._child is not None and s.proc._child.deltas.startswith("@")
            s.proc._child.deltas = "@goondan-no-such-connector"
            events = await asyncio.wait_for(s.ask("cats", "k1"), 20)
            # the turn reported its stream broken: the reply is the whole text, not held
            assert events[-1] == (
                "done",
                {"ok": True, "text": "".join(f"cats-{i} " for i in range(5)), "finishReason": "text_response"},
            )

    asyncio.run(main())


def test_a_streamed_approval_resume_streams_straight_to_the_connector(tmp_path: Path) -> None:
    root = approval_bundle(tmp_path / "b", tmp_path / "ran.log")
    (root / "model.py").write_text(STREAMING_MODEL)  # the resumed turn streams

    async def main() -> None:
        async with swarm(tmp_path, "process", root) as s:
            paused = await asyncio.wait_for(s.ask("one", "k1"), 60)
            approval_id = re.search(r"approve (appr_\w+)`", paused[-1][1]["text"]).group(1)  # type: ignore[union-attr]
            events = await asyncio.wait_for(s.ask(f"approve {approval_id}", "k1"), 60)
            assert "".join(deltas(events)) == "resumed, approved and streamed", events
            assert events[-1] == (
                "done",
                {"ok": True, "text": "resumed, approved and streamed", "finishReason": "text_response"},
            )
            # the resumed turn (under the paused turn's trace id) took the direct path
            assert s.proc._off_deltas is None and s.host_deltas == 0
            assert not s.rt.executor._direct

    asyncio.run(main())
