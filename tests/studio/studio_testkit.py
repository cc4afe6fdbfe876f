"""What the Studio tests share: a real two-agent run (``lead`` delegates to ``helper`` through the
agents tool, ``helper`` calls a tool), a generated large state root, and ``gdn studio`` as a real
subprocess on a free port of 127.0.0.1."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import goondan
import kit

# lead asks helper (agents__request); helper adds two numbers with calc__add; both then answer
DELEGATION_MODEL = """\
def generate(request):
    last = request.messages[-1]
    usage = {"promptTokens": 11, "completionTokens": 4, "totalTokens": 15}
    if request.agent_name == "lead":
        if last["role"] == "tool":
            return {"text": "lead: the helper says it is done", "usage": usage}
        return {"toolCalls": [{"name": "agents__request", "args": {"target": "helper", "input": "add 2 and 3"}}],
                "usage": usage}
    if last["role"] == "tool":
        return {"text": "sum is 5", "usage": usage}
    return {"toolCalls": [{"name": "calc__add", "args": {"a": 2, "b": 3}}], "usage": usage}
"""

CALC_TOOL = """\
def add(ctx, args):
    return {"sum": args["a"] + args["b"]}


handlers = {"add": add}
"""


def delegation_bundle(root: Path) -> Path:
    docs = [
        kit.package_doc("studio-demo"),
        kit.python_model_doc(),
        kit.tool_doc("calc", "./calc.py", [kit.export("add", {"a": {"type": "number"}, "b": {"type": "number"}})]),
        kit.agent_doc("lead", tools=[kit.base_ref("Tool", "agents")]),
        kit.agent_doc("helper", tools=["calc"]),
        kit.swarm_doc(["lead", "helper"]),
    ]
    return kit.write_bundle(root, *docs, files={"model.py": DELEGATION_MODEL, "calc.py": CALC_TOOL})


def run_turns(
    bundle: Path, state_root: Path, inputs: Sequence[str], *, store: str | None = None
) -> list[goondan.TurnResult]:
    """Requests to the entry agent with the real runtime (one agent process per instance)."""

    async def main() -> list[goondan.TurnResult]:
        async with goondan.Runtime(bundle, state_root=state_root, executor="process", store=store) as rt:
            return [await rt.request(text) for text in inputs]

    # in a thread of its own: the caller may be inside an event loop (Playwright's sync API runs one)
    box: list[list[goondan.TurnResult] | BaseException] = []

    def target() -> None:
        try:
            box.append(asyncio.run(main()))
        except BaseException as exc:
            box.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(120)
    assert box, "the run did not finish within 120 s"
    if isinstance(box[0], BaseException):
        raise box[0]
    results = box[0]
    for r in results:
        assert r.finish_reason == "text_response", r.error
    return results


def delegation_run(root: Path) -> tuple[Path, Path]:
    """``root/bundle`` after one real request (``hello``) into ``root/state``: (bundle, state root)."""
    bundle = delegation_bundle(root / "bundle")
    run_turns(bundle, root / "state", ["hello"])
    return bundle, root / "state"


@dataclass
class Studio:
    proc: subprocess.Popen[str]
    url: str


def studio_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("GOONDAN_STUDIO_TOKEN", None)
    env.pop("GOONDAN_STORE", None)
    return env


@contextmanager
def gdn_studio(*args: str, env: dict[str, str] | None = None) -> Iterator[Studio]:
    """``gdn studio ARGS --port 0`` until the block ends; yields its URL once it listens."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "goondan", "studio", *args, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env or studio_env(),
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("Studio: "):
            proc.wait(10)
            raise AssertionError(f"gdn studio did not start: {line!r} {proc.stderr.read() if proc.stderr else ''}")
        yield Studio(proc, line.split()[1])
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def wait_for(predicate: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(predicate) and predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


def big_state(state_root: Path, *, instances: int = 1000, messages: int = 10_000) -> tuple[str, str]:
    """A state root of ``instances`` small instances plus one (``big@long``) of ``messages``
    messages, written with the real store API; returns ``(workspace id, big instance key)``."""
    from goondan.messages import Message, assistant_message, tool_message, user_message
    from goondan.storage import FileStoreBackend, workspace_identity

    identity = workspace_identity(bundle_dir=state_root / "no-bundle", package="big-demo", swarm="default")
    ws = FileStoreBackend(state_root).workspace(identity.workspace_id, identity=identity)
    for i in range(instances):
        store = ws.instance("worker", f"user-{i:04d}")
        store.load()
        msgs = [user_message(f"hello {i}"), assistant_message(f"hi {i}")]
        store.commit(msgs, None)
        store.append_runtime_event(
            {
                "type": "turn.started",
                "turnId": f"t{i}",
                "traceId": f"{i:032x}",
                "spanId": f"{i:016x}",
                "timestamp": "2026-01-01T00:00:00.000Z",
                "agentName": "worker",
                "instanceKey": f"user-{i:04d}",
            }
        )
        store.write_metadata(agent_name="worker", instance_key=f"user-{i:04d}", status="idle")
        store.close()
    store = ws.instance("big", "long")
    store.load()
    history: list[Message] = []
    for n in range(messages // 4):
        call_id = f"call_{n}"
        history.append(user_message(f"question {n}: " + "lorem ipsum " * 8))
        history.append(
            assistant_message(
                [{"type": "tool-call", "toolCallId": call_id, "toolName": "calc__add", "input": {"a": n, "b": 1}}]
            )
        )
        history.append(tool_message(call_id, "calc__add", {"type": "json", "value": {"sum": n + 1}}))
        history.append(assistant_message(f"answer {n}"))
    store.commit(history, None)
    store.write_metadata(agent_name="big", instance_key="long", status="idle")
    store.close()
    ws.close()
    return identity.workspace_id, "long"
