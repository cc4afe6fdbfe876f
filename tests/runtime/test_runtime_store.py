"""Runtime(store=...): the URL picks the backend for inline runtimes and for agent processes alike;
GOONDAN_STORE is the default; persist=False is the memory store."""

from __future__ import annotations

from pathlib import Path

import pytest

import goondan
import kit as k
from goondan.errors import GoondanError
from goondan.storage import FileStoreBackend, MemoryStoreBackend
from kit import scripted, simple_bundle, text


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def test_memory_store_keeps_the_conversation_in_memory_and_writes_nothing(tmp_path: Path, state_root: Path) -> None:
    k.MODEL = scripted(lambda r: text(f"seen {len(r.messages)}"))
    root = simple_bundle(tmp_path)

    async def main() -> list[str]:
        async with goondan.Runtime(root, state_root=state_root, isolation="inline", store="memory:") as rt:
            assert isinstance(rt.store, MemoryStoreBackend) and rt.persist is False
            first = await rt.request("one")
            second = await rt.request("two")
            await rt.restart()  # a plain restart keeps the conversation, as on disk
            third = await rt.request("three")
            await rt.restart(fresh=True)  # a fresh start clears it
            fourth = await rt.request("four")
            return [first.text, second.text, third.text, fourth.text]

    assert k.run(main()) == ["seen 1", "seen 3", "seen 5", "seen 1"]
    assert _files(state_root) == []


def test_deleting_an_instance_of_the_memory_store_forgets_its_conversation(tmp_path: Path, state_root: Path) -> None:
    k.MODEL = scripted(lambda r: text(f"seen {len(r.messages)}"))
    root = simple_bundle(tmp_path)

    async def main() -> list[str]:
        async with goondan.Runtime(root, state_root=state_root, isolation="inline", persist=False) as rt:
            first = await rt.request("one")
            assert await rt.delete_instance(rt.entry_agent, rt.swarm_instance_key) is True
            second = await rt.request("two")
            return [first.text, second.text]

    assert k.run(main()) == ["seen 1", "seen 1"]


def test_a_directory_store_keeps_instances_there_and_not_under_the_state_root(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    k.MODEL = None
    root = simple_bundle(tmp_path, files={"model.py": "def generate(request):\n    return {'text': 'ok'}\n"})
    store_dir = tmp_path / "elsewhere"

    async def main() -> None:
        async with goondan.Runtime(root, state_root=state_root, executor=executor, store=str(store_dir)) as rt:
            assert isinstance(rt.store, FileStoreBackend) and rt.store.root == store_dir
            assert (await rt.request("hi")).text == "ok"
            infos = await rt.instances()
            assert [i.agent_name for i in infos] == [rt.entry_agent]

    k.run(main())
    assert k.instance_dirs(store_dir), "the agent wrote its instance into the store directory"
    assert list(state_root.glob("workspaces/*/instances/*")) == []


def test_goondan_store_in_the_runtime_env_selects_the_store(tmp_path: Path, state_root: Path) -> None:
    k.MODEL = scripted(text("ok"))
    root = simple_bundle(tmp_path)
    env = {"GOONDAN_STORE": "memory:"}

    async def main() -> None:
        async with goondan.Runtime(root, state_root=state_root, isolation="inline", env=env) as rt:
            assert isinstance(rt.store, MemoryStoreBackend)
            await rt.request("hi")

    k.run(main())
    assert _files(state_root) == []


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"store": "postgresql://db/goondan?pool_size=0"}, "E_STORE_URL_INVALID"),
        ({"store": "nosuch://x"}, "E_STORE_UNSUPPORTED"),
        ({"store": "file://relative"}, "E_STORE_URL_INVALID"),
        ({"store": "/tmp/x", "persist": False}, "E_RUNTIME_OPTION"),
    ],
)
def test_a_store_the_runtime_cannot_open_fails_start_with_a_clear_error(
    tmp_path: Path, state_root: Path, kwargs: dict[str, object], code: str
) -> None:
    root = simple_bundle(tmp_path)

    async def main() -> None:
        async with goondan.Runtime(root, state_root=state_root, isolation="inline", **kwargs):  # type: ignore[arg-type]
            pass

    with pytest.raises(GoondanError) as info:
        k.run(main())
    assert info.value.code == code and info.value.suggestion
