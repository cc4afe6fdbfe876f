"""Where a process-isolated turn's CPU goes: the host's share and the agent process's share.

Run: ``.venv/bin/python bench/process_turn.py`` (``--persist on`` for the default mode, ``--src DIR``
to measure another source tree, e.g. ``git archive`` of a base commit, for an A/B).

The peers scenario (``bench/peers``: two model calls, one tool call) through ``Runtime.request``
with ``isolation="process"``: after a warm-up, blocks of ``--block`` turns of one conversation; per
block the CPU of this process (``process_time``) and of the agent process (``/proc/<pid>/task/*/
schedstat``, nanoseconds) divided by the turns. Medians over the blocks. The peers bench reports the
sum only; this splits it, which is what tells a host-side change from an agent-side one. On a
loaded machine, compare A and B interleaved (several runs each, alternating) before believing a
difference under 15%.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _cpu_ns(pid: int) -> int:
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
            total += int(f.read().split()[0])
    return total


async def measure(persist: bool, turns: int, block: int, warmup: int) -> dict[str, float]:
    import goondan

    sys.path.insert(0, str(HERE / "peers"))
    sys.path.insert(0, str(HERE / "peers" / "frameworks"))
    import _harness
    from goondan_ import write_bundle

    tmp = tempfile.mkdtemp(prefix="gdn-process-turn-")
    try:
        bundle = write_bundle(Path(tmp) / "bundle", {}, "")
        rt = goondan.Runtime(bundle, state_root=Path(tmp) / "state", isolation="process", persist=persist)
        await rt.start()
        try:
            before = set(_harness.descendants())
            await rt.request("go", instance_key="c0")
            agents = [p for p in _harness.descendants() if p not in before]  # the agent process
            for _ in range(warmup):
                await rt.request("go", instance_key="c0")
            host, agent, wall = [], [], []
            for _ in range(max(1, turns // block)):
                gc.collect()
                a0 = sum(_cpu_ns(p) for p in agents)
                h0 = time.process_time_ns()
                w0 = time.perf_counter_ns()
                for _ in range(block):
                    result = await rt.request("go", instance_key="c0")
                w1 = time.perf_counter_ns()
                h1 = time.process_time_ns()
                a1 = sum(_cpu_ns(p) for p in agents)
                if result.text != "done":
                    raise AssertionError(f"the turn ended with {result!r}")
                host.append((h1 - h0) / block / 1e3)
                agent.append((a1 - a0) / block / 1e3)
                wall.append((w1 - w0) / block / 1e3)
        finally:
            await rt.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    med = statistics.median
    return {
        "host_cpu_us": med(host),
        "agent_cpu_us": med(agent),
        "total_cpu_us": med([h + a for h, a in zip(host, agent, strict=True)]),
        "wall_us": med(wall),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--persist", choices=["off", "on"], default="off")
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--block", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--src", default="", help="import goondan from this source tree")
    args = parser.parse_args()
    if args.src:
        sys.path.insert(0, args.src)
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [args.src, os.environ.get("PYTHONPATH")]))
    res = asyncio.run(measure(args.persist == "on", args.turns, args.block, args.warmup))
    load = os.getloadavg()[0]
    sys.path.insert(0, str(HERE / "peers"))
    from _harness import idle_config

    print(
        f"process isolation, persist {args.persist}: host {res['host_cpu_us']:.1f} + agent process "
        f"{res['agent_cpu_us']:.1f} = {res['total_cpu_us']:.1f} µs CPU per turn, wall {res['wall_us']:.1f} µs "
        f"(load average {load:.1f}; {idle_config()})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
