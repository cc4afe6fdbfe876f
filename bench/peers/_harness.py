"""Measurement harness shared by every framework adapter (stdlib only: it runs inside each peer's venv).

An adapter module describes one framework and ends with ``harness.main(Adapter())``. The orchestrator
(``run.py``) runs the adapter with that framework's own interpreter in three fresh processes:

``import``  time to import the framework's agent entry point, each in a fresh interpreter;
``memory``  bytes per constructed agent (tracemalloc, N agents kept alive) and the RSS delta;
``durable`` per-turn CPU and wall time of the plain scenario (0 layers) with durable state, for the
            "durable turn" comparison of ``durable.py``;
``bench``   per-turn medians for 0 layers, for 3 pass-through layers at every level (the scenario), and
            for 30 layers at one level at a time (the per-layer cost: 30 so the difference stands well
            above the run-to-run noise of a millisecond turn), then turns per second for 100 concurrent
            conversations.

Every adapter runs the same scenario: one user message, the model asks for ``add(a=1, b=2)``, the tool
returns 3, the model answers ``"done"``: two model calls and one tool call per turn. Model and tool are
trivial Python, so a turn's wall time is framework time.

The timed configurations are interleaved (blocks of turns in rotating order) so slow drift of the
machine (frequency, other tenants) hits every configuration alike; the figure is the median of all
per-turn times of a configuration. Each turn is timed twice: wall clock (``perf_counter``) and CPU time
of the whole process, all threads (``process_time``). The CPU figure leaves out time spent waiting for
a core that other processes hold, so it stays comparable when frameworks run minutes apart on a shared
machine; it also leaves out waiting for the disk (fsync), which only the wall figure shows. When an
adapter's turns run partly in child processes (Goondan ``isolation="process"``), the CPU figure is that
of the whole process tree per block of turns, divided by the block's turns. The
garbage collector stays on (it is part of what users pay);
``gc.collect()`` runs before every block.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

LEVELS = ("turn", "model", "tool")
CALLS_PER_TURN = {"turn": 1, "model": 2, "tool": 1}  # wrapped calls of each level in one scenario turn
LAYERS = 3  # the scenario: 3 pass-through layers at every level
SLOPE_LAYERS = 30  # per-layer cost: N layers at one level, so the difference stands well above the noise

# Pass-through layers increment these counters only while probing (a one-turn check that the layers
# really run); timed runs use layers that do nothing but call through.
HITS: dict[str, int] = {"turn": 0, "model": 0, "tool": 0}
TOOL_CALLS = [0]


def tool_add(a: int, b: int) -> int:
    """The scenario's one tool."""
    TOOL_CALLS[0] += 1
    return a + b


class Runner(Protocol):
    async def turn(self, conv: int) -> None:
        """Run one turn of conversation ``conv``; raise if the outcome is not the scripted one."""

    async def close(self) -> None: ...


class Unavailable(Exception):
    """A variant that cannot run here (reported as n/a with the reason)."""


@dataclass
class Adapter:
    """What a framework adapter provides. Subclasses fill the fields and implement the methods."""

    name: str = ""
    package: str = ""  # distribution name, for the version
    import_stmt: str = ""  # the framework's agent entry point
    levels: dict[str, str] = field(default_factory=dict)  # level -> how the pass-through layer is built
    fake_model: str = ""  # how the scripted model is plugged in
    notes: str = ""
    tree_cpu: bool = False  # True when turns run partly in child processes: CPU is read for the whole tree

    async def make(self, layers: dict[str, int], probe: bool = False) -> Runner:
        raise NotImplementedError

    async def new_agent(self) -> Any:
        """Construct one agent (0 layers), as a user would for one more agent; returned to keep it alive."""
        raise NotImplementedError

    def read_probe(self) -> tuple[int, dict[str, int]]:
        """Tool calls and layer hits counted so far (in this process; an adapter whose work runs in other
        processes counts elsewhere and overrides this)."""
        return TOOL_CALLS[0], dict(HITS)

    def version(self) -> str:
        from importlib.metadata import version

        return version(self.package)


def idle_config() -> str:
    """How this machine's CPUs idle, for the figures' header: a process-isolated turn wakes a process
    on another CPU twice per turn, and on a virtual machine whose idle vCPUs halt at once (no guest
    halt polling) each such wake costs an inter-processor interrupt plus cold caches, which roughly
    doubles what the woken side spends (see bench/README.md, "Where a default-mode turn goes")."""
    base = "/sys/devices/system/cpu/cpuidle"
    try:
        with open(f"{base}/current_driver") as f:
            driver = f.read().strip()
    except OSError:
        return "cpuidle n/a"
    try:
        with open("/sys/module/haltpoll/parameters/guest_halt_poll_ns") as f:
            return f"cpuidle {driver}, guest halt poll {int(f.read())} ns"
    except (OSError, ValueError):
        return f"cpuidle {driver}"


