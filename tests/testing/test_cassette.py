"""Record and replay of provider traffic: a turn recorded against a loopback OpenAI-compatible server
replays with the server stopped and no API key, the cassette holds no secret, and a changed request
fails with a diff of what changed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import kit
from goondan.errors import GoondanError
from goondan.testing import AgentRunner, Cassette, CassetteMismatch
from goondan.testing._cassette import body_diff
from models.providers.fake_http import FakeServer, Reply, Req, sse_event

KEY = "sk-cassette-SECRET-7"


def chat(req: Req) -> Reply:
    """An OpenAI chat server: a tool call first, then text built from the tool result."""
    body = req.json
    last = body["messages"][-1]
    if last["role"] == "tool":
        message: dict[str, Any] = {"role": "assistant", "content": f"sum={json.loads(last['content'])['sum']}"}
        finish = "stop"
    else:
        call = {"id": "call_1", "type": "function", "function": {"name": "calc__add", "arguments": '{"a":2,"b":3}'}}
        message, finish = {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
    return Reply(
        body={
            "id": "c",
            "object": "chat.completion",
            "created": 1,
            "model": "served",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15},
        }
    )


def bundle(root: Path, endpoint: str, prompt: str = "Use the calculator.") -> Path:
    add = kit.export("add", {"a": {"type": "number"}, "b": {"type": "number"}}, required=["a", "b"])
    return kit.write_bundle(
        root,
        kit.package_doc("cassette"),
        kit.model_doc(
            "main",
            "openai",
            "served",
            endpoint=endpoint,
            apiKey={"valueFrom": {"env": "CASSETTE_KEY"}},
            options={"maxRetries": 0},
        ),
        kit.tool_doc("calc", "./calc.py", [add]),
        kit.agent_doc("helper", model="main", prompt=prompt, tools=["calc"], params={"temperature": 0.0}),
        kit.swarm_doc(["helper"]),
        files={"calc.py": "handlers = {'add': lambda ctx, a: {'sum': a['a'] + a['b']}}\n"},
    )


def record(tmp_path: Path) -> tuple[Path, Path, FakeServer]:
    cassette = tmp_path / "cassettes" / "turn.json"
    with FakeServer(chat) as server:
        root = bundle(tmp_path / "b", server.url + "/v1")
        with AgentRunner(root, cassette=cassette, env={"CASSETTE_KEY": KEY}) as runner:
            turn = runner.request("what is 2 + 3?")
        turn.assert_tool_called("calc__add", {"a": 2, "b": 3})
        turn.assert_text(equals="sum=5")
    return root, cassette, server


def test_a_recorded_turn_replays_offline_without_the_key_and_the_server(tmp_path: Path) -> None:
    root, cassette, server = record(tmp_path)
    assert len(server.requests) == 2
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in server.requests)
    # the server is stopped now; no key is set: replay answers everything from the file
    for _ in range(2):
        with AgentRunner(root, cassette=cassette, cassette_mode="replay", env={}) as runner:
            turn = runner.request("what is 2 + 3?")
            assert runner.cassette is not None and runner.cassette.unused == []
        turn.assert_tool_called("calc__add", {"a": 2, "b": 3})
        turn.assert_tool_result("calc__add", equals={"sum": 5})
        turn.assert_text(equals="sum=5")
        assert turn.token_usage == {"promptTokens": 22, "completionTokens": 8, "totalTokens": 30}


def test_the_cassette_holds_no_key_or_auth_header(tmp_path: Path) -> None:
    _, cassette, _ = record(tmp_path)
    raw = cassette.read_text(encoding="utf-8")
    assert KEY not in raw and "authorization" not in raw.lower() and "bearer" not in raw.lower()
    data = json.loads(raw)
    first = data["interactions"][0]
    assert set(first["request"]) == {"model", "method", "path", "body"}
    assert first["request"]["path"] == "/chat/completions"
    assert first["request"]["body"]["messages"][0] == {"role": "user", "content": "what is 2 + 3?"}
    assert first["response"]["contentType"].startswith("application/json")


def test_a_changed_prompt_fails_the_replay_with_a_diff_of_the_messages(tmp_path: Path) -> None:
    _, cassette, _ = record(tmp_path)
    changed = bundle(tmp_path / "b2", "http://127.0.0.1:9/v1", prompt="Use the calculator, carefully.")
    runner = AgentRunner(changed, cassette=cassette, cassette_mode="replay", env={}).start()
    with pytest.raises(CassetteMismatch) as info:
        runner.request("what is 2 + 3?")
    runner.close()
    message = str(info.value)
    assert "--- messages changed:" in message
    changed_lines = [line.replace(" ", "") for line in message.splitlines() if line[:1] in "+-"]
    assert '-"content":"Usethecalculator.",' in changed_lines
    assert '+"content":"Usethecalculator,carefully.",' in changed_lines
    assert "--- tools changed" not in message and "--- params changed" not in message
    assert "POST /chat/completions to Model/main matches no recorded request" in message


def test_the_diff_names_changed_tools_and_params_separately() -> None:
    old = {"messages": [1], "tools": [{"name": "a"}], "temperature": 0}
    new = {"messages": [1], "tools": [{"name": "b"}], "temperature": 1}
    diff = body_diff(old, new)
    assert "--- tools changed:" in diff and "--- params changed:" in diff and "messages changed" not in diff
    assert '-      "name": "a"' in diff and '+  "temperature": 1' in diff


def test_replaying_a_cassette_that_does_not_exist_says_how_to_record_it(tmp_path: Path) -> None:
    with pytest.raises(GoondanError) as info:
        Cassette(tmp_path / "none.json", mode="replay")
    assert info.value.code == "E_CASSETTE_MISSING"
    assert "--goondan-record" in (info.value.suggestion or "")
    with pytest.raises(GoondanError) as bad_mode:
        Cassette(tmp_path / "none.json", mode="sometimes")
    assert bad_mode.value.code == "E_CASSETTE_MODE"
    (tmp_path / "broken.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(GoondanError) as broken:
        Cassette(tmp_path / "broken.json")
    assert broken.value.code == "E_CASSETTE_INVALID"


def messages_api(req: Req) -> Reply:
    """An Anthropic Messages API server: tool_use first, then text from the tool_result."""
    last = req.json["messages"][-1]
    results = [b for b in last["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]
    if results:
        content: list[dict[str, Any]] = [{"type": "text", "text": f"total {results[0]['content']}"}]
        stop = "end_turn"
    else:
        content = [{"type": "tool_use", "id": "toolu_1", "name": "calc__add", "input": {"a": 4, "b": 5}}]
        stop = "tool_use"
    body = {"id": "msg", "type": "message", "role": "assistant", "model": "claude-test", "content": content}
    return Reply(
        body={**body, "stop_reason": stop, "stop_sequence": None, "usage": {"input_tokens": 7, "output_tokens": 3}}
    )


def test_an_anthropic_turn_records_and_replays_the_same_way(tmp_path: Path) -> None:
    add = kit.export("add", {"a": {"type": "number"}, "b": {"type": "number"}}, required=["a", "b"])
    cassette = tmp_path / "anthropic.json"
    with FakeServer(messages_api) as server:
        root = kit.write_bundle(
            tmp_path / "b",
            kit.package_doc("cassette-anthropic"),
            kit.model_doc("claude", "anthropic", "claude-test", endpoint=server.url, apiKey={"value": KEY}),
            kit.tool_doc("calc", "./calc.py", [add]),
            kit.agent_doc("helper", model="claude", tools=["calc"]),
            kit.swarm_doc(["helper"]),
            files={"calc.py": "handlers = {'add': lambda ctx, a: {'sum': a['a'] + a['b']}}\n"},
        )
        with AgentRunner(root, cassette=cassette) as runner:
            recorded = runner.request("add 4 and 5")
        assert KEY in server.requests[0].headers.get("authorization", "") + server.requests[0].headers.get(
            "x-api-key", ""
        )
    assert recorded.text is not None and "9" in recorded.text
    raw = cassette.read_text(encoding="utf-8")
    assert KEY not in raw and json.loads(raw)["interactions"][0]["request"]["path"] == "/v1/messages"
    with AgentRunner(root, cassette=cassette, cassette_mode="replay") as runner:
        replayed = runner.request("add 4 and 5")
    assert replayed.text == recorded.text
    replayed.assert_tool_called("calc__add", {"a": 4, "b": 5})


def test_recording_reads_the_key_from_the_bundles_env_file_like_gdn_run(tmp_path: Path) -> None:
    with FakeServer(chat) as server:
        root = bundle(tmp_path / "b", server.url + "/v1")
        (root / ".env").write_text(f"CASSETTE_KEY={KEY}\n", encoding="utf-8")
        with AgentRunner(root, cassette=tmp_path / "c.json") as runner:
            runner.request("what is 2 + 3?").assert_text(equals="sum=5")
        assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in (tmp_path / "c.json").read_text(encoding="utf-8")


def streamed_chat(req: Req) -> Reply:
    """The OpenAI chat server answering ``stream: true`` requests with Server-Sent Events."""
    body = req.json
    assert body.get("stream") is True
    last = body["messages"][-1]

    def chunk(delta: dict[str, Any], finish: str | None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return sse_event(
            {"id": "s", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [choice]}
        )

    if last["role"] == "tool":
        words = ["The ", "sum ", "is ", str(json.loads(last["content"])["sum"])]
        events = [chunk({"content": w}, None) for w in words] + [chunk({}, "stop")]
    else:
        call = {"index": 0, "id": "call_s", "type": "function"}
        call["function"] = {"name": "calc__add", "arguments": '{"a": 1, "b": 6}'}
        events = [chunk({"role": "assistant", "tool_calls": [call]}, "tool_calls")]
    return Reply(sse=[*events, "data: [DONE]\n\n"])


def test_a_streamed_turn_replays_its_events_chunk_for_chunk(tmp_path: Path) -> None:
    cassette = tmp_path / "stream.json"
    with FakeServer(streamed_chat) as server:
        root = bundle(tmp_path / "b", server.url + "/v1")
        with AgentRunner(root, cassette=cassette, env={"CASSETTE_KEY": KEY}) as runner:
            recorded = runner.request("add 1 and 6", stream=True)
    assert recorded.text_deltas == ["The ", "sum ", "is ", "7"]
    first = json.loads(cassette.read_text(encoding="utf-8"))["interactions"][0]["response"]
    assert first["contentType"].startswith("text/event-stream") and "data: [DONE]" in first["body"]
    with AgentRunner(root, cassette=cassette, cassette_mode="replay", env={}) as runner:
        replayed = runner.request("add 1 and 6", stream=True)
    assert replayed.text_deltas == recorded.text_deltas and replayed.text == "The sum is 7"
    replayed.assert_tool_result("calc__add", equals={"sum": 7})


def test_an_authentication_failure_is_passed_on_but_never_recorded(tmp_path: Path) -> None:
    def refuse(req: Req) -> Reply:
        return Reply(status=401, body={"error": {"message": "Incorrect API key", "type": "invalid_request_error"}})

    cassette = tmp_path / "auth.json"
    with FakeServer(refuse) as server:
        root = bundle(tmp_path / "b", server.url + "/v1")
        with AgentRunner(root, cassette=cassette, env={"CASSETTE_KEY": "wrong"}) as runner:
            turn = runner.request("hi")
    assert turn.finish_reason == "error" and turn.result.error is not None
    assert turn.result.error["code"] == "E_MODEL_AUTH"
    assert not cassette.exists()
