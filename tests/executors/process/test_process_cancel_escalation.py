"""A cancel that the turn does not honour escalates (process executor): ``rt.cancel`` asks the agent
process to cancel its turn; a turn still running ``cancel_grace_ms`` later (a synchronous tool that
blocks the process's event loop, which then cannot even read the cancel) has its process killed.
Its request resolves ``cancelled``, the call it left is answered ``E_TOOL_CANCELLED`` on disk by the
fresh process before that, the tool never runs again, events queued behind it still run, and the
instance goes on in a new process. A turn that honours the cancel keeps its process.

Real agent processes; tools and the model report through files (runs, pids)."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import proc_kit as pk
import pytest
from proc_kit import until

import goondan
import kit
from goondan.errors import GoondanError

MODEL = """\
import json
import os


def generate(request):
    last = request.messages[-1]
    if last["role"] == "tool":
        return {"text": "tool said " + json.dumps(last["content"][0]["output"], sort_keys=True)}
    text = last["content"] if isinstance(last["content"], str) else ""
    if text in ("stuck", "nap", "delegate"):
        return {"toolCalls": [{"id": "c-" + text, "name": "t__" + text, "args": {}}]}
    return {"text": "said " + text + " in " + str(os.getpid())}
"""

TOOL = """\
import asyncio
import json
import os
import time
from pathlib import Path

HERE = Path(__file__).parent


def stuck(ctx, args):
    # a synchronous handler, the only call of its step: it runs on the agent process's event loop
    with open(HERE / "runs.txt", "a", encoding="utf-8") as fh:
        fh.write(str(os.getpid()) + "\\n")
    time.sleep(60)
    return "woke up"


async def nap(ctx, args):
    with open(HERE / "naps.txt", "a", encoding="utf-8") as fh:
        fh.write(str(os.getpid()) + "\\n")
    await asyncio.sleep(60)
    return "rested"


async def delegate(ctx, args):
    result = await ctx.runtime.request("worker", "stuck")
    return result.response


handlers = {"stuck": stuck, "nap": nap, "delegate": delegate}
"""


def _bundle(root: Path, agents: tuple[str, ...] = ("a",)) -> Path:
    return kit.write_bundle(
        root,
        kit.package_doc(),
        kit.python_model_doc(),
        kit.tool_doc("t", "./t.py", [kit.export("stuck"), kit.export("nap"), kit.export("delegate")]),
        *(kit.agent_doc(name, tools=["t"]) for name in agents),
        kit.swarm_doc(list(agents)),
        files={"model.py": MODEL, "t.py": TOOL},
    )


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split() if path.exists() else []


def _base(state_root: Path, agent: str = "a") -> list[dict[str, Any]]:
    """The committed history (base.jsonl) alone: events.jsonl may already hold a later turn's events."""
    messages = pk.instance_dir(state_root, agent, "k") / "messages"
    return [r["data"] for r in pk.read_jsonl(messages / "base.jsonl")]


def _history(state_root: Path, agent: str = "a") -> list[dict[str, Any]]:
    """The committed history once every turn has ended: no residual events are left."""
    base = _base(state_root, agent)
    events = pk.instance_dir(state_root, agent, "k") / "messages" / "events.jsonl"
    assert not events.exists() or not events.read_text(encoding="utf-8").strip(), "a turn left residual events"
    return base


def _pid(rt: goondan.Runtime, agent: str = "a") -> int | None:
    handle = rt.orchestrator.handles.get((agent, "k"))
    return None if handle is None else handle.pid


def _said_pid(result: Any) -> int:
    assert result.finish_reason == "text_response", result.error
    return int(result.text.rsplit(" ", 1)[1])


