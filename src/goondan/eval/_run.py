"""Running an eval suite: every scenario on its own state root, at most ``concurrency`` at a time.

A scenario runs the user's real bundle through :class:`goondan.testing.AsyncAgentRunner` (so what is
evaluated is what ``gdn run`` would do), then its checks and rubric criteria become a list of
:class:`CriterionResult` scored 0..1. Each state root is a normal one, with the conversation and
runtime events (trace ids included) of the scenario: kept with ``keep_state`` so that ``gdn logs``
and Studio can open it.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..bundle._paths import close_path
from ..errors import ConfigError, ConfigIssue, GoondanError
from ..messages import content_text
from ..testing._runner import AsyncAgentRunner
from ..testing._turn import Turn, is_subset
from ._judge import JudgeModel, judge_api_key
from ._pricing import cost, price_for
from ._suite import Judge, Scenario, Suite, slug

MANIFEST = "goondan.yaml"  # a directory is a bundle when it holds this file


@dataclass
class CriterionResult:
    name: str
    kind: str  # "check" | "rubric"
    score: float
    passed: bool
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "score": self.score, "passed": self.passed, "detail": self.detail}


@dataclass
class ScenarioResult:
    name: str
    passed: bool
    score: float
    criteria: list[CriterionResult] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0
    latency_ms: float = 0.0
    steps: int = 0
    text: str | None = None
    error: str | None = None
    state_root: str | None = None
    trace_ids: list[str] = field(default_factory=list)
    transcript: str = ""

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "passed": self.passed,
            "score": round(self.score, 4),
            "criteria": [c.to_json() for c in self.criteria],
            "tokens": {
                "prompt": self.prompt_tokens,
                "completion": self.completion_tokens,
                "total": self.total_tokens,
            },
            "costUsd": self.cost_usd,
            "latencyMs": round(self.latency_ms, 1),
            "steps": self.steps,
            "text": self.text,
            "error": self.error,
            "stateRoot": self.state_root,
            "traceIds": self.trace_ids,
            "transcript": self.transcript,
        }


@dataclass
class EvalReport:
    suite: str
    threshold: float
    scenarios: list[ScenarioResult]
    started_at: str
    duration_ms: float
    judge_tokens: int = 0

    @property
    def pass_rate(self) -> float:
        return sum(s.passed for s in self.scenarios) / len(self.scenarios) if self.scenarios else 0.0

    @property
    def passed(self) -> bool:
        return self.pass_rate >= self.threshold

    @property
    def cost_usd(self) -> float | None:
        costs = [s.cost_usd for s in self.scenarios]
        return None if any(c is None for c in costs) else sum(c for c in costs if c is not None)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": 1,
            "suite": self.suite,
            "startedAt": self.started_at,
            "durationMs": round(self.duration_ms, 1),
            "threshold": self.threshold,
            "passRate": round(self.pass_rate, 4),
            "passed": self.passed,
            "costUsd": self.cost_usd,
            "judgeTokens": self.judge_tokens,
            "scenarios": [s.to_json() for s in self.scenarios],
        }


def _input_text(value: str | list[dict[str, Any]]) -> str:
    return value if isinstance(value, str) else content_text(value)


def resolve_parts(value: str | list[dict[str, Any]], root: Path) -> str | list[dict[str, Any]]:
    """Content parts with a relative ``path`` name files next to the suite, wherever ``gdn eval`` runs."""
    if isinstance(value, str):
        return value
    out: list[dict[str, Any]] = []
    for part in value:
        path = part.get("path") if isinstance(part, dict) else None
        if isinstance(path, str) and path and not Path(path).is_absolute():
            part = {**part, "path": str(root / path)}
        out.append(part)
    return out


def _check_inputs(suite: Suite, suite_dir: Path) -> None:
    """Every content part of every scenario's input must be one the runtime takes, its file there.

    A part naming a file that is not there (``path: ./cat.png`` next to another suite) or of an
    unknown ``type`` used to fail its scenario as "runs" with exit 1, scored like an agent that did
    badly; it is a broken suite: every such part is listed at once and nothing runs (exit 3)."""
    from .._content import check_part_file, max_part_bytes, normalize_part

    limit = max_part_bytes()
    problems: list[str] = []
    for scenario in suite.scenarios:
        for turn, value in enumerate(scenario.inputs):
            if isinstance(value, str):
                continue
            where = f"scenario {scenario.name!r}" + (f", turn {turn + 1}" if scenario.turns is not None else "")
            for index, part in enumerate(resolve_parts(value, suite_dir)):
                try:
                    checked = normalize_part(part, index, limit=limit, read_paths=False)
                    if "path" in checked:
                        check_part_file(checked, index, limit)
                except GoondanError as exc:
                    problems.append(f"{where}: [{exc.code}] {exc.message}")
    if problems:
        raise GoondanError(
            "E_EVAL_SUITE_INVALID",
            "the eval suite's inputs have problems; no scenario was run:\n  " + "\n  ".join(problems),
            suggestion="A part is {type: text, text} | {type: image, path|url|data} | "
            "{type: file, mediaType, name, path|url|data}; a relative path is relative to the suite file.",
        )


def _check(name: str, ok: bool, detail: str = "") -> CriterionResult:
    return CriterionResult(name, "check", 1.0 if ok else 0.0, ok, "" if ok else detail)


def deterministic_checks(scenario: Scenario, turns: list[Turn]) -> list[CriterionResult]:
    """The scenario's ``expect`` checks; tool checks look at every turn, the rest at the last one
    (tokens and latency add up over all turns)."""
    expect = scenario.expect
    last = turns[-1]
    calls = [c for t in turns for c in t.tool_calls]
    out: list[CriterionResult] = []
    seen_calls = "; ".join(f"{c.name}({c.args})" for c in calls) or "no tool calls"
    for tool in expect.tool_called:
        matching = [c for c in calls if c.name == tool.name and (tool.args is None or is_subset(tool.args, c.args))]
        ok = len(matching) == tool.times if tool.times is not None else bool(matching)
        label = (
            f"tool {tool.name}"
            + (f" {json.dumps(tool.args, sort_keys=True)}" if tool.args else "")
            + (f" x{tool.times}" if tool.times else "")
        )
        out.append(_check(label, ok, f"calls: {seen_calls}"))
    for name in expect.tool_not_called:
        out.append(_check(f"no tool {name}", all(c.name != name for c in calls), f"calls: {seen_calls}"))
    text = last.text or ""
    for needle in expect.text_contains:
        out.append(_check(f"text contains {needle!r}", needle in text, f"text: {text[:200]!r}"))
    for pattern in expect.text_regex:
        out.append(_check(f"text matches /{pattern}/", re.search(pattern, text) is not None, f"text: {text[:200]!r}"))
    if expect.output_schema is not None:
        import jsonschema

        output = last.output
        if output is None:
            out.append(_check("output schema", False, "the turn has no structured output"))
        else:
            errors = list(jsonschema.Draft202012Validator(expect.output_schema).iter_errors(output))
            out.append(_check("output schema", not errors, errors[0].message if errors else ""))
    if expect.max_steps is not None:
        steps = max(t.steps for t in turns)
        out.append(_check(f"steps <= {expect.max_steps}", steps <= expect.max_steps, f"took {steps} steps"))
    if expect.max_tokens is not None:
        tokens = sum(t.token_usage["totalTokens"] for t in turns)
        out.append(_check(f"tokens <= {expect.max_tokens}", tokens <= expect.max_tokens, f"used {tokens} tokens"))
    if expect.max_latency_ms is not None:
        latency = sum(t.latency_ms for t in turns)
        ok = latency <= expect.max_latency_ms
        out.append(_check(f"latency <= {expect.max_latency_ms:g} ms", ok, f"took {latency:.0f} ms"))
    if expect.finish_reason is not None:
        out.append(
            _check(
                f"finishes {expect.finish_reason}",
                last.finish_reason == expect.finish_reason,
                f"finished {last.finish_reason}" + (f": {last.result.error}" if last.result.error else ""),
            )
        )
    return out


class SuiteRun:
    def __init__(
        self,
        suite: Suite,
        suite_dir: Path,
        *,
        bundle: str | Path | None = None,
        overrides: Mapping[str, str] | None = None,
        concurrency: int | None = None,
        keep_state: str | Path | None = None,
        executor: str = "inline",
        suite_name: str | None = None,
        env: Mapping[str, str] | None = None,
        on_result: Callable[[ScenarioResult], None] | None = None,
    ) -> None:
        self.suite = suite
        self.suite_dir = suite_dir
        bundle_path = bundle if bundle is not None else suite.bundle
        if bundle_path is None:
            raise GoondanError(
                "E_EVAL_NO_BUNDLE",
                "the suite names no bundle",
                suggestion="Add `bundle: <dir>` to the suite (relative to it) or pass --bundle PATH.",
            )
        self.bundle = Path(bundle_path) if bundle is not None else (suite_dir / bundle_path)
        _check_inputs(suite, suite_dir)
        _check_bundle_path(self.bundle, None if bundle is not None else str(bundle_path), suite_dir)
        self.overrides = {**suite.models, **(overrides or {})}
        # toolNotCalled names that cannot be tools of the bundle: the check runs, its line says so
        self.unknown_tools = _check_bundle_loads(self.bundle, self.overrides, env, suite)
        if suite.judge is not None:
            judge_api_key(suite.judge, os.environ if env is None else env)  # refused here, not per criterion
            if any(s.rubric for s in suite.scenarios):
                _check_judge_loads(suite.judge, suite_dir, env)
        self.concurrency = concurrency or suite.concurrency
        self.keep_state = Path(keep_state) if keep_state is not None else None
        self.executor = executor
        self.name = suite_name or suite.name or "suite"
        self.env = env
        self.on_result = on_result
        self.judge: JudgeModel | None = None
        self.judge_tokens = 0
        self._prices = {k: (p.input, p.output) for k, p in suite.prices.items()}

    async def run(self) -> EvalReport:
        started_at = datetime.now(UTC).isoformat(timespec="seconds")
        started = time.perf_counter()
        if self.suite.judge is not None:
            self.judge = JudgeModel(self.suite.judge, self.suite_dir, self.env)
        gate = asyncio.Semaphore(self.concurrency)

        async def one(scenario: Scenario) -> ScenarioResult:
            async with gate:
                result = await self.scenario(scenario)
            if self.on_result is not None:
                self.on_result(result)
            return result

        try:
            results = await asyncio.gather(*(one(s) for s in self.suite.scenarios))
        finally:
            if self.judge is not None:
                await self.judge.aclose()
        return EvalReport(
            self.name,
            self.suite.threshold,
            list(results),
            started_at,
            (time.perf_counter() - started) * 1000,
            self.judge_tokens,
        )

    async def scenario(self, scenario: Scenario) -> ScenarioResult:
        state_root = self.keep_state / slug(scenario.name) if self.keep_state is not None else None
        runner = AsyncAgentRunner(
            self.bundle,
            override_models=dict(self.overrides),
            state_root=state_root,
            keep_state=state_root is not None,
            executor=self.executor,
            swarm=self.suite.swarm,
            env=self.env,
        )
        turns: list[Turn] = []
        error: str | None = None
        prompt = completion = 0
        price_missing = False
        total_cost = 0.0
        try:
            await runner.start()
            models = _agent_models(runner.runtime.bundle)
            for value in scenario.inputs:
                turn = await runner.request(
                    resolve_parts(value, self.suite_dir),
                    agent=scenario.agent or self.suite.agent,
                    instance_key=scenario.instance_key,
                )
                turns.append(turn)
                for event in turn.events:
                    usage = event.get("tokenUsage") if event.get("type") == "turn.completed" else None
                    if not isinstance(usage, dict):
                        continue
                    p, c = int(usage.get("promptTokens") or 0), int(usage.get("completionTokens") or 0)
                    prompt, completion = prompt + p, completion + c
                    provider, model = models.get(str(event.get("agentName")), ("?", "?"))
                    spent = cost(p, c, price_for(provider, model, self._prices))
                    if spent is None:
                        price_missing = True
                    else:
                        total_cost += spent
        except GoondanError as exc:
            error = f"[{exc.code}] {exc.message}"
        except Exception as exc:  # one broken scenario must not stop the suite; it fails with the cause
            error = f"{type(exc).__name__}: {exc}"
        finally:
            await runner.close()
        result = ScenarioResult(
            scenario.name,
            passed=False,
            score=0.0,
            prompt_tokens=prompt,
            completion_tokens=completion,
            cost_usd=None if price_missing else round(total_cost, 6),
            latency_ms=sum(t.latency_ms for t in turns),
            steps=sum(t.steps for t in turns),
            text=turns[-1].text if turns else None,
            error=error,
            state_root=str(state_root) if state_root is not None else None,
            trace_ids=sorted({str(e["traceId"]) for t in turns for e in t.events if e.get("traceId")}),
            transcript="\n".join(t.transcript() for t in turns),
        )
        if error is not None or not turns:
            result.criteria = [CriterionResult("runs", "check", 0.0, False, error or "no turn ran")]
            return result
        criteria = deterministic_checks(scenario, turns)
        for check in criteria:
            note = self.unknown_tools.get(check.name.removeprefix("no tool "))
            if note and check.name.startswith("no tool "):
                check.detail = "; ".join(filter(None, (check.detail, note)))
        if scenario.rubric and self.judge is not None:
            user_input = "\n---\n".join(_input_text(v) for v in scenario.inputs)
            seen = "\n".join(t.transcript(header=False) for t in turns)
            for criterion in scenario.rubric:
                grade = await self.judge.grade(criterion, user_input, seen)
                if grade.usage:
                    self.judge_tokens += int(grade.usage.get("totalTokens") or 0)
                ok = grade.error is None and grade.score >= criterion.pass_score
                criteria.append(CriterionResult(criterion.name, "rubric", grade.score, ok, grade.error or grade.reason))
        result.criteria = criteria
        result.score = sum(c.score for c in criteria) / len(criteria) if criteria else 1.0
        result.passed = all(c.passed for c in criteria)
        return result


def _check_bundle_path(path: Path, suite_value: str | None, suite_dir: Path | None = None) -> None:
    """Fail once, before any scenario, when the bundle is not there (``E_EVAL_BUNDLE_NOT_FOUND``).

    Each scenario loads the bundle itself, so a wrong path used to fail every scenario with the same
    loader error and a report of N failures, which reads like N problems with the agent.
    ``suite_value`` is the suite's ``bundle:`` as written (``None`` when ``--bundle`` named it), and
    ``suite_dir`` the directory it is relative to. The message shows the absolute path that was
    looked at (``evals/../quikstart`` as typed says little about where), and the suggestion a
    near name that does exist, written the way the user would write it.
    """
    manifest = path / MANIFEST if path.is_dir() else path
    if manifest.name == MANIFEST and manifest.is_file():
        return
    try:
        absolute = path.resolve()
    except (OSError, RuntimeError, ValueError):
        absolute = Path(os.path.abspath(path))
    near: Path | None = None
    if not path.exists():
        what = "does not exist"
        near = close_path(path)
    elif path.is_dir():
        what = f"is not a bundle: it has no {MANIFEST}"
        nested = sorted(p.parent for p in path.glob(f"*/{MANIFEST}"))
        near = nested[0] if len(nested) == 1 else None
    else:
        what = f"is not a bundle: a bundle is a directory with a {MANIFEST}, or that file"
        near = path.parent if (path.parent / MANIFEST).is_file() else None
    if suite_value is None:
        source, fix = "--bundle", f"Pass --bundle the bundle directory (the one with {MANIFEST})"
        shown = os.path.relpath(near) if near is not None else ""
        hint = f"did you mean --bundle {shown}? " if near is not None else ""
    else:
        source = f"the suite's `bundle: {suite_value}`"
        fix = "Fix `bundle:` in the suite (a path relative to the suite file), or pass --bundle PATH"
        base = suite_dir if suite_dir is not None else absolute.parent
        shown = Path(os.path.relpath(near, base)).as_posix() if near is not None else ""
        hint = f"did you mean `bundle: {shown}`? " if near is not None else ""
    raise GoondanError(
        "E_EVAL_BUNDLE_NOT_FOUND",
        f"the bundle {absolute} ({source}) {what}",
        suggestion=f"{hint}{fix}; no scenario was run.",
    )


def _check_bundle_loads(
    path: Path, overrides: Mapping[str, str], env: Mapping[str, str] | None, suite: Suite | None = None
) -> dict[str, str]:
    """Load the bundle once and apply the model overrides before any scenario runs; returns what
    :func:`_check_tool_names` says of the ``toolNotCalled`` names.

    Every scenario loads the bundle again, so a bundle that does not load (an unknown option, an
    unset variable) or an override naming no Model of it (``--model-override locl=...``) used to fail
    each scenario with the same error, exit 1 "below threshold", the suggestion left out of the table:
    it read like N problems with the agent. Now it is one error with its suggestion, exit 3 (a broken
    suite), as for a bundle path that is not there. The load is the scenarios' own (same function,
    environment and overrides), so nothing that would run is refused.
    """
    import tempfile

    # scenarios send requests and start no connector: a Connection's port and secrets need not be set
    from ..bundle import load_bundle_for_requests as load_bundle
    from ..testing._models import ModelOverrides
    from ..testing._runner import _bundle_env

    try:
        bundle = load_bundle(path, env=_bundle_env(path) if env is None else env)
    except ConfigError as exc:
        issues = exc.errors or [ConfigIssue(exc.code, exc.message, suggestion=exc.suggestion)]
        lines = [
            f"[{i.code}] {i.message}" + (f" ({i.file}:{i.line})" if i.file and i.line else "") for i in issues[:10]
        ]
        more = [f"+{len(issues) - 10} more"] if len(issues) > 10 else []
        first = issues[0].suggestion
        raise GoondanError(
            exc.code,
            f"the bundle {path.resolve()} does not load; no scenario was run:\n  " + "\n  ".join(lines + more),
            suggestion=(f"{first.rstrip('.')}; " if first else "")
            + f"`gdn validate {shlex.quote(os.path.relpath(path))}` shows each problem with its fix.",
        ) from None
    with tempfile.TemporaryDirectory(prefix="goondan-eval-") as scratch:
        models = ModelOverrides(Path(scratch))
        try:
            models.apply(bundle, overrides)
        finally:
            models.close()
    if suite is None:
        return {}
    _check_names(bundle, suite)
    _check_output_expectations(bundle, suite)
    return _check_tool_names(bundle, suite)


def _check_judge_loads(judge: Judge, suite_dir: Path, env: Mapping[str, str] | None) -> None:
    """A ``python`` judge whose module is missing or does not import fails the suite before any
    scenario runs (``E_MODEL_LOAD``, exit 3), as a bundle that does not load does.

    Each criterion used to fail on its own with the load error as its reason, scored 0, so a typo
    in ``options.entry`` read as agents that answered badly, and with a low ``threshold`` the suite
    still passed. Network judges are checked for their key above; a python module is imported here
    (the import is the one grading does, so a module that imports is not refused)."""
    if judge.model.provider != "python":
        return
    model = JudgeModel(judge, suite_dir, env)
    load = getattr(model.adapter, "_load", None)
    try:
        if callable(load):
            load()
    except GoondanError as exc:
        # the user's own exception stays the cause: `gdn eval -v` prints its traceback
        raise GoondanError(
            exc.code,
            f"the suite's judge does not load; no scenario was run: {exc.message}",
            suggestion=(exc.suggestion or "").replace("gdn run -v", "gdn eval -v") or None,
        ) from exc.__cause__


def _check_names(bundle: Any, suite: Suite) -> None:
    """The suite's ``swarm`` and each ``agent`` must name one of the bundle (a typo failed every
    scenario it touched with E_AGENT_NOT_FOUND, as a failed run of the agent)."""
    from ..bundle._issues import did_you_mean

    problems: list[str] = []
    for kind, named in (("Swarm", [("the suite", suite.swarm)]), ("Agent", [("the suite", suite.agent)])):
        if kind == "Agent":
            named += [(f"scenario {s.name!r}", s.agent) for s in suite.scenarios]
        names = sorted({r.name for r in bundle.of_kind(kind)})
        for owner, name in named:
            if name is None or name in names:
                continue
            hint = did_you_mean(name, names)
            problems.append(
                f"{owner}: {kind.lower()} {name!r} is not {'an' if kind == 'Agent' else 'a'} {kind} of the bundle"
                + (f"; {hint}" if hint else f" ({', '.join(names) or 'none'})")
            )
    if problems:
        unique = list(dict.fromkeys(problems))
        raise GoondanError(
            "E_EVAL_SUITE_INVALID",
            "the eval suite names what the bundle lacks; no scenario was run:\n  " + "\n  ".join(unique),
            suggestion="Fix `swarm:`/`agent:` in the suite to the names of the bundle's Swarm and Agent resources.",
        )


def _check_output_expectations(bundle: Any, suite: Suite) -> None:
    """``expect.outputSchema`` needs an agent with ``spec.output``: without one a turn has no
    structured output (``TurnResult.output`` is None), so the check could only fail, read as an
    agent that answered badly."""
    try:
        entry = bundle.select_swarm(suite.swarm).spec.entry_agent.name
    except (GoondanError, AttributeError):
        return
    agents = {r.name: r for r in bundle.of_kind("Agent")}
    problems: list[str] = []
    for scenario in suite.scenarios:
        if scenario.expect.output_schema is None:
            continue
        name = scenario.agent or suite.agent or entry
        agent = agents.get(name)
        if agent is not None and getattr(agent.spec, "output", None) is None:
            problems.append(
                f"scenario {scenario.name!r}: expect.outputSchema, but agent {name!r} has no spec.output, "
                "so its turns have no structured output"
            )
    if problems:
        raise GoondanError(
            "E_EVAL_SUITE_INVALID",
            "the eval suite checks output the agents do not produce; no scenario was run:\n  " + "\n  ".join(problems),
            suggestion="Give the agent `spec.output: {schema: ...}` (it then answers JSON that validates), "
            "or check its text with textContains / textRegex instead.",
        )


def _bundle_tools(bundle: Any) -> dict[str, set[str]]:
    """Tool resource name -> its export names, over every agent of the bundle."""
    out: dict[str, set[str]] = {}
    for agent in bundle.of_kind("Agent"):
        try:
            tools = bundle.agent_plan(agent.name).tools
        except GoondanError:
            continue
        for res in tools or ():
            out.setdefault(res.name, set()).update(e.name for e in getattr(res.spec, "exports", None) or ())
    return out


def _check_tool_names(bundle: Any, suite: Suite) -> dict[str, str]:
    """``expect.toolCalled`` must name tools the bundle can have; returns, for ``toolNotCalled``
    names that cannot be, the note their check line shows.

    A misspelt ``toolCalled`` fails however well the agent did, so it is a broken suite. A
    misspelt ``toolNotCalled`` passes whatever the agent does, but a name the bundle lacks may be
    meant (a model can call a tool it made up, and the check guards against that), so it runs with
    a note on its line ("not a tool of the bundle; did you mean ...?"). Only what is certainly not a
    tool counts: a ``<Tool>__<export>`` whose Tool is in the bundle without that export, or whose
    prefix is no Tool or Extension of the bundle but close to a Tool's name. Tools that extensions
    and MCP servers register at run time are not known before a turn runs, so other prefixes pass."""
    from ..bundle._issues import did_you_mean

    tools = _bundle_tools(bundle)
    if not tools:
        return {}
    extensions = {r.name for r in bundle.of_kind("Extension")}
    known = sorted(f"{t}__{e}" for t, exports in tools.items() for e in exports)
    problems: list[str] = []
    notes: dict[str, str] = {}
    for scenario in suite.scenarios:
        named = [("toolCalled", t.name) for t in scenario.expect.tool_called]
        named += [("toolNotCalled", n) for n in scenario.expect.tool_not_called]
        for where, name in named:
            prefix, sep, export = name.partition("__")
            if prefix in tools:
                if not sep or export in tools[prefix]:
                    continue
                why = f"Tool {prefix!r} has no export {export!r}"
            elif prefix in extensions or did_you_mean(prefix, tools) is None:
                continue
            else:
                why = f"no Tool of the bundle is named {prefix!r}"
            hint = did_you_mean(name, known)
            if where == "toolNotCalled":
                notes[name] = f"{why}" + (f"; {hint}" if hint else "")
                continue
            problems.append(
                f"scenario {scenario.name!r}: expect.{where} {name!r}: {why}"
                + (f"; {hint}" if hint else f" (its tools: {', '.join(known)})")
            )
    if problems:
        raise GoondanError(
            "E_EVAL_SUITE_INVALID",
            "the eval suite expects tools the bundle lacks; no scenario was run:\n  " + "\n  ".join(problems),
            suggestion="Write tool names as the model sees them: <Tool name>__<export name>.",
        )
    return notes


def _agent_models(bundle: Any) -> dict[str, tuple[str, str]]:
    """agent name -> (provider, model) of the Model it uses, after overrides (for the price table)."""
    out: dict[str, tuple[str, str]] = {}
    for agent in bundle.of_kind("Agent"):
        try:
            spec = bundle.agent_plan(agent.name).model.spec
        except GoondanError:
            continue
        out[agent.name] = (str(spec.provider), str(spec.model))
    return out


__all__ = ["CriterionResult", "EvalReport", "ScenarioResult", "SuiteRun", "deterministic_checks"]
