"""A Tool export whose ``parameters`` has no ``type`` (``parameters: {properties: ...}``, the usual
slip) or another type says which and what to write: the message was only "parameters must be a JSON
Schema with type: object", with no suggestion."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from cli_testkit import gdn

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_parameters_without_type_object_say_what_they_have_and_what_to_write(tmp_path: Path) -> None:
    bundle = tmp_path / "quickstart"
    shutil.copytree(EXAMPLES / "quickstart", bundle)
    manifest = (bundle / "goondan.yaml").read_text()
    written = "parameters:\n        type: object\n"
    assert written in manifest
    cases = {"parameters:\n": "this one has no 'type'", "parameters:\n        type: obj\n": "has type 'obj'"}
    for replacement, found in cases.items():
        (bundle / "goondan.yaml").write_text(manifest.replace(written, replacement, 1))
        proc = gdn(tmp_path, "validate", "quickstart", "--format", "json")
        assert proc.returncode == 4, proc.stdout
        (error,) = json.loads(proc.stdout)["errors"]
        assert error["code"] == "E_CONFIG_SCHEMA_INVALID"
        assert "parameters must be a JSON Schema with type: object" in error["message"] and found in error["message"]
        assert "type: object" in error["suggestion"]
