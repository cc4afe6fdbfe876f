"""Connector processes: the cli connector, user connectors, config/secrets delivery, start failures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from cn_testkit import connector_bundle, gdn_env, probes

USER_CONNECTION = """\
apiVersion: goondan.ai/v1
kind: Connector
metadata:
  name: custom
spec:
  entry: ./custom.py
  events:
    - name: ping
---
apiVersion: goondan.ai/v1
kind: Connection
metadata:
  name: mine
spec:
  connectorRef: Connector/custom
  config:
    greeting: { value: "hi" }
    fromEnv: { valueFrom: { env: CUSTOM_SETTING } }
  secrets:
    token: { valueFrom: { secretRef: { ref: Secret/custom, key: api-token } } }
"""

CUSTOM = """\
import json, os


async def run(ctx):
    out = {"config": ctx.config, "secrets": ctx.secrets, "replies": []}
    for message in ({"type": "text", "text": "t1"},
                    {"type": "image", "url": "http://img/1.png"},
                    {"type": "file", "url": "http://f/a.pdf", "name": "a.pdf"}):
        reply = await ctx.emit({"name": "ping", "message": message, "properties": {"n": 1, "flag": True},
                                "instanceKey": "custom:1"})
        out["replies"].append([reply.ok, reply.text])
    try:
        ctx.emit({"name": "ping", "message": {"type": "text", "text": "x"}})
    except ValueError as exc:
        out["invalid"] = str(exc)
    with open(os.environ["CUSTOM_OUT"], "w") as fh:
        json.dump(out, fh)
"""


def gdn(tmp_path: Path, *args: str, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "goondan", *args, "--state-root", str(tmp_path / "state")],
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=gdn_env(tmp_path, **env),
        timeout=60,
    )


def test_cli_connector_turns_stdin_lines_into_events_and_prints_replies(tmp_path: Path) -> None:
    conn = (
        "apiVersion: goondan.ai/v1\nkind: Connection\nmetadata:\n  name: term\nspec:\n"
        '  connectorRef: { kind: Connector, name: cli, package: "@goondan/base" }\n'
    )
    bundle = connector_bundle(tmp_path / "b", conn)
    lines = 'hello\n\n   \nworld\n{"text": "as json", "instanceKey": "k9", "properties": {"tier": 2}}\n'
    proc = gdn(tmp_path, "run", str(bundle), stdin=lines)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["echo: hello", "echo: world", "echo: as json"]
    records = probes(tmp_path / "probe.jsonl")
    assert [r["instanceKey"] for r in records] == ["cli:0", "cli:1", "k9"]
    assert records[2]["metadata"]["properties"] == {"tier": "2"}
    assert records[0]["metadata"]["event"] == "stdin_message"


def test_user_connector_gets_config_and_secrets_and_every_message_kind_reaches_the_agent(tmp_path: Path) -> None:
    bundle = connector_bundle(tmp_path / "b", USER_CONNECTION)
    (bundle / "custom.py").write_text(CUSTOM, encoding="utf-8")
    out = tmp_path / "custom.json"
    proc = gdn(
        tmp_path,
        "run",
        str(bundle),
        CUSTOM_OUT=str(out),
        CUSTOM_SETTING="from-env",
        GOONDAN_SECRET_CUSTOM_API_TOKEN="tok-1",
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert result["config"] == {"greeting": "hi", "fromEnv": "from-env"}
    assert result["secrets"] == {"token": "tok-1"}
    assert result["replies"] == [
        [True, "echo: t1"],
        [True, "echo: [image] http://img/1.png"],
        [True, "echo: [file:a.pdf] http://f/a.pdf"],
    ]
    assert "instanceKey" in result["invalid"]
    records = probes(tmp_path / "probe.jsonl")
    assert records[0]["metadata"] == {
        "connector": "custom",
        "connection": "mine",
        "event": "ping",
        "properties": {"n": "1", "flag": "true"},
    }


def test_connector_that_fails_at_start_makes_gdn_run_fail_with_its_message(tmp_path: Path) -> None:
    bundle = connector_bundle(tmp_path / "b", USER_CONNECTION)
    (bundle / "custom.py").write_text("async def run(ctx):\n    raise RuntimeError('port busy')\n")
    proc = gdn(tmp_path, "run", str(bundle), CUSTOM_SETTING="x", GOONDAN_SECRET_CUSTOM_API_TOKEN="t")
    assert proc.returncode == 1
    assert "[E_CONNECTOR_START]" in proc.stderr and "port busy" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_connector_without_async_run_is_reported_as_a_config_error(tmp_path: Path) -> None:
    bundle = connector_bundle(tmp_path / "b", USER_CONNECTION)
    (bundle / "custom.py").write_text("def run(ctx):\n    pass\n")
    proc = gdn(tmp_path, "run", str(bundle), CUSTOM_SETTING="x", GOONDAN_SECRET_CUSTOM_API_TOKEN="t")
    assert proc.returncode == 3  # a user module the runtime refuses at load: config (CONTRACT §9)
    assert "[E_CONNECTOR_LOAD]" in proc.stderr and "async def run(ctx)" in proc.stderr


def test_interactive_flag_chats_even_when_the_swarm_has_connections(tmp_path: Path) -> None:
    bundle = connector_bundle(tmp_path / "b", USER_CONNECTION)
    (bundle / "custom.py").write_text("async def run(ctx):\n    raise RuntimeError('must not start')\n")
    proc = gdn(
        tmp_path,
        "run",
        str(bundle),
        "--interactive",
        stdin="direct\n",
        CUSTOM_SETTING="x",
        GOONDAN_SECRET_CUSTOM_API_TOKEN="t",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "echo: direct\n"


CRASHY = """\
import os, signal


