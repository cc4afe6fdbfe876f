"""Swarm runtime benchmark (issue #3 targets). Run: ``python bench/swarm.py`` (``--quick`` for a
short run).

Measures, with ``isolation="process"`` (one OS process per agent instance, forked from the
pre-warmed fork server):

  (a) inter-agent request round trip through the orchestrator with a trivial callee, p50/p99, next
      to the same call inline (same process), whose difference is what process isolation adds;
  (b) new-instance spawn latency: fork → instance started (ready), and → first turn answered;
  (c) memory per idle instance (RSS, and PSS/USS: RSS counts the pages every fork shares);
  (d) memory with 1,000 live instances (sum of PSS over host, fork server and agents);
  (e) 10,000 conversations served with idle eviction (ttlSeconds), history kept on disk.

Every model and tool is a trivial Python function, so the figures are runtime time. Not a test:
nothing fails on these numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import goondan

PARTS = ("roundtrip", "spawn", "memory", "memory-openai", "conversations")

MODEL = """
import json
def generate(request):
    last = request.messages[-1]
    if last["role"] == "tool":
        return {"text": "done"}
    if request.agent_name == "caller" and isinstance(last["content"], str) and last["content"].startswith("loop "):
        _, n, path = last["content"].split(" ", 2)
        return {"toolCalls": [{"name": "bench__loop", "args": {"n": int(n), "path": path}}]}
    return {"text": "ok"}
"""

TOOL = """
import json
import time


async def loop(ctx, args):
    times = []
    for _ in range(args["n"]):
        t0 = time.perf_counter()
        await ctx.runtime.request("callee", "ping")
        times.append(time.perf_counter() - t0)
    with open(args["path"], "w") as fh:
        json.dump(times, fh)
    return len(times)


handlers = {"loop": loop}
"""

BUNDLE = """\
apiVersion: goondan.ai/v1
kind: Package
metadata: {{name: swarm-bench}}
spec: {{version: 0.1.0}}
---
apiVersion: goondan.ai/v1
kind: Model
metadata: {{name: m}}
spec: {{provider: python, model: fake, options: {{entry: ./model.py}}}}
---
apiVersion: goondan.ai/v1
kind: Tool
metadata: {{name: bench}}
spec:
  entry: ./tool.py
  exports:
    - name: loop
      description: loop
      parameters: {{type: object, properties: {{n: {{type: integer}}, path: {{type: string}}}}}}
