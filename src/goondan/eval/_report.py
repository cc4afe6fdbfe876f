"""Eval reports: the text table, JSON, JUnit XML, and the comparison of two JSON reports."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from ..errors import GoondanError
from ._run import EvalReport


def _cost(value: float | None) -> str:
    return "?" if value is None else f"${value:.4f}"


def text_report(report: EvalReport) -> str:
    """One row per scenario (pass, score, tokens, cost, latency), its criteria with their scores under
    it, and the totals against the threshold."""
    rows = [("", "scenario", "score", "tokens", "cost", "latency")]
    for s in report.scenarios:
        rows.append(
            (
                "PASS" if s.passed else "FAIL",
                s.name,
                f"{s.score:.2f}",
                str(s.total_tokens),
                _cost(s.cost_usd),
                f"{s.latency_ms:.0f} ms",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines: list[str] = []
    for index, row in enumerate(rows):
        cells = [row[i].ljust(widths[i]) if i < 2 else row[i].rjust(widths[i]) for i in range(len(row))]
        lines.append("  ".join(cells).rstrip())
        if index == 0:
            continue
        scenario = report.scenarios[index - 1]
        for c in scenario.criteria:
            mark = "ok " if c.passed else "FAIL"
            detail = f"  ({c.detail})" if c.detail and (not c.passed or c.kind == "rubric") else ""
            lines.append(f"      {mark} {c.score:4.2f}  {c.kind:6}  {c.name}{detail}")
    passed = sum(s.passed for s in report.scenarios)
    tokens = sum(s.total_tokens for s in report.scenarios)
    verdict = "PASSED" if report.passed else "FAILED"
    lines.append("")
    lines.append(
        f"{verdict}: {passed}/{len(report.scenarios)} scenarios passed ({report.pass_rate:.0%}, threshold "
        f"{report.threshold:.0%}); {tokens} tokens, cost {_cost(report.cost_usd)} (approximate), "
        f"judge {report.judge_tokens} tokens, {report.duration_ms / 1000:.1f} s"
    )
    return "\n".join(lines) + "\n"


def json_report(report: EvalReport) -> str:
    return json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n"


def junit_report(report: EvalReport) -> str:
    """JUnit XML: one testcase per scenario, a failure element listing the criteria that failed, and
    the scores as properties (CI systems show these natively)."""
    failures = sum(not s.passed for s in report.scenarios)
    suite = ET.Element(
        "testsuite",
        name=report.suite,
        tests=str(len(report.scenarios)),
        failures=str(failures),
        errors="0",
        time=f"{report.duration_ms / 1000:.3f}",
        timestamp=report.started_at,
    )
    for s in report.scenarios:
        case = ET.SubElement(suite, "testcase", classname=report.suite, name=s.name, time=f"{s.latency_ms / 1000:.3f}")
        props = ET.SubElement(case, "properties")
        ET.SubElement(props, "property", name="score", value=f"{s.score:.4f}")
        ET.SubElement(props, "property", name="tokens", value=str(s.total_tokens))
        if s.cost_usd is not None:
            ET.SubElement(props, "property", name="costUsd", value=f"{s.cost_usd:.6f}")
        for c in s.criteria:
            ET.SubElement(props, "property", name=f"criterion:{c.name}", value=f"{c.score:.4f}")
        if not s.passed:
            failed = [c for c in s.criteria if not c.passed]
            message = "; ".join(f"{c.name}: {c.detail or c.score}" for c in failed) or (s.error or "failed")
            failure = ET.SubElement(case, "failure", message=message[:1000], type="EvalFailure")
            failure.text = s.transcript
        out = ET.SubElement(case, "system-out")
        out.text = s.transcript
    ET.indent(suite)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def render(report: EvalReport, fmt: str) -> str:
    if fmt == "json":
        return json_report(report)
    if fmt == "junit":
        return junit_report(report)
    return text_report(report)


# --- comparing two runs --------------------------------------------------------------------------


def _load(path: str) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        scenarios = data["scenarios"]
        return {str(s["name"]): s for s in scenarios}
    except FileNotFoundError:
        raise GoondanError(
            "E_EVAL_REPORT_INVALID",
            f"eval report {path} does not exist",
            suggestion="Write reports with `gdn eval SUITE --format json --output FILE`.",
        ) from None
    except (ValueError, KeyError, TypeError) as exc:
        raise GoondanError(
            "E_EVAL_REPORT_INVALID",
            f"{path} is not a gdn eval JSON report ({type(exc).__name__}: {exc})",
            suggestion="Compare files written by `gdn eval SUITE --format json --output FILE`.",
        ) from None


def compare(path_a: str, path_b: str) -> tuple[str, dict[str, list[str]]]:
    """Which scenarios got better or worse from report A to report B: a pass/fail flip decides, else
    the score; scenarios only in one report are listed as added or removed."""
    a, b = _load(path_a), _load(path_b)
    groups: dict[str, list[str]] = {"better": [], "worse": [], "same": [], "added": [], "removed": []}
    lines = [f"comparing {path_a} (A) -> {path_b} (B)"]
    for name in list(dict.fromkeys([*a, *b])):
        if name not in a:
            groups["added"].append(name)
            lines.append(f"  added    {name}: {'PASS' if b[name]['passed'] else 'FAIL'} {b[name]['score']:.2f}")
            continue
        if name not in b:
            groups["removed"].append(name)
            lines.append(f"  removed  {name}")
            continue
        sa, sb = a[name], b[name]
        if sa["passed"] != sb["passed"]:
            kind = "better" if sb["passed"] else "worse"
        elif abs(float(sb["score"]) - float(sa["score"])) > 1e-9:
            kind = "better" if float(sb["score"]) > float(sa["score"]) else "worse"
        else:
            kind = "same"
        groups[kind].append(name)
        flip = f"{'PASS' if sa['passed'] else 'FAIL'} -> {'PASS' if sb['passed'] else 'FAIL'}"
        line = f"  {kind:8} {name}: {flip}, score {float(sa['score']):.2f} -> {float(sb['score']):.2f}"
        changed = _criteria_changes(sa, sb)
        lines.append(line + (f" ({changed})" if changed else ""))
    lines.append(
        f"{len(groups['better'])} better, {len(groups['worse'])} worse, {len(groups['same'])} unchanged, "
        f"{len(groups['added'])} added, {len(groups['removed'])} removed"
    )
    return "\n".join(lines) + "\n", groups


def _criteria_changes(sa: dict[str, Any], sb: dict[str, Any]) -> str:
    before = {c["name"]: float(c["score"]) for c in sa.get("criteria", [])}
    after = {c["name"]: float(c["score"]) for c in sb.get("criteria", [])}
    return ", ".join(
        f"{name} {before[name]:.2f}->{after[name]:.2f}"
        for name in after
        if name in before and abs(after[name] - before[name]) > 1e-9
    )


__all__ = ["compare", "json_report", "junit_report", "render", "text_report"]
