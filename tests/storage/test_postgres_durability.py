"""What the PostgreSQL store keeps when things fail: a writer SIGKILLed in the middle of a turn
leaves every emitted message event in the database (the next runtime replays them and answers the
interrupted tool call), and a server restarted under a running swarm makes turns fail with a clear
E_STORE_UNAVAILABLE while it is down and succeed after, losing nothing that was committed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
from storage_testkit import child_env

import goondan
import kit
from kit.postgres import PostgresServer

MODEL = """\
def generate(request):
    last = request.messages[-1]
    if last["role"] == "user" and last["content"] == "slow":
        return {"toolCalls": [{"id": "c-wait", "name": "t__wait", "args": {}}]}
    users = [m["content"] for m in request.messages if m["role"] == "user" and isinstance(m["content"], str)]
    return {"text": "saw: " + "|".join(users)}
"""

TOOL = """\
import time
from pathlib import Path


def wait(ctx, args):
    Path(__file__).with_name("started").write_text("1")
    time.sleep(120)
    return "never"


handlers = {"wait": wait}
"""

CHILD = """
import asyncio, sys
import goondan

async def main():
    async with goondan.Runtime(sys.argv[1], state_root=sys.argv[2], executor=sys.argv[3], store=sys.argv[4]) as rt:
        await rt.request("slow")

asyncio.run(main())
"""


def _bundle(root: Path) -> Path:
    return kit.write_bundle(
        root,
        kit.package_doc(),
        kit.python_model_doc(),
        kit.tool_doc("t", "./t.py", [kit.export("wait")]),
        kit.agent_doc("a", tools=["t"]),
        kit.swarm_doc(["a"]),
        files={"model.py": MODEL, "t.py": TOOL},
    )


def _rows(url: str, table: str) -> list[dict[str, Any]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(f"SELECT record::text FROM {table} ORDER BY seq").fetchall()
    return [json.loads(r[0]) for r in rows]


def test_a_writer_killed_mid_turn_leaves_every_emitted_event_and_the_next_runtime_continues(
    tmp_path: Path, state_root: Path, postgres_url: str
) -> None:
    bundle = _bundle(tmp_path / "b")
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(bundle), str(state_root), "process", postgres_url],
        env=child_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (bundle / "started").exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "the tool never started"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)  # the host and its agent process, mid-turn
        proc.wait(30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    events = _rows(postgres_url, "goondan_events")
    messages = [e["message"]["data"] for e in events if e["type"] == "append"]
    assert messages[0] == {"role": "user", "content": "slow"}
    assert messages[1]["role"] == "assistant" and "c-wait" in json.dumps(messages[1]), messages[1]
    assert _rows(postgres_url, "goondan_messages") == []  # the turn never committed

    async def main() -> Any:
        async with goondan.Runtime(bundle, state_root=state_root, executor="inline", store=postgres_url) as rt:
            return await rt.request("next")

    result = kit.run(main())
    assert result.text == "saw: slow|next", result.error
    base = [m["data"] for m in _rows(postgres_url, "goondan_messages")]
    interrupted = [m for m in base if m["role"] == "tool"]
    assert len(interrupted) == 1 and "E_TOOL_INTERRUPTED" in json.dumps(interrupted[0])
    assert _rows(postgres_url, "goondan_events") == []


COUNTING = "def generate(request):\n    return {'text': 'echo ' + request.messages[-1]['content']}\n"


def test_a_server_restarted_under_a_running_swarm_fails_turns_clearly_then_serves_them_again(
    tmp_path: Path, state_root: Path, postgres_url: str, postgres_server: PostgresServer
) -> None:
    root = kit.simple_bundle(tmp_path, files={"model.py": COUNTING})
    url = postgres_url + "?pool_timeout=2"

    async def main() -> list[Any]:
        async with goondan.Runtime(root, state_root=state_root, executor="process", store=url) as rt:
            out: list[Any] = [await rt.request("one")]
            postgres_server.stop()
            try:
                started = time.monotonic()
                try:
                    out.append(await rt.request("two"))
                except goondan.GoondanError as exc:
                    out.append(exc)
                out.append(time.monotonic() - started)
            finally:
                postgres_server.start()
            out.append(await rt.request("three"))
            out.append(await rt.request("four"))
        return out

    one, down, waited, three, four = kit.run(main())
    assert one.text == "echo one"
    code = down.code if isinstance(down, goondan.GoondanError) else (down.error or {}).get("code")
    assert code == "E_STORE_UNAVAILABLE", down
    assert waited < 30
    assert (three.text, four.text) == ("echo three", "echo four"), (three.error, four.error)
    texts = [m["data"]["content"] for m in _rows(postgres_url, "goondan_messages")]
    assert texts[:2] == ["one", "echo one"]  # committed before the restart: still there
    assert texts[-4:] == ["three", "echo three", "four", "echo four"]
