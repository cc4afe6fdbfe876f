"""Runtime events reach a store that takes batches (the file store) a few records at a time, yet
each is in runtime-events.jsonl when something could look for it: when ``Runtime.request``
returns, while a tool holds the event loop, while a model call waits on the network.

The stores here are real file stores (a subclass that counts or fails calls where a test needs
it), the model calls a real loopback HTTP server, and the files are read as ``gdn logs`` reads them.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

import goondan
import kit
from goondan.errors import StorageError
from goondan.storage import FileInstanceStore, FileStoreBackend, FileWorkspaceStore
from models.providers.fake_http import FakeServer, Reply, Req, openai_text

ONE_TOOL_TURN = kit.ONE_TOOL_TURN_EVENTS

NOOP_TOOL = """\
def noop(ctx, args):
    return "ok"


handlers = {"noop": noop}
"""

# a tool that holds the event loop (a synchronous handler runs on it) until the test's watcher
# thread saw its tool.called line in the file, or 5 s passed
BLOCKING_TOOL = """\
import kit


def block(ctx, args):
    kit.PROBE["seen_while_running"] = kit.PROBE["seen"].wait(5)
    return "ok"


handlers = {"block": block}
"""


def tool_bundle(root: Path, name: str = "noop", code: str = NOOP_TOOL) -> Path:
    return kit.simple_bundle(
        root,
        agents=[kit.agent_doc("a", tools=["t"])],
        tools=[kit.tool_doc("t", "./tools/t.py", [kit.export(name)])],
        files={"tools/t.py": code},
    )


def events_file(state_root: Path, agent: str = "a", key: str = "k") -> Path:
    return kit.instance_dir(state_root, agent, key) / "messages" / "runtime-events.jsonl"


def types_in(path: Path) -> list[str]:
    return [str(record["type"]) for record in kit.read_jsonl(path)]


# --------------------------------------------------------------------------- a store that counts


class CountingStore(FileInstanceStore):
    """The file store, counting the calls that write runtime events; ``fail_batches`` makes that
    many batch calls fail first (as a full disk would) without writing anything."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.writes = 0
        self.fail_batches = 0

    def append_runtime_event(self, record: Mapping[str, Any], *, owned: bool = False) -> None:
        self.writes += 1
        super().append_runtime_event(record, owned=owned)

    def append_runtime_events(self, records: Sequence[Mapping[str, Any]]) -> None:
        if self.fail_batches:
            self.fail_batches -= 1
            raise StorageError("E_STORAGE_WRITE", "no space left on device (test)")
        self.writes += 1
        super().append_runtime_events(records)


class CountingWorkspace(FileWorkspaceStore):
    def instance(self, agent_name: str, instance_key: str) -> FileInstanceStore:
        store = self._stores.get((agent_name, instance_key))
        if store is None or store.closed:
            store = CountingStore(
                self.instance_path(agent_name, instance_key), agent_name=agent_name, instance_key=instance_key
            )
            self._stores[(agent_name, instance_key)] = store
        return store


class CountingBackend(FileStoreBackend):
    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.workspaces: list[CountingWorkspace] = []

    def workspace(self, workspace_id: str, *, identity: Any = None) -> FileWorkspaceStore:
        workspace = CountingWorkspace(self.root, workspace_id, identity=identity)
        self.workspaces.append(workspace)
        return workspace

    def store(self, agent: str = "a", key: str = "k") -> CountingStore:
        for workspace in self.workspaces:
            found = workspace._stores.get((agent, key))
            if isinstance(found, CountingStore):
                return found
        raise AssertionError(f"no store for {agent}@{key}")


# --------------------------------------------------------------------------- tests


# the bundle's own model (an agent process does not share kit.MODEL): a tool call, then text
SCRIPTED_MODEL = """\
def generate(request):
    if request.messages[-1]["role"] == "tool":
        return {"text": "done"}
    return {"text": None, "toolCalls": [{"name": "t__noop", "args": {}}]}
"""


@pytest.mark.parametrize("isolation", ["inline", "process"])
def test_all_runtime_events_of_a_turn_are_in_the_file_in_order_when_request_returns(
    tmp_path: Path, state_root: Path, isolation: str
) -> None:
    root = kit.simple_bundle(
        tmp_path,
        agents=[kit.agent_doc("a", tools=["t"])],
        tools=[kit.tool_doc("t", "./tools/t.py", [kit.export("noop")])],
        files={"tools/t.py": NOOP_TOOL, "model.py": SCRIPTED_MODEL},
    )

    async def main() -> list[list[str]]:
        seen: list[list[str]] = []
        async with goondan.Runtime(root, state_root=state_root, isolation=isolation) as rt:  # type: ignore[arg-type]
            for prompt in ("one", "two"):
                result = await rt.request(prompt, agent="a", instance_key="k")
                assert result.text == "done"
                seen.append(types_in(events_file(state_root)))
        return seen

    first, second = kit.run(main())
    assert first == ONE_TOOL_TURN
    assert second == ONE_TOOL_TURN * 2


