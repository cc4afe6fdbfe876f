"""The failover scenario of ``test_ray_failover.py``, run in a child Python because it needs a Ray
cluster of its own (``ray.cluster_utils.Cluster``: a head that runs no actors and two worker nodes,
all on this machine) while the test session's Ray stays up.

argv: WORKDIR STORE_URL. Writes ``WORKDIR/result.json``. Steps:

1. turn 1 on ``a@k`` (its actor lands on one worker node);
2. turn 2 calls the ``hold`` tool, which writes ``WORKDIR/held`` and waits for a file nobody
   writes; once ``held`` exists the node hosting the actor is removed (its processes killed);
3. turn 3: the instance comes back on the other node, loads its conversation from the store and
   answers; the model reports whether the interrupted call was answered ``E_TOOL_INTERRUPTED``.

Every runtime event the head saw is recorded, and what the store holds is read back afterwards.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ["RAY_USAGE_STATS_ENABLED"] = "0"

MODEL = """\
import json


def generate(request):
    messages = list(request.messages)
    last = messages[-1]
    if last["role"] == "tool":
        return {"text": "tool said: " + json.dumps(last["content"][0]["output"], sort_keys=True)}
    text = last["content"] if isinstance(last["content"], str) else ""
    if text.startswith("hold "):
        return {"text": None, "toolCalls": [{"name": "t__hold", "args": {"dir": text[5:]}}]}
    interrupted = "E_TOOL_INTERRUPTED" in json.dumps(messages, default=str)
    return {"text": f"got {text}; interrupted call answered: {interrupted}"}
"""

TOOLS = """\
import asyncio
from pathlib import Path


async def hold(ctx, args):
    Path(args["dir"], "held").write_text("held")
    while not Path(args["dir"], "release").exists():
        await asyncio.sleep(0.05)
    return "released"


handlers = {"hold": hold}
"""


def failover_bundle(root: Path) -> Path:
    import kit

    docs = [
        kit.package_doc("ray-failover"),
        kit.python_model_doc(),
        kit.tool_doc("t", "./tools.py", [kit.export("hold", {"dir": {"type": "string"}})]),
        kit.agent_doc("a", tools=["t"]),
        kit.swarm_doc(["a"]),
    ]
    return kit.write_bundle(root, *docs, files={"model.py": MODEL, "tools.py": TOOLS})


async def scenario(cluster: Any, workdir: Path, store: str) -> dict[str, Any]:
    import goondan

    root = failover_bundle(workdir / "bundle")
    out: dict[str, Any] = {}
    seen: list[dict[str, Any]] = []
    async with goondan.Runtime(root, state_root=workdir / "state", executor="ray", store=store) as rt:
        rt.on_runtime_event(seen.append)
        first = await rt.request("hello", agent="a", instance_key="k")
        out["first"] = [first.finish_reason, first.text]
        where = await rt.executor.actor_node("a", "k")
        out["node_before"] = where["nodeId"]
        turn = asyncio.ensure_future(rt.request(f"hold {workdir}", agent="a", instance_key="k"))
        deadline = time.monotonic() + 60
        while not (workdir / "held").exists():
            assert time.monotonic() < deadline, "the hold tool never started"
            await asyncio.sleep(0.05)
        [victim] = [n for n in cluster.worker_nodes if n.node_id == where["nodeId"]]
        killed_at = time.monotonic()
        cluster.remove_node(victim, allow_graceful=False)
        try:
            second = await asyncio.wait_for(turn, 120)
            out["second"] = [second.finish_reason, (second.error or {}).get("code")]
        except goondan.GoondanError as exc:
            out["second"] = ["raised", exc.code]
        out["second_failed_after_s"] = round(time.monotonic() - killed_at, 3)
        third = await rt.request("again", agent="a", instance_key="k")
        out["third"] = [third.finish_reason, third.text]
        out["recovered_after_s"] = round(time.monotonic() - killed_at, 3)
        out["node_after"] = (await rt.executor.actor_node("a", "k"))["nodeId"]
        out["alive_nodes"] = [n.node_id for n in cluster.worker_nodes]
    out["seen"] = seen
    from goondan.storage import open_store

    backend = open_store(store, state_root=workdir / "state")
    [workspace_id] = backend.list_workspaces()
    reader = backend.workspace(workspace_id).reader("a", "k")
    stored, _ = reader.runtime_events()
    out["stored"] = stored
    out["messages"] = [m.to_record() if hasattr(m, "to_record") else str(m) for m in reader.messages()]
    reader.close()
    return out


def main(argv: list[str]) -> int:
    workdir, store = Path(argv[1]), argv[2]
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    for _ in range(2):
        cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
    cluster.wait_for_nodes()
    try:
        out = asyncio.run(scenario(cluster, workdir, store))
    finally:
        ray.shutdown()
        cluster.shutdown()
    (workdir / "result.json").write_text(json.dumps(out, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
