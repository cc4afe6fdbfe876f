"""The pieces of ``gdn eval`` on their own: suite files checked with line numbers, the judge's answer
parsed leniently, the price table, and reports (JUnit XML, comparisons)."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from goondan.errors import GoondanError
from goondan.eval import EvalReport, compare, junit_report, load_suite, parse_grade, price_for
from goondan.eval._run import CriterionResult, ScenarioResult


def suite_error(tmp_path: Path, text: str) -> GoondanError:
    path = tmp_path / "s.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(GoondanError) as info:
        load_suite(path)
    return info.value


def test_a_minimal_suite_gets_its_defaults(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("bundle: b\nscenarios:\n  - {name: x, input: hi, expect: {toolCalled: [t]}}\n", encoding="utf-8")
    suite, root = load_suite(path)
    assert root == tmp_path.resolve() and suite.threshold == 1.0 and suite.concurrency == 4
    scenario = suite.scenarios[0]
    assert scenario.inputs == ["hi"] and scenario.expect.tool_called[0].name == "t"
    assert scenario.expect.finish_reason == "text_response"


def test_problems_are_reported_at_their_lines_with_camel_case_paths(tmp_path: Path) -> None:
    error = suite_error(
        tmp_path,
        "scenarios:\n  - name: a\n    input: hi\n    expect:\n      maxSteps: 0\n      outputSchema: {type: 3}\n",
    )
    assert error.code == "E_EVAL_SUITE_INVALID"
    assert "s.yaml:5: scenarios.0.expect.maxSteps: Input should be greater than or equal to 1" in error.message
    assert "s.yaml:6: scenarios.0.expect.outputSchema: not a valid JSON Schema" in error.message


def test_rubric_criteria_need_a_judge_and_names_must_be_unique(tmp_path: Path) -> None:
    error = suite_error(
        tmp_path,
        "scenarios:\n  - {name: a, input: x, rubric: [{name: r, criterion: c}]}\n  - {name: a, input: y}\n",
    )
    assert "two scenarios are named 'a'" in error.message
    error = suite_error(tmp_path, "scenarios:\n  - {name: a, input: x, rubric: [{name: r, criterion: c}]}\n")
    assert "rubric criteria but the suite configures no judge model" in error.message
    assert "docs/guides/evaluating.md" in (error.suggestion or "")


def test_a_judge_model_is_provider_slash_model_or_a_mapping(tmp_path: Path) -> None:
    error = suite_error(tmp_path, "judge: {model: gpt}\nscenarios: [{name: a, input: x}]\n")
    assert "s.yaml:1: judge.model: write the judge model as provider/model" in error.message
    error = suite_error(tmp_path, "judge: {model: {provider: nope, model: m}}\nscenarios: [{name: a, input: x}]\n")
    assert "judge.model.provider: unknown provider 'nope'" in error.message


def test_not_a_mapping_and_bad_yaml_are_clear(tmp_path: Path) -> None:
    assert suite_error(tmp_path, "- a\n- b\n").code == "E_EVAL_SUITE_INVALID"
    error = suite_error(tmp_path, "scenarios:\n  - name: [\n")
    assert error.code == "E_EVAL_SUITE_YAML" and "s.yaml:3:" in error.message


@given(st.floats(min_value=-5, max_value=5, allow_nan=False), st.text(max_size=30))
def test_a_json_grade_anywhere_in_the_answer_is_read_and_clamped(score: float, reason: str) -> None:
    answer = "Sure. " + json.dumps({"score": score, "reason": reason}) + " Done."
    grade = parse_grade(answer)
    assert grade.error is None and grade.reason == reason
    assert math.isclose(grade.score, min(1.0, max(0.0, score)))


@given(st.text(alphabet=st.characters(blacklist_categories=("Nd",)), max_size=40))
def test_an_answer_without_a_score_is_an_error_grade_of_zero(text: str) -> None:
    grade = parse_grade(text)
    assert grade.score == 0.0 and grade.error is not None and "has no score" in grade.error


def test_a_bare_number_is_a_score() -> None:
    assert parse_grade(" 0.75 ").score == 0.75 and parse_grade("7").score == 1.0


def test_prices_match_the_longest_model_prefix_and_the_suite_wins() -> None:
    assert price_for("openai", "gpt-4o-mini-2024-07-18", {}) == (0.15, 0.60)
    assert price_for("openai", "gpt-4o-2024-08-06", {}) == (2.50, 10.00)
    assert price_for("openai", "unknown-model", {}) is None
    assert price_for("local", "SmolLM2", {}) == (0.0, 0.0)
    assert price_for("openai", "gpt-4o-mini", {"openai/gpt-4o-mini": (1.0, 2.0)}) == (1.0, 2.0)
    assert price_for("python", "good", {"python/good": (3.0, 4.0)}) == (3.0, 4.0)


def _report(*scenarios: ScenarioResult) -> EvalReport:
    return EvalReport("s", 1.0, list(scenarios), "2026-01-01T00:00:00+00:00", 12.0)


def _scenario(name: str, passed: bool, score: float) -> ScenarioResult:
    criteria = [CriterionResult("c", "rubric", score, passed, "why")]
    return ScenarioResult(name, passed, score, criteria, transcript="turn x")


def test_junit_has_a_failure_per_failed_scenario_with_its_criteria() -> None:
    xml = junit_report(_report(_scenario("ok", True, 1.0), _scenario("bad & <odd>", False, 0.2)))
    root = ET.fromstring(xml.split("?>", 1)[1])
    assert root.get("failures") == "1" and root.get("tests") == "2"
    failed = [c for c in root.iter("testcase") if c.find("failure") is not None]
    assert [c.get("name") for c in failed] == ["bad & <odd>"]
    assert failed[0].find("failure").get("message") == "c: why"  # type: ignore[union-attr]


def test_compare_lists_added_and_removed_scenarios(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(_report(_scenario("x", True, 1.0), _scenario("gone", True, 1.0)).to_json()))
    b.write_text(json.dumps(_report(_scenario("x", True, 0.5), _scenario("new", False, 0.0)).to_json()))
    text, groups = compare(str(a), str(b))
    assert groups == {"better": [], "worse": ["x"], "same": [], "added": ["new"], "removed": ["gone"]}
    assert "x: PASS -> PASS, score 1.00 -> 0.50 (c 1.00->0.50)" in text
    with pytest.raises(GoondanError) as info:
        compare(str(a), str(tmp_path / "missing.json"))
    assert info.value.code == "E_EVAL_REPORT_INVALID"
    (tmp_path / "junk.json").write_text("[1]")
    with pytest.raises(GoondanError, match="is not a gdn eval JSON report"):
        compare(str(a), str(tmp_path / "junk.json"))


@given(
    st.lists(st.sampled_from(["input: hi", "turns: [a, b]", "input: [{type: text, text: x}]"]), min_size=1, max_size=6),
    st.data(),
)
def test_an_unknown_field_is_reported_at_its_own_line(inputs: list[str], data: st.DataObject) -> None:
    bad = data.draw(st.integers(min_value=0, max_value=len(inputs) - 1))
    lines = ["bundle: b", "scenarios:"]
    expected_line = 0
    for index, value in enumerate(inputs):
        lines += [f"  - name: s{index}", f"    {value}", "    expect:", "      maxSteps: 2"]
        if index == bad:
            lines.append("      maxStep: 3")
            expected_line = len(lines)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.yaml"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        with pytest.raises(GoondanError) as info:
            load_suite(path)
    assert (
        f"s.yaml:{expected_line}: scenarios.{bad}.expect.maxStep: unknown field 'maxStep'; did you mean 'maxSteps'?"
        in info.value.message
    )
