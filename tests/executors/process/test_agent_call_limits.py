"""Inter-agent calls are bounded the same way with every executor: a chain deeper than
``Swarm.spec.policy.maxCallDepth`` (default 8) fails with ``E_AGENT_CALL_DEPTH`` even when every hop
uses a new instance key, and agents creating instances are held to
``maxInstanceSpawnsPerSecond`` and ``maxInstances`` (``E_AGENT_SPAWN_LIMIT``)."""

from __future__ import annotations

import asyncio
import json
import textwrap
from pathlib import Path
from typing import Any

import yaml

import goondan

API = "goondan.ai/v1"

MODEL = """\
import json


def generate(request):
    last = request.messages[-1]
    if last["role"] == "tool":
        return {"text": str(last["content"][0]["output"]["value"])}
    text = last["content"]
    if text.startswith("hop ") or text.startswith("fan "):
        name, n = text.split()
        return {"text": None, "toolCalls": [{"name": "t__" + name, "args": {"n": int(n)}}]}
    return {"text": "leaf " + request.instance_key}
"""

TOOLS = """\
import json
import os
from pathlib import Path

OUT = Path(__file__).parent / "hops.jsonl"


async def hop(ctx, args):
    n = args["n"]
    with open(OUT, "a") as fh:
        fh.write(json.dumps({"n": n, "key": ctx.instance_key, "pid": os.getpid()}) + "\\n")
    try:
        result = await ctx.runtime.request("a", f"hop {n + 1}", instance_key=f"k{n + 1}", timeout_ms=30000)
    except Exception as exc:
        return f"ERR {getattr(exc, 'code', type(exc).__name__)} at {n}: {exc}"
    return result.response


async def fan(ctx, args):
    out = []
    for i in range(args["n"]):
        try:
            await ctx.runtime.spawn("a", instance_key=f"f{i}")
            out.append("ok")
        except Exception as exc:
            out.append(getattr(exc, "code", type(exc).__name__))
    return " ".join(out)


handlers = {"hop": hop, "fan": fan}
"""


def bundle(root: Path, **policy: Any) -> Path:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    spec: dict[str, Any] = {"entryAgent": "Agent/a", "agents": [{"ref": "Agent/a"}]}
    if policy:
        spec["policy"] = policy
    docs: list[dict[str, Any]] = [
        {"apiVersion": API, "kind": "Package", "metadata": {"name": "limits"}, "spec": {"version": "0.1.0"}},
        {
            "apiVersion": API,
            "kind": "Model",
            "metadata": {"name": "m"},
            "spec": {"provider": "python", "model": "fake", "options": {"entry": "./model.py"}},
        },
        {
            "apiVersion": API,
            "kind": "Tool",
            "metadata": {"name": "t"},
            "spec": {
                "entry": "./tools.py",
                "exports": [
                    {"name": "hop", "description": "hop", "parameters": schema},
                    {"name": "fan", "description": "fan", "parameters": schema},
                ],
            },
        },
        {
            "apiVersion": API,
            "kind": "Agent",
            "metadata": {"name": "a"},
            "spec": {"modelConfig": {"modelRef": "Model/m"}, "tools": [{"ref": "Tool/t"}]},
        },
        {"apiVersion": API, "kind": "Swarm", "metadata": {"name": "limits"}, "spec": spec},
    ]
    root.mkdir(parents=True)
    (root / "goondan.yaml").write_text(yaml.safe_dump_all(docs, sort_keys=False), encoding="utf-8")
    (root / "model.py").write_text(textwrap.dedent(MODEL), encoding="utf-8")
    (root / "tools.py").write_text(textwrap.dedent(TOOLS), encoding="utf-8")
    return root


def ask(root: Path, state_root: Path, executor: str, text: str) -> str:
    async def main() -> str:
        async with goondan.Runtime(root, state_root=state_root, executor=executor, persist=False) as rt:
            result = await asyncio.wait_for(rt.request(text, instance_key="k0"), 120)
            await rt.wait_idle()
            return result.text or ""

    return asyncio.run(main())


def hops(root: Path) -> list[dict[str, Any]]:
    path = root / "hops.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_chain_with_a_new_instance_key_per_hop_stops_at_the_default_depth_of_8(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    root = bundle(tmp_path / "b")
    text = ask(root, state_root, executor, "hop 0")
    assert text.startswith("ERR E_AGENT_CALL_DEPTH at 8: "), text
    assert "maxCallDepth" in text
    seen = hops(root)
    assert [h["n"] for h in seen] == list(range(9))  # a@k0 (the host's request) then 8 hops
    if executor != "inline":  # process and ray: one OS process per instance
        assert len({h["pid"] for h in seen}) == 9


def test_max_call_depth_comes_from_the_swarm_policy(tmp_path: Path, state_root: Path, executor: str) -> None:
    root = bundle(tmp_path / "b", maxCallDepth=2)
    text = ask(root, state_root, executor, "hop 0")
    assert text.startswith("ERR E_AGENT_CALL_DEPTH at 2: "), text
    assert [h["n"] for h in hops(root)] == [0, 1, 2]


def test_agents_creating_instances_are_held_to_the_spawn_rate(tmp_path: Path, state_root: Path, executor: str) -> None:
    root = bundle(tmp_path / "b", maxInstanceSpawnsPerSecond=0.01)  # a burst of one, then one per 100 s
    assert ask(root, state_root, executor, "fan 3") == "ok E_AGENT_SPAWN_LIMIT E_AGENT_SPAWN_LIMIT"


def test_agents_cannot_create_instances_beyond_the_live_instance_cap(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    root = bundle(tmp_path / "b", maxInstances=3)
    # a@k0 is live (the host's request); two more fit, the third does not
    assert ask(root, state_root, executor, "fan 4") == "ok ok E_AGENT_SPAWN_LIMIT E_AGENT_SPAWN_LIMIT"
