"""A tool module that calls ``sys.exit()`` at import (a script's ``sys.exit(main())``, a module-level
``parser.parse_args()`` refusing gdn's own arguments) is ``E_TOOL_LOAD`` naming the module and the
exit, exit 3, with either executor: inline it ended ``gdn run`` with no message at all (the module's
exit code), and with the process executor it killed the fork server (``[E_FORKSERVER] 3``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from cli_testkit import gdn

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("executor", ["inline", "process"])
def test_sys_exit_at_a_tool_modules_import_is_a_load_error(tmp_path: Path, executor: str) -> None:
    bundle = tmp_path / "quickstart"
    shutil.copytree(EXAMPLES / "quickstart", bundle)
    (bundle / "tools" / "calc.py").write_text("import sys\n\nsys.exit(5)\n")
    run = gdn(tmp_path, "run", "quickstart", "--input", "add 2 and 3", "--executor", executor, "--state-root", "s")
    assert run.returncode == 3, run.stderr
    assert "[E_TOOL_LOAD] Tool/calc: importing calc.py failed" in run.stderr
    assert "importing calc.py called sys.exit(5); exiting is not allowed in user code" in run.stderr
    assert "E_FORKSERVER" not in run.stderr
