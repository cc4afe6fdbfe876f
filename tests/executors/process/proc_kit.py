"""A small bundle for the process-isolation tests. Everything the agent processes observe is
written to files next to the bundle (``out.jsonl``), because those processes share no memory with
the test.

Model (python provider): the last user text drives it —
``call <tool> <json args>`` → one tool call; ``mw-ask <target> <rest>`` → answered normally, the
``mw`` step middleware first requests ``<target>`` with ``<rest>`` (``mw-async ...`` does it async);
anything else → ``<agent>@<key> got: <text>``. After a tool result the model answers
``<agent> tool: <output json>``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import kit
from kit import instance_dir, read_jsonl

__all__ = ["alive", "bundle", "call", "instance_dir", "out", "read_jsonl", "until"]

MODEL = """\
import json
import os
from pathlib import Path

OUT = Path(__file__).parent / "out.jsonl"


def log(**record):
    with open(OUT, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\\n")


def last_text(messages):
    for m in reversed(messages):
        if m["role"] == "user" and isinstance(m["content"], str) and not m["content"].startswith("{"):
            return m["content"]
    return ""


def generate(request):
    messages = list(request.messages)
    last = messages[-1]
    log(kind="model", agent=request.agent_name, key=request.instance_key, pid=os.getpid(), messages=messages)
    if last["role"] == "tool":
        return {"text": request.agent_name + " tool: " + json.dumps(last["content"][0]["output"], sort_keys=True)}
    if last["role"] == "user" and isinstance(last["content"], str) and last["content"].startswith("{"):
        return {"text": request.agent_name + " saw: " + last["content"]}
    text = last_text(messages) if last["role"] in ("user", "system") else ""
    if last["role"] == "user" and isinstance(last["content"], str) and text.startswith("call "):
        _, name, args = text.split(" ", 2)
        return {"text": None, "toolCalls": [{"name": name, "args": json.loads(args)}]}
    return {"text": f"{request.agent_name}@{request.instance_key} got: {text}"}
"""

TOOLS = """\
import asyncio
import json
import os
import time
from pathlib import Path

OUT = Path(__file__).parent / "out.jsonl"


def log(**record):
    with open(OUT, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\\n")


def pid(ctx, args):
    return {"pid": os.getpid(), "agent": ctx.agent_name, "key": ctx.instance_key}


async def sleep(ctx, args):
    await asyncio.sleep(args.get("seconds", 0.1))
    return {"slept": args.get("seconds", 0.1), "pid": os.getpid()}


async def hold(ctx, args):
    while not Path(args["release"]).exists():
        await asyncio.sleep(0.01)
    return {"released": True, "pid": os.getpid()}


def crash(ctx, args):
    os._exit(int(args.get("code", 1)))


def block(ctx, args):
    Path(args["ready"]).write_text(str(os.getpid()))
    time.sleep(60)
    return "never"


async def ask(ctx, args):
    kw = {}
    if "timeoutMs" in args:
        kw["timeout_ms"] = args["timeoutMs"]
    if args.get("async"):
        kw["async_"] = True
    try:
        result = await ctx.runtime.request(args["target"], args.get("input"), **kw)
    except Exception as exc:
        log(kind="ask", agent=ctx.agent_name, error=getattr(exc, "code", type(exc).__name__), message=str(exc))
        raise
    log(kind="ask", agent=ctx.agent_name, response=result.response, async_=result.async_)
    if args.get("thenSleep"):
        await asyncio.sleep(args["thenSleep"])
    return result.response


def restart(ctx, args):
    return {"restartRequested": True, "restartReason": "tool asked"}


async def spawn(ctx, args):
    return await ctx.runtime.spawn(args["target"], instance_key=args.get("instanceKey"))


async def listing(ctx, args):
    return await ctx.runtime.list()


handlers = {
    "pid": pid,
    "sleep": sleep,
    "hold": hold,
    "crash": crash,
    "block": block,
    "ask": ask,
    "restart": restart,
    "spawn": spawn,
    "list": listing,
}
"""

MIDDLEWARE = """\
import json
from pathlib import Path

from goondan import AgentRequestError

OUT = Path(__file__).parent / "out.jsonl"


def log(**record):
    with open(OUT, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\\n")


def register(api):
    async def step(ctx):
        text = ctx.input_event.get("input") or ""
        if ctx.step_index == 0 and (text.startswith("mw-ask ") or text.startswith("mw-async ")):
            mode, target, rest = (text.split(" ", 2) + [""])[:3]
            try:
                result = await ctx.agents.request(target, rest, async_=mode == "mw-async", timeout_ms=20000)
                log(kind="mw", agent=ctx.agent_name, response=result.response, async_=result.async_)
            except AgentRequestError as exc:
                log(kind="mw", agent=ctx.agent_name, error=exc.code, message=exc.message)
        log(kind="event", agent=ctx.agent_name, key=ctx.instance_key, event=ctx.input_event, trace=ctx.trace_id)
        return await ctx.next()

    api.pipeline.register("step", step)
"""

CRASH_EXT = """\
import os


def register(api):
    os._exit(1)
"""


def _schema(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


EXPORTS = [
    {"name": "pid", "description": "pid", "parameters": _schema()},
    {"name": "sleep", "description": "sleep", "parameters": _schema(seconds={"type": "number"})},
    {"name": "hold", "description": "hold", "parameters": _schema(release={"type": "string"})},
    {"name": "crash", "description": "crash", "parameters": _schema(code={"type": "integer"})},
    {"name": "block", "description": "block", "parameters": _schema(ready={"type": "string"})},
    {
        "name": "ask",
        "description": "ask",
        "parameters": _schema(
            target={"type": "string"},
            input={"type": "string"},
            timeoutMs={"type": "integer"},
            thenSleep={"type": "number"},
            **{"async": {"type": "boolean"}},
        ),
    },
    {"name": "restart", "description": "restart", "parameters": _schema()},
    {
        "name": "spawn",
        "description": "spawn",
        "parameters": _schema(target={"type": "string"}, instanceKey={"type": "string"}),
    },
    {"name": "list", "description": "list", "parameters": _schema()},
]


def bundle(
    root: Path,
    agents: Sequence[str] = ("a", "b", "c"),
    *,
    ttl_seconds: int | None = None,
    crash_at_start: Sequence[str] = (),
    grace_seconds: int | None = None,
) -> Path:
    docs: list[dict[str, Any]] = [
        kit.package_doc("proc-test"),
        kit.python_model_doc(model="fake"),
        kit.tool_doc("t", "./tools.py", EXPORTS),
        kit.extension_doc("mw", "./mw.py"),
        kit.extension_doc("crasher", "./crash_ext.py"),
    ]
    for name in agents:
        exts = ["mw"] + (["crasher"] if name in crash_at_start else [])
        docs.append(kit.agent_doc(name, tools=["t"], extensions=exts))
    policy: dict[str, Any] = {}
    if ttl_seconds is not None:
        policy["lifecycle"] = {"ttlSeconds": ttl_seconds}
    if grace_seconds is not None:
        policy["shutdown"] = {"gracePeriodSeconds": grace_seconds}
    docs.append(kit.swarm_doc(list(agents), policy=policy))
    files = {"model.py": MODEL, "tools.py": TOOLS, "mw.py": MIDDLEWARE, "crash_ext.py": CRASH_EXT}
    return kit.write_bundle(root, *docs, files=files)


def call(tool: str, **args: Any) -> str:
    return f"call t__{tool} {json.dumps(args)}"


def out(root: Path, kind: str | None = None) -> list[dict[str, Any]]:
    path = root / "out.jsonl"
    if not path.exists():
        return []
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in records if kind is None or r.get("kind") == kind]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


async def until(predicate: Any, timeout: float = 10.0, what: str = "condition") -> None:
    import asyncio

    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)
