"""The pytest plugin, loaded through its ``pytest11`` entry point in a pytest run of its own
(``pytester``): fixtures that run a real example bundle, failure output with the turn's transcript,
cassettes next to the test file, and the ``--goondan-record`` option."""

from __future__ import annotations

from pathlib import Path

import pytest

import kit
from models.providers.fake_http import FakeServer, Reply, Req

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

TESTS = f"""
from goondan.testing import tool_call

QUICKSTART = {str(EXAMPLES / "quickstart")!r}


def test_adds(goondan_runner):
    replies = [tool_call("calc__add", {{"a": 1, "b": 2}}), "3"]
    runner = goondan_runner(QUICKSTART, override_models={{"scripted": replies}})
    turn = runner.request("add")
    turn.assert_tool_result("calc__add", equals={{"sum": 3}})
    turn.assert_text(equals="3")
    assert runner.state_root.name.startswith("goondan-state-")


def test_wrong_expectation(goondan_runner):
    runner = goondan_runner(QUICKSTART, override_models={{"scripted": ["no tools today"]}})
    runner.request("add").assert_tool_called("calc__add")


def test_cassette_path(goondan_cassette):
    assert goondan_cassette.parts[-3:] == ("cassettes", "test_agents", "test_cassette_path.json")
"""


def test_the_plugin_runs_a_real_bundle_and_shows_the_transcript_of_a_failure(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_agents=TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*expected a call to calc__add; tools called: none*",
            "*turn turn_* of assistant@quickstart: text_response, 1 step(s)*",
            "*assistant: no tools today*",
            "*goondan state roots*",
            "gdn logs --state-root */goondan-state-0",
        ]
    )


def test_the_record_option_is_offered_and_checked(pytester: pytest.Pytester) -> None:
    help_text = pytester.runpytest("--help")
    help_text.stdout.fnmatch_lines(["*--goondan-record*"])
    bad = pytester.runpytest("--goondan-record=sometimes")
    assert bad.ret != 0
    bad.stderr.fnmatch_lines(["*invalid choice: 'sometimes'*"])


def test_replay_only_mode_fails_a_test_whose_cassette_is_missing(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(
        test_replay=f"""
import pytest
from goondan.errors import GoondanError

def test_needs_cassette(goondan_runner, goondan_cassette):
    with pytest.raises(GoondanError) as info:
        goondan_runner({str(EXAMPLES / "quickstart")!r}, cassette=goondan_cassette)
    assert info.value.code == "E_CASSETTE_MISSING"
"""
    )
    result = pytester.runpytest("--goondan-record=none")
    result.assert_outcomes(passed=1)


def test_the_record_option_records_every_cassette_again(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    answer = {"text": "first"}

    def chat(req: Req) -> Reply:
        choice = {"index": 0, "message": {"role": "assistant", "content": answer["text"]}, "finish_reason": "stop"}
        return Reply(body={"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": [choice]})

    pytester.makepyfile(
        test_rec="""
def test_answer(goondan_runner, goondan_cassette):
    goondan_runner("./agent", cassette=goondan_cassette).request("hi")
"""
    )
    monkeypatch.setenv("REC_KEY", "sk-rec")
    cassette = pytester.path / "cassettes" / "test_rec" / "test_answer.json"
    with FakeServer(chat) as server:
        model = kit.model_doc(
            "main", "openai", "m", endpoint=server.url + "/v1", apiKey={"valueFrom": {"env": "REC_KEY"}}
        )
        kit.write_bundle(
            pytester.path / "agent",
            kit.package_doc("rec"),
            model,
            kit.agent_doc("a", model="main"),
            kit.swarm_doc(["a"]),
        )
        pytester.runpytest().assert_outcomes(passed=1)
        assert "first" in cassette.read_text(encoding="utf-8")
        answer["text"] = "second"
        pytester.runpytest().assert_outcomes(passed=1)  # default: the cassette exists, it replays
        assert len(server.requests) == 1
        pytester.runpytest("--goondan-record").assert_outcomes(passed=1)
        assert len(server.requests) == 2
    assert "second" in cassette.read_text(encoding="utf-8")
