"""Orchestrator routing against scripted agent ends of real socketpairs (no fork): the checks the
orchestrator makes itself, whatever an agent process sends (digest §2.3 route, §9.1 e2e/inter-agent)."""

from __future__ import annotations

import asyncio
import itertools
import socket
from collections.abc import Callable
from typing import Any

from goondan.executors.process import Orchestrator
from goondan.executors.process._ipc import Connection, message


class FakeAgents:
    """A spawner whose "processes" are coroutines on the far end of a socketpair. Each answers
    ``turn`` with ``turn_done`` (text ``<agent>@<key>: <input>``) and records what it received."""

    def __init__(self, on_exit: Callable[[int, int], None]) -> None:
        self.on_exit = on_exit
        self.children: set[int] = set()
        self.pids = itertools.count(1000)
        self.received: dict[str, list[dict[str, Any]]] = {}
        self.ends: dict[str, Connection] = {}
        self.by_pid: dict[int, Connection] = {}
        self.tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()

    def kill(self, pid: int, sig: int) -> None:
        if pid in self.children:  # the "process" dies: its end of the stream closes, then the exit is reported
            self.children.discard(pid)
            self.by_pid[pid].close()
            self.on_exit(pid, -sig)

    async def spawn(self, spec: dict[str, Any]) -> tuple[int, Connection]:
        left, right = socket.socketpair()
        r1, w1 = await asyncio.open_unix_connection(sock=left)
        r2, w2 = await asyncio.open_unix_connection(sock=right)
        pid = next(self.pids)
        self.children.add(pid)
        name = f"{spec['agent']}:{spec['instanceKey']}"
        end = Connection(r2, w2)
        self.ends[name] = end
        self.by_pid[pid] = end
        self.tasks.append(asyncio.ensure_future(self._agent(name, spec["agent"], end)))
        return pid, Connection(r1, w1)

    async def _agent(self, name: str, agent: str, conn: Connection) -> None:
        conn.send(message("event", agent, "orchestrator", {"kind": "agent_ready", "pid": 0}))
        while (msg := await conn.recv()) is not None:
            self.received.setdefault(name, []).append(msg)
            payload = msg["payload"]
            if msg["type"] == "event" and payload.get("kind") == "turn":
                text = f"{name}: {payload['event'].get('input')}"
                result = {"turnId": "t", "finishReason": "text_response", "text": text, "responseMessage": None}
                conn.send(
                    message(
                        "event",
                        agent,
                        "orchestrator",
                        {"kind": "turn_done", "ticket": payload["ticket"], "result": result},
                    )
                )
            elif msg["type"] == "shutdown":
                conn.send(message("shutdown_ack", agent, "orchestrator", {"instanceKey": name.split(":")[1]}))


async def _orchestrator() -> tuple[Orchestrator, FakeAgents]:
    holder: dict[str, FakeAgents] = {}

    def factory(on_exit: Callable[[int, int], None]) -> FakeAgents:
        holder["s"] = FakeAgents(on_exit)
        return holder["s"]

    orch = Orchestrator(
        spawner_factory=factory, swarm_name="s", agent_names=frozenset({"a", "b", "c", "beta"}), reconcile_interval_ms=0
    )
    await orch.start()
    return orch, holder["s"]


def request_event(corr: str, stack: list[str], text: str = "hi") -> dict[str, Any]:
    return {
        "id": "evt_1",
        "type": "agent.request",
        "input": text,
        "replyTo": {"target": "x", "correlationId": corr},
        "metadata": {"__goondanAgentCallStack": stack},
    }


async def _until(pred: Callable[[], bool]) -> None:
    for _ in range(500):
        if pred():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition never held")


def test_a_request_closing_a_cycle_gets_an_error_response_naming_the_chain() -> None:
    async def main() -> None:
        orch, fake = await _orchestrator()
        await orch.ensure_started("c", "k")
        end = fake.ends["c:k"]
        end.send(
            message(
                "event",
                "c",
                "orchestrator",
                {
                    "kind": "request",
                    "event": request_event("corr-1", ["a@k", "b@k"]),
                    "target": "a",
                    "instanceKey": "k",
                },
            )
        )
        await _until(lambda: any(m["payload"].get("kind") == "error_response" for m in fake.received.get("c:k", [])))
        [err] = [m for m in fake.received["c:k"] if m["payload"].get("kind") == "error_response"]
        meta = err["payload"]["metadata"]
        assert meta["inReplyTo"] == "corr-1" and meta["errorCode"] == "CIRCULAR_CALL_DETECTED"
        assert meta["errorMessage"] == "Circular call detected: a@k -> b@k -> c@k -> a@k"
        assert "a:k" not in fake.ends  # nothing was spawned for the refused request
        assert orch.pending_requests == {}
        await orch.close()

    asyncio.run(main())


def test_a_request_auto_spawns_its_target_and_the_response_reaches_the_requester_once() -> None:
    async def main() -> None:
        orch, fake = await _orchestrator()
        await orch.ensure_started("a", "k")
        end = fake.ends["a:k"]
        end.send(
            message(
                "event",
                "a",
                "orchestrator",
                {
                    "kind": "request",
                    "event": request_event("corr-2", ["a@k"], "ping"),
                    "target": "beta",
                    "instanceKey": "k",
                },
            )
        )
        await _until(
            lambda: (
                "corr-2" in orch.pending_requests
                or any(m["payload"].get("kind") == "response" for m in fake.received.get("a:k", []))
            )
        )
        await _until(lambda: any(m["payload"].get("kind") == "response" for m in fake.received.get("a:k", [])))
        responses = [m for m in fake.received["a:k"] if m["payload"].get("kind") == "response"]
        assert len(responses) == 1
        event = responses[0]["payload"]["event"]
        assert event["metadata"] == {"inReplyTo": "corr-2"} and event["input"] == "beta:k: ping"
        assert [
            m["payload"]["event"]["input"] for m in fake.received["beta:k"] if m["payload"].get("kind") == "turn"
        ] == ["ping"]
        assert orch.pending_requests == {}
        # a send registers nothing and expects no answer
        end.send(
            message(
                "event",
                "a",
                "orchestrator",
                {
                    "kind": "send",
                    "event": {"id": "e", "type": "agent.send", "input": "fyi"},
                    "target": "c",
                    "instanceKey": "k",
                },
            )
        )
        await _until(lambda: any(m["payload"].get("kind") == "turn" for m in fake.received.get("c:k", [])))
        assert orch.pending_requests == {}
        await orch.close()

    asyncio.run(main())


def test_shutdown_is_acknowledged_and_the_instance_terminates() -> None:
    async def main() -> None:
        orch, fake = await _orchestrator()
        handle = await orch.ensure_started("a", "k")
        assert handle.status == "idle"
        await orch.stop(handle, "restart", grace_ms=5000)
        shutdown = [m for m in fake.received["a:k"] if m["type"] == "shutdown"]
        assert shutdown[0]["payload"] == {"gracePeriodMs": 5000, "reason": "restart", "instanceKey": "k"}
        assert handle.status == "terminated" and handle.pid is None
        await orch.close()

    asyncio.run(main())
