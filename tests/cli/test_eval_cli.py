"""``gdn eval`` end to end, as a user runs it: python-model agents on a real bundle with a real tool,
a python-model judge, reports in three formats, the pass threshold as exit code, model overrides,
bounded concurrency, kept state roots that ``gdn logs`` reads, and ``--compare``; the ``local``
SmolLM2 model as both agent and judge."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

import kit
from cli.cli_testkit import gdn

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

MODEL = """\
import asyncio, json, os, re


async def generate(request):
    # concurrency probe: how many model calls are in flight at once
    probe = os.environ.get("EVAL_PROBE")
    if probe:
        with open(probe, "a") as f:
            f.write("+\\n")
        await asyncio.sleep(0.15)
        with open(probe, "a") as f:
            f.write("-\\n")
    last = [m for m in request.messages if m["role"] != "system"][-1]
    usage = {"promptTokens": 10, "completionTokens": 5, "totalTokens": 15}
    if last["role"] == "tool":
        total = last["content"][0]["output"]["value"]["sum"]
        if request.model == "sloppy":
            total += 1
        return {"text": f"The sum is {total}.", "usage": usage}
    content = last["content"]
    images = [p for p in content if p.get("type") == "image"] if isinstance(content, list) else []
    if images:
        return {"text": f"an image of {len(images[0].get('data', ''))} base64 characters", "usage": usage}
    text = content if isinstance(content, str) else " ".join(p.get("text", "") for p in content)
    m = re.search(r"add (\\d+) and (\\d+)", text)
    if m:
        return {"toolCalls": [{"name": "calc__add", "args": {"a": int(m[1]), "b": int(m[2])}}], "usage": usage}
    return {"text": "Hello! Ask me to add numbers.", "usage": usage}
"""

JUDGE = """\
import json, re


def generate(request):
    prompt = request.messages[-1]["content"]
    assert request.output_schema["required"] == ["score", "reason"]
    nums = re.search(r"add (\\d+) and (\\d+)", prompt)
    said = re.search(r"The sum is (\\d+)", prompt.split("Agent transcript:")[1])
    if nums and said:
        ok = int(said[1]) == int(nums[1]) + int(nums[2])
        answer = {"score": 1.0 if ok else 0.25, "reason": "correct sum" if ok else "wrong sum"}
    else:
        answer = {"score": 0.9, "reason": "polite"}
    usage = {"promptTokens": 3, "completionTokens": 2, "totalTokens": 5}
    return {"text": "Here is my grade: " + json.dumps(answer), "usage": usage}
"""

SUITE = """\
name: calc
bundle: ./bundle
threshold: 1.0
judge:
  model: {provider: python, model: judge, options: {entry: ./judge.py}}
prices:
  python/good: {input: 1000, output: 2000}
  python/sloppy: {input: 1000, output: 2000}
scenarios:
  - name: adds
    input: add 2 and 3
    expect:
      toolCalled: [{name: calc__add, args: {a: 2, b: 3}}]
      textRegex: "The sum is \\\\d+"
      maxSteps: 2
      maxTokens: 100
      maxLatencyMs: 20000
    rubric:
      - {name: correct, criterion: The answer gives the correct sum., passScore: 0.8}
  - name: greets then adds
    turns: ["hi", [{type: text, text: add 10 and 20}]]
    expect:
      toolCalled: [calc__add]
      toolNotCalled: [calc__sub]
      textContains: "The sum is"
    rubric:
      - {name: correct, criterion: The answer gives the correct sum.}
