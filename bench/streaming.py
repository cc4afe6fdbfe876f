"""Streaming overhead (issue 17, item 3). Run: ``python bench/streaming.py`` (``--quick``: fewer turns).

A loopback Anthropic Messages API (``tests/models/providers/fake_http.py``) streams every answer as
Server-Sent Events and pauses before the first text delta, so the client is idle, as it is while a
real model thinks. The server notes the moment it writes that first token (``perf_counter``, a
system-wide monotonic clock on Linux, comparable across processes); the listener notes the moment
the token arrives. Per turn one sample of "first token written -> first delta seen", for:

- ``sdk``: the official ``anthropic`` SDK alone, streaming in this process (the floor: loopback
  TCP, HTTP chunking and the SDK's SSE parsing, which every framework pays);
- ``inline``: ``Runtime(executor="inline")``, listener on ``Runtime.on_text_delta`` (provider
  adapter, engine, listener dispatch, all in this process);
- ``process``: ``Runtime(executor="process")``, the default: the model is called in the agent's
  own process and each delta crosses the IPC channel to the host, where ``Runtime.on_text_delta``
  sees it.
- ``webhook``: a real ``gdn run`` (agent processes, the default) with a ``webhook`` Connection in
  ``replyMode: stream``, and an httpx client in this process that POSTs each turn and notes when it
  reads the first ``event: delta`` line of the Server-Sent Events answer. The delta goes agent
  process -> ``gdn run`` -> connector process (the connector channel) -> HTTP chunk -> client.

Opt-in (``--variants sdk,connector`` ...): ``connector``, the connector's part of ``webhook`` alone: this
process plays ``gdn run``, writes a ``connector_delta`` record to a real connector host running the
webhook (``replyMode: stream``) after the same pause, and a client on a raw socket notes when it reads
the ``event: delta`` chunk. Its samples are that hop's own latency (compare them as they are, not
minus the SDK's).

Added latency = the variant's percentile minus the SDK's. The rounds alternate the variants (one
round = ``--block`` turns of each, in rotating order) so load on the machine hits them alike.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
KEY = "sk-ant-stream-bench"
THINK = 0.015  # seconds the fake model "thinks" before its first token


def _fake_http() -> Any:
    path = ROOT / "tests" / "models" / "providers" / "fake_http.py"
    spec = importlib.util.spec_from_file_location("goondan_bench_fake_http", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class Clock:
    """First-token write times (server side) and first-delta arrival times (listener side), per turn."""

    def __init__(self) -> None:
        self.written: list[float] = []
        self.seen: list[float] = []
        self.waiting = False

    def start_turn(self) -> None:
        self.waiting = True

    def delta(self) -> None:
        if self.waiting:
            self.seen.append(time.perf_counter())
            self.waiting = False

    def samples_us(self) -> list[float]:
        return [(s - w) * 1e6 for w, s in zip(self.written, self.seen, strict=True)]


def make_handler(fake: Any, clock: Clock) -> Callable[[Any], Any]:
    message = fake.anthropic_message([{"type": "text", "text": "Hello there, streaming world."}])
    events = fake.anthropic_stream(message)
    first = next(i for i, e in enumerate(events) if "text_delta" in e)

    def before(index: int) -> None:
        if index == first:
            clock.written.append(time.perf_counter())

    def handler(req: Any) -> Any:
        return fake.Reply(sse=events, pauses={first: THINK}, before_event=before)

    return handler


BUNDLE = """apiVersion: goondan.ai/v1
kind: Model
metadata: {{name: claude}}
spec:
  provider: anthropic
  model: claude-stream-bench
  endpoint: {endpoint}
  apiKey: {{valueFrom: {{env: BENCH_ANTHROPIC_KEY}}}}
---
apiVersion: goondan.ai/v1
kind: Agent
metadata: {{name: talker}}
spec:
  modelConfig: {{modelRef: Model/claude, params: {{maxTokens: 64}}}}
