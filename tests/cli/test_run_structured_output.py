"""``gdn run`` with an agent that has ``spec.output.schema``: ``--json`` carries the parsed output,
and an answer that never validates exits non-zero with ``[E_OUTPUT_INVALID]``."""

from __future__ import annotations

import json
from pathlib import Path

from cli_testkit import gdn

import kit

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def bundle(root: Path, reply: str) -> Path:
    model = kit.model_doc("m", "scripted", "x", options={"rules": [{"reply": {"text": reply}}]})
    agent = kit.agent_doc("a")
    agent["spec"]["output"] = {"schema": SCHEMA, "retries": 0}
    return kit.write_bundle(root, kit.package_doc(), model, agent, kit.swarm_doc(["a"]))


def test_run_json_includes_the_structured_output(tmp_path: Path) -> None:
    root = bundle(tmp_path / "b", '{"n": 42}')
    proc = gdn(tmp_path, "run", str(root), "--json", "--input", "go", "--state-root", "s", "--executor", "inline")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["output"] == {"n": 42}
    assert result["finishReason"] == "text_response"


def test_run_with_an_answer_that_never_validates_fails_with_e_output_invalid(tmp_path: Path) -> None:
    root = bundle(tmp_path / "b", '{"n": "many"}')
    proc = gdn(tmp_path, "run", str(root), "--input", "go", "--state-root", "s", "--executor", "inline")
    assert proc.returncode == 1
    assert "[E_OUTPUT_INVALID]" in proc.stderr
    assert "output.n: expected integer but got string" in proc.stderr
    assert "Traceback" not in proc.stderr
