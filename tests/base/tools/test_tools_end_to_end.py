"""Each standard-tool family through a real bundle and goondan.Runtime (inline isolation).

Agents reference the tools as ``{kind: Tool, name: ..., package: "@goondan/base"}``; the ``python``
model makes the tool calls, and what comes back to the model in the next step is what we check. This
proves the YAML resources load, catalog names are ``<tool>__<export>``, the executor validates against
the shipped schemas and the handlers run with the runtime's real ToolContext (workdir, runtime).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from tools_testkit import calls_then_text, last_results, output_value, tools_bundle

import goondan
import kit


def _request(root: Path, state_root: Path, text: str = "go") -> Any:
    async def main() -> Any:
        async with goondan.Runtime(root, state_root=state_root, isolation="inline") as rt:
            return await rt.request(text)

    return asyncio.run(main())


@pytest.fixture
def state_root(tmp_path: Path) -> Path:
    path = tmp_path / "state"
    path.mkdir()
    return path


def _workdirs(state_root: Path) -> list[Path]:
    return sorted(p for p in state_root.glob("workspaces/*/instances/*/workdir") if p.is_dir())


def test_bash_exec_and_script_run_in_the_instance_workdir(tmp_path: Path, state_root: Path) -> None:
    root = tools_bundle(tmp_path / "b", {"a": ["bash", "file-system"]})
    seen_tools: list[list[str]] = []
    steps = calls_then_text(
        ("bash__exec", {"command": "printf hello; echo made > out.txt"}),
        ("file-system__write", {"path": "s.sh", "content": 'echo "arg=$1"'}),
        ("bash__script", {"path": "s.sh", "args": ["x"]}),
    )

    def model(request: Any) -> Any:
        seen_tools.append([t["name"] for t in request.tools])
        return steps(request)

    kit.MODEL = model
    result = _request(root, state_root)
    assert result.text == "done"
    assert {"bash__exec", "bash__script", "file-system__read"} <= set(seen_tools[0])
    first, _write, script = last_results()
    assert first["toolName"] == "bash__exec"
    assert output_value(first)["stdout"] == "hello"
    assert output_value(first)["exitCode"] == 0
    assert output_value(script)["stdout"] == "arg=x\n"
    [workdir] = _workdirs(state_root)
    assert (workdir / "out.txt").read_text() == "made\n"


def test_file_system_round_trip_and_escape_refused_through_the_runtime(tmp_path: Path, state_root: Path) -> None:
    root = tools_bundle(tmp_path / "b", {"a": ["file-system"]})
    kit.MODEL = calls_then_text(
        ("file-system__mkdir", {"path": "notes"}),
        ("file-system__write", {"path": "notes/a.txt", "content": "alpha"}),
        ("file-system__read", {"path": "notes/a.txt"}),
        ("file-system__list", {"path": "notes"}),
        ("file-system__read", {"path": "../../../../etc/hostname"}),
        ("file-system__write", {"path": "/tmp/goondan-e2e-escape.txt", "content": "x"}),
    )
    _request(root, state_root)
    mkdir, _write, read, listing, escape, absolute = last_results()
    assert output_value(mkdir)["created"] is True
    assert output_value(read)["content"] == "alpha"
    assert [e["name"] for e in output_value(listing)["entries"]] == ["a.txt"]
    assert escape["output"]["type"] == "error-json"
    assert output_value(escape)["code"] == "E_FS_OUTSIDE_WORKDIR"
    assert output_value(escape)["suggestion"]
    assert output_value(absolute)["code"] == "E_FS_OUTSIDE_WORKDIR"
    assert not Path("/tmp/goondan-e2e-escape.txt").exists()
    [workdir] = _workdirs(state_root)
    assert (workdir / "notes" / "a.txt").read_text() == "alpha"


def test_schema_validation_runs_before_the_handlers(tmp_path: Path, state_root: Path) -> None:
    root = tools_bundle(tmp_path / "b", {"a": ["bash", "wait", "text-transform"]})
    kit.MODEL = calls_then_text(
        ("bash__exec", {"command": "true", "shell": "zsh"}),
        ("wait__seconds", {"seconds": 301}),
        ("text-transform__case", {"text": "x", "to": "title"}),
        ("bash__exec", {"command": ""}),
    )
    _request(root, state_root)
    extra, too_long, bad_enum, empty = (output_value(p) for p in last_results())
    assert extra["code"] == "E_TOOL_INVALID_ARGS"
    assert "args.shell: unexpected property" in extra["message"]
    assert too_long["code"] == "E_TOOL_INVALID_ARGS"
    assert "args.seconds" in too_long["message"] and "300" in too_long["message"]
    assert "args.to: must be one of" in bad_enum["message"]
    assert empty["code"] == "E_TOOL_INVALID_ARGS"
    assert empty["message"] == "'command' must be a non-empty string"
    assert "'command'" in empty["suggestion"]


class _Hello(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        body = b'{"items": ["a", "b", "c"]}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def json_server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/data"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_http_fetch_then_json_query_and_text_transform(tmp_path: Path, state_root: Path, json_server: str) -> None:
    # the server is on 127.0.0.1, which http-fetch refuses unless the agent's tool config allows it
    tool_config = {"http-fetch": {"allowHosts": ["127.0.0.1"]}}
    root = tools_bundle(tmp_path / "b", {"a": ["http-fetch", "json-query", "text-transform"]}, tool_config=tool_config)
    body: dict[str, str] = {}

    def model(request: Any) -> Any:
        results = kit.tool_results(request.messages)
        n = len(results)
        if n == 0:
            return {"toolCalls": [{"id": "c0", "name": "http-fetch__get", "args": {"url": json_server}}]}
        if n == 1:
            body["text"] = results[0]["output"]["value"]["body"]
            args = {"data": body["text"], "path": "items[1]"}
            return {"toolCalls": [{"id": "c1", "name": "json-query__query", "args": args}]}
        if n == 2:
            args = {"text": "a-b-c-d", "search": "-", "replacement": "+", "all": True}
            return {"toolCalls": [{"id": "c2", "name": "text-transform__replace", "args": args}]}
        return {"text": "finished"}

    kit.MODEL = model
    assert _request(root, state_root).text == "finished"
    fetched, queried, replaced = (output_value(p) for p in last_results())
    assert fetched["status"] == 200
    assert queried == {"path": "items[1]", "found": True, "value": "b"}
    assert replaced["result"] == "a+b+c+d"
    assert replaced["replacements"] == 3


def test_wait_and_self_restart_through_the_runtime(tmp_path: Path, state_root: Path) -> None:
    root = tools_bundle(tmp_path / "b", {"a": ["wait", "self-restart"]})
    kit.MODEL = calls_then_text(
        ("wait__seconds", {"seconds": 0.05}),
        ("self-restart__request", {"reason": "tools changed"}),
    )
    _request(root, state_root)
    waited, restart = (output_value(p) for p in last_results())
    assert waited == {"waitedSeconds": 0.05, "waitedMs": 50}
    assert restart == {"ok": True, "restartRequested": True, "restartReason": "tools changed"}


# --- agents -------------------------------------------------------------------------------------


def test_agents_request_returns_the_other_agents_reply(tmp_path: Path, state_root: Path) -> None:
    root = tools_bundle(tmp_path / "b", {"boss": ["agents"], "helper": ["agents"]})

    def model(request: Any) -> Any:
        if request.agent_name == "helper":
            return {"text": f"helper got: {request.messages[-1]['content']}"}
        results = kit.tool_results(request.messages)
        if not results:
            args = {"target": "helper", "input": "summarize the plan"}
            return {"toolCalls": [{"id": "r1", "name": "agents__request", "args": args}]}
        if len(results) == 1:
            return {"toolCalls": [{"id": "r2", "name": "agents__catalog", "args": {}}]}
        return {"text": "boss done"}

    kit.MODEL = model
    assert _request(root, state_root).text == "boss done"
    reply, catalog = (output_value(p) for p in last_results())
    assert reply["target"] == "helper"
    assert reply["response"] == "helper got: summarize the plan"
    assert reply["accepted"] is True
    assert reply["async"] is False
    assert reply["instanceKey"] == "tools-swarm"  # the caller's own instance key by default
    assert reply["correlationId"].startswith("corr_")
    assert reply["eventId"]
    assert catalog["swarmName"] == "tools-swarm"
    assert catalog["selfAgent"] == "boss"
    assert catalog["availableCount"] == 2
    assert catalog["callableAgents"] == ["helper"]


def test_agents_request_cycle_is_a_circular_call_tool_error(tmp_path: Path, state_root: Path) -> None:
    root = tools_bundle(tmp_path / "b", {"a": ["agents"], "b": ["agents"]})
    seen_by_b: list[dict[str, Any]] = []

    def model(request: Any) -> Any:
        results = kit.tool_results(request.messages)
        if request.agent_name == "b":
            if not results:
                return {
                    "toolCalls": [{"id": "b1", "name": "agents__request", "args": {"target": "a", "input": "back"}}]
                }
            seen_by_b.append(results[-1])
            return {"text": f"b saw {results[-1]['output']['value']['code']}"}
        if not results:
            return {"toolCalls": [{"id": "a1", "name": "agents__request", "args": {"target": "b", "input": "hi"}}]}
        return {"text": "a done"}

    kit.MODEL = model
    assert _request(root, state_root).text == "a done"
    [cycle] = seen_by_b
    assert cycle["toolName"] == "agents__request"
    assert cycle["output"]["type"] == "error-json"
    assert cycle["output"]["value"]["code"] == "CIRCULAR_CALL_DETECTED"
    assert "a@" in cycle["output"]["value"]["message"]
    [reply] = last_results()
    assert output_value(reply)["response"] == "b saw CIRCULAR_CALL_DETECTED"


def test_agents_unknown_target_is_agent_not_found(tmp_path: Path, state_root: Path) -> None:
    root = tools_bundle(tmp_path / "b", {"a": ["agents"]})
    kit.MODEL = calls_then_text(
        ("agents__request", {"target": "ghost", "input": "hi"}),
        ("agents__send", {"target": "ghost", "input": "hi"}),
    )
    _request(root, state_root)
    req, send = (output_value(p) for p in last_results())
    assert req["code"] == "AGENT_NOT_FOUND"
    assert send["code"] == "AGENT_NOT_FOUND"


def test_agents_spawn_then_list_through_the_runtime(tmp_path: Path, state_root: Path) -> None:
    root = tools_bundle(tmp_path / "b", {"boss": ["agents"], "helper": ["agents"]})
    kit.MODEL = calls_then_text(
        ("agents__spawn", {"target": "helper", "instanceKey": "h-1", "cwd": "sub"}),
        ("agents__spawn", {"target": "helper", "instanceKey": "h-1"}),
        ("agents__list", {}),
    )
    _request(root, state_root)
    first, again, listed = (output_value(p) for p in last_results())
    assert first == {"target": "helper", "instanceKey": "h-1", "spawned": True, "cwd": "sub"}
    assert again["spawned"] is False
    assert listed["count"] == 1
    assert listed["agents"][0]["target"] == "helper"
    assert listed["agents"][0]["instanceKey"] == "h-1"


def test_error_messages_are_cut_at_the_tools_error_message_limit(tmp_path: Path, state_root: Path) -> None:
    root = tools_bundle(tmp_path / "b", {"a": ["file-system"]})
    long_path = "../" + "x/" * 1500  # the refusal message quotes the path: > 3000 characters
    kit.MODEL = calls_then_text(("file-system__read", {"path": long_path}))
    _request(root, state_root)
    [refused] = last_results()
    err = output_value(refused)
    assert err["code"] == "E_FS_OUTSIDE_WORKDIR"
    assert len(err["message"]) == 2000  # file-system's errorMessageLimit
    assert err["message"].endswith("... (truncated)")
