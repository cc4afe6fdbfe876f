"""Core hot-path benchmark (issue #2 targets). Run: ``python bench/core.py`` (``--quick`` for a short run).

Prints:
  (a) time one pass-through middleware adds per wrapped call, for turn / step / toolCall;
  (b) framework time for a turn of two model calls and one tool call (python provider), with
      persistence off and on;
  (c) turn time with a history of 10 and of 100,000 messages (loading excluded).

"Framework time" is everything except the model and the tool themselves: both are trivial Python
functions here, so the figure is what Goondan adds to every turn.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import goondan

MODEL = """
def generate(request):
    last = request.messages[-1]
    if last["role"] == "tool":
        return {"text": "done"}
    return {"toolCalls": [{"name": "calc__add", "args": {"a": 1, "b": 2}}]}
"""

TOOL = """
def add(ctx, args):
    return args["a"] + args["b"]

handlers = {"add": add}
"""

EXT = """
def register(api, config):
    n = int(config.get("layers", 0))
    kinds = config.get("kinds", [])

    async def passthrough(ctx):
        return await ctx.next()

    for kind in kinds:
        for _ in range(n):
            api.pipeline.register(kind, passthrough)
"""


def make_bundle(root: Path, layers: int, kinds: list[str]) -> Path:
    (root / "model.py").write_text(MODEL)
    (root / "calc.py").write_text(TOOL)
    (root / "ext.py").write_text(EXT)
    kinds_yaml = "[" + ", ".join(kinds) + "]"
    (root / "goondan.yaml").write_text(
        f"""apiVersion: goondan.ai/v1
kind: Model
metadata: {{name: m}}
spec: {{provider: python, model: bench, options: {{entry: ./model.py}}}}
---
apiVersion: goondan.ai/v1
kind: Tool
metadata: {{name: calc}}
spec:
  entry: ./calc.py
  exports:
    - name: add
      description: add
      parameters: {{type: object, properties: {{a: {{type: number}}, b: {{type: number}}}}, required: [a, b]}}
---
apiVersion: goondan.ai/v1
kind: Extension
metadata: {{name: layers}}
spec: {{entry: ./ext.py, config: {{layers: {layers}, kinds: {kinds_yaml}}}}}
---
apiVersion: goondan.ai/v1
kind: Agent
metadata: {{name: a}}
spec:
  modelConfig: {{modelRef: Model/m}}
  tools: [Tool/calc]
  extensions: [Extension/layers]
---
apiVersion: goondan.ai/v1
kind: Swarm
metadata: {{name: default}}
spec: {{entryAgent: Agent/a, agents: [Agent/a]}}
"""
    )
    return root


class Case:
    """One configuration: its bundle, runtime and the per-turn times measured so far."""

    def __init__(self, name: str, layers: int, kinds: list[str], *, persist: bool = False, history: int = 0) -> None:
        self.name, self.layers, self.kinds, self.persist, self.history = name, layers, kinds, persist, history
        self.times: list[float] = []

    def median_us(self) -> float:
        return statistics.median(self.times) * 1e6


async def measure(cases: list[Case], turns: int, block: int = 50) -> None:
    """Time ``turns`` turns of every case, interleaved: blocks of ``block`` turns per case in rotating
    order, so a slow moment of a shared machine hits every case alike instead of one of them. Each
    case is its own Runtime (own state root) started and warmed up before any timing."""
    async with contextlib.AsyncExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        runtimes = []
        for n, case in enumerate(cases):
            root = tmp / f"case{n}"
            (root / "bundle").mkdir(parents=True)
            bundle = make_bundle(root / "bundle", case.layers, case.kinds)
            if case.history:
                if not case.persist:
                    raise ValueError("history cases need persistence (the history is loaded from disk)")
                seed_history(root / "state", case.history)
            rt = goondan.Runtime(bundle, state_root=root / "state", persist=case.persist, isolation="inline")
            await stack.enter_async_context(rt)
            for _ in range(20):  # warm-up: imports, validator compilation, instance start
                await rt.request("go")
            runtimes.append(rt)
        rounds = -(-turns // block)
        for r in range(rounds):
            for k in range(len(cases)):
                i = (r + k) % len(cases)
                rt, times = runtimes[i], cases[i].times
                gc.collect()
                gc.disable()
                try:
                    for _ in range(block):
                        t0 = time.perf_counter()
                        result = await rt.request("go")
                        times.append(time.perf_counter() - t0)
                        assert result.text == "done", result
                finally:
                    gc.enable()


def seed_history(state_root: Path, n: int) -> None:
    from goondan.messages import assistant_message, user_message
    from goondan.storage import FileWorkspaceStore

    store = FileWorkspaceStore(state_root, "default").instance("a", "default")
    store.load()
    messages = []
    for i in range(n // 2):
        messages.append(user_message(f"question {i}"))
        messages.append(assistant_message(f"answer {i}"))
    store.commit(messages, None)
    store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer turns (noisier figures)")
    parser.add_argument("--layers", type=int, default=50, help="pass-through layers used to measure (a)")
    args = parser.parse_args()
    turns = 300 if args.quick else 2000
    layers = args.layers

    print(
        f"goondan {goondan.__version__} | Python {platform.python_version()} | {platform.machine()} | "
        f"{os.cpu_count()} CPUs | {turns} timed turns per case (median), all cases interleaved"
    )
    print()
    base = Case("base", 0, [])
    layered = {kind: Case(kind, layers, [kind]) for kind in ("turn", "step", "toolCall")}
    persisted = Case("persist", 0, [], persist=True)
    small = Case("history 10", 0, [], persist=True, history=10)
    large = Case("history 100k", 0, [], persist=True, history=100_000)
    asyncio.run(measure([base, *layered.values(), persisted, small, large], turns))
    per_call = {"turn": 1, "step": 2, "toolCall": 1}  # wrapped calls per turn in this scenario
    print("(a) time one pass-through middleware adds per wrapped call   target < 20 µs")
    for kind, case in layered.items():
        added = (case.median_us() - base.median_us()) / (layers * per_call[kind])
        print(f"    {kind:<9} {added:7.2f} µs   {'ok' if added < 20 else 'MISSED'}")
    print()
    b = base.median_us()
    print("(b) framework time per turn (2 model calls + 1 tool call, python provider)")
    print(f"    persistence off  {b:8.1f} µs   target < 1000 µs   {'ok' if b < 1000 else 'MISSED'}")
    print(f"    persistence on   {persisted.median_us():8.1f} µs   (events appended per emit, base fsync'd per turn)")
    print()
    ratio = large.median_us() / small.median_us()
    print("(c) turn time by history length (persistence on, loading excluded)")
    print(f"    10 messages       {small.median_us():8.1f} µs")
    print(
        f"    100,000 messages  {large.median_us():8.1f} µs   ratio {ratio:.2f}   target < 1.5   "
        f"{'ok' if ratio < 1.5 else 'MISSED'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
