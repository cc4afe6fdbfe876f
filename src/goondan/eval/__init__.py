"""``gdn eval``: run a YAML suite of scenarios against a bundle and grade them
(docs/guides/evaluating.md).

Deterministic checks (tools called with arguments, text, JSON Schema of the structured output,
steps, tokens, latency) and rubric criteria graded by a judge model become per-criterion scores; the
report (text, JSON, JUnit XML) adds tokens, an approximate cost and latency; two JSON reports can be
compared. Every scenario runs the real bundle on a state root of its own.
"""

from __future__ import annotations

from ._judge import Grade, JudgeModel, parse_grade
from ._pricing import PRICES, price_for
from ._report import compare, json_report, junit_report, render, text_report
from ._run import CriterionResult, EvalReport, ScenarioResult, SuiteRun, deterministic_checks
from ._suite import Scenario, Suite, load_suite

__all__ = [
    "PRICES",
    "CriterionResult",
    "EvalReport",
    "Grade",
    "JudgeModel",
    "Scenario",
    "ScenarioResult",
    "Suite",
    "SuiteRun",
    "compare",
    "deterministic_checks",
    "json_report",
    "junit_report",
    "load_suite",
    "parse_grade",
    "price_for",
    "render",
    "text_report",
]
