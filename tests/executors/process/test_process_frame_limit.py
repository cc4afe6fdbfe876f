"""A turn result or an event above the IPC frame limit fails that one request with
``E_IPC_FRAME_TOO_LARGE``; the instance keeps serving (real agent processes)."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

import goondan
from goondan import GoondanError
from goondan.executors.process import _ipc

API = "goondan.ai/v1"
MODEL = """\
def generate(request):
    text = request.messages[-1]["content"]
    if text.startswith("big "):
        return {"text": "x" * int(text.split()[1])}
    return {"text": "echo: " + text[:40]}
"""


def bundle(root: Path) -> Path:
    docs: list[dict[str, Any]] = [
        {"apiVersion": API, "kind": "Package", "metadata": {"name": "frames"}, "spec": {"version": "0.1.0"}},
        {
            "apiVersion": API,
            "kind": "Model",
            "metadata": {"name": "m"},
            "spec": {"provider": "python", "model": "fake", "options": {"entry": "./model.py"}},
        },
        {
            "apiVersion": API,
            "kind": "Agent",
            "metadata": {"name": "a"},
            "spec": {"modelConfig": {"modelRef": "Model/m"}},
        },
        {
            "apiVersion": API,
            "kind": "Swarm",
            "metadata": {"name": "frames"},
            "spec": {"entryAgent": "Agent/a", "agents": [{"ref": "Agent/a"}]},
        },
    ]
    root.mkdir(parents=True)
    (root / "goondan.yaml").write_text(yaml.safe_dump_all(docs, sort_keys=False), encoding="utf-8")
    (root / "model.py").write_text(textwrap.dedent(MODEL), encoding="utf-8")
    return root


def test_an_oversized_turn_result_fails_that_request_and_the_instance_keeps_serving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    limit = 64 * 1024
    monkeypatch.setenv(_ipc.MAX_FRAME_ENV, str(limit))  # the agent processes read it at start
    monkeypatch.setattr(_ipc, "MAX_FRAME", limit)
    root = bundle(tmp_path / "b")

    async def main() -> None:
        async with goondan.Runtime(root, state_root=tmp_path / "s", isolation="process") as rt:
            assert (await rt.request("hello", instance_key="k")).text == "echo: hello"
            big = await asyncio.wait_for(rt.request(f"big {limit}", instance_key="k"), 30)
            assert big.finish_reason == "error"
            assert big.error is not None and big.error["code"] == "E_IPC_FRAME_TOO_LARGE"
            after = await asyncio.wait_for(rt.request("after", instance_key="k"), 30)
            assert after.text == "echo: after"
            # the other direction: an event above the limit never leaves the host
            with pytest.raises(GoondanError) as info:
                await asyncio.wait_for(rt.request("y" * limit, instance_key="k"), 30)
            assert info.value.code == "E_IPC_FRAME_TOO_LARGE"
            again = await asyncio.wait_for(rt.request("again", instance_key="k"), 30)
            assert again.text == "echo: again"

    asyncio.run(main())


def test_a_result_above_the_default_64_mib_limit_does_not_wedge_the_instance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(_ipc.MAX_FRAME_ENV, raising=False)
    assert _ipc.MAX_FRAME == _ipc.DEFAULT_MAX_FRAME == 64 * 1024 * 1024
    root = bundle(tmp_path / "b")
    size = 33 * 1024 * 1024  # the result carries the text twice (text and responseMessage): > 64 MiB

    async def main() -> None:
        async with goondan.Runtime(root, state_root=tmp_path / "s", isolation="process", persist=False) as rt:
            big = await asyncio.wait_for(rt.request(f"big {size}", instance_key="k"), 120)
            # whether the turn loop bounded the model's text first or the channel refused the frame,
            # the request is answered
            assert big.finish_reason in ("text_response", "error"), big
            after = await asyncio.wait_for(rt.request("after", instance_key="k"), 60)
            assert after.text == "echo: after"

    asyncio.run(main())
