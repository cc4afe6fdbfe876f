"""Runtime operations that behave the same with every executor: restart, fresh restart,
self-restart, instance deletion and listing, sends, FIFO per instance."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import proc_kit as pk
from proc_kit import call

import goondan


def run(root: Path, state_root: Path, executor: str, body: Any) -> Any:
    async def main() -> Any:
        async with goondan.Runtime(root, state_root=state_root, executor=executor) as rt:
            out = await body(rt)
            await rt.wait_idle()
            return out

    return asyncio.run(main())


def test_restart_keeps_history_and_fresh_restart_clears_it(tmp_path: Path, state_root: Path, executor: str) -> None:
    root = pk.bundle(tmp_path / "b")

    async def body(rt: Any) -> list[str]:
        await rt.request("one", instance_key="k")
        names = await rt.restart("a")
        await rt.request("two", instance_key="k")
        await rt.restart(None, fresh=True)
        await rt.request("three", instance_key="k")
        return list(names)

    names = run(root, state_root, executor, body)
    assert names == ["a:k"]
    calls = [r["messages"] for r in pk.out(root, "model")]
    assert [m["content"] for m in calls[1] if m["role"] == "user"] == ["one", "two"]
    assert calls[2] == [{"role": "user", "content": "three"}]


def test_self_restart_keeps_the_conversation(tmp_path: Path, state_root: Path, executor: str) -> None:
    root = pk.bundle(tmp_path / "b")

    async def body(rt: Any) -> Any:
        await rt.request(call("restart"), instance_key="k")
        await rt.wait_idle()
        return await rt.request("after restart", instance_key="k")

    result = run(root, state_root, executor, body)
    assert result.text == "a@k got: after restart"
    seen = pk.out(root, "model")[-1]["messages"]
    assert seen[0]["content"].startswith("call t__restart") and len(seen) == 5


def test_delete_instance_removes_its_history_only(tmp_path: Path, state_root: Path, executor: str) -> None:
    root = pk.bundle(tmp_path / "b")

    async def body(rt: Any) -> Any:
        await rt.request("keep", instance_key="k1")
        await rt.request("drop", instance_key="k2")
        deleted = await rt.delete_instance("a", "k2")
        again = await rt.delete_instance("a", "k2")
        listed = [(i.agent_name, i.instance_key, i.status) for i in await rt.instances()]
        return deleted, again, listed

    deleted, again, listed = run(root, state_root, executor, body)
    assert (deleted, again) == (True, False)
    assert listed == [("a", "k1", "idle")]


def test_send_runs_the_target_in_the_background(tmp_path: Path, state_root: Path, executor: str) -> None:
    root = pk.bundle(tmp_path / "b")

    async def body(rt: Any) -> bool:
        accepted = await rt.send("note", agent="c", instance_key="k")
        await rt.wait_idle()
        return bool(accepted)

    assert run(root, state_root, executor, body) is True
    [c_call] = [r for r in pk.out(root, "model") if r["agent"] == "c"]
    assert c_call["messages"] == [{"role": "user", "content": "note"}]


def test_concurrent_requests_to_one_instance_are_served_in_order(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    root = pk.bundle(tmp_path / "b")

    async def body(rt: Any) -> list[Any]:
        return list(await asyncio.gather(*(rt.request(f"m{i}", instance_key="q") for i in range(5))))

    results = run(root, state_root, executor, body)
    assert [r.text for r in results] == [f"a@q got: m{i}" for i in range(5)]
    last = pk.out(root, "model")[-1]["messages"]
    assert [m["content"] for m in last if m["role"] == "user"] == [f"m{i}" for i in range(5)]


def test_self_restart_picks_up_edited_bundle_files(tmp_path: Path, state_root: Path, executor: str) -> None:
    root = pk.bundle(tmp_path / "b")

    async def body(rt: Any) -> Any:
        await rt.request(call("pid"), instance_key="k")
        tools = (root / "tools.py").read_text(encoding="utf-8")
        (root / "tools.py").write_text(tools.replace('"key": ctx.instance_key}', '"key": ctx.instance_key, "v": 2}'))
        yaml_text = (root / "goondan.yaml").read_text(encoding="utf-8")
        edited = yaml_text.replace(
            "name: a\nspec:\n  modelConfig:\n    modelRef: Model/m\n",
            "name: a\nspec:\n  modelConfig:\n    modelRef: Model/m\n  prompt:\n    system: edited prompt\n",
        )
        assert edited != yaml_text
        (root / "goondan.yaml").write_text(edited, encoding="utf-8")
        still_old = await rt.request(call("pid"), instance_key="k")
        await rt.request(call("restart"), instance_key="k")
        await rt.wait_idle()
        for _ in range(200):  # the restart happens right after the turn, in the background
            fresh = await rt.request(call("pid"), instance_key="k")
            if '"v": 2' in (fresh.text or ""):
                return still_old, fresh
            await asyncio.sleep(0.05)
        return still_old, fresh

    still_old, fresh = run(root, state_root, executor, body)
    assert '"v": 2' not in (still_old.text or "")
    assert '"v": 2' in (fresh.text or "")
    assert {"role": "system", "content": "edited prompt"} in pk.out(root, "model")[-1]["messages"]
