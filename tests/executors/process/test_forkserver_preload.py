"""The fork server imports, before forking, what every agent process would import when its
instance starts (the bundle's model, tool and extension entries, the model provider's module and
SDK), so those pages are shared by all agent processes instead of copied into each. A module whose
import starts a thread is the exception: its thread must run in the agent process as before, so
then the children import the bundle themselves.

Every module of the test bundle appends ``<pid> <what>`` to ``imports.log`` when it is imported,
and the tool module records every later import of the process it runs in, so the log tells which
process imported what.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import goondan
import kit
from models.providers.fake_http import FakeServer, openai_text

RECORD = """\
import os
import sys
from pathlib import Path

LOG = Path(__file__).parent / "imports.log"


def note(what):
    with open(LOG, "a", encoding="utf-8") as fh:
        fh.write(f"{os.getpid()} {what}\\n")
"""

TOOL = (
    RECORD
    + """
note("module tool")


class Recorder:
    # every import after this one, in whichever process makes it
    def find_spec(self, name, path=None, target=None):
        note("import " + name)
        return None


sys.meta_path.insert(0, Recorder())


def ping(ctx, args):
    return "pong"


handlers = {"ping": ping}
"""
)

MODEL = (
    RECORD
    + """
import json
note("module model")


def generate(request):
    return {"text": json.dumps({"pid": os.getpid()})}
"""
)

THREAD_MODEL = (
    RECORD
    + """
import json
import threading
import time

note("module model")
TICKER = threading.Thread(target=lambda: time.sleep(3600), daemon=True, name="ticker")
TICKER.start()


def generate(request):
    return {"text": json.dumps({"pid": os.getpid(), "ticker": TICKER.is_alive()})}
"""
)

EXTENSION = (
    RECORD
    + """
note("module extension")


def register(api):
    pass
"""
)


def bundle(root: Path, model: dict[str, Any], model_code: str | None) -> Path:
    files = {"tool.py": TOOL, "ext.py": EXTENSION}
    if model_code is not None:
        files["model.py"] = model_code
    return kit.write_bundle(
        root,
        kit.package_doc(),
        model,
        kit.tool_doc("probe", "./tool.py", [kit.export("ping")]),
        kit.extension_doc("ext", "./ext.py"),
        kit.agent_doc("caller", tools=["probe"]),
        kit.agent_doc("callee", extensions=["ext"]),
        kit.swarm_doc(["caller", "callee"]),
        files=files,
    )


def imports(root: Path) -> list[tuple[int, str]]:
    lines = (root / "imports.log").read_text(encoding="utf-8").splitlines()
    return [(int(pid), what) for pid, what in (line.split(" ", 1) for line in lines)]


async def one_turn(root: Path, state_root: Path, env: dict[str, str] | None = None) -> tuple[str, int, int]:
    """One turn of ``callee`` in its own agent process: (answer, agent pid, fork server pid)."""
    async with goondan.Runtime(root, state_root=state_root, executor="process", env=env) as rt:
        result = await rt.request("hi", agent="callee", instance_key="k")
        orch: Any = rt.orchestrator
        pid = orch.handles[("callee", "k")].pid
        return str(result.text), int(pid), int(orch.spawner.pid)


def test_fork_server_imports_the_bundles_entries_before_forking_so_an_agent_process_imports_none(
    tmp_path: Path, state_root: Path
) -> None:
    root = bundle(tmp_path / "b", kit.python_model_doc(), MODEL)
    answer, child, server = kit.run(one_turn(root, state_root))
    assert json.loads(answer)["pid"] == child
    log = imports(root)
    modules = {what: pid for pid, what in log if what.startswith("module ")}
    # every entry of every agent (the caller's tool too) was imported once, by the fork server
    assert modules == {"module tool": server, "module model": server, "module extension": server}
    assert len([what for _pid, what in log if what.startswith("module ")]) == 3
    late = [what.removeprefix("import ") for pid, what in log if pid == child and what.startswith("import ")]
    assert not [name for name in late if name.startswith(("goondan.models", "goondan_bundle_"))], late


def test_fork_server_imports_the_openai_sdk_before_forking_so_an_agent_process_imports_none_of_it(
    tmp_path: Path, state_root: Path
) -> None:
    with FakeServer(lambda _req: openai_text("ok")) as fake:
        model = kit.model_doc(
            "m", "openai", "served", endpoint=fake.url + "/v1", apiKey={"valueFrom": {"env": "TEST_OPENAI_KEY"}}
        )
        root = bundle(tmp_path / "b", model, None)
        text, child, server = kit.run(one_turn(root, state_root, env={"TEST_OPENAI_KEY": "sk-test"}))
    assert text == "ok"
    log = imports(root)
    assert {what: pid for pid, what in log if what.startswith("module ")} == {
        "module tool": server,
        "module extension": server,
    }
    late = [what.removeprefix("import ") for pid, what in log if pid == child and what.startswith("import ")]
    # the SDK and goondan's provider module came with the fork (what the SDK imports lazily at its
    # first request, its HTTP stack, may still be imported by the child)
    assert not [name for name in late if name.split(".")[0] in ("openai", "goondan")], late


def test_a_thread_started_by_a_bundle_module_at_import_runs_in_the_agent_process(
    tmp_path: Path, state_root: Path
) -> None:
    root = bundle(tmp_path / "b", kit.python_model_doc(), THREAD_MODEL)
    answer, child, _server = kit.run(one_turn(root, state_root))
    assert json.loads(answer) == {"pid": child, "ticker": True}
    # the fork server that had the thread was replaced by one that preloads nothing: the child
    # imported its entries itself
    assert ("module model") in {what for pid, what in imports(root) if pid == child}
