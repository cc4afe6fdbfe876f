"""An ``entry`` written without ``.py`` (``./tools/calc``) or as a Python module name (``tools.calc``,
what a Python developer writes) names the file meant when it exists: the suggestion was only "point
it at a .py module"."""

from __future__ import annotations

import shutil
from pathlib import Path

from cli_testkit import gdn

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_an_entry_without_py_or_as_a_module_name_names_the_file(tmp_path: Path) -> None:
    bundle = tmp_path / "quickstart"
    shutil.copytree(EXAMPLES / "quickstart", bundle)
    manifest = (bundle / "goondan.yaml").read_text()
    assert "entry: ./tools/calc.py" in manifest
    for written in ("./tools/calc", "tools.calc"):
        (bundle / "goondan.yaml").write_text(manifest.replace("entry: ./tools/calc.py", f"entry: {written}"))
        validate = gdn(tmp_path, "validate", "quickstart")
        assert validate.returncode == 4, validate.stdout
        assert f"Tool/calc: entry '{written}' must be a Python file (.py)" in validate.stdout
        assert "suggestion: did you mean './tools/calc.py'? point it at a .py module" in validate.stdout
        run = gdn(tmp_path, "run", "quickstart", "--input", "add 2 and 3")
        assert run.returncode == 3 and "did you mean './tools/calc.py'?" in run.stderr
    (bundle / "goondan.yaml").write_text(manifest.replace("entry: ./tools/calc.py", "entry: tools.nothing"))
    assert "did you mean" not in gdn(tmp_path, "validate", "quickstart").stdout
