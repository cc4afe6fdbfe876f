"""The fields of every runtime event of a turn, in their order, on the success and the failure
paths; and, with the in-memory store (which keeps snapshots), that a listener scribbling on the
records it is handed changes none of the records that follow: the engine builds a step's and a
call's last record from fields it keeps to itself, the first record being a copy of them. (The
file store encodes buffered records later: listeners must not change them, see _record_event.)"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import goondan
import kit as k
from kit import agent_doc, call, export, extension_doc, scripted, text, tool_doc

HEX32 = re.compile(r"^[0-9a-f]{32}$")
SPAN = ["type", "timestamp", "agentName", "instanceKey", "traceId", "spanId"]
STEP = [*SPAN, "parentSpanId", "stepId", "stepIndex", "turnId"]
TOOL = [*SPAN, "parentSpanId", "toolCallId", "toolName", "stepId", "turnId"]
FIELDS = {
    "turn.started": [*SPAN, "turnId"],
    "step.started": STEP,
    "tool.called": TOOL,
    "tool.completed": [*TOOL, "status", "duration"],
    "tool.failed": [*TOOL, "duration", "errorMessage", "extensionName", "error"],  # its middleware raised
    "step.completed": [*STEP, "toolCallCount", "duration", "model"],
    "step.failed": [*STEP, "duration", "errorMessage", "error", "model"],
    "turn.completed": [*SPAN, "turnId", "stepCount", "duration"],
    "turn.failed": [*SPAN, "turnId", "duration", "errorMessage", "error"],
}

TOOLS = """\
def noop(ctx, args):
    return "ok"


handlers = {"noop": noop, "broken": noop}
"""

# a toolCall middleware that fails for one tool: the call gets a tool.failed record
BREAKER = """\
def register(api):
    async def breaker(ctx):
        if ctx.tool_name == "t__broken":
            raise RuntimeError("middleware broke")
        return await ctx.next()

    api.pipeline.register("toolCall", breaker)
"""


def _vandal(record: dict[str, Any]) -> None:
    record.update(type="vandalised", traceId="x", spanId="y", stepIndex=-1)
    record.pop("turnId", None)


def _recorded(tmp_path: Path, state_root: Path, persist: bool) -> list[dict[str, Any]]:
    root = k.simple_bundle(
        tmp_path / f"b{persist}",
        agents=[agent_doc("a", tools=["t"], extensions=["breaker"])],
        tools=[tool_doc("t", "./tools/t.py", [export("noop"), export("broken")])],
        extensions=[extension_doc("breaker", "./ext/breaker.py")],
        files={"tools/t.py": TOOLS, "ext/breaker.py": BREAKER},
    )

    async def scenario() -> list[dict[str, Any]]:
        state = state_root / f"s{persist}"
        async with goondan.Runtime(root, state_root=state, isolation="inline", persist=persist) as rt:
            if not persist:
                rt.on_runtime_event(_vandal)
            for _ in range(3):
                await rt.request("go")
            instance = await rt.get_instance(rt.entry_agent, rt.swarm_instance_key)
            return instance.store.read_runtime_events()

    # turn 1: a call that succeeds, then an answer; turn 2: a call whose middleware fails, then an
    # answer; turn 3: the model fails
    k.MODEL = scripted(call("t__noop", {}), text("done"), call("t__broken", {}), text("done"), RuntimeError("down"))
    return k.run(scenario())


def test_runtime_events_keep_their_fields_in_order_and_spans_their_own_values(tmp_path: Path, state_root: Path) -> None:
    for persist in (True, False):
        recorded = _recorded(tmp_path, state_root, persist)
        assert [e["type"] for e in recorded] == [
            *k.ONE_TOOL_TURN_EVENTS,
            "turn.started", "step.started", "tool.called", "tool.failed", "step.completed",
            "step.started", "step.completed", "turn.completed",
            "turn.started", "step.started", "step.failed", "turn.failed",
        ]  # fmt: skip
        started: dict[str, dict[str, Any]] = {}
        for record in recorded:
            assert list(record) == FIELDS[record["type"]], record
            assert HEX32.match(record["traceId"]), record
            kind, phase = record["type"].split(".")
            if phase in ("started", "called"):
                started[kind] = record
            else:  # a span's last record repeats its first one's fields
                first = started[kind]
                for key in FIELDS[first["type"]][2:]:
                    assert record[key] == first[key], (key, record, first)