async def run(ctx):
    marker = os.environ["CRASH_MARKER"]
    if not os.path.exists(marker):
        open(marker, "w").close()
        ctx.ready()
        os.kill(os.getpid(), signal.SIGKILL)
    reply = await ctx.emit({"name": "ping", "message": {"type": "text", "text": "back"}, "instanceKey": "k"})
    with open(os.environ["CUSTOM_OUT"], "w") as fh:
        fh.write(reply.text)
"""


def test_a_connector_process_that_dies_is_started_again(tmp_path: Path) -> None:
    bundle = connector_bundle(tmp_path / "b", USER_CONNECTION)
    (bundle / "custom.py").write_text(CRASHY, encoding="utf-8")
    out = tmp_path / "out.txt"
    proc = gdn(
        tmp_path,
        "run",
        str(bundle),
        CUSTOM_OUT=str(out),
        CRASH_MARKER=str(tmp_path / "crashed"),
        CUSTOM_SETTING="x",
        GOONDAN_SECRET_CUSTOM_API_TOKEN="t",
    )
    assert proc.returncode == 0, proc.stderr
    assert "exited unexpectedly (code -9); restarting" in proc.stderr
    assert out.read_text() == "echo: back"


def test_user_connector_imports_helpers_beside_it_without_shadowing_installed_modules(tmp_path: Path) -> None:
    bundle = connector_bundle(tmp_path / "b", USER_CONNECTION)
    # a helper beside the connector, and a file named like a stdlib module that must not shadow it
    (bundle / "greeting.py").write_text("WORD = 'hello from a helper'\n", encoding="utf-8")
    (bundle / "json.py").write_text("raise RuntimeError('the bundle json.py shadowed the stdlib')\n")
    (bundle / "custom.py").write_text(
        "import json, os\nfrom greeting import WORD\nfrom .greeting import WORD as SAME\n\n\n"
        "async def run(ctx):\n"
        "    with open(os.environ['CUSTOM_OUT'], 'w') as fh:\n"
        "        json.dump({'word': WORD, 'same': SAME == WORD}, fh)\n",
        encoding="utf-8",
    )
    out = tmp_path / "custom.json"
    proc = gdn(
        tmp_path, "run", str(bundle), CUSTOM_OUT=str(out), CUSTOM_SETTING="x", GOONDAN_SECRET_CUSTOM_API_TOKEN="t"
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text()) == {"word": "hello from a helper", "same": True}


IN_CALLBACK = """\
import asyncio, json, os


async def run(ctx):
    stream = ctx.stream({"name": "ping", "message": "hi", "instanceKey": "k"})
    handled = []
    stream.write_through(lambda delta: handled.append([delta.text, asyncio.current_task() is None]) is None)

    async def consume():
        async for _ in stream:
            pass

    reader = asyncio.create_task(consume())
    await asyncio.sleep(0.05)  # the consumer waits for text now
    await ctx.emit({"name": "ping", "message": "parked", "instanceKey": "k"})
    await reader
    with open(os.environ["CUSTOM_OUT"], "w") as fh:
        json.dump(handled, fh)
"""


def test_a_delta_record_is_handled_in_the_connector_channels_read_callback(tmp_path: Path) -> None:
    """No task is woken between reading a delta off the channel and the stream's writer: the host
    hands each frame over where its bytes arrive (the writer runs outside any task)."""
    import asyncio
    import os
    import socket

    from goondan.connectors._protocol import HOST_MODULE, SUPERVISOR
    from goondan.executors.process._ipc import (
        ConnectorDelta,
        ConnectorEvent,
        ConnectorReply,
        ConnectorStart,
        FrameChannel,
        decode_record,
    )

    entry = tmp_path / "in_callback.py"
    entry.write_text(IN_CALLBACK)
    out = tmp_path / "out.json"

    async def main() -> int:
        mine, theirs = socket.socketpair()
        proc = subprocess.Popen(
            [sys.executable, "-m", HOST_MODULE, "--fd", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            env={**os.environ, "CUSTOM_OUT": str(out)},
        )
        theirs.close()
        conn = await FrameChannel.open(mine)
        conn.send_record(ConnectorStart(str(entry), "mine", "custom", {}, {}), SUPERVISOR, "mine")
        events: list[ConnectorEvent] = []
        while len(events) < 2:
            msg = await asyncio.wait_for(conn.recv(), 30)
            assert msg is not None
            record = decode_record(msg)
            if isinstance(record, ConnectorEvent):
                events.append(record)
        streamed, parked = events
        assert streamed.stream and not parked.stream
        conn.send_record(ConnectorDelta(streamed.id, "hello", 0), SUPERVISOR, "mine")
        conn.send_record(ConnectorReply(parked.id, "ok", "text_response"), SUPERVISOR, "mine")
        conn.send_record(ConnectorReply(streamed.id, "hello", "text_response"), SUPERVISOR, "mine")
        code = await asyncio.to_thread(proc.wait, 30)
        conn.close()
        return code

    assert asyncio.run(main()) == 0
    assert json.loads(out.read_text()) == [["hello", True]]
