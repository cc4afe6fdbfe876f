"""Parallel tool calls, in every executor (``executor`` fixture): the calls of one step run at the
same time (bounded, ``parallel: false`` tools alone, synchronous handlers in worker threads) and
their results are appended in the order the model made the calls.

The tools append ``[event, tag, time]`` lines to a log file named in their arguments: the agent
may run in another process, so the file is how the timings come back."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import goondan
import kit

# the model makes the calls listed in calls.json next to it, then answers once it saw the results
MODEL = """\
import json
import time
from pathlib import Path


def generate(request):
    if request.messages[-1]["role"] == "tool":
        return {"text": "done"}
    return {"toolCalls": json.loads(Path(__file__).with_name("calls.json").read_text())}
"""

TOOLS = """\
import asyncio
import json
import time
import time


def log(args, event, value=None):
    with open(args["log"], "a") as f:
        f.write(json.dumps([event, args["tag"] if value is None else value, time.time()]) + "\\n")


async def nap(ctx, args):
    log(args, "start")
    await asyncio.sleep(args.get("seconds", 0.5))
    log(args, "end")
    return args["tag"]


def snooze(ctx, args):
    log(args, "start")
    print("snooze is sleeping")  # captured, never in the host's stdout
    time.sleep(args.get("seconds", 0.5))
    log(args, "end")
    return args["tag"]


def alone(ctx, args):
    log(args, "start")
    time.sleep(args.get("seconds", 0.3))
    log(args, "end")
    return args["tag"]


async def tick(ctx, args):
    log(args, "start")
    ticks = 0
    until = time.time() + args.get("seconds", 0.5)
    while time.time() < until:
        await asyncio.sleep(0.05)
        ticks += 1
    log(args, "ticks", ticks)
    log(args, "end")
    return ticks


handlers = {"nap": nap, "snooze": snooze, "alone": alone, "tick": tick}
"""

EXPORTS = [
    kit.export("nap"),
    kit.export("snooze"),
    {**kit.export("alone"), "parallel": False},
    kit.export("tick"),
]


def bundle(root: Path, calls: list[dict[str, Any]], policy: dict[str, Any] | None = None) -> Path:
    docs = [
        kit.package_doc(),
        kit.python_model_doc(),
        kit.tool_doc("t", "./t.py", EXPORTS),
        kit.agent_doc("a", tools=["t"]),
        kit.swarm_doc(["a"], policy=policy),
    ]
    files = {"model.py": MODEL, "t.py": TOOLS, "calls.json": json.dumps(calls)}
    return kit.write_bundle(root, *docs, files=files)


def calls_of(log: Path, *specs: tuple[str, str, float]) -> list[dict[str, Any]]:
    """Tool calls ``t__<tool>`` with ids ``c-<tag>``, logging to ``log``."""
    return [
        {"id": f"c-{tag}", "name": f"t__{tool}", "args": {"log": str(log), "tag": tag, "seconds": seconds}}
        for tool, tag, seconds in specs
    ]


def run(root: Path, state_root: Path, executor: str) -> tuple[Any, list[dict[str, Any]]]:
    async def main() -> tuple[Any, list[dict[str, Any]]]:
        async with goondan.Runtime(root, state_root=state_root, executor=executor) as rt:
            result = await rt.request("go")
            return result, kit.history(rt)

    return asyncio.run(main())


def spans(log: Path) -> dict[str, tuple[float, float]]:
    """``tag -> (start, end)`` from the tools' log."""
    starts: dict[str, float] = {}
    out: dict[str, tuple[float, float]] = {}
    for line in log.read_text().splitlines():
        event, tag, at = json.loads(line)
        if event == "start":
            starts[tag] = at
        elif event == "end":
            out[tag] = (starts[tag], at)
    return out


def most_at_once(intervals: list[tuple[float, float]]) -> int:
    edges = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    now = best = 0
    for _, step in edges:
        now += step
        best = max(best, now)
    return best