---
apiVersion: goondan.ai/v1
kind: Swarm
metadata: {{name: default}}
spec: {{entryAgent: Agent/talker, agents: [Agent/talker]}}
"""


class SdkVariant:
    name = "sdk"

    def __init__(self, url: str, clock: Clock) -> None:
        import anthropic

        self.clock = clock
        self.client = anthropic.AsyncAnthropic(api_key=KEY, base_url=url, max_retries=0)

    async def turn(self) -> None:
        self.clock.start_turn()
        stream = await self.client.messages.create(
            model="m", max_tokens=64, messages=[{"role": "user", "content": "hi"}], stream=True
        )
        async for event in stream:
            if event.type == "content_block_delta":
                self.clock.delta()

    async def close(self) -> None:
        await self.client.close()


class WebhookVariant:
    """``gdn run`` serving a streaming webhook; see the module docstring."""

    name = "webhook"

    def __init__(self, url: str, clock: Clock, tmp: Path) -> None:
        import socket
        import subprocess

        import httpx

        self.clock = clock
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        root = tmp / "webhook"
        root.mkdir()
        hook = (
            "---\napiVersion: goondan.ai/v1\nkind: Connection\nmetadata: {name: hook}\nspec:\n"
            '  connectorRef: {kind: Connector, name: webhook, package: "@goondan/base"}\n'
            f'  config: {{port: {{value: "{port}"}}, replyMode: {{value: stream}}}}\n'
        )
        (root / "goondan.yaml").write_text(BUNDLE.format(endpoint=url) + hook)
        env = {k: v for k, v in os.environ.items() if not k.endswith("_PROXY") and k != "GOONDAN_STATE_ROOT"}
        env.update({"BENCH_ANTHROPIC_KEY": KEY, "NO_COLOR": "1", "GOONDAN_ISOLATION": "process"})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "goondan", "run", str(root), "--state-root", str(tmp / "state-webhook"), "-q"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
        )
        self.url = f"http://127.0.0.1:{port}/"
        self.client = httpx.AsyncClient(timeout=30, trust_env=False)

    async def start(self) -> None:
        import httpx

        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                raise SystemExit(f"webhook: gdn run exited {self.proc.returncode}: {err}")
            try:
                await self.client.post(self.url + "ready-probe", json={})  # a 404 says it listens
                return
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise SystemExit("webhook: gdn run did not listen within 60 s") from None
                await asyncio.sleep(0.1)

    async def turn(self) -> None:
        self.clock.start_turn()
        done: Any = None
        async with self.client.stream("POST", self.url, json={"text": "hi", "instanceKey": "bench"}) as response:
            event = ""
            async for line in response.aiter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                    if event == "delta":
                        self.clock.delta()
                elif line.startswith("data: ") and event in ("done", "error"):
                    done = json.loads(line[6:])
        if not done or done.get("text") != "Hello there, streaming world.":
            raise SystemExit(f"webhook: unexpected end of the streamed reply {done!r}")

    async def close(self) -> None:
        import signal

        await self.client.aclose()
        self.proc.send_signal(signal.SIGINT)
        try:
            await asyncio.to_thread(self.proc.wait, 20)
        except Exception:
            self.proc.kill()


class ConnectorHopVariant:
    """The connector hop alone (see the module docstring): frame written -> SSE delta read."""

    name = "connector"

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.proc: Any = None
        self.conn: Any = None
        self.port = 0

    async def start(self) -> None:
        import socket
        import subprocess

        import goondan
        from goondan.executors.process._ipc import Connection, ConnectorStart, Ready, decode_record

        entry = Path(goondan.__file__).parent / "base" / "connectors" / "webhook.py"
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        mine, theirs = socket.socketpair()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "goondan.connectors.host", "--fd", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
        )
        theirs.close()
        reader, writer = await asyncio.open_unix_connection(sock=mine)
        self.conn = Connection(reader, writer)
        config = {"port": str(self.port), "replyMode": "stream"}
        self.conn.send_record(ConnectorStart(str(entry), "hook", "webhook", config, {}), "supervisor", "hook")
        while True:
            msg = await asyncio.wait_for(self.conn.recv(), 60)
            if msg is None:
                raise SystemExit("connector: the host exited during start")
            if isinstance(decode_record(msg), Ready):
                return

    async def _record(self, kind: type) -> Any:
        from goondan.executors.process._ipc import decode_record

        while True:
            msg = await asyncio.wait_for(self.conn.recv(), 30)
            if msg is None:
                raise SystemExit("connector: the host went away")
            record = decode_record(msg)
            if isinstance(record, kind):
                return record

    async def turn(self) -> None:
        import socket

        from goondan.executors.process._ipc import ConnectorDelta, ConnectorEvent, ConnectorReply

        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        body = b'{"text": "hi", "instanceKey": "bench"}'
        writer.write(b"POST / HTTP/1.1\r\nHost: b\r\nContent-Length: %d\r\n\r\n%b" % (len(body), body))
        event = await self._record(ConnectorEvent)
        got = b""
        while b"\r\n\r\n" not in got:  # the answer's head: the stream waits for text now
            got += await reader.read(65536)
        await asyncio.sleep(THINK)
        self.clock.start_turn()
        self.clock.written.append(time.perf_counter())
        self.conn.send_record(ConnectorDelta(event.id, "Hello", 0), "supervisor", "hook")
        got = b""
        while b"event: delta" not in got:
            got += await reader.read(65536)
        self.clock.delta()
        self.conn.send_record(ConnectorReply(event.id, "Hello", "text_response"), "supervisor", "hook")
        while b"event: done" not in got:
            chunk = await reader.read(65536)
            if not chunk:
                raise SystemExit("connector: the answer ended without its done event")
            got += chunk
        writer.close()

    async def close(self) -> None:
        from goondan.executors.process._ipc import Shutdown

        self.conn.send_record(Shutdown("shutdown", 3000), "supervisor", "hook")
        try:
            await asyncio.to_thread(self.proc.wait, 20)
        except Exception:
            self.proc.kill()
        self.conn.close()


class RuntimeVariant:
    def __init__(self, executor: str, url: str, clock: Clock, tmp: Path) -> None:
        import goondan

        self.name = executor
        self.clock = clock
        root = tmp / executor
        root.mkdir()
        (root / "goondan.yaml").write_text(BUNDLE.format(endpoint=url))
        self.rt = goondan.Runtime(
            root, state_root=tmp / f"state-{executor}", executor=executor, env={"BENCH_ANTHROPIC_KEY": KEY}
        )
        self.rt.on_text_delta(lambda event: clock.delta())

    async def turn(self) -> None:
        self.clock.start_turn()
        result = await self.rt.request("hi")
        if result.text != "Hello there, streaming world.":
            raise SystemExit(f"{self.name}: unexpected turn result {result!r}")

    async def close(self) -> None:
        await self.rt.close()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure(turns: int, block: int, warmup: int, variants: list[str]) -> dict[str, Any]:
    fake = _fake_http()
    clocks = {name: Clock() for name in variants}
    servers = {name: fake.FakeServer(make_handler(fake, clocks[name])) for name in variants}
    for server in servers.values():
        server.__enter__()
    runners: dict[str, Any] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for name in variants:
                url = servers[name].url
                if name == "sdk":
                    runners[name] = SdkVariant(url, clocks[name])
                elif name == "webhook":
                    runners[name] = WebhookVariant(url, clocks[name], Path(tmp))
                elif name == "connector":
                    runners[name] = ConnectorHopVariant(clocks[name])
                else:
                    runners[name] = RuntimeVariant(name, url, clocks[name], Path(tmp))
            for name, runner in runners.items():
                if isinstance(runner, RuntimeVariant):
                    await runner.rt.start()
                elif isinstance(runner, WebhookVariant | ConnectorHopVariant):
                    await runner.start()
                for _ in range(warmup):
                    await runner.turn()
                clocks[name].written.clear()
                clocks[name].seen.clear()
            rounds = max(1, turns // block)
            for r in range(rounds):
                order = variants[r % len(variants) :] + variants[: r % len(variants)]
                for name in order:
                    for _ in range(block):
                        await runners[name].turn()
            for runner in runners.values():
                await runner.close()
    finally:
        for server in servers.values():
            server.__exit__(None, None, None)
    out: dict[str, Any] = {}
    for name in variants:
        samples = clocks[name].samples_us()
        out[name] = {
            "samples": len(samples),
            "p50_us": statistics.median(samples),
            "p90_us": pct(samples, 0.90),
            "p99_us": pct(samples, 0.99),
            "min_us": min(samples),
        }
    return out


def render(res: dict[str, Any]) -> str:
    base = res.get("sdk")
    head = (
        f"{'first token -> first delta':<42}{'samples':>8}{'min µs':>8}{'p50 µs':>9}{'p90 µs':>9}{'p99 µs':>9}"
        f"{'+min µs':>9}{'+p50 µs':>9}{'+p90 µs':>9}"
    )
    lines = [head, "-" * len(head)]
    labels = {
        "sdk": "anthropic SDK alone (floor)",
        "inline": "Runtime.on_text_delta, inline",
        "process": "Runtime.on_text_delta, process (default)",
        "webhook": "webhook client (SSE), gdn run, process",
        "connector": "connector hop only: frame -> SSE delta",
    }
    for name, r in res.items():
        added = ["", "", ""]
        if base is not None and name not in ("sdk", "connector"):
            added = [f"{r[k] - base[k]:.0f}" for k in ("min_us", "p50_us", "p90_us")]
        lines.append(
            f"{labels.get(name, name):<42}{r['samples']:>8}{r['min_us']:>8.0f}{r['p50_us']:>9.0f}{r['p90_us']:>9.0f}"
            f"{r['p99_us']:>9.0f}{added[0]:>9}{added[1]:>9}{added[2]:>9}"
        )
    sdk = res.get("sdk")
    lines.append("")
    for name, what in (("process", "Runtime.on_text_delta"), ("webhook", "a webhook client")):
        run = res.get(name)
        if run and sdk:
            added50 = (run["p50_us"] - sdk["p50_us"]) / 1000
            verdict = "ok" if added50 <= 1 else "MISSED"
            lines.append(f"target: added p50 to {what} through process isolation <= 1 ms: {added50:.2f} ms  {verdict}")
    lines.append("p99 on a loaded machine is the scheduler's (a ready thread waiting for a core), not the code path's.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=400, help="timed turns per variant")
    parser.add_argument("--block", type=int, default=25)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="60 turns per variant")
    parser.add_argument("--variants", default="sdk,inline,process,webhook")
    args = parser.parse_args(argv)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if args.quick:
        args.turns, args.block, args.warmup = 60, 10, 3
    variants = [v for v in args.variants.split(",") if v]
    res = asyncio.run(measure(args.turns, args.block, args.warmup, variants))
    print(f"streaming: {args.turns} turns per variant, the model thinks {THINK * 1000:.0f} ms before its first token")
    print(render(res))
    print("BENCH-JSON " + json.dumps(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
