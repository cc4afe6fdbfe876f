"""LangGraph with a durable checkpointer: the LangChain v1 scenario (``create_agent``, the same scripted
chat model and async tool) with ``AsyncSqliteSaver`` (``langgraph-checkpoint-sqlite``, a database
file, WAL journal) or ``AsyncPostgresSaver`` (``langgraph-checkpoint-postgres``, psycopg 3) as its
checkpointer, so every super-step's state is written before the run returns.

``--saver sqlite|postgres`` (``--dsn`` for postgres); ``--history fresh`` runs every turn on a new
thread (the checkpointer's cheapest case: nothing to load), ``--history conv10`` keeps a thread for
10 turns (its history grows to 40 messages, then a new thread starts), the shape of a short chat.
``--durability`` is LangGraph's own setting (``async``, the default: checkpoints are written while
the next step runs and awaited before the run returns; ``sync``: before the next step starts).
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import _harness as h
from langchain.agents import create_agent
from langchain_v1 import ScriptedChatModel, _layer, add


class DurableRunner:
    def __init__(self, adapter: LangGraphDurableAdapter, agent: Any, closers: list[Any]) -> None:
        self.adapter = adapter
        self.agent = agent
        self.closers = closers
        self.turns = itertools.count()
        self.thread = uuid.uuid4().hex

    async def turn(self, conv: int) -> None:
        n = next(self.turns)
        if self.adapter.history == "fresh" or n % 10 == 0:
            self.thread = uuid.uuid4().hex
        config = {"configurable": {"thread_id": f"{conv}-{self.thread}"}}
        out = await self.agent.ainvoke(
            {"messages": [{"role": "user", "content": "go"}]}, config, durability=self.adapter.durability
        )
        if out["messages"][-1].content != "done":
            raise AssertionError(out)

    async def close(self) -> None:
        for close in reversed(self.closers):
            await close()


class LangGraphDurableAdapter(h.Adapter):
    def __init__(self) -> None:
        super().__init__(
            name="langgraph durable",
            package="langgraph",
            import_stmt="from langchain.agents import create_agent",
            levels={
                "turn": "AgentMiddleware with abefore_agent + aafter_agent returning None (graph nodes)",
                "model": "AgentMiddleware.awrap_model_call: `return await handler(request)`",
                "tool": "AgentMiddleware.awrap_tool_call: `return await handler(request)`",
            },
            fake_model="the LangChain v1 adapter's scripted BaseChatModel",
        )
        self.saver = "sqlite"
        self.dsn = ""
        self.history = "fresh"
        self.durability = "async"
        self.tmp = Path(tempfile.mkdtemp(prefix="lg-durable-"))

    def configure(self, args: argparse.Namespace) -> None:
        self.saver, self.dsn, self.history, self.durability = args.saver, args.dsn, args.history, args.durability
        self.name = f"langgraph {self.saver} ({self.history}, durability={self.durability})"
        self.package = f"langgraph-checkpoint-{self.saver}"
        self.notes = (
            f"create_agent(checkpointer=Async{'Sqlite' if self.saver == 'sqlite' else 'Postgres'}Saver), "
            f"thread per {'turn' if self.history == 'fresh' else '10 turns'}"
        )

    async def _saver(self) -> tuple[Any, Any]:
        if self.saver == "sqlite":
            from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

            cm = AsyncSqliteSaver.from_conn_string(str(self.tmp / f"{uuid.uuid4().hex}.sqlite"))
        else:
            from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

            cm = AsyncPostgresSaver.from_conn_string(self.dsn)
        saver = await cm.__aenter__()
        await saver.setup()
        return saver, cm

    async def make(self, layers: dict[str, int], probe: bool = False) -> DurableRunner:
        saver, cm = await self._saver()

        async def close() -> None:
            await cm.__aexit__(None, None, None)

        middleware = [_layer(level, i, probe) for level, n in layers.items() for i in range(n)]
        agent = create_agent(model=ScriptedChatModel(), tools=[add], middleware=middleware, checkpointer=saver)
        return DurableRunner(self, agent, [close])

    async def new_agent(self) -> Any:
        raise h.Unavailable("memory is measured by run.py for the non-durable LangChain adapter")


def _args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--saver", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--dsn", default="")
    parser.add_argument("--history", choices=["fresh", "conv10"], default="fresh")
    parser.add_argument("--durability", choices=["async", "sync", "exit"], default="async")


if __name__ == "__main__":
    adapter = LangGraphDurableAdapter()
    try:
        h.main(adapter, _args)
    finally:
        shutil.rmtree(adapter.tmp, ignore_errors=True)