def descendants() -> list[int]:
    """Live descendant pids of this process (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out: list[int] = []
    todo = list(children.get(os.getpid(), ()))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def _pid_cpu_ns(pid: int) -> int:
    total = 0
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
    except (OSError, ValueError):
        pass
    return total


class TreeCpu:
    """CPU seconds of this process plus the given descendants, every thread (Linux schedstat, ns).

    ``start()`` reads the children first and this process last, ``stop()`` this process first, so the
    reading itself is (almost) outside the measured interval."""

    def __init__(self) -> None:
        self.pids = descendants()

    def start(self) -> float:
        return (sum(_pid_cpu_ns(p) for p in self.pids) + time.process_time_ns()) / 1e9

    def stop(self) -> float:
        own = time.process_time_ns()
        return (own + sum(_pid_cpu_ns(p) for p in self.pids)) / 1e9


# --- bench ---------------------------------------------------------------------------------------


async def _check(adapter: Adapter, layers: dict[str, int]) -> None:
    """One probed turn: the scripted outcome happened and every layer ran once per wrapped call."""
    runner = await adapter.make(layers, probe=True)
    try:
        tools0, hits0 = adapter.read_probe()
        await runner.turn(0)
        tools1, hits1 = adapter.read_probe()
    finally:
        await runner.close()
    if tools1 - tools0 != 1:
        raise AssertionError(f"{adapter.name}: tool ran {tools1 - tools0} times in one turn, expected 1")
    for level in LEVELS:
        want = layers.get(level, 0) * CALLS_PER_TURN[level]
        got = hits1.get(level, 0) - hits0.get(level, 0)
        if got != want:
            raise AssertionError(f"{adapter.name}: {level} layers ran {got} times, expected {want}")


def configs(adapter: Adapter, slope: int) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {"0": {}}
    for level in LEVELS:
        if level in adapter.levels:
            out[level] = {level: slope}
    out["all"] = {level: LAYERS for level in LEVELS if level in adapter.levels}
    return out


async def bench_turns(adapter: Adapter, turns: int, warmup: int, block: int, slope: int) -> dict[str, Any]:
    cfgs = configs(adapter, slope)
    for layers in cfgs.values():
        await _check(adapter, layers)
    runners = {key: await adapter.make(layers) for key, layers in cfgs.items()}
    times: dict[str, list[float]] = {key: [] for key in cfgs}
    cpu: dict[str, list[float]] = {key: [] for key in cfgs}
    try:
        for runner in runners.values():
            for _ in range(warmup):
                await runner.turn(0)
        keys = list(runners)
        rounds = max(1, turns // block)
        for r in range(rounds):
            order = keys[r % len(keys) :] + keys[: r % len(keys)]
            for key in order:
                runner = runners[key]
                sink, csink = times[key], cpu[key]
                gc.collect()
                if adapter.tree_cpu:  # work in child processes: CPU of the process tree per block
                    tree = TreeCpu()
                    b0 = tree.start()
                    for _ in range(block):
                        t0 = time.perf_counter()
                        await runner.turn(0)
                        sink.append(time.perf_counter() - t0)
                    csink.extend([(tree.stop() - b0) / block] * block)
                    continue
                for _ in range(block):
                    c0 = time.process_time()
                    t0 = time.perf_counter()
                    await runner.turn(0)
                    t1 = time.perf_counter()
                    csink.append(time.process_time() - c0)
                    sink.append(t1 - t0)
    finally:
        for runner in runners.values():
            await runner.close()
    med = {key: statistics.median(v) * 1e6 for key, v in times.items()}
    cmed = {key: statistics.median(v) * 1e6 for key, v in cpu.items()}

    def per_layer(m: dict[str, float]) -> dict[str, float]:
        return {lv: (m[lv] - m["0"]) / (slope * CALLS_PER_TURN[lv]) for lv in LEVELS if lv in m}

    return {
        "turn_us": med["0"],
        "turn_3layers_us": med["all"],
        "per_layer_us": per_layer(med),
        "medians_us": med,
        "turn_cpu_us": cmed["0"],
        "turn_3layers_cpu_us": cmed["all"],
        "per_layer_cpu_us": per_layer(cmed),
        "medians_cpu_us": cmed,
        "turns_per_config": {k: len(v) for k, v in times.items()},
        "slope_layers": slope,
    }


async def bench_concurrency(adapter: Adapter, convs: int, turns_per_conv: int, repeats: int) -> dict[str, Any]:
    runner = await adapter.make({})
    try:

        async def conversation(c: int) -> None:
            for _ in range(turns_per_conv):
                await runner.turn(c)

        async def once() -> tuple[float, float]:
            gc.collect()
            tree = TreeCpu() if adapter.tree_cpu else None
            c0 = tree.start() if tree else time.process_time()
            t0 = time.perf_counter()
            await asyncio.gather(*(conversation(c) for c in range(convs)))
            t1 = time.perf_counter()
            return t1 - t0, (tree.stop() if tree else time.process_time()) - c0

        await once()  # warm-up: per-conversation state is created here, not timed
        runs = [await once() for _ in range(repeats)]
    finally:
        await runner.close()
    n = convs * turns_per_conv
    return {
        "turns_per_s": n / statistics.median(w for w, _ in runs),
        "turns_per_cpu_s": n / statistics.median(c for _, c in runs),
        "convs": convs,
        "turns_per_conv": turns_per_conv,
    }


async def bench_durable(adapter: Adapter, turns: int, warmup: int, block: int) -> dict[str, Any]:
    """The plain scenario (no layers) timed alone, for adapters that keep durable state: median CPU
    (process tree when turns run in child processes, per block) and wall time per turn."""
    await _check(adapter, {})
    runner = await adapter.make({})
    walls: list[float] = []
    cpus: list[float] = []
    try:
        for _ in range(warmup):
            await runner.turn(0)
        for _ in range(max(1, turns // block)):
            gc.collect()
            tree = TreeCpu() if adapter.tree_cpu else None
            c0 = tree.start() if tree else time.process_time()
            for _ in range(block):
                t0 = time.perf_counter()
                await runner.turn(0)
                walls.append(time.perf_counter() - t0)
            cpus.append(((tree.stop() if tree else time.process_time()) - c0) / block)
    finally:
        await runner.close()
    return {
        "durable_turn_us": statistics.median(walls) * 1e6,
        "durable_turn_cpu_us": statistics.median(cpus) * 1e6,
        "durable_turns": len(walls),
        "durable_block": block,
    }


# --- memory --------------------------------------------------------------------------------------


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def bench_memory(adapter: Adapter, n: int) -> dict[str, Any]:
    keep = [await adapter.new_agent()]  # warm: lazy imports and caches are not per-agent cost
    runner = await adapter.make({})
    await runner.turn(0)
    gc.collect()
    rss0 = _rss_bytes()
    tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()
    for _ in range(n):
        keep.append(await adapter.new_agent())
    gc.collect()
    current, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss1 = _rss_bytes()
    await runner.close()
    return {"bytes_per_agent": (current - base) / n, "rss_bytes_per_agent": (rss1 - rss0) / n, "agents": n}


# --- import --------------------------------------------------------------------------------------


def bench_import(adapter: Adapter, runs: int) -> dict[str, Any]:
    """Median over fresh interpreters of the wall and CPU time of the entry point's import statement."""
    code = (
        "import time\nt0, c0 = time.perf_counter(), time.process_time()\n"
        + adapter.import_stmt
        + "\nprint(time.perf_counter() - t0, time.process_time() - c0)"
    )
    # Bytecode caching on (whatever the caller's PYTHONDONTWRITEBYTECODE): the uncounted first run writes
    # the .pyc files, as any installed package has them, so the timed runs measure imports, not compiles.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    walls, cpus = [], []
    for i in range(runs + 1):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
        if i:  # the first run may compile .pyc files: not counted
            wall, cpu = out.stdout.strip().splitlines()[-1].split()
            walls.append(float(wall))
            cpus.append(float(cpu))
    return {
        "import_ms": statistics.median(walls) * 1e3,
        "import_cpu_ms": statistics.median(cpus) * 1e3,
        "import_stmt": adapter.import_stmt,
    }