---
apiVersion: goondan.ai/v1
kind: Agent
metadata: {{name: caller}}
spec: {{modelConfig: {{modelRef: Model/m}}, tools: [Tool/bench]}}
---
apiVersion: goondan.ai/v1
kind: Agent
metadata: {{name: callee}}
spec: {{modelConfig: {{modelRef: Model/m}}}}
---
apiVersion: goondan.ai/v1
kind: Swarm
metadata: {{name: bench}}
spec:
  entryAgent: Agent/caller
  agents: [Agent/caller, Agent/callee]
{policy}
"""


OPENAI_MODEL = """\
apiVersion: goondan.ai/v1
kind: Model
metadata: {{name: m}}
spec: {{provider: openai, model: fake, endpoint: "http://127.0.0.1:{port}/v1", apiKey: {{value: sk-bench}}}}
"""


def make_bundle(root: Path, ttl_seconds: int | None = None, openai_port: int | None = None) -> Path:
    """The bench bundle; with ``openai_port`` its model is the ``openai`` provider (the real SDK) talking
    to the fake OpenAI server on that port, so the memory figures include what a provider SDK costs."""
    root.mkdir(parents=True, exist_ok=True)
    policy = f"  policy: {{lifecycle: {{ttlSeconds: {ttl_seconds}}}}}" if ttl_seconds is not None else ""
    text = BUNDLE.format(policy=policy)
    if openai_port is not None:
        head, _, rest = text.partition("kind: Model")
        _, _, rest = rest.partition("---")
        text = head.rsplit("apiVersion", 1)[0] + OPENAI_MODEL.format(port=openai_port) + "---" + rest
    (root / "goondan.yaml").write_text(text, encoding="utf-8")
    (root / "model.py").write_text(MODEL, encoding="utf-8")
    (root / "tool.py").write_text(TOOL, encoding="utf-8")
    return root


async def fake_openai() -> tuple[asyncio.AbstractServer, int]:
    """A minimal OpenAI chat-completions server on 127.0.0.1 that answers every request with "ok"."""
    import json

    answer = {
        "id": "c",
        "object": "chat.completion",
        "created": 1,
        "model": "fake",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
    chunk = {**answer, "object": "chat.completion.chunk"}
    chunk["choices"] = [{"index": 0, "delta": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                body = json.loads(await reader.readexactly(length) or b"{}")
                if body.get("stream"):
                    payload = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()
                    kind = b"text/event-stream"
                else:
                    payload, kind = json.dumps(answer).encode(), b"application/json"
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: "
                    + kind
                    + b"\r\ncontent-length: "
                    + str(len(payload)).encode()
                    + b"\r\n\r\n"
                    + payload
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def smaps(pid: int) -> dict[str, int]:
    """kB figures of /proc/<pid>/smaps_rollup (Rss, Pss, Private_*)."""
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="utf-8") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) >= 2 and parts[0].endswith(":") and parts[1].isdigit():
                    out[parts[0][:-1]] = int(parts[1])
    except OSError:
        pass
    return out


def smaps_by_mapping(pid: int) -> dict[str, dict[str, int]]:
    """kB of Pss and Private_* per kind of mapping in /proc/<pid>/smaps: the malloc heap, anonymous
    memory (pymalloc arenas, thread stacks, mmap'd buffers), the interpreter, other shared libraries,
    the stack and the rest."""
    out: dict[str, dict[str, int]] = {}
    kind = "other"
    try:
        with open(f"/proc/{pid}/smaps", encoding="utf-8") as fh:
            for line in fh:
                parts = line.split()
                if not parts:
                    continue
                head = parts[0]
                if "-" in head and not head.endswith(":"):
                    name = parts[5] if len(parts) > 5 else ""
                    if name == "[heap]":
                        kind = "malloc heap"
                    elif not name:
                        kind = "anonymous"
                    elif "libpython" in name or os.path.basename(name).startswith("python"):
                        kind = "interpreter"
                    elif name.startswith("["):
                        kind = name
                    elif ".so" in name:
                        kind = "other libraries"
                    else:
                        kind = "files"
                    continue
                if head in ("Pss:", "Private_Clean:", "Private_Dirty:", "Rss:"):
                    slot = out.setdefault(kind, {})
                    slot[head[:-1]] = slot.get(head[:-1], 0) + int(parts[1])
    except OSError:
        pass
    return out


def print_breakdown(rows: dict[str, dict[str, float]]) -> None:
    print("    where an idle agent's memory is (avg kB per process; USS = private pages)")
    print(f"    {'mapping':<18}{'RSS':>9}{'PSS':>9}{'USS':>9}")
    for kind, m in sorted(rows.items(), key=lambda kv: -kv[1].get("USS", 0)):
        print(f"    {kind:<18}{m.get('Rss', 0):9.0f}{m.get('Pss', 0):9.0f}{m.get('USS', 0):9.0f}")


def uss(m: dict[str, int]) -> int:
    return m.get("Private_Clean", 0) + m.get("Private_Dirty", 0)


async def round_trip(tmp: Path, isolation: str, calls: int) -> list[float]:
    root = make_bundle(tmp / f"rt-{isolation}")
    out = tmp / f"rt-{isolation}.json"
    async with goondan.Runtime(
        root, state_root=tmp / f"state-rt-{isolation}", isolation=isolation, persist=False
    ) as rt:
        await rt.request(f"loop 50 {out}")  # warm-up: both instances started, code paths hot
        await rt.request(f"loop {calls} {out}")
    import json

    return [t * 1e6 for t in json.loads(out.read_text())]


async def spawn_latency(tmp: Path, count: int, persist: bool) -> tuple[list[float], list[float]]:
    root = make_bundle(tmp / f"spawn-{persist}")
    ready: list[float] = []
    first: list[float] = []
    async with goondan.Runtime(
        root, state_root=tmp / f"state-spawn-{persist}", isolation="process", persist=persist
    ) as rt:
        orch = rt.orchestrator
        await rt.request("warm", agent="callee", instance_key="warm")
        for i in range(count):
            key = f"s{i}"
            t0 = time.perf_counter()
            fut = orch.submit(
                "callee",
                key,
                rt._event(
                    "hi", event_type="message", instance_key=key, metadata=None, trace_id=None, source=None, auth=None
                ),
            )
            handle = orch.handles[("callee", key)]
            assert handle.ready is not None
            await handle.ready
            t1 = time.perf_counter()
            await fut
            t2 = time.perf_counter()
            ready.append((t1 - t0) * 1000)
            first.append((t2 - t0) * 1000)
    return ready, first


async def memory(tmp: Path, count: int, breakdown: bool = False, openai_port: int | None = None) -> dict[str, Any]:
    name = f"mem-{count}-{'openai' if openai_port else 'python'}"
    root = make_bundle(tmp / name, openai_port=openai_port)
    async with goondan.Runtime(root, state_root=tmp / f"state-{name}", isolation="process", persist=False) as rt:
        t0 = time.perf_counter()
        batch = 100
        for start in range(0, count, batch):
            await asyncio.gather(
                *(
                    rt.request("hi", agent="callee", instance_key=f"m{i}")
                    for i in range(start, min(count, start + batch))
                )
            )
        elapsed = time.perf_counter() - t0
        orch = rt.orchestrator
        pids = [h.pid for h in orch.handles.values() if h.pid is not None]
        agents = [smaps(pid) for pid in pids]
        host = smaps(os.getpid())
        server = smaps(orch.spawner.pid)
        rows: dict[str, dict[str, float]] = {}
        if breakdown:
            per = [smaps_by_mapping(pid) for pid in pids]
            for kinds in per:
                for kind, m in kinds.items():
                    slot = rows.setdefault(kind, {})
                    slot["Rss"] = slot.get("Rss", 0) + m.get("Rss", 0) / len(per)
                    slot["Pss"] = slot.get("Pss", 0) + m.get("Pss", 0) / len(per)
                    slot["USS"] = slot.get("USS", 0) + uss(m) / len(per)
        return {
            "breakdown": rows,
            "live": len(pids),
            "spawn_s": elapsed,
            "rss_kb": statistics.mean(m.get("Rss", 0) for m in agents),
            "pss_kb": statistics.mean(m.get("Pss", 0) for m in agents),
            "uss_kb": statistics.mean(uss(m) for m in agents),
            "total_pss_kb": sum(m.get("Pss", 0) for m in agents) + host.get("Pss", 0) + server.get("Pss", 0),
            "total_rss_kb": sum(m.get("Rss", 0) for m in agents),
            "host_pss_kb": host.get("Pss", 0),
            "server_pss_kb": server.get("Pss", 0),
        }


async def conversations(tmp: Path, count: int, concurrency: int) -> dict[str, Any]:
    root = make_bundle(tmp / "conv", ttl_seconds=1)
    state = tmp / "state-conv"
    peak_live = 0
    peak_pss = 0
    async with goondan.Runtime(root, state_root=state, isolation="process", reconcile_interval_ms=250) as rt:
        orch = rt.orchestrator
        sem = asyncio.Semaphore(concurrency)
        done = 0
        failures = 0

        async def one(i: int) -> None:
            nonlocal done, failures
            async with sem:
                result = await rt.request(f"conversation {i}", agent="callee", instance_key=f"c{i}")
                if result.text != "ok":
                    failures += 1
                done += 1

        async def sample() -> None:
            nonlocal peak_live, peak_pss
            while True:
                pids = [h.pid for h in orch.handles.values() if h.pid is not None]
                peak_live = max(peak_live, len(pids))
                if len(pids) >= peak_live:
                    peak_pss = max(peak_pss, sum(smaps(p).get("Pss", 0) for p in pids))
                await asyncio.sleep(0.5)

        sampler = asyncio.ensure_future(sample())
        t0 = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(count)))
        elapsed = time.perf_counter() - t0
        sampler.cancel()
        await asyncio.sleep(2.5)  # let the last ones pass their TTL
        await orch.reconcile()
        await asyncio.sleep(1.0)
        live_after = sum(1 for h in orch.handles.values() if h.pid is not None)
        stored = len(list((state / "workspaces").glob("*/instances/*/messages/base.jsonl")))
    return {
        "count": count,
        "elapsed_s": elapsed,
        "failures": failures,
        "peak_live": peak_live,
        "peak_pss_mb": peak_pss / 1024,
        "live_after": live_after,
        "stored": stored,
    }


async def main(args: argparse.Namespace) -> None:
    try:
        import resource

        _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ImportError, ValueError, OSError):
        pass
    quick = args.quick
    parts = set(args.only or PARTS)
    print(f"goondan swarm bench | Python {platform.python_version()} | {platform.machine()} | {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory(prefix="goondan-swarm-bench-") as tmpdir:
        tmp = Path(tmpdir)
        if "roundtrip" in parts:
            calls = 300 if quick else 2000
            inline = await round_trip(tmp, "inline", calls)
            process = await round_trip(tmp, "process", calls)
            print(f"\n(a) inter-agent request round trip, trivial callee, {calls} calls")
            print(f"    inline   p50 {pct(inline, 50):7.0f} µs   p99 {pct(inline, 99):7.0f} µs")
            print(f"    process  p50 {pct(process, 50):7.0f} µs   p99 {pct(process, 99):7.0f} µs")
            overhead = pct(process, 50) - pct(inline, 50)
            print(f"    process isolation adds {overhead:.0f} µs at p50 (target: runtime overhead < 1000 µs)")

        if "spawn" in parts:
            n = 30 if quick else 100
            ready, first = await spawn_latency(tmp, n, persist=False)
            ready_p, first_p = await spawn_latency(tmp, n, persist=True)
            print(f"\n(b) new-instance spawn latency, {n} new instances one after another (target < 50 ms)")
            print(
                f"    persist=False  ready p50 {pct(ready, 50):5.1f} ms p99 {pct(ready, 99):5.1f} ms | "
                f"first turn answered p50 {pct(first, 50):5.1f} ms p99 {pct(first, 99):5.1f} ms"
            )
            print(
                f"    persist=True   ready p50 {pct(ready_p, 50):5.1f} ms p99 {pct(ready_p, 99):5.1f} ms | "
                f"first turn answered p50 {pct(first_p, 50):5.1f} ms p99 {pct(first_p, 99):5.1f} ms"
            )

        if "memory" in parts:
            small = await memory(tmp, 100, breakdown=args.breakdown)
            print("\n(c) memory per idle instance (100 live, after one turn each)")
            print(
                f"    RSS {small['rss_kb'] / 1024:.1f} MiB   PSS {small['pss_kb'] / 1024:.2f} MiB   "
                f"USS {small['uss_kb'] / 1024:.2f} MiB"
            )
            if args.breakdown:
                print_breakdown(small["breakdown"])
            big_n = args.live or (300 if quick else 1000)
            big = await memory(tmp, big_n)
            print(f"\n(d) {big['live']} live instances (spawned in {big['spawn_s']:.1f} s)")
            print(
                f"    total PSS {big['total_pss_kb'] / 1024 / 1024:.2f} GiB (host {big['host_pss_kb'] / 1024:.0f} MiB, "
                f"fork server {big['server_pss_kb'] / 1024:.0f} MiB; agents avg PSS {big['pss_kb'] / 1024:.2f} MiB, "
                f"USS {big['uss_kb'] / 1024:.2f} MiB)   target < 8 GiB"
            )
            print(f"    (sum of RSS {big['total_rss_kb'] / 1024 / 1024:.1f} GiB counts shared pages once per process)")

        if "memory-openai" in parts:
            server, port = await fake_openai()
            async with server:
                sdk = await memory(tmp, 100, breakdown=args.breakdown, openai_port=port)
            print("\n(c') memory per idle instance of an openai-provider agent (100 live, one turn each, local server)")
            print(
                f"    RSS {sdk['rss_kb'] / 1024:.1f} MiB   PSS {sdk['pss_kb'] / 1024:.2f} MiB   "
                f"USS {sdk['uss_kb'] / 1024:.2f} MiB   (fork server PSS {sdk['server_pss_kb'] / 1024:.0f} MiB)"
            )
            if args.breakdown:
                print_breakdown(sdk["breakdown"])

        if "conversations" in parts:
            conv_n = 1000 if quick else 10000
            conv = await conversations(tmp, conv_n, concurrency=50)
            print(
                f"\n(e) {conv['count']} conversations, 50 at a time, ttlSeconds=1, reconcile every 250 ms, persist on"
            )
            print(
                f"    served in {conv['elapsed_s']:.1f} s ({conv['count'] / conv['elapsed_s']:.0f}/s), "
                f"failures {conv['failures']}, "
                f"peak live processes {conv['peak_live']}, peak agents PSS {conv['peak_pss_mb']:.0f} MiB"
            )
            print(
                f"    after idle TTL: {conv['live_after']} live processes; {conv['stored']} conversations kept on disk"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller counts (about a minute)")
    parser.add_argument(
        "--only", action="append", choices=PARTS, help="run only this part (repeatable): " + ", ".join(PARTS)
    )
    parser.add_argument("--live", type=int, default=0, help="live instances for (d) (default 1000, --quick 300)")
    parser.add_argument(
        "--breakdown", action="store_true", help="(c): where an idle agent's private memory is, by mapping, from smaps"
    )
    asyncio.run(main(parser.parse_args()))
