"""Per-turn commit cost of the stores (issue 15, store half of item 5): Goondan's PostgreSQL store
against its filesystem store and against LangGraph's ``PostgresSaver`` checkpointing the same turn
on the same PostgreSQL server.

Run: ``.venv/bin/python bench/scale_store.py`` (``--quick`` for a short run, ``--json`` for the raw
figures). ``bench/scale.py`` calls :func:`run` and prints the same table beside its throughput
figures. LangGraph is optional: ``uv pip install -r bench/requirements-scale.txt`` (pinned, the
versions ``bench/peers`` uses); without it the PostgresSaver row says so.

The turn (identical on every side): the user says "go"; the model asks for ``add(a=1, b=2)``; the
tool answers 3; the model says "done" - four messages, two model calls, one tool call, with no
latency anywhere, so only persistence differs. Every conversation runs ``turns`` turns (its
history grows, as a chat's does).

What is measured is the time spent *inside the persistence layer* during real turns - not a
synthetic loop of store calls:

* Goondan: a real ``goondan.Runtime`` (inline executor, so every store call is in this process)
  with the store's instance class instrumented: ``load``, ``append_event`` (each message event,
  durable before it returns), ``commit`` (the turn's fold), ``append_runtime_event``,
  ``write_metadata``, extension state... Wall time and the calling thread's CPU time of each call.
* LangGraph: a ``StateGraph(MessagesState)`` with a model node and a tools node compiled with
  ``PostgresSaver`` and ``durability="sync"`` (every checkpoint written before the graph goes on,
  the closest to Goondan's guarantee; the default ``async`` only moves the same writes to a
  background thread), with the saver's ``get_tuple``, ``put`` and ``put_writes`` instrumented.

Both sides talk to one PostgreSQL server over TCP on 127.0.0.1, started for the run from the Debian
binaries by ``tests/kit/postgres.py`` (fsync and synchronous_commit on), each side in a database of
its own. The server's own CPU is in neither side's CPU column (the wall column includes waiting
for it and for the disk).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import platform
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TARGET = "PostgreSQL store commit cost per turn <= LangGraph PostgresSaver's on the same server"

MODEL = """\
def generate(request):
    last = request.messages[-1]
    if last["role"] == "user":
        return {"toolCalls": [{"id": "c1", "name": "calc__add", "args": {"a": 1, "b": 2}}]}
    return {"text": "done"}
"""

TOOL = """\
def add(ctx, args):
    return args["a"] + args["b"]


handlers = {"add": add}
"""

BUNDLE = """\
apiVersion: goondan.ai/v1
kind: Package
metadata:
  name: scale-store-bench
spec:
  version: 0.1.0
---
apiVersion: goondan.ai/v1
kind: Model
metadata:
  name: m
spec:
  provider: python
  model: bench
  options:
    entry: ./model.py
---
apiVersion: goondan.ai/v1
kind: Tool
metadata:
  name: calc
spec:
  entry: ./calc.py
  exports:
    - name: add
      description: add two numbers
      parameters:
        type: object
        properties: {a: {type: number}, b: {type: number}}
        required: [a, b]
---
apiVersion: goondan.ai/v1
kind: Agent
metadata:
  name: a
spec:
  modelConfig:
    modelRef: Model/m
  tools: [Tool/calc]
---
apiVersion: goondan.ai/v1
kind: Swarm
metadata:
  name: default
spec:
  entryAgent: Agent/a
  agents: [Agent/a]