# --- entry ---------------------------------------------------------------------------------------


def main(adapter: Adapter, extra_args: Callable[[argparse.ArgumentParser], None] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["info", "import", "memory", "bench", "durable"])
    parser.add_argument("--turns", type=int, default=2000, help="timed turns per configuration")
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--block", type=int, default=50, help="turns per interleaved block")
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--slope-layers", type=int, default=SLOPE_LAYERS, help="layers used for the per-layer cost")
    parser.add_argument("--convs", type=int, default=100)
    parser.add_argument("--turns-per-conv", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--import-runs", type=int, default=7)
    if extra_args:
        extra_args(parser)
    args = parser.parse_args()
    if hasattr(adapter, "configure"):
        adapter.configure(args)
    out: dict[str, Any] = {
        "name": adapter.name,
        "version": adapter.version(),
        "python": sys.version.split()[0],
        "levels": adapter.levels,
        "fake_model": adapter.fake_model,
        "notes": adapter.notes,
    }
    try:
        if args.mode == "import":
            out.update(bench_import(adapter, args.import_runs))
        elif args.mode == "durable":
            out.update(asyncio.run(_guard(bench_durable(adapter, args.turns, args.warmup, args.block))))
        elif args.mode == "memory":
            out.update(asyncio.run(_guard(bench_memory(adapter, args.agents))))
        elif args.mode == "bench":

            async def both() -> dict[str, Any]:
                res = await bench_turns(adapter, args.turns, args.warmup, args.block, args.slope_layers)
                res.update(await bench_concurrency(adapter, args.convs, args.turns_per_conv, args.repeats))
                return res

            out.update(asyncio.run(_guard(both())))
    except Unavailable as exc:
        out["unavailable"] = str(exc)
    out["maxrss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print("BENCH-JSON " + json.dumps(out))


async def _guard(coro: Awaitable[dict[str, Any]]) -> dict[str, Any]:
    return await coro


async def atool_add(a: int, b: int) -> int:
    """The scenario's tool as a coroutine: every peer runs async tools inline (sync ones may go to a thread)."""
    TOOL_CALLS[0] += 1
    return a + b
