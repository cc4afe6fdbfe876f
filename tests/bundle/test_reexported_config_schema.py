"""An Extension whose entry re-exports a built-in's CONFIG_SCHEMA (the MCP recipe's one-line
``from goondan.base.extensions.mcp import CONFIG_SCHEMA, register``) has its config checked by
`gdn validate` at its line: "Bundle is valid." passed a misspelt `transport.typ`, and `gdn run` then
failed with E_EXT_CONFIG and no location."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

RECIPE = Path(__file__).resolve().parents[2] / "docs" / "cookbook" / "mcp-tools"


def _validate(bundle: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "goondan", "validate", str(bundle)],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "HOME": str(bundle.parent / "home"), "NO_COLOR": "1"},
    )


def test_a_misspelt_mcp_config_fails_validate_at_its_line(tmp_path: Path) -> None:
    bundle = tmp_path / "shop"
    shutil.copytree(RECIPE, bundle)
    assert _validate(bundle).returncode == 0
    manifest = bundle / "goondan.yaml"
    source = manifest.read_text()
    manifest.write_text(source.replace("{ type: stdio,", "{ typ: stdio,", 1))
    line = next(i for i, text in enumerate(manifest.read_text().splitlines(), 1) if "typ: stdio" in text)
    checked = _validate(bundle)
    assert checked.returncode == 4, checked.stdout
    assert "[E_CONFIG_EXTENSION_CONFIG_INVALID]" in checked.stdout
    assert "config.transport.typ: unexpected property" in checked.stdout
    assert f"(goondan.yaml:{line}:" in checked.stdout

    manifest.write_text(source.replace("mode: stateful,", "mode: statefull,", 1))
    checked = _validate(bundle)
    assert checked.returncode == 4 and 'config.attach.mode: must be one of ["stateful", "stateless"]' in checked.stdout


def test_a_module_that_binds_config_schema_again_is_not_second_guessed(tmp_path: Path) -> None:
    # its own CONFIG_SCHEMA (not a literal) wins at run time: validate stays silent, as for any such module
    bundle = tmp_path / "shop"
    shutil.copytree(RECIPE, bundle)
    entry = bundle / "inventory.py"
    entry.write_text(entry.read_text() + "\nCONFIG_SCHEMA = dict(CONFIG_SCHEMA, additionalProperties=True)\n")
    manifest = bundle / "goondan.yaml"
    manifest.write_text(manifest.read_text().replace("mode: stateful,", "mode: statefull,", 1))
    assert _validate(bundle).returncode == 0
