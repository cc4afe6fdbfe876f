"""What only the Ray executor has (the behaviour it shares with the other executors is proved by the
shared executor suite, which runs against ``ray`` too): each instance is a named actor in the
workspace's namespace, gone when the runtime closes; bad cluster settings are clear errors."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import goondan
import kit
from goondan import GoondanError

MODEL = """\
def generate(request):
    return {"text": f"{request.agent_name}@{request.instance_key} ok"}
"""


def bundle(root: Path) -> Path:
    docs = [kit.package_doc("ray-names"), kit.python_model_doc(), kit.agent_doc("a"), kit.swarm_doc(["a"])]
    return kit.write_bundle(root, *docs, files={"model.py": MODEL})


def test_each_instance_is_a_named_actor_in_the_workspace_namespace_until_the_runtime_closes(
    tmp_path: Path, state_root: Path, ray_session: Any
) -> None:
    ray = ray_session
    root = bundle(tmp_path / "b")

    async def main() -> tuple[str | None, str, dict[str, Any] | None]:
        async with goondan.Runtime(root, state_root=state_root, executor="ray") as rt:
            result = await rt.request("hi", agent="a", instance_key="k1")
            namespace = f"goondan-{rt.executor._context.workspace_identity.workspace_id}"
            actor = ray.get_actor("a@k1", namespace=namespace)
            where = await asyncio.wrap_future(actor.where.remote().future())
            return result.text, namespace, where

    text, namespace, where = asyncio.run(main())
    assert text == "a@k1 ok"
    assert where is not None and where["pid"] != os.getpid()  # the turn ran in the actor's process
    with pytest.raises(ValueError):  # closing the runtime ends its actors
        ray.get_actor("a@k1", namespace=namespace)


def test_bad_actor_options_are_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from goondan.executors import open_executor

    for value, words in (("{not json", "not JSON"), ("[1]", "must be a JSON object")):
        monkeypatch.setenv("GOONDAN_RAY_ACTOR_OPTIONS", value)
        with pytest.raises(GoondanError) as info:
            open_executor("ray")
        assert info.value.code == "E_RAY_OPTIONS" and words in info.value.message
        assert info.value.suggestion


def test_gdn_run_with_a_ray_address_nobody_listens_on_fails_at_once_without_traceback(tmp_path: Path) -> None:
    root = bundle(tmp_path / "b")
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "GOONDAN_RAY_ADDRESS")}
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "goondan", "run", str(root), "--state-root", str(tmp_path / "state")),
            *("--input", "hi", "--executor", "ray", "--ray-address", f"127.0.0.1:{port}"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode != 0
    assert f"[E_RAY_CONNECT] no Ray cluster answers at 127.0.0.1:{port}" in proc.stderr
    assert "ray start --head" in proc.stderr and "Traceback" not in proc.stderr


def test_a_second_runtime_on_the_same_cluster_is_refused_an_instance_the_first_runs(
    tmp_path: Path, state_root: Path, ray_session: Any
) -> None:
    root = bundle(tmp_path / "b")

    async def main() -> tuple[str | None, GoondanError, str | None]:
        async with goondan.Runtime(root, state_root=state_root, executor="ray") as first:
            await first.request("hi", agent="a", instance_key="k")
            async with goondan.Runtime(root, state_root=state_root, executor="ray") as second:
                with pytest.raises(GoondanError) as info:
                    await second.request("me too", agent="a", instance_key="k")
            again = await first.request("still mine", agent="a", instance_key="k")
            return again.text, info.value, again.finish_reason

    text, error, reason = asyncio.run(main())
    assert error.code == "E_INSTANCE_LOCKED"
    assert "a@k" in error.message and "pid " in error.message and error.suggestion
    assert (text, reason) == ("a@k ok", "text_response")  # the holder goes on serving it
