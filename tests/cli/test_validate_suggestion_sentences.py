"""A suggestion made of a near name and a list reads as two sentences in `gdn validate`'s output:
``did you mean 'Agent'? Known kinds: ...``, not ``did you mean 'Agent'?; known kinds: ...`` (what
a new user saw). Real `gdn validate --json` on bundles with a misspelt kind and field."""

from __future__ import annotations

import json
from pathlib import Path

from cli_testkit import gdn

from kit import write_bundle

MODEL = """\
apiVersion: goondan.ai/v1
kind: Model
metadata: {name: m}
spec: {provider: scripted, model: x, options: {rules: []}}
"""


def _suggestion(tmp_path: Path, text: str, code: str) -> str:
    write_bundle(tmp_path / "b", text)
    proc = gdn(tmp_path, "validate", "b", "--json")
    assert proc.returncode == 4, proc.stderr
    return next(str(e.get("suggestion")) for e in json.loads(proc.stdout)["errors"] if e["code"] == code)


def test_a_near_name_and_the_known_kinds_are_two_sentences(tmp_path: Path) -> None:
    agnet = "---\napiVersion: goondan.ai/v1\nkind: Agnet\nmetadata: {name: x}\n"
    suggestion = _suggestion(tmp_path, MODEL + agnet, "E_CONFIG_UNKNOWN_KIND")
    assert suggestion.startswith("did you mean 'Agent'? Known kinds: "), suggestion
    assert "?;" not in suggestion


def test_a_near_field_and_the_allowed_fields_are_two_sentences(tmp_path: Path) -> None:
    suggestion = _suggestion(tmp_path, MODEL.replace("options:", "optoins:"), "E_CONFIG_SCHEMA_INVALID")
    assert suggestion.startswith("did you mean 'options'? Allowed fields: "), suggestion
    assert "?;" not in suggestion


def test_a_near_provider_and_the_known_providers_are_two_sentences(tmp_path: Path) -> None:
    typo = MODEL.replace("provider: scripted", "provider: scriptd")
    suggestion = _suggestion(tmp_path, typo, "E_CONFIG_SCHEMA_INVALID")
    assert suggestion.startswith("did you mean 'scripted'? Known providers: "), suggestion
