"""Cancelling from a connector: a ``/cancel`` message routed to a conversation cancels that
conversation's running turn (whose own message is answered as the cancelled turn ends), and says
so; another conversation's ``/cancel`` finds nothing to cancel and leaves it running."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from cn_testkit import free_port, gdn_run, post

import kit
from goondan.connectors._cancel_command import is_cancel_command

MODEL = """\
def generate(request):
    last = request.messages[-1]
    if last["role"] == "tool":
        return {"text": "napped"}
    if last["content"] == "slow":
        return {"toolCalls": [{"id": "c1", "name": "t__nap", "args": {}}]}
    return {"text": "said " + str(last["content"])}
"""

TOOL = """\
import asyncio
from pathlib import Path


async def nap(ctx, args):
    Path(__file__).with_name("napping").write_text("1")
    await asyncio.sleep(30)
    return "rested"


handlers = {"nap": nap}
"""


def webhook(port: int) -> str:
    return (
        "apiVersion: goondan.ai/v1\nkind: Connection\nmetadata:\n  name: hook\nspec:\n"
        '  connectorRef: { kind: Connector, name: webhook, package: "@goondan/base" }\n'
        f'  config:\n    port: {{ value: "{port}" }}\n'
        "  ingress:\n    rules:\n      - route: { instanceKeyProperty: chat }\n"
    )


def say(port: int, text: str, chat: str = "c1", timeout: float = 15) -> dict[str, Any]:
    body = json.dumps({"text": text, "properties": {"chat": chat}}).encode()
    status, reply = post(f"http://127.0.0.1:{port}/", body, timeout=timeout)
    assert status == 200, reply
    return dict(reply)


def test_a_cancel_message_cancels_the_running_turn_of_its_conversation_only(tmp_path: Path) -> None:
    port = free_port()
    bundle = kit.write_bundle(
        tmp_path / "b",
        kit.package_doc(),
        kit.python_model_doc(),
        kit.tool_doc("t", "./t.py", [kit.export("nap")]),
        kit.agent_doc("a", tools=["t"]),
        kit.swarm_doc(["a"]),
        webhook(port),
        files={"model.py": MODEL, "t.py": TOOL},
    )
    slow: dict[str, Any] = {}
    with gdn_run(tmp_path, bundle) as run:
        run.wait_ready()
        worker = threading.Thread(target=lambda: slow.update(say(port, "slow", timeout=30)))
        worker.start()
        deadline = time.monotonic() + 20
        while not (bundle / "napping").exists():
            assert time.monotonic() < deadline, "the tool never started"
            time.sleep(0.05)
        assert say(port, "/cancel", chat="c2")["text"] == "No turn is running."
        assert worker.is_alive()  # another conversation's /cancel left this turn running
        started = time.monotonic()
        assert say(port, "/cancel")["text"] == "Cancelling the running turn."
        worker.join(10)
        took = time.monotonic() - started
        assert not worker.is_alive() and slow.get("ok") is True, slow
        assert took < 2.0, f"the cancelled turn took {took:.1f} s to answer"
        assert say(port, "/cancel")["text"] == "No turn is running."
        assert say(port, "hello")["text"] == "said hello"  # the conversation goes on


def test_only_a_bare_cancel_is_the_command() -> None:
    for text in ("/cancel", "  /CANCEL \n"):
        assert is_cancel_command(text)
    for text in ("cancel", "cancel it", "please cancel", "/cancel now", "", None, 3):
        assert not is_cancel_command(text)