"""


class Meter:
    """Wall and CPU time of instrumented calls, per method."""

    def __init__(self) -> None:
        self.calls: dict[str, list[float]] = {}
        self.wall = 0.0
        self.cpu = 0.0

    @contextlib.contextmanager
    def patch(self, cls: type, names: list[str]) -> Iterator[None]:
        saved = {name: cls.__dict__[name] for name in names if name in cls.__dict__}
        for name, original in saved.items():
            setattr(cls, name, self._wrap(name, original))
        try:
            yield
        finally:
            for name, original in saved.items():
                setattr(cls, name, original)

    def _wrap(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        meter = self

        def timed(*args: Any, **kwargs: Any) -> Any:
            c0, w0 = time.thread_time(), time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                w, c = time.perf_counter() - w0, time.thread_time() - c0
                meter.wall += w
                meter.cpu += c
                meter.calls.setdefault(name, []).append(w)

        return timed


def _bundle(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "goondan.yaml").write_text(BUNDLE, encoding="utf-8")
    (directory / "model.py").write_text(MODEL, encoding="utf-8")
    (directory / "calc.py").write_text(TOOL, encoding="utf-8")
    return directory


_STORE_METHODS = [
    "load",
    "append_event",
    "commit",
    "append_runtime_event",
    "write_metadata",
    "read_metadata",
    "save_extension_state",
    "load_extension_state",
    "put_attachment",
    "write_paused_turn",
    "read_paused_turn",
]


def _goondan(store: str, instance_cls: type, conversations: int, turns: int, tmp: Path) -> dict[str, Any]:
    import goondan

    bundle = _bundle(tmp / f"bundle-{uuid.uuid4().hex[:8]}")
    meter = Meter()

    async def main() -> None:
        async with goondan.Runtime(bundle, state_root=tmp / "state", executor="inline", store=store) as rt:
            await rt.request("go", instance_key="warmup")  # imports, pool, schema: not a turn's cost
            meter.calls.clear()
            meter.wall = meter.cpu = 0.0
            with meter.patch(instance_cls, _STORE_METHODS):
                for conv in range(conversations):
                    for _ in range(turns):
                        result = await rt.request("go", instance_key=f"c{conv}")
                        assert result.text == "done", result.error

    asyncio.run(main())
    n = conversations * turns
    return _row(meter, n)


def _row(meter: Meter, n: int) -> dict[str, Any]:
    ops = {name: len(calls) / n for name, calls in sorted(meter.calls.items())}
    per_call = {name: statistics.median(calls) * 1e6 for name, calls in sorted(meter.calls.items())}
    return {
        "turns": n,
        "wall_us": meter.wall / n * 1e6,
        "cpu_us": meter.cpu / n * 1e6,
        "calls_per_turn": ops,
        "median_call_us": per_call,
    }


def _langgraph(dsn: str, conversations: int, turns: int) -> dict[str, Any]:
    try:
        from langchain_core.messages import AIMessage, ToolMessage
        from langgraph.checkpoint.postgres import PostgresSaver
        from langgraph.graph import END, START, MessagesState, StateGraph
    except ImportError as exc:
        return {"error": f"not installed ({exc.name}): uv pip install -r bench/requirements-scale.txt"}

    # no annotations: LangGraph reads the nodes' type hints, which this module's postponed
    # annotations would leave as strings naming names imported only here
    def model(state):  # type: ignore[no-untyped-def]
        last = state["messages"][-1]
        if last.type == "human":
            return {"messages": [AIMessage("", tool_calls=[{"id": "c1", "name": "add", "args": {"a": 1, "b": 2}}])]}
        return {"messages": [AIMessage("done")]}

    def tools(state):  # type: ignore[no-untyped-def]
        call = state["messages"][-1].tool_calls[0]
        return {"messages": [ToolMessage(str(call["args"]["a"] + call["args"]["b"]), tool_call_id=call["id"])]}

    def route(state):  # type: ignore[no-untyped-def]
        return "tools" if getattr(state["messages"][-1], "tool_calls", None) else END

    graph = StateGraph(MessagesState)
    graph.add_node("model", model)
    graph.add_node("tools", tools)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", route, ["tools", END])
    graph.add_edge("tools", "model")
    meter = Meter()
    with PostgresSaver.from_conn_string(dsn) as saver:
        saver.setup()
        app = graph.compile(checkpointer=saver)
        app.invoke({"messages": [("user", "go")]}, {"configurable": {"thread_id": "warmup"}}, durability="sync")
        with meter.patch(PostgresSaver, ["get_tuple", "put", "put_writes"]):
            for conv in range(conversations):
                config = {"configurable": {"thread_id": f"c{conv}"}}
                for _ in range(turns):
                    out = app.invoke({"messages": [("user", "go")]}, config, durability="sync")
                    assert out["messages"][-1].content == "done"
    return _row(meter, conversations * turns)


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for dist in ("goondan-runtime", "psycopg", "psycopg-pool", "langgraph", "langgraph-checkpoint-postgres"):
        with contextlib.suppress(PackageNotFoundError):
            out[dist] = version(dist)
    return out


def run(
    report: Callable[[str], None] | None = print,
    *,
    conversations: int = 10,
    turns: int = 10,
    quick: bool = False,
    postgres_url: str | None = None,
) -> dict[str, Any]:
    """Measure all three and return the figures; each line of the table goes to ``report``.

    ``postgres_url``: a server to use (a database of its own is created on it for each side); by
    default one is started from the Debian binaries for the run and stopped after.
    """
    if quick:
        conversations, turns = 3, 5
    sys.path.insert(0, str(ROOT / "tests"))
    from goondan.storage import FileInstanceStore
    from goondan.storage._postgres import PostgresInstanceStore
    from kit.postgres import PostgresServer, find_pg_bin

    server: PostgresServer | None = None
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="goondan-scale-store-") as tmp_dir:
        tmp = Path(tmp_dir)
        try:
            if postgres_url is None:
                bin_dir = find_pg_bin()
                if bin_dir is None:
                    raise SystemExit("PostgreSQL binaries not found: apt-get install postgresql")
                server = PostgresServer(bin_dir)
                server.init()
                server.start()

            def database() -> str:
                if server is not None:
                    return server.create_database()
                import psycopg

                name = f"scale_{uuid.uuid4().hex[:10]}"
                with psycopg.connect(postgres_url, autocommit=True) as conn:
                    conn.execute(f'CREATE DATABASE "{name}"')
                assert postgres_url is not None
                return postgres_url.rsplit("/", 1)[0] + "/" + name

            results["Goondan filesystem store"] = _goondan(
                str(tmp / "files"), FileInstanceStore, conversations, turns, tmp
            )
            results["Goondan PostgreSQL store"] = _goondan(database(), PostgresInstanceStore, conversations, turns, tmp)
            results["LangGraph PostgresSaver (durability=sync)"] = _langgraph(database(), conversations, turns)
        finally:
            if server is not None:
                server.destroy()
    figures = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()} | {_cpus()} CPUs | Python {platform.python_version()}",
        "conversations": conversations,
        "turns_per_conversation": turns,
        "versions": _versions(),
        "results": results,
    }
    ours = results["Goondan PostgreSQL store"]
    theirs = results["LangGraph PostgresSaver (durability=sync)"]
    if "error" not in theirs:
        figures["target"] = {
            "name": TARGET,
            "wall_ratio": ours["wall_us"] / theirs["wall_us"],
            "cpu_ratio": ours["cpu_us"] / theirs["cpu_us"],
            "met": ours["wall_us"] <= theirs["wall_us"] and ours["cpu_us"] <= theirs["cpu_us"],
        }
    if report is not None:
        for line in render(figures):
            report(line)
    return figures


def _cpus() -> int:
    import os

    return os.cpu_count() or 1


def render(figures: dict[str, Any]) -> list[str]:
    lines = [
        f"per-turn persistence cost | {figures['when']} | {figures['machine']} | "
        f"{figures['conversations']} conversations x {figures['turns_per_conversation']} turns",
        f"{'store':<44}{'wall µs/turn':>14}{'CPU µs/turn':>13}  calls per turn",
    ]
    for name, row in figures["results"].items():
        if "error" in row:
            lines.append(f"{name:<44}{row['error']}")
            continue
        calls = ", ".join(f"{k} {v:g}" for k, v in row["calls_per_turn"].items())
        lines.append(f"{name:<44}{row['wall_us']:>14.0f}{row['cpu_us']:>13.0f}  {calls}")
    target = figures.get("target")
    if target:
        verdict = "met" if target["met"] else "NOT met"
        lines.append(
            f"target: {target['name']}: wall {target['wall_ratio']:.2f}x, CPU {target['cpu_ratio']:.2f}x -> {verdict}"
        )
    versions = ", ".join(f"{k} {v}" for k, v in figures["versions"].items())
    lines.append(f"versions: {versions}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 conversations x 5 turns")
    parser.add_argument("--conversations", type=int, default=10)
    parser.add_argument("--turns", type=int, default=10, help="turns per conversation")
    parser.add_argument("--postgres-url", help="use this server instead of starting one")
    parser.add_argument("--json", action="store_true", help="print the raw figures as JSON")
    args = parser.parse_args(argv)
    figures = run(
        None if args.json else print,
        conversations=args.conversations,
        turns=args.turns,
        quick=args.quick,
        postgres_url=args.postgres_url,
    )
    if args.json:
        print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    raise SystemExit(main())
