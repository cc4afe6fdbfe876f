"""A bundle for approval tests: a model that picks its calls from the user's text, a Tool whose
``run`` export needs approval (``echo`` does not; both log what ran to a file), a toolCall
middleware that asks for approval of ``cmd == "big"``, and the built-in bash tool."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kit.bundles import write_bundle
from kit.docs import agent_doc, base_ref, export, extension_doc, package_doc, python_model_doc, swarm_doc, tool_doc

# The model answers from the conversation: after tool results it reports them as JSON text;
# otherwise the user's text picks the calls ("one": a guarded call, "two": two guarded calls,
# "mw": a call a middleware guards, "bash": the built-in bash tool).
MODEL = """\
import asyncio
import json


def _text(message):
    content = message["content"]
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content if p.get("type") == "text")


async def generate(request):
    last = request.messages[-1]
    if last["role"] == "tool":
        results = []
        for message in reversed(request.messages):
            if message["role"] != "tool":
                break
            for part in message["content"]:
                results.insert(0, {"name": part["toolName"], "output": part["output"]})
        return {"text": "RESULTS " + json.dumps(results)}
    said = _text(last)
    if said == "one":
        return {"text": "I will run it.", "toolCalls": [{"id": "c1", "name": "shell__run", "args": {"cmd": "rm x"}}]}
    if said == "two":
        return {"toolCalls": [
            {"id": "c1", "name": "shell__run", "args": {"cmd": "a"}},
            {"id": "c2", "name": "shell__echo", "args": {"cmd": "free"}},
            {"id": "c3", "name": "shell__run", "args": {"cmd": "b"}},
        ]}
    if said == "ask":  # an async request to agent b, then a guarded call
        return {"toolCalls": [
            {"id": "c1", "name": "agents__request", "args": {"target": "b", "input": "slow hello", "async": True}},
            {"id": "c2", "name": "shell__run", "args": {"cmd": "x"}},
        ]}
    if said == "slow hello":  # agent b answers after the asking turn paused
        await asyncio.sleep(0.3)
    if said == "pair":
        return {"toolCalls": [
            {"id": "c1", "name": "shell__run", "args": {"cmd": "a"}},
            {"id": "c2", "name": "shell__echo", "args": {"cmd": "free"}},
        ]}
    if said == "mw":
        return {"toolCalls": [{"id": "c1", "name": "shell__echo", "args": {"cmd": "big"}}]}
    if said == "bash":
        return {"toolCalls": [{"id": "c1", "name": "bash__exec", "args": {"command": "echo hi"}}]}
    return {"text": "said " + said}
"""

TOOL = """\
from pathlib import Path


def run(ctx, args):
    with open(ctx.config["log"], "a") as f:
        f.write(args["cmd"] + "\\n")
    return "ran " + args["cmd"]


def echo(ctx, args):
    with open(ctx.config["log"], "a") as f:
        f.write("echo " + args["cmd"] + "\\n")
    return "echo " + args["cmd"]


handlers = {"run": run, "echo": echo}
"""

GUARD = """\
def register(api):
    async def guard(ctx):
        if ctx.args.get("cmd") == "big":
            ctx.require_approval("big commands need a person")
        result = await ctx.next()
        return result

    api.pipeline.register("toolCall", guard)
"""


def approval_bundle(
    root: Path,
    log: Path,
    *,
    timeout: float | None = None,
    policy: list[str] | None = None,
    extra: str | None = None,
    max_parallel: int | None = None,
    peer: bool = False,
) -> Path:
    run_export = {**export("run", {"cmd": {"type": "string"}}), "approval": "required"}
    tool = tool_doc("shell", "./shell.py", [run_export, export("echo", {"cmd": {"type": "string"}})])
    tool["spec"]["config"] = {"log": str(log)}
    tools: list[Any] = ["shell", base_ref("Tool", "bash")]
    if peer:  # agent a may ask agent b (agents__request)
        tools.append(base_ref("Tool", "agents"))
    agent = agent_doc("a", tools=tools, extensions=["guard"])
    approval: dict[str, Any] = {}
    if timeout is not None:
        approval["timeoutSeconds"] = timeout
    if policy is not None:
        approval["tools"] = policy
    if approval:
        agent["spec"]["approval"] = approval
    docs: list[Any] = [
        package_doc(),
        python_model_doc(),
        tool,
        extension_doc("guard", "./guard.py"),
        agent,
        swarm_doc(
            ["a", "b"] if peer else ["a"], policy={"maxParallelToolCalls": max_parallel} if max_parallel else None
        ),
    ]
    if peer:
        docs.insert(-1, agent_doc("b"))
    if extra is not None:
        docs.append(extra)  # a YAML document more, e.g. a Connection
    return write_bundle(root, *docs, files={"model.py": MODEL, "shell.py": TOOL, "guard.py": GUARD})


def ran(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []
