"""A connector's ``/cancel`` stops a turn stuck in a synchronous tool too: ``gdn run`` kills that
conversation's agent process once the turn has not stopped within ``GOONDAN_CANCEL_GRACE_MS``, the
stuck message is answered (as cancelled), and the conversation goes on in a fresh process with the
call answered ``E_TOOL_CANCELLED`` and the tool never run again."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from cn_testkit import free_port, gdn_run, post

import kit

MODEL = """\
import os


def generate(request):
    last = request.messages[-1]
    if last["role"] == "tool":
        return {"text": "woke"}
    if last["content"] == "stuck":
        return {"toolCalls": [{"id": "c1", "name": "t__stuck", "args": {}}]}
    return {"text": "said " + str(last["content"]) + " in " + str(os.getpid())}
"""

TOOL = """\
import os
import time
from pathlib import Path


def stuck(ctx, args):
    with open(Path(__file__).with_name("runs.txt"), "a", encoding="utf-8") as fh:
        fh.write(str(os.getpid()) + "\\n")
    time.sleep(60)
    return "woke up"


handlers = {"stuck": stuck}
"""


def webhook(port: int) -> str:
    return (
        "apiVersion: goondan.ai/v1\nkind: Connection\nmetadata:\n  name: hook\nspec:\n"
        '  connectorRef: { kind: Connector, name: webhook, package: "@goondan/base" }\n'
        f'  config:\n    port: {{ value: "{port}" }}\n'
        "  ingress:\n    rules:\n      - route: { instanceKeyProperty: chat }\n"
    )


def say(port: int, text: str, timeout: float = 15) -> dict[str, Any]:
    body = json.dumps({"text": text, "properties": {"chat": "c1"}}).encode()
    status, reply = post(f"http://127.0.0.1:{port}/", body, timeout=timeout)
    assert status == 200, reply
    return dict(reply)


def test_a_cancel_message_kills_the_process_of_a_turn_stuck_in_a_synchronous_tool(tmp_path: Path) -> None:
    port = free_port()
    bundle = kit.write_bundle(
        tmp_path / "b",
        kit.package_doc(),
        kit.python_model_doc(),
        kit.tool_doc("t", "./t.py", [kit.export("stuck")]),
        kit.agent_doc("a", tools=["t"]),
        kit.swarm_doc(["a"]),
        webhook(port),
        files={"model.py": MODEL, "t.py": TOOL},
    )
    runs = bundle / "runs.txt"
    stuck: dict[str, Any] = {}
    with gdn_run(tmp_path, bundle, GOONDAN_ISOLATION="process", GOONDAN_CANCEL_GRACE_MS="1000") as run:
        run.wait_ready()
        worker = threading.Thread(target=lambda: stuck.update(say(port, "stuck", timeout=60)))
        worker.start()
        deadline = time.monotonic() + 20
        while not runs.exists():
            assert time.monotonic() < deadline, "the tool never started"
            time.sleep(0.05)
        first = runs.read_text(encoding="utf-8").split()
        started = time.monotonic()
        assert say(port, "/cancel")["text"] == "Cancelling the running turn."
        worker.join(15)
        took = time.monotonic() - started
        assert not worker.is_alive(), "the stuck turn was never answered"
        assert stuck.get("ok") is True, stuck
        assert 0.8 < took < 5.0, f"the cancelled turn took {took:.1f} s to answer"
        hello = say(port, "hello")["text"]
        assert hello.startswith("said hello in ") and hello.rsplit(" ", 1)[1] != first[0]  # a fresh process
    assert runs.read_text(encoding="utf-8").split() == first  # never run again
    base = kit.read_jsonl(kit.instance_dir(tmp_path / "state", "a", "c1") / "messages" / "base.jsonl")
    roles = [m["data"]["role"] for m in base]
    assert roles == ["user", "assistant", "tool", "user", "assistant"], roles
    assert base[2]["data"]["content"][0]["output"]["value"]["code"] == "E_TOOL_CANCELLED"