def test_a_cancelled_turn_stuck_in_a_synchronous_tool_has_its_process_killed_and_resolves_cancelled(
    tmp_path: Path, state_root: Path
) -> None:
    root = _bundle(tmp_path / "b")
    grace = 1.5

    async def main() -> dict[str, Any]:
        async with goondan.Runtime(root, state_root=state_root, executor="process", cancel_grace_ms=1500) as rt:
            turn = asyncio.ensure_future(rt.request("stuck", instance_key="k"))
            await until(lambda: bool(_lines(root / "runs.txt")), timeout=30, what="the tool to run")
            first = _pid(rt)
            queued = asyncio.ensure_future(rt.request("behind", instance_key="k"))  # waits for the turn
            await asyncio.sleep(0.1)
            started = time.monotonic()
            assert await rt.cancel("a", "k") is True
            returned = time.monotonic() - started
            result = await asyncio.wait_for(turn, grace + 10)
            took = time.monotonic() - started
            # the history is valid on disk when the cancelled request resolves: the answered call is
            # committed (the queued turn may already be running in the fresh process, writing its
            # own events, so only the committed base is read here)
            at_resolve = _base(state_root)
            behind = await asyncio.wait_for(queued, 30)
            after = await rt.request("next", instance_key="k")
            return {
                "returned": returned,
                "result": result,
                "took": took,
                "first": first,
                "at_resolve": at_resolve,
                "behind": behind,
                "after": after,
                "last_pid": _pid(rt),
            }

    out = asyncio.run(main())
    assert out["returned"] < 0.5, "rt.cancel waited for the escalation"
    result = out["result"]
    assert result.finish_reason == "cancelled", result
    assert grace - 0.2 < out["took"] < grace + 3.0, f"the cancelled turn resolved after {out['took']:.1f} s"
    first = out["first"]
    assert first is not None and not pk.alive(first), "the stuck process was not killed"
    # the events queued behind it ran, in a new process, and so does the next turn
    assert _said_pid(out["behind"]) != first
    assert _said_pid(out["after"]) == out["last_pid"] != first
    # the call was answered once, as cancelled (what its caller was told), and never run again
    assert [m["role"] for m in out["at_resolve"][:3]] == ["user", "assistant", "tool"], out["at_resolve"]
    tool_results = [m for m in out["at_resolve"] if m["role"] == "tool"]
    assert len(tool_results) == 1, out["at_resolve"]
    part = tool_results[0]["content"][0]
    assert part["toolCallId"] == "c-stuck"
    assert part["output"]["value"]["code"] == "E_TOOL_CANCELLED"
    history = _history(state_root)
    roles = [m["role"] for m in history]
    assert roles == ["user", "assistant", "tool", "user", "assistant", "user", "assistant"], roles
    assert [m["content"] for m in history if m["role"] == "user"] == ["stuck", "behind", "next"]
    assert _lines(root / "runs.txt") == [str(first)]
    meta = json.loads((pk.instance_dir(state_root, "a", "k") / "metadata.json").read_text(encoding="utf-8"))
    assert meta["status"] == "idle"


def test_the_next_runtime_finds_the_killed_turn_answered_and_never_runs_its_tool_again(
    tmp_path: Path, state_root: Path
) -> None:
    """Nothing was queued behind the killed turn: the fresh process still starts at once, so the
    history on disk is repaired (as cancelled) before the request resolves, and a later runtime
    continues from it."""
    root = _bundle(tmp_path / "b")

    async def cancel_it() -> Any:
        async with goondan.Runtime(root, state_root=state_root, cancel_grace_ms=500) as rt:
            turn = asyncio.ensure_future(rt.request("stuck", instance_key="k"))
            await until(lambda: bool(_lines(root / "runs.txt")), timeout=30, what="the tool to run")
            assert await rt.cancel("a", "k") is True
            return await asyncio.wait_for(turn, 10)

    assert asyncio.run(cancel_it()).finish_reason == "cancelled"

    async def later() -> Any:
        async with goondan.Runtime(root, state_root=state_root) as rt:
            return await rt.request("again", instance_key="k")

    assert asyncio.run(later()).text.startswith("said again")
    history = _history(state_root)
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "user", "assistant"]
    assert history[2]["content"][0]["output"]["value"]["code"] == "E_TOOL_CANCELLED"
    assert len(_lines(root / "runs.txt")) == 1


def test_a_cancel_the_turn_honours_keeps_its_process(tmp_path: Path, state_root: Path) -> None:
    root = _bundle(tmp_path / "b")

    async def main() -> tuple[Any, int | None, float, int]:
        async with goondan.Runtime(root, state_root=state_root, cancel_grace_ms=1000) as rt:
            turn = asyncio.ensure_future(rt.request("nap", instance_key="k"))
            await until(lambda: bool(_lines(root / "naps.txt")), timeout=30, what="the tool to run")
            pid = _pid(rt)
            started = time.monotonic()
            assert await rt.cancel("a", "k") is True
            result = await asyncio.wait_for(turn, 10)
            took = time.monotonic() - started
            await asyncio.sleep(1.2)  # past the grace period: nothing is killed
            after = await rt.request("next", instance_key="k")
            return result, pid, took, _said_pid(after)

    result, pid, took, after_pid = asyncio.run(main())
    assert result.finish_reason == "cancelled"
    assert took < 1.0, f"the cancel took {took:.1f} s"
    assert pid is not None and after_pid == pid
    history = _history(state_root)
    assert history[2]["content"][0]["output"]["value"]["code"] == "E_TOOL_CANCELLED"


