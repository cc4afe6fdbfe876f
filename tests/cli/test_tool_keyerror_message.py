"""A tool that raises KeyError (a misspelt ``args`` or ``ctx.config`` key: the commonest bug in a new
tool) gives the model and ``gdn logs`` ``KeyError: 'precision'``: ``str(KeyError('precision'))`` is
``'precision'``, so the error result said only ``"message": "'precision'"``. Through the real
quickstart bundle and ``gdn run``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from cli_testkit import gdn

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_a_keyerror_in_a_tool_names_the_exception_type(tmp_path: Path) -> None:
    bundle = tmp_path / "quickstart"
    shutil.copytree(EXAMPLES / "quickstart", bundle)
    (bundle / "tools" / "calc.py").write_text(
        "def add(ctx, args):\n    return {'sum': round(args['a'] + args['b'], ctx.config['precision'])}\n\n\n"
        "handlers = {'add': add}\n"
    )
    run = gdn(tmp_path, "run", "quickstart", "--input", "add 2 and 3", "--state-root", "state")
    assert run.returncode == 0, run.stderr
    said = json.loads(run.stdout.removeprefix("Tool said: "))
    assert said == {"code": "E_TOOL_ERROR", "message": "KeyError: 'precision'"}
    logs = gdn(tmp_path, "logs", "--state-root", "state", "-v")
    assert "KeyError: 'precision'" in logs.stdout