"""


def write_project(tmp_path: Path, suite: str = SUITE) -> Path:
    add = kit.export("add", {"a": {"type": "number"}, "b": {"type": "number"}}, required=["a", "b"])
    kit.write_bundle(
        tmp_path / "bundle",
        kit.package_doc("eval-calc"),
        kit.model_doc("main", "python", "good", options={"entry": "./model.py"}),
        kit.tool_doc("calc", "./calc.py", [add]),
        kit.agent_doc("helper", model="main", tools=["calc"], prompt="Add numbers with the calculator."),
        kit.swarm_doc(["helper"]),
        files={"model.py": MODEL, "calc.py": "handlers = {'add': lambda ctx, a: {'sum': a['a'] + a['b']}}\n"},
    )
    (tmp_path / "judge.py").write_text(JUDGE, encoding="utf-8")
    suite_file = tmp_path / "suite.yaml"
    suite_file.write_text(suite, encoding="utf-8")
    return suite_file


def report(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def test_a_suite_runs_checks_and_a_judge_and_writes_json_and_junit(tmp_path: Path) -> None:
    suite = write_project(tmp_path)
    out = gdn(tmp_path, "eval", str(suite), "--format", "json", "--output", "a.json")
    assert out.returncode == 0, out.stdout + out.stderr
    # the table: one row per scenario, its criteria with scores under it, totals
    assert "PASS  adds" in out.stdout and "PASS  greets then adds" in out.stdout
    assert "rubric  correct  (correct sum)" in out.stdout
    assert 'check   tool calc__add {"a": 2, "b": 3}' in out.stdout
    assert "PASSED: 2/2 scenarios passed (100%, threshold 100%)" in out.stdout
    data = report(tmp_path / "a.json")
    adds = next(s for s in data["scenarios"] if s["name"] == "adds")
    assert adds["passed"] and adds["score"] == 1.0
    # two model calls of 10 + 5 tokens at 1000 / 2000 USD per million
    assert adds["tokens"] == {"prompt": 20, "completion": 10, "total": 30}
    assert adds["costUsd"] == pytest.approx(0.04)
    assert adds["steps"] == 2 and adds["latencyMs"] > 0 and adds["traceIds"]
    names = [c["name"] for c in adds["criteria"]]
    assert names[-1] == "correct" and "steps <= 2" in names and "tokens <= 100" in names
    multi = next(s for s in data["scenarios"] if s["name"] == "greets then adds")
    assert multi["text"] == "The sum is 30." and multi["tokens"]["total"] == 45
    assert data["judgeTokens"] == 10 and data["passRate"] == 1.0

    as_json = gdn(tmp_path, "--json", "eval", str(suite))
    assert json.loads(as_json.stdout)["passRate"] == 1.0 and as_json.stderr == ""
    junit = gdn(tmp_path, "eval", str(suite), "--format", "junit", "--output", "a.xml")
    assert junit.returncode == 0, junit.stderr
    root = ET.parse(tmp_path / "a.xml").getroot()
    assert root.tag == "testsuite" and root.get("tests") == "2" and root.get("failures") == "0"
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["criterion:correct"] == "1.0000"


def test_a_worse_model_fails_the_threshold_and_compare_names_what_got_worse(tmp_path: Path) -> None:
    suite = write_project(tmp_path)
    assert gdn(tmp_path, "eval", str(suite), "--format", "json", "--output", "a.json").returncode == 0
    worse = gdn(
        tmp_path, "eval", str(suite), "--model-override", "main=python/sloppy", "--format", "json", "--output", "b.json"
    )
    assert worse.returncode == 1, worse.stdout + worse.stderr
    assert "FAIL  adds" in worse.stdout and "rubric  correct  (wrong sum)" in worse.stdout
    assert "FAILED: 0/2 scenarios passed" in worse.stdout
    junit = gdn(tmp_path, "eval", str(suite), "--model-override", "main=python/sloppy", "--format", "junit")
    failure = ET.fromstring(junit.stdout).find("testcase/failure")
    assert failure is not None and "correct: wrong sum" in (failure.get("message") or "")

    compared = gdn(tmp_path, "eval", "--compare", "a.json", "b.json")
    assert compared.returncode == 0, compared.stderr
    assert "worse    adds: PASS -> FAIL, score 1.00 -> 0.89 (correct 1.00->0.25)" in compared.stdout
    assert "0 better, 2 worse, 0 unchanged" in compared.stdout
    back = gdn(tmp_path, "eval", "--compare", "b.json", "a.json")
    assert "2 better, 0 worse" in back.stdout


def test_scenarios_run_concurrently_up_to_the_bound(tmp_path: Path) -> None:
    scenarios = "".join(f"  - {{name: s{i}, input: hello {i}, expect: {{}}}}\n" for i in range(4))
    suite = write_project(tmp_path, "bundle: ./bundle\nscenarios:\n" + scenarios)
    probe = tmp_path / "probe.txt"
    out = gdn(tmp_path, "eval", str(suite), "--concurrency", "2", EVAL_PROBE=str(probe))
    assert out.returncode == 0, out.stdout + out.stderr
    in_flight = peak = 0
    for mark in probe.read_text().split():
        in_flight += 1 if mark == "+" else -1
        peak = max(peak, in_flight)
    assert peak == 2


def test_kept_state_roots_are_normal_ones_that_gdn_logs_reads(tmp_path: Path) -> None:
    suite = write_project(tmp_path)
    out = gdn(tmp_path, "eval", str(suite), "--keep-state", "runs")
    assert out.returncode == 0, out.stderr
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["adds", "greets-then-adds"]
    logs = gdn(tmp_path, "logs", "--state-root", str(tmp_path / "runs" / "adds"))
    assert logs.returncode == 0, logs.stderr
    assert "tool.called" in logs.stdout and "calc__add" in logs.stdout and "turn.completed" in logs.stdout


def test_studio_opens_a_kept_scenario_and_shows_its_conversation(tmp_path: Path) -> None:
    pytest.importorskip("starlette", reason="Studio needs the studio extra")
    from studio.studio_testkit import gdn_studio, studio_env

    suite = write_project(tmp_path)
    assert gdn(tmp_path, "eval", str(suite), "--keep-state", "runs").returncode == 0
    env = {**studio_env(), "HOME": str(tmp_path)}
    with gdn_studio("--state-root", str(tmp_path / "runs" / "adds"), env=env) as studio:
        with urllib.request.urlopen(studio.url.rstrip("/") + "/api/instances", timeout=10) as response:
            listing = json.loads(response.read())
        (row,) = listing["items"]
        assert row["agent"] == "helper"
        query = urllib.parse.urlencode({"workspace": row["workspace"], "agent": "helper", "key": row["key"]})
        with urllib.request.urlopen(f"{studio.url.rstrip('/')}/api/conversation?{query}", timeout=10) as response:
            conversation = response.read().decode()
    assert "calc__add" in conversation and "The sum is 5." in conversation


PNG_1PX = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


def test_a_part_path_is_relative_to_the_suite_file_not_the_working_directory(tmp_path: Path) -> None:
    import base64

    suite = write_project(
        tmp_path,
        "bundle: ./bundle\nscenarios:\n"
        "  - name: looks\n"
        "    input: [{type: text, text: 'what is this?'}, {type: image, path: ./pic.png}]\n"
        "    expect: {textRegex: 'an image of [1-9]\\d* base64'}\n",
    )
    (tmp_path / "pic.png").write_bytes(base64.b64decode(PNG_1PX))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = gdn(elsewhere, "eval", str(suite))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "[1/1] PASS looks" in out.stderr


def test_an_invalid_suite_lists_every_problem_with_its_line(tmp_path: Path) -> None:
    bad = (
        "bundle: ./bundle\n"
        "threshold: 2\n"
        "scenarios:\n"
        "  - name: one\n"
        "    input: hi\n"
        "    expect:\n"
        "      toolCaled: [x]\n"
        "      textRegex: '('\n"
        "  - name: two\n"
        "    rubric: [{name: r, criterion: c}]\n"
    )
    suite = write_project(tmp_path, bad)
    out = gdn(tmp_path, "eval", str(suite))
    assert out.returncode == 3, out.stdout + out.stderr
    err = out.stderr
    assert "[E_EVAL_SUITE_INVALID]" in err
    assert f"{suite}:2: threshold: Input should be less than or equal to 1" in err
    assert f"{suite}:7: scenarios.0.expect.toolCaled: unknown field 'toolCaled'; did you mean 'toolCalled'?" in err
    assert f"{suite}:8: scenarios.0.expect.textRegex: invalid regular expression '('" in err
    assert f"{suite}:9: scenarios.1: a scenario needs exactly one of 'input' or 'turns'" in err
    syntax = write_project(tmp_path, "scenarios: [\n")
    out = gdn(tmp_path, "eval", str(syntax))
    assert out.returncode == 3 and "[E_EVAL_SUITE_YAML]" in out.stderr and "suite.yaml:2:1" in out.stderr
    missing = gdn(tmp_path, "eval", "nope.yaml")
    assert missing.returncode == 3 and "[E_EVAL_SUITE_NOT_FOUND]" in missing.stderr
    usage = gdn(tmp_path, "eval", str(suite), "--model-override", "main")
    assert usage.returncode == 2 and "is not NAME=provider/model" in usage.stderr


def test_a_bundle_that_is_not_there_fails_once_before_any_scenario(tmp_path: Path) -> None:
    suite = write_project(tmp_path, SUITE.replace("bundle: ./bundle", "bundle: ./no-such-bundle"))
    out = gdn(tmp_path, "eval", str(suite))
    assert out.returncode == 3, out.stdout + out.stderr
    assert out.stderr.count("[E_EVAL_BUNDLE_NOT_FOUND]") == 1 and "suggestion: " in out.stderr
    assert str(tmp_path / "no-such-bundle") in out.stderr and "`bundle: ./no-such-bundle`" in out.stderr
    assert "FAIL" not in out.stdout + out.stderr and "[1/2]" not in out.stderr  # no scenario ran
    (tmp_path / "empty").mkdir()
    out = gdn(tmp_path, "eval", str(suite), "--bundle", str(tmp_path / "empty"))
    assert out.returncode == 3 and "[E_EVAL_BUNDLE_NOT_FOUND]" in out.stderr and "--bundle" in out.stderr
    assert "has no goondan.yaml" in out.stderr
    out = gdn(tmp_path, "eval", str(write_project(tmp_path, SUITE.replace("bundle: ./bundle\n", ""))))
    assert out.returncode == 3 and "[E_EVAL_NO_BUNDLE]" in out.stderr


LOCAL_SUITE = f"""\
name: local
bundle: {EXAMPLES / "local-model"}
threshold: 0
judge:
  model:
    provider: local
    model: SmolLM2-135M-Instruct
    options: {{contextSize: 2048, maxTokens: 64}}
scenarios:
  - name: adds with the local model
    input: What is 2 plus 3? Use the add tool.
    expect:
      toolCalled: [calc__add]
    rubric:
      - {{name: on topic, criterion: The answer is about adding numbers.}}
"""


@pytest.mark.local_model
def test_the_local_model_is_both_agent_and_judge(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp", reason="needs the local extra: pip install -e '.[dev,local]'")
    suite = tmp_path / "suite.yaml"
    suite.write_text(LOCAL_SUITE, encoding="utf-8")
    out = gdn(tmp_path, "eval", str(suite), "--format", "json", "--output", "r.json", timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    scenario = report(tmp_path / "r.json")["scenarios"][0]
    assert scenario["error"] is None
    # toolChoice "first" in the example makes the agent call the tool; the judge answers in the
    # grammar of the score schema, so its grade always parses
    tool = next(c for c in scenario["criteria"] if c["name"] == "tool calc__add")
    assert tool["passed"]
    grade = next(c for c in scenario["criteria"] if c["kind"] == "rubric")
    assert 0.0 <= grade["score"] <= 1.0 and "has no score" not in grade["detail"]
    assert scenario["tokens"]["total"] > 0