def test_a_turn_with_a_tool_writes_its_runtime_events_in_at_most_three_calls(tmp_path: Path, state_root: Path) -> None:
    kit.MODEL = kit.scripted(kit.call("t__noop"), kit.text("done"))
    backend = CountingBackend(state_root)

    async def main() -> tuple[int, list[str]]:
        async with goondan.Runtime(
            tool_bundle(tmp_path), state_root=state_root, store=backend, isolation="inline"
        ) as rt:
            await rt.request("go", agent="a", instance_key="k")
            return backend.store().writes, types_in(events_file(state_root))

    writes, types = kit.run(main())
    assert types == ONE_TOOL_TURN
    assert 1 <= writes <= 3, writes  # eight records, one call each before batching (2 now)


def test_a_tool_holding_the_event_loop_has_its_tool_called_line_on_disk_while_it_runs(
    tmp_path: Path, state_root: Path
) -> None:
    kit.MODEL = kit.scripted(kit.call("t__block"), kit.text("done"))
    seen = kit.PROBE["seen"] = threading.Event()
    stop = threading.Event()

    def watch() -> None:  # what `gdn logs -f` does: read the file while the agent works
        while not stop.is_set():
            for path in state_root.glob("workspaces/*/instances/*/messages/runtime-events.jsonl"):
                if "tool.called" in types_in(path):
                    seen.set()
                    return
            time.sleep(0.005)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()

    async def main() -> None:
        async with goondan.Runtime(
            tool_bundle(tmp_path, "block", BLOCKING_TOOL), state_root=state_root, isolation="inline"
        ) as rt:
            await rt.request("go", agent="a", instance_key="k")

    try:
        kit.run(main())
    finally:
        stop.set()
        watcher.join(5)
    assert kit.PROBE["seen_while_running"] is True


def test_a_model_call_waiting_on_the_network_has_its_step_started_line_on_disk(
    tmp_path: Path, state_root: Path
) -> None:
    seen_by_server: list[list[str]] = []

    def answer(_req: Req) -> Reply:  # runs while the agent's model call waits for it
        paths = list(state_root.glob("workspaces/*/instances/*/messages/runtime-events.jsonl"))
        seen_by_server.append(types_in(paths[0]) if paths else [])
        return openai_text("ok")

    with FakeServer(answer) as fake:
        model = kit.model_doc(
            "m", "openai", "served", endpoint=fake.url + "/v1", apiKey={"valueFrom": {"env": "TEST_OPENAI_KEY"}}
        )
        root = kit.write_bundle(tmp_path / "b", kit.package_doc(), model, kit.agent_doc("a"), kit.swarm_doc(["a"]))

        async def main() -> str | None:
            env = {"TEST_OPENAI_KEY": "sk-test"}
            async with goondan.Runtime(root, state_root=state_root, isolation="inline", env=env) as rt:
                return (await rt.request("hi", agent="a", instance_key="k")).text

        assert kit.run(main()) == "ok"
    assert seen_by_server == [["turn.started", "step.started"]]


def test_a_failed_scheduled_flush_is_logged_and_its_records_written_by_the_next(
    tmp_path: Path, state_root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def slow_text(_request: Any) -> dict[str, Any]:
        await asyncio.sleep(0.02)  # the turn suspends: the scheduled flush runs (and fails)
        return kit.text("done")

    kit.MODEL = slow_text
    backend = CountingBackend(state_root)
    root = kit.simple_bundle(tmp_path)

    async def main() -> None:
        async with goondan.Runtime(root, state_root=state_root, store=backend, isolation="inline") as rt:
            await rt.request("warm", agent="a", instance_key="k")
            store = backend.store()
            store.fail_batches = 1
            writes = store.writes
            with caplog.at_level(logging.WARNING, logger="goondan.agent.a"):
                await rt.request("go", agent="a", instance_key="k")
            assert store.fail_batches == 0  # the scheduled flush was tried and failed
            assert store.writes - writes == 1  # the end of the turn wrote everything once

    kit.run(main())
    turn = ["turn.started", "step.started", "step.completed", "turn.completed"]
    assert types_in(events_file(state_root)) == turn * 2
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("could not write 2 runtime event(s), kept for the next write" in m for m in warnings), warnings


def test_an_explicit_flush_that_fails_raises_and_keeps_the_records_for_the_next(
    tmp_path: Path, state_root: Path
) -> None:
    kit.MODEL = kit.scripted(kit.text("one"), kit.text("two"), kit.text("three"))
    backend = CountingBackend(state_root)
    root = kit.simple_bundle(tmp_path)
    turn = ["turn.started", "step.started", "step.completed", "turn.completed"]

    async def main() -> None:
        async with goondan.Runtime(root, state_root=state_root, store=backend, isolation="inline") as rt:
            await rt.request("warm", agent="a", instance_key="k")
            backend.store().fail_batches = 1  # the flush before the result is returned
            with pytest.raises(StorageError, match="no space left"):  # as the single append raised
                await rt.request("go", agent="a", instance_key="k")
            assert types_in(events_file(state_root)) == turn
            await rt.request("three", agent="a", instance_key="k")
            assert types_in(events_file(state_root)) == turn * 3  # kept, written once, in order

    kit.run(main())