def test_cancel_grace_ms_zero_never_kills_and_a_bad_value_is_a_runtime_option_error(
    tmp_path: Path, state_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _bundle(tmp_path / "b")
    for bad in (-1, 1.5, "3000", True):
        with pytest.raises(GoondanError) as info:
            goondan.Runtime(root, state_root=state_root, cancel_grace_ms=bad)  # type: ignore[arg-type]
        assert info.value.code == "E_RUNTIME_OPTION" and "cancel_grace_ms" in info.value.message
    monkeypatch.setenv("GOONDAN_CANCEL_GRACE_MS", "soon")
    with pytest.raises(GoondanError) as info:
        goondan.Runtime(root, state_root=state_root)
    assert info.value.code == "E_RUNTIME_OPTION" and "GOONDAN_CANCEL_GRACE_MS" in info.value.message
    assert info.value.suggestion
    monkeypatch.setenv("GOONDAN_CANCEL_GRACE_MS", "0")

    async def main() -> tuple[bool, bool]:
        async with goondan.Runtime(root, state_root=state_root) as rt:
            turn = asyncio.ensure_future(rt.request("stuck", instance_key="k"))
            await until(lambda: bool(_lines(root / "runs.txt")), timeout=30, what="the tool to run")
            pid = _pid(rt)
            assert await rt.cancel("a", "k") is True
            await asyncio.sleep(3.5)  # past the default grace period
            alive = pid is not None and pk.alive(pid)
            done = turn.done()
            assert pid is not None
            os.kill(pid, 9)  # end the test's stuck process
            with pytest.raises(GoondanError):
                await asyncio.wait_for(turn, 10)
            return alive, done

    alive, done = asyncio.run(main())
    assert alive and not done


def test_cancelling_a_caller_whose_sub_agent_is_stuck_ends_the_callers_turn_and_the_sub_agent_is_cancelled_apart(
    tmp_path: Path, state_root: Path
) -> None:
    """The caller awaits its request: the cancel ends its turn at once, in its own process. The
    sub-agent's turn is its own: it keeps running until it is cancelled where it runs, which kills
    its process; then both conversations go on."""
    root = _bundle(tmp_path / "b", ("a", "worker"))

    async def main() -> dict[str, Any]:
        async with goondan.Runtime(root, state_root=state_root, cancel_grace_ms=500) as rt:
            lead = asyncio.ensure_future(rt.request("delegate", agent="a", instance_key="k"))
            await until(lambda: bool(_lines(root / "runs.txt")), timeout=30, what="the worker's tool to run")
            lead_pid, worker_pid = _pid(rt), _pid(rt, "worker")
            started = time.monotonic()
            assert await rt.cancel("a", "k") is True
            lead_result = await asyncio.wait_for(lead, 10)
            lead_took = time.monotonic() - started
            await asyncio.sleep(0.8)  # past the grace period: the caller honoured it, nothing is killed
            worker_alive = worker_pid is not None and pk.alive(worker_pid)
            assert await rt.cancel("worker", "k") is True
            await until(lambda: worker_pid is not None and not pk.alive(worker_pid), timeout=10, what="the kill")
            again = await rt.request("hello", agent="a", instance_key="k")
            worker_again = await rt.request("hello", agent="worker", instance_key="k")
            return {
                "lead": lead_result,
                "lead_took": lead_took,
                "lead_pid": lead_pid,
                "worker_alive": worker_alive,
                "again": again,
                "worker_again": worker_again,
                "worker_pid": worker_pid,
            }

    out = asyncio.run(main())
    assert out["lead"].finish_reason == "cancelled"
    assert out["lead_took"] < 1.0, "the caller's turn waited for its stuck sub-agent"
    assert out["worker_alive"], "cancelling the caller killed the sub-agent's process"
    assert _said_pid(out["again"]) == out["lead_pid"]  # the caller kept its process
    assert _said_pid(out["worker_again"]) != out["worker_pid"]
    for agent in ("a", "worker"):
        tool = [m for m in _history(state_root, agent) if m["role"] == "tool"]
        assert [m["content"][0]["output"]["value"]["code"] for m in tool] == ["E_TOOL_CANCELLED"], agent
    assert len(_lines(root / "runs.txt")) == 1
