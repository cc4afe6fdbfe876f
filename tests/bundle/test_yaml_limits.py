"""YAML nesting is bounded before anything recursive sees it, and parse errors keep PyYAML's context."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from goondan.bundle import validate_bundle
from goondan.bundle._yaml import MAX_DEPTH, YamlProblem, _parse_problem, parse_documents


def _nested(depth: int, flow: bool) -> str:
    if flow:
        return "a: " + "[" * depth + "]" * depth + "\n"
    lines = [f"{'  ' * i}k{i}:" for i in range(depth)]
    return "\n".join(lines) + " x\n"


def test_libyamls_own_nesting_limit_is_reported_as_nesting_too_deep() -> None:
    # PyYAML 6.0.4's libyaml stops at 1,000 flow levels with a scanner error of its own, which its
    # scanner reaches before the parser's events reach MAX_DEPTH; earlier versions have no limit
    problem = _parse_problem(
        yaml.scanner.ScannerError(
            "while increasing flow level",
            None,
            "exceeded maximum nesting depth",
            yaml.Mark("f", 0, 0, 1002, None, None),
        )
    )
    assert (problem.code, problem.line, problem.column) == ("E_CONFIG_NESTING_TOO_DEEP", 1, 1003)


@pytest.mark.parametrize("command", ["validate", "run"])
def test_yaml_nested_40000_deep_is_a_config_error_not_a_segfault(tmp_path: Path, command: str) -> None:
    bundle = tmp_path / "deep"
    bundle.mkdir()
    (bundle / "goondan.yaml").write_text(_nested(40_000, flow=True))
    assert (bundle / "goondan.yaml").stat().st_size > 80_000
    extra = ["--input", "hi"] if command == "run" else []
    proc = subprocess.run(
        [sys.executable, "-m", "goondan", command, str(bundle), *extra, "--state-root", str(tmp_path / "s")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == (4 if command == "validate" else 3), proc.stderr
    output = proc.stdout + proc.stderr
    assert "E_CONFIG_NESTING_TOO_DEEP" in output
    assert "goondan.yaml:1:" in output
    assert "Traceback" not in output


@settings(max_examples=40, deadline=None)
@given(depth=st.integers(1, MAX_DEPTH + 30), flow=st.booleans())
def test_nesting_is_accepted_up_to_the_limit_and_rejected_beyond(depth: int, flow: bool) -> None:
    text = _nested(depth, flow).encode()
    # the mapping that holds `a:` (flow) or the first key (block) is level 1
    levels = depth + 1 if flow else depth
    if levels <= MAX_DEPTH:
        assert parse_documents(text)
    else:
        with pytest.raises(YamlProblem) as info:
            parse_documents(text)
        assert info.value.code == "E_CONFIG_NESTING_TOO_DEEP" and info.value.line is not None


def test_parse_error_keeps_pyyaml_context_line_and_adds_no_swarm_warning(tmp_path: Path) -> None:
    (tmp_path / "goondan.yaml").write_text("a: b\nc:\n  - d\n e: f\n")
    report = validate_bundle(tmp_path, env={})
    assert [e.code for e in report.errors] == ["E_CONFIG_PARSE_ERROR"]
    assert "while parsing a block mapping that starts at line 1" in report.errors[0].message
    assert report.errors[0].line == 4
    assert report.warnings == []