def test_two_tool_calls_sleeping_half_a_second_finish_in_well_under_a_second(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    log = tmp_path / "log"
    calls = calls_of(log, ("nap", "a", 0.5), ("nap", "b", 0.5), ("snooze", "c", 0.5), ("snooze", "d", 0.5))
    result, _ = run(bundle(tmp_path / "b", calls), state_root, executor)
    assert result.finish_reason == "text_response", result.error
    seen = spans(log)
    first = min(s for s, _ in seen.values())
    last = max(e for _, e in seen.values())
    assert last - first < 0.8, seen  # one by one: 2 s
    assert most_at_once(list(seen.values())) == 4


def test_results_keep_the_order_the_model_made_the_calls(tmp_path: Path, state_root: Path, executor: str) -> None:
    log = tmp_path / "log"
    calls = calls_of(log, ("nap", "slow", 0.4), ("nap", "fast", 0.01), ("snooze", "mid", 0.2))
    result, history = run(bundle(tmp_path / "b", calls), state_root, executor)
    assert result.finish_reason == "text_response", result.error
    seen = spans(log)
    assert seen["fast"][1] < seen["mid"][1] < seen["slow"][1]  # they finished in the other order
    results = kit.tool_results(history)
    assert [r["toolCallId"] for r in results] == ["c-slow", "c-fast", "c-mid"]
    assert [r["output"]["value"] for r in results] == ["slow", "fast", "mid"]
    # the message events on disk are in call order too, and every call has its own well-formed span
    [folder] = kit.instance_dirs(state_root)
    stored = kit.tool_results(r["data"] for r in kit.read_jsonl(folder / "messages" / "base.jsonl"))
    assert [r["toolCallId"] for r in stored] == ["c-slow", "c-fast", "c-mid"]
    events = kit.read_jsonl(folder / "messages" / "runtime-events.jsonl")
    called = {e["toolCallId"]: e for e in events if e["type"] == "tool.called"}
    completed = {e["toolCallId"]: e for e in events if e["type"] == "tool.completed"}
    assert set(called) == set(completed) == {"c-slow", "c-fast", "c-mid"}
    steps = {e["spanId"] for e in events if e["type"] == "step.started"}
    for cid, record in called.items():
        assert completed[cid]["spanId"] == record["spanId"]
        assert record["parentSpanId"] in steps
        assert completed[cid]["status"] == "ok"
    assert len({r["spanId"] for r in called.values()}) == 3


def test_a_tool_exported_parallel_false_runs_alone(tmp_path: Path, state_root: Path, executor: str) -> None:
    log = tmp_path / "log"
    calls = calls_of(log, ("nap", "a", 0.3), ("nap", "b", 0.3), ("alone", "x", 0.3), ("nap", "c", 0.3))
    result, history = run(bundle(tmp_path / "b", calls), state_root, executor)
    assert result.finish_reason == "text_response", result.error
    seen = spans(log)
    assert most_at_once([seen["a"], seen["b"]]) == 2  # the others still run together
    assert max(seen["a"][1], seen["b"][1]) <= seen["x"][0]
    assert seen["x"][1] <= seen["c"][0]
    assert [r["toolCallId"] for r in kit.tool_results(history)] == ["c-a", "c-b", "c-x", "c-c"]


def test_a_synchronous_handler_does_not_block_the_event_loop(tmp_path: Path, state_root: Path, executor: str) -> None:
    log = tmp_path / "log"
    calls = calls_of(log, ("snooze", "sync", 0.5), ("tick", "async", 0.5))
    result, _ = run(bundle(tmp_path / "b", calls), state_root, executor)
    assert result.finish_reason == "text_response", result.error
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    ticks = next(value for event, value, _ in lines if event == "ticks")
    assert ticks >= 6, ticks  # ~10 ticks of 50 ms while the other call sleeps; blocked: 1 or 2
    seen = spans(log)
    assert most_at_once(list(seen.values())) == 2


def test_max_parallel_tool_calls_bounds_how_many_run_at_once(tmp_path: Path, state_root: Path, executor: str) -> None:
    log = tmp_path / "log"
    calls = calls_of(log, *[("nap", str(i), 0.2) for i in range(4)])
    root = bundle(tmp_path / "b", calls, policy={"maxParallelToolCalls": 2})
    result, history = run(root, state_root, executor)
    assert result.finish_reason == "text_response", result.error
    assert most_at_once(list(spans(log).values())) == 2
    assert [r["toolCallId"] for r in kit.tool_results(history)] == ["c-0", "c-1", "c-2", "c-3"]


def test_max_parallel_tool_calls_of_one_runs_the_calls_one_by_one(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    log = tmp_path / "log"
    calls = calls_of(log, ("nap", "a", 0.1), ("snooze", "b", 0.1), ("nap", "c", 0.1))
    result, history = run(bundle(tmp_path / "b", calls, policy={"maxParallelToolCalls": 1}), state_root, executor)
    assert result.finish_reason == "text_response", result.error
    seen = spans(log)
    assert seen["a"][1] <= seen["b"][0] and seen["b"][1] <= seen["c"][0]
    assert [r["toolCallId"] for r in kit.tool_results(history)] == ["c-a", "c-b", "c-c"]


def test_the_per_step_tool_call_limit_still_holds_with_parallel_calls(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    log = tmp_path / "log"
    calls = calls_of(log, *[("nap", str(i), 0.01) for i in range(130)])
    result, history = run(bundle(tmp_path / "b", calls), state_root, executor)
    assert result.finish_reason == "text_response", result.error
    results = kit.tool_results(history)
    assert [r["toolCallId"] for r in results] == [f"c-{i}" for i in range(130)]
    codes = [r["output"]["value"]["code"] if r["output"]["type"] == "error-json" else None for r in results]
    assert codes == [None] * 128 + ["E_TOOL_CALL_LIMIT"] * 2
    assert len(spans(log)) == 128


def test_cancel_while_calls_run_in_parallel_stops_them_all_and_answers_every_call(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    log = tmp_path / "log"
    calls = calls_of(log, ("nap", "a", 30), ("snooze", "b", 30), ("nap", "c", 30))
    root = bundle(tmp_path / "b", calls)

    async def main() -> tuple[Any, float, list[dict[str, Any]]]:
        async with goondan.Runtime(root, state_root=state_root, executor=executor) as rt:
            task = asyncio.create_task(rt.request("go"))
            for _ in range(400):  # until all three calls have started
                if log.exists() and log.read_text().count('"start"') == 3:
                    break
                await asyncio.sleep(0.025)
            started = time.monotonic()
            assert await rt.cancel() is True
            result = await asyncio.wait_for(task, 5)
            return result, time.monotonic() - started, kit.history(rt)

    began = time.monotonic()
    result, elapsed, history = asyncio.run(main())
    assert result.finish_reason == "cancelled", result
    assert elapsed < 1.0
    assert time.monotonic() - began < 15  # the runtime closes without waiting for the sleeping thread
    results = kit.tool_results(history)
    assert [r["toolCallId"] for r in results] == ["c-a", "c-b", "c-c"]
    assert {r["output"]["value"]["code"] for r in results} == {"E_TOOL_CANCELLED"}


# agent a asks agent b (through agents__request) while another call of its step runs; b then makes a
# single tool call of its own in its own turn
NESTED_MODEL = """\
import json


def generate(request):
    last = request.messages[-1]
    if last["role"] == "tool":
        return {"text": "done by " + request.agent_name}
    log = json.loads(open(__file__.replace("model.py", "log.json")).read())
    nap = {"name": "t__nap", "args": {"log": log, "tag": request.agent_name, "seconds": 0.05}}
    if request.agent_name == "a":
        return {"toolCalls": [{"name": "agents__request", "args": {"target": "b", "input": "go"}}, nap]}
    return {"toolCalls": [nap]}
"""


def test_a_turn_started_from_a_parallel_call_runs_its_own_calls_as_usual(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    """The marks a parallel step puts on its calls' context (results handed back, handlers in
    threads) must not leak into another agent's turn that one of those calls starts."""
    log = tmp_path / "log"
    docs = [
        kit.package_doc(),
        kit.python_model_doc(),
        kit.tool_doc("t", "./t.py", EXPORTS),
        kit.agent_doc("a", tools=["t", kit.base_ref("Tool", "agents")]),
        kit.agent_doc("b", tools=["t"]),
        kit.swarm_doc(["a", "b"]),
    ]
    files = {"model.py": NESTED_MODEL, "t.py": TOOLS, "log.json": json.dumps(str(log))}
    root = kit.write_bundle(tmp_path / "b", *docs, files=files)

    async def main() -> tuple[Any, list[dict[str, Any]]]:
        async with goondan.Runtime(root, state_root=state_root, executor=executor) as rt:
            result = await rt.request("go")
            return result, kit.history(rt, "b")

    result, b_history = asyncio.run(main())
    assert result.finish_reason == "text_response", result.error
    assert result.text == "done by a"
    assert kit.roles(b_history) == ["user", "assistant", "tool", "assistant"]
    assert [r["output"]["value"] for r in kit.tool_results(b_history)] == ["b"]
