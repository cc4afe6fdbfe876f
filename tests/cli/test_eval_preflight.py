"""``gdn eval`` refuses, once and before any scenario, a bundle that does not load or an override
that names no Model of it: exit 3 (a broken suite) with the suggestion, not N failed scenarios."""

from __future__ import annotations

from pathlib import Path

from cli_testkit import ECHO_BUNDLE, gdn
from test_eval_paths import project

from kit import write_bundle


def test_an_override_of_a_model_the_bundle_lacks_fails_once_with_the_near_name(tmp_path: Path) -> None:
    project(tmp_path, "../quickstart")
    out = gdn(tmp_path, "eval", "evals/suite.yaml", "--model-override", "ecko=openai/gpt-4o-mini")
    assert out.returncode == 3, out.stdout + out.stderr
    assert out.stderr.count("[E_MODEL_OVERRIDE]") == 1 and "did you mean 'echo'?" in out.stderr
    assert "[1/1]" not in out.stderr and "FAIL" not in out.stdout  # no scenario ran


def test_a_bundle_that_does_not_load_is_one_error_listing_its_problems_at_their_lines(tmp_path: Path) -> None:
    project(tmp_path, "../quickstart")
    broken = ECHO_BUNDLE.replace("  model: echo\n", "  model: echo\n  apiKey: {valueFrom: {env: NOT_SET_KEY}}\n", 1)
    write_bundle(tmp_path / "broken", broken)
    out = gdn(tmp_path, "eval", "evals/suite.yaml", "--bundle", "broken")
    assert out.returncode == 3, out.stdout + out.stderr
    assert f"the bundle {(tmp_path / 'broken').resolve()} does not load; no scenario was run" in out.stderr
    assert "[E_CONFIG_ENV_MISSING] required environment variable NOT_SET_KEY" in out.stderr
    assert "(goondan.yaml:" in out.stderr and "gdn validate broken" in out.stderr
    assert "[1/1]" not in out.stderr and "FAIL" not in out.stdout


def test_a_scenario_agent_or_suite_swarm_the_bundle_lacks_fails_once_with_the_near_name(tmp_path: Path) -> None:
    suite = project(tmp_path, "../quickstart")
    text = suite.read_text().replace("name: paths\n", "name: paths\nswarm: defualt\n")
    suite.write_text(text.replace("    input: hello\n", "    input: hello\n    agent: talkr\n"))
    out = gdn(tmp_path, "eval", "evals/suite.yaml")
    assert out.returncode == 3, out.stdout + out.stderr
    assert out.stderr.count("[E_EVAL_SUITE_INVALID]") == 1
    assert "the suite: swarm 'defualt' is not a Swarm of the bundle; did you mean 'default'?" in out.stderr
    assert "scenario 'echoes': agent 'talkr' is not an Agent of the bundle; did you mean 'talker'?" in out.stderr
    assert "[1/1]" not in out.stderr and "FAIL" not in out.stdout


def test_a_judge_without_a_key_fails_once_before_any_scenario(tmp_path: Path) -> None:
    suite = project(tmp_path, "../quickstart")
    text = suite.read_text().replace("{provider: python, model: judge, options: {entry: ./judge.py}}", "openai/x")
    rubric = "    rubric: [{name: polite, criterion: It is polite.}]\n"
    suite.write_text(text.replace("      textContains: hello\n", "      textContains: hello\n" + rubric))
    out = gdn(tmp_path, "eval", "evals/suite.yaml")
    assert out.returncode == 3, out.stdout + out.stderr
    assert out.stderr.count("[E_MODEL_AUTH]") == 1 and "OPENAI_API_KEY is not set" in out.stderr
    assert "[1/1]" not in out.stderr and "FAIL" not in out.stdout
