"""An Extension's ``register`` is called ``register(api, config)`` when it takes two positional
parameters (or ``*args``), else ``register(api)``. ``gdn validate`` reads its ``def`` without running
the module and reports one that can take neither; ``gdn run`` refuses it when the extension loads,
before calling it, with E_EXT_LOAD (it used to fail inside the call as E_EXT_INIT)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_testkit import bundle_with_audit, gdn


def bundle(tmp_path: Path, source: str) -> Path:
    return bundle_with_audit(tmp_path, source)


def validate(tmp_path: Path, source: str) -> tuple[int, dict[str, Any]]:
    proc = gdn(tmp_path, "validate", str(bundle(tmp_path, source)), "--format", "json")
    return proc.returncode, json.loads(proc.stdout)


@pytest.mark.parametrize(
    ("source", "said"),
    [
        ("def register():\n    pass\n", "register() at audit.py:1 takes no positional parameter"),
        ("def register(api, config, extra):\n    pass\n", "needs 3 positional arguments"),
        ("async def register(api, *, mode):\n    pass\n", "needs keyword-only argument(s) mode"),
        ("register = None\n", "`register` at audit.py:1 is None, not a function"),
        ("register = {'on': 'turn'}\n", "is {'on': 'turn'}, not a function"),
    ],
)
def test_a_register_that_cannot_take_api_and_config_is_an_error_at_the_entry(
    tmp_path: Path, source: str, said: str
) -> None:
    code, report = validate(tmp_path, source)
    assert code == 4, report
    (error,) = report["errors"]
    assert error["code"] == "E_CONFIG_EXTENSION_REGISTER_SIGNATURE", error
    assert said in error["message"] and error["path"].endswith("spec.entry"), error
    assert error["line"] and "def register(api, config)" in error["suggestion"]


def test_registers_the_runtime_can_call_pass(tmp_path: Path) -> None:
    for source in (
        "def register(api):\n    pass\n",  # the spec's register(api): called with api only
        "async def register(api, config, extra=None, *, mode='a'):\n    pass\n",
        "def register(*args):\n    pass\n",
        "import functools\n\ndef _r(api, config, x):\n    pass\n\nregister = functools.partial(_r, x=1)\n",
        "class register:\n    def __init__(self, api):\n        pass\n",
    ):
        code, report = validate(tmp_path, source)
        assert code == 0 and report["errors"] == [] and report["warnings"] == [], (source, report)


def test_gdn_run_refuses_a_register_without_parameters_before_calling_it(tmp_path: Path) -> None:
    source = "import pathlib\n\ndef register():\n    pathlib.Path('ran').write_text('x')\n"
    proc = gdn(tmp_path, "run", str(bundle(tmp_path, source)), "--input", "hi")
    assert proc.returncode != 0, proc.stdout
    assert "[E_EXT_LOAD]" in proc.stderr and "cannot be called as register(api)" in proc.stderr, proc.stderr
    assert "E_CONFIG_EXTENSION_REGISTER_SIGNATURE" in proc.stderr  # the suggestion points at gdn validate
    assert not (tmp_path / "ran").exists()


def test_gdn_run_refuses_a_register_that_is_not_a_function(tmp_path: Path) -> None:
    proc = gdn(tmp_path, "run", str(bundle(tmp_path, "register = 'audit'\n")), "--input", "hi")
    assert proc.returncode != 0, proc.stdout
    assert "[E_EXT_LOAD]" in proc.stderr and "its register is str, not a function" in proc.stderr, proc.stderr


def test_gdn_run_shows_an_annotated_register_without_its_annotations(tmp_path: Path) -> None:
    source = (
        "from __future__ import annotations\n\nfrom typing import Any\n\n"
        "def register(api: Any, config: dict[str, Any], extra: int) -> None:\n    pass\n"
    )
    proc = gdn(tmp_path, "run", str(bundle(tmp_path, source)), "--input", "hi")
    assert proc.returncode == 3, proc.stderr
    assert "register(api, config, extra) cannot be called as register(api, config)" in proc.stderr, proc.stderr
