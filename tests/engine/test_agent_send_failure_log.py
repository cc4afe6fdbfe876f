"""An agents__send whose target cannot take it (its tool does not import) is reported on gdn run's
stderr in one coded line with its suggestion: "a send to bad@k was not delivered:
[IPC_DELIVERY_FAILED] ... [E_TOOL_LOAD] ...". Inline it printed an ERROR and three chained internal
tracebacks; with the process executor nothing at all (the send vanished). Real gdn run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kit import agent_doc, base_ref, export, package_doc, python_model_doc, swarm_doc, tool_doc, write_bundle

MODEL = """
import json


def generate(request):
    last = [m for m in request.messages if m["role"] != "system"][-1]
    if last["role"] == "tool":
        return {"text": "sent"}
    return {"toolCalls": [{"name": "agents__send", "args": {"target": "bad", "input": "hi"}}]}
"""


@pytest.mark.parametrize("executor", ["inline", "process"])
def test_a_send_the_target_cannot_take_is_one_coded_line(tmp_path: Path, executor: str) -> None:
    bundle = write_bundle(
        tmp_path / "b",
        package_doc(),
        python_model_doc(),
        tool_doc("broken", "./broken.py", [export("x")]),
        agent_doc("coord", tools=[base_ref("Tool", "agents")]),
        agent_doc("bad", tools=["broken"]),
        swarm_doc(["coord", "bad"]),
        files={"model.py": MODEL, "broken.py": "import not_installed_zz\n"},
    )
    state = str(tmp_path / "state")
    options = ["--state-root", state, "--executor", executor, "--instance-key", "k", "--input", "go", "--json"]
    run = subprocess.run(
        [sys.executable, "-m", "goondan", "run", str(bundle), *options],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["text"] == "sent"
    assert "Traceback" not in run.stderr, run.stderr
    [line] = [line for line in run.stderr.splitlines() if "bad@k" in line]
    assert line.startswith(
        "WARNING goondan.runtime: a send to bad@k was not delivered: [IPC_DELIVERY_FAILED] agent 'bad' could "
        "not take the request [E_TOOL_LOAD]: Tool/broken: importing broken.py failed"
    ), line
    assert "`gdn logs --agent bad -v`" in line
