"""mcp (seed 002 §11, seed 001 §8.6): real MCP servers written with the official SDK
(``mcp_server.py``) over stdio subprocesses and streamable HTTP on 127.0.0.1, bridged into real
bundles run by ``goondan.Runtime`` with a ``python`` model."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import policy_kit as k
import pytest

import goondan
from goondan.base.extensions.mcp._extension import tool_name_part

SERVER = str(Path(__file__).with_name("mcp_server.py"))

RECORDING_MODEL = """\
import json
import policy_kit


def generate(request):
    policy_kit.PROBE.setdefault("tools", []).append(json.loads(json.dumps(list(request.tools))))
    policy_kit.REQUESTS.append(json.loads(json.dumps(list(request.messages))))
    return policy_kit.MODEL(request)
"""


def _bundle(tmp_path: Path, config: dict[str, Any]) -> Path:
    return k.bundle(tmp_path / "bundle", [k.base_ref("mcp", config)], files={"model.py": RECORDING_MODEL})


def _stdio(**extra: Any) -> dict[str, Any]:
    return {"transport": {"type": "stdio", "command": ["{python}", SERVER]}, **extra}


def _call(name: str, args: dict[str, Any] | None = None, cid: str = "c1") -> dict[str, Any]:
    return {"text": None, "toolCalls": [{"id": cid, "name": name, "args": args or {}}]}


def _outputs(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [part["output"] for m in messages if m["role"] == "tool" for part in m["content"]]


def _last_output() -> dict[str, Any]:
    return _outputs(k.REQUESTS[-1])[-1]


def _pid_of(output: dict[str, Any]) -> int:
    assert output["type"] == "text", output
    return int(output["value"])


def _wait_gone(pid: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.02)
    raise AssertionError(f"process {pid} still alive")


def test_server_tools_appear_with_their_schema_and_run(tmp_path: Path) -> None:
    root = _bundle(tmp_path, _stdio())
    k.MODEL = k.scripted(_call("mcp__add", {"a": 2, "b": 3}), k.text_reply("done"))
    turn = goondan.run(root, "add", state_root=tmp_path / "state", isolation="inline")
    assert turn.finish_reason == "text_response"
    tools = {t["name"]: t for t in k.PROBE["tools"][0]}
    assert {"mcp__add", "mcp__pid", "mcp__crash", "mcp__refuse", "mcp__weird_name_with_parts"} <= set(tools)
    add = tools["mcp__add"]
    assert add["description"] == "Add two integers."
    assert add["parameters"]["required"] == ["a", "b"]
    assert add["parameters"]["properties"]["a"]["type"] == "integer"
    assert _outputs(k.REQUESTS[1]) == [{"type": "text", "value": "5"}]
    # a second event loop over the same bundle (scope instance) gets a session of its own
    k.MODEL = k.scripted(_call("mcp__add", {"a": 3, "b": 4}, "c2"), k.text_reply("done"))
    assert goondan.run(root, "again", state_root=tmp_path / "state", isolation="inline").text == "done"
    assert _outputs(k.REQUESTS[-1])[-1] == {"type": "text", "value": "7"}


def test_a_tool_error_and_bad_arguments_come_back_as_tool_errors(tmp_path: Path) -> None:
    root = _bundle(tmp_path, _stdio())
    k.MODEL = k.scripted(
        _call("mcp__refuse", {"reason": "not today"}),
        _call("mcp__add", {"a": "x", "b": 1}, "c2"),  # checked against the server's schema first
        _call("mcp__weird_name_with_parts", {}, "c3"),
        k.text_reply("done"),
    )
    goondan.run(root, "go", state_root=tmp_path / "state", isolation="inline")
    refused, invalid, weird = _outputs(k.REQUESTS[-1])
    assert refused["type"] == "error-json" and refused["value"]["code"] == "E_MCP_TOOL_ERROR"
    assert "refuse" in refused["value"]["message"]
    assert invalid["value"]["code"] == "E_TOOL_INVALID_ARGS"
    assert weird == {"type": "text", "value": "weird ok"}


def test_resources_and_prompts_are_listed_in_context_and_fetched_by_tools(tmp_path: Path) -> None:
    root = _bundle(tmp_path, _stdio(expose={"tools": False, "resources": True, "prompts": True}))
    k.MODEL = k.scripted(
        _call("mcp__read-resource", {"uri": "notes://today"}),
        _call("mcp__get-prompt", {"name": "review", "arguments": {"code": "x = 1"}}, "c2"),
        _call("mcp__read-resource", {"uri": "notes://missing"}, "c3"),
        k.text_reply("done"),
    )
    goondan.run(root, "go", state_root=tmp_path / "state", isolation="inline")
    names = [t["name"] for t in k.PROBE["tools"][0]]
    assert names == ["t__echo", "t__fail", "mcp__read-resource", "mcp__get-prompt"]
    contexts = [m["content"] for m in k.REQUESTS[-1] if m["role"] == "system"]
    assert len(contexts) == 1  # kept once, not appended per step
    assert "- notes://today (today): Today's note [text/plain]" in contexts[0]
    assert "- review(code*): Review a piece of code." in contexts[0]
    resource, prompt, missing = _outputs(k.REQUESTS[-1])
    assert missing["value"]["code"] == "E_MCP_REQUEST_FAILED"
    assert "rejected resource 'notes://missing'" in missing["value"]["message"]
    assert resource["value"] == {"uri": "notes://today", "text": "buy milk"}
    assert prompt["value"]["messages"] == [{"role": "user", "text": "Please review: x = 1"}]


def test_a_server_killed_between_turns_is_restarted_transparently(tmp_path: Path) -> None:
    root = _bundle(tmp_path, _stdio())

    async def scenario() -> tuple[int, int]:
        async with goondan.Runtime(root, isolation="inline", state_root=tmp_path / "state") as rt:
            k.MODEL = k.scripted(_call("mcp__pid"), k.text_reply("done"))
            await rt.request("pid")
            first = _pid_of(_last_output())
            os.kill(first, signal.SIGKILL)
            await asyncio.get_running_loop().run_in_executor(None, _wait_gone, first)
            await asyncio.sleep(0.1)  # let the transport see EOF
            k.MODEL = k.scripted(_call("mcp__pid", cid="c2"), k.text_reply("done"))
            await rt.request("pid again")
            return first, _pid_of(_last_output())

    first, second = asyncio.run(scenario())
    assert second != first


def test_a_server_dying_during_a_call_fails_that_call_and_the_next_call_reconnects(tmp_path: Path) -> None:
    root = _bundle(tmp_path, _stdio())
    k.MODEL = k.scripted(_call("mcp__crash"), _call("mcp__add", {"a": 1, "b": 1}, "c2"), k.text_reply("done"))
    goondan.run(root, "go", state_root=tmp_path / "state", isolation="inline")
    lost, recovered = _outputs(k.REQUESTS[-1])
    assert lost["type"] == "error-json"
    assert lost["value"]["code"] == "E_MCP_CONNECTION_LOST"
    assert "closed the connection during tool 'crash'" in lost["value"]["message"]
    assert "restarted on the next call" in lost["value"]["message"]
    assert recovered == {"type": "text", "value": "2"}


FAILING = ["{python}", "-c", "import sys; sys.stderr.write('missing NOTES_DB\\n'); sys.exit(2)"]


def test_a_server_that_never_starts_fails_register_with_the_command_line(tmp_path: Path) -> None:
    config = {"transport": {"type": "stdio", "command": FAILING, "cwd": str(tmp_path)}}
    root = _bundle(tmp_path, config)
    k.MODEL = k.scripted(k.text_reply("unreachable"))
    with pytest.raises(goondan.ExtensionError) as info:
        goondan.run(root, "go", state_root=tmp_path / "state", isolation="inline")
    err = info.value
    assert err.code == "E_EXT_INIT" and err.extension_name == "mcp"
    assert f"command `{sys.executable} -c" in err.message
    assert "missing NOTES_DB" in err.message
    assert err.suggestion and "Run the command by hand" in err.suggestion


def test_a_server_relative_to_the_bundle_that_never_starts_fails_the_turn_with_e_ext_init(tmp_path: Path) -> None:
    root = _bundle(tmp_path, {"transport": {"type": "stdio", "command": FAILING}})
    k.MODEL = k.scripted(k.text_reply("unreachable"))
    turn = goondan.run(root, "go", state_root=tmp_path / "state", isolation="inline")
    assert turn.finish_reason == "error"
    assert turn.error is not None and turn.error["code"] == "E_EXT_INIT"
    assert f"(cwd {root})" in turn.error["message"] and "missing NOTES_DB" in turn.error["message"]


def test_a_missing_program_is_named_in_the_error(tmp_path: Path) -> None:
    root = _bundle(tmp_path, {"transport": {"type": "stdio", "command": "no-such-mcp-server --flag", "cwd": "/"}})
    with pytest.raises(goondan.ExtensionError) as info:
        goondan.run(root, "go", state_root=tmp_path / "state", isolation="inline")
    assert "command `no-such-mcp-server --flag`" in info.value.message
    assert "FileNotFoundError" in info.value.message


def test_stateless_mode_connects_per_use(tmp_path: Path) -> None:
    root = _bundle(tmp_path, _stdio(attach={"mode": "stateless", "scope": "agent"}))
    k.MODEL = k.scripted(_call("mcp__pid"), _call("mcp__pid", cid="c2"), k.text_reply("done"))
    goondan.run(root, "go", state_root=tmp_path / "state", isolation="inline")
    first, second = (_pid_of(o) for o in _outputs(k.REQUESTS[-1]))
    assert first != second
    for pid in (first, second):
        _wait_gone(pid)  # each per-use server was shut down


# --- streamable HTTP ------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_http(port: int, script: str = SERVER, *flags: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, script, *flags, str(port)], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise AssertionError("http MCP server did not start")


@pytest.fixture
def http_port() -> Iterator[tuple[int, list[subprocess.Popen[bytes]]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield _free_port(), procs
    for proc in procs:
        proc.kill()
        proc.wait()


def test_streamable_http_server_tools_run_and_survive_a_server_restart(
    tmp_path: Path, http_port: tuple[int, list[subprocess.Popen[bytes]]]
) -> None:
    port, procs = http_port
    procs.append(_start_http(port))
    config = {
        "transport": {"type": "http", "endpoint": f"http://127.0.0.1:{port}/mcp", "headers": {"X-Test": "configured"}},
        "timeouts": {"connectMs": 3000},
    }
    root = _bundle(tmp_path, config)

    async def scenario() -> list[dict[str, Any]]:
        results = []
        async with goondan.Runtime(root, isolation="inline", state_root=tmp_path / "state") as rt:
            k.MODEL = k.scripted(
                _call("mcp__header", {"name": "x-test"}),
                _call("mcp__add", {"a": 20, "b": 22}, "c1b"),
                k.text_reply("ok"),
            )
            await rt.request("one")
            results.extend(_outputs(k.REQUESTS[-1]))
            procs[0].kill()
            procs[0].wait()
            k.MODEL = k.scripted(_call("mcp__add", {"a": 1, "b": 2}, "c2"), k.text_reply("done"))
            await rt.request("two")  # server down: a clear error, not a hang
            results.append(_last_output())
            procs.append(await asyncio.get_running_loop().run_in_executor(None, _start_http, port))
            k.MODEL = k.scripted(_call("mcp__add", {"a": 2, "b": 2}, "c3"), k.text_reply("done"))
            await rt.request("three")
            results.append(_last_output())
        return results

    header, ok, down, back = asyncio.run(scenario())
    assert header == {"type": "text", "value": "configured"}  # transport.headers reach the server
    assert ok == {"type": "text", "value": "42"}
    assert down["type"] == "error-json"
    assert down["value"]["code"] == "E_MCP_UNAVAILABLE", down  # refused: never sent, so retried once
    assert f"127.0.0.1:{port}/mcp" in down["value"]["message"]
    assert back == {"type": "text", "value": "4"}


def test_tool_names_are_made_catalog_safe_and_unique() -> None:
    used: set[str] = set()
    assert tool_name_part("get.weather", "mcp", used) == "get_weather"
    assert tool_name_part("get/weather", "mcp", used) == "get_weather-2"
    assert tool_name_part("a__b", "mcp", used) == "a_b"
    long = tool_name_part("x" * 100, "mcp", used)
    assert len("mcp__" + long) <= 64


def _pids_per_instance(root: Path, state: Path, keys: list[str]) -> tuple[list[int], Any]:
    """Ask each agent instance (one per key) for its server's pid; returns the pids and, after the
    runtime closed and was garbage-collected, whether those servers are gone."""
    import gc

    async def scenario() -> list[int]:
        pids = []
        async with goondan.Runtime(root, isolation="inline", state_root=state) as rt:
            for n, key in enumerate(keys):
                k.MODEL = k.scripted(_call("mcp__pid", cid=f"c{n}"), k.text_reply("done"))
                await rt.request("pid", instance_key=key)
                pids.append(_pid_of(_last_output()))
        gc.collect()  # the closed instances' extension objects are garbage now
        await asyncio.sleep(0)
        await asyncio.get_running_loop().run_in_executor(None, lambda: [_wait_gone(p) for p in set(pids)])
        return pids

    return asyncio.run(scenario()), None


def test_scope_instance_shares_one_server_between_agent_instances(tmp_path: Path) -> None:
    root = _bundle(tmp_path, _stdio(attach={"mode": "stateful", "scope": "instance"}))
    pids, _ = _pids_per_instance(root, tmp_path / "state", ["k1", "k2"])
    assert pids[0] == pids[1]


def test_scope_agent_gives_each_instance_its_own_server_and_closing_the_runtime_stops_them(tmp_path: Path) -> None:
    root = _bundle(tmp_path, _stdio(attach={"mode": "stateful", "scope": "agent"}))
    pids, _ = _pids_per_instance(root, tmp_path / "state", ["k1", "k2"])
    assert pids[0] != pids[1]  # and _pids_per_instance waited until both were gone, inside the loop


def test_without_the_sdk_the_extension_says_how_to_install_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)  # makes `import mcp` raise ImportError
    root = _bundle(tmp_path, _stdio())
    with pytest.raises(goondan.ExtensionError) as info:
        goondan.run(root, "go", state_root=tmp_path / "state", isolation="inline")
    assert info.value.code == "E_EXT_INIT"
    assert info.value.suggestion is not None and "goondan-runtime[mcp]" in info.value.suggestion


def test_a_config_without_a_usable_transport_is_a_config_error(tmp_path: Path) -> None:
    root = _bundle(tmp_path, {"transport": {"type": "http"}})
    with pytest.raises(goondan.ExtensionError) as info:
        goondan.run(root, "go", state_root=tmp_path / "state", isolation="inline")
    assert info.value.code == "E_EXT_CONFIG"
    assert "transport.endpoint is required" in info.value.message


def test_a_server_that_never_answers_the_handshake_times_out_with_e_ext_init(tmp_path: Path) -> None:
    hang = ["{python}", "-c", "import time; time.sleep(60)"]
    config = {"transport": {"type": "stdio", "command": hang, "cwd": str(tmp_path)}, "timeouts": {"connectMs": 500}}
    root = _bundle(tmp_path, config)
    started = time.monotonic()
    with pytest.raises(goondan.ExtensionError) as info:
        goondan.run(root, "go", state_root=tmp_path / "state", isolation="inline")
    assert time.monotonic() - started < 15  # the hung server was stopped, not waited for
    assert info.value.code == "E_EXT_INIT"
    assert "no MCP handshake within 500 ms" in info.value.message
    assert "time.sleep(60)" in info.value.message


def test_a_call_past_call_ms_is_e_mcp_timeout_naming_the_limit_and_the_server_still_answers(tmp_path: Path) -> None:
    root = _bundle(tmp_path, _stdio(timeouts={"callMs": 300}))
    k.MODEL = k.scripted(
        _call("mcp__slow", {"seconds": 30}), _call("mcp__add", {"a": 1, "b": 2}, "c2"), k.text_reply("done")
    )
    started = time.monotonic()
    goondan.run(root, "go", state_root=tmp_path / "state", isolation="inline")
    assert time.monotonic() - started < 20  # the slow call was given up on, not waited for
    timed_out, added = _outputs(k.REQUESTS[-1])
    assert timed_out["type"] == "error-json"
    assert timed_out["value"]["code"] == "E_MCP_TIMEOUT", timed_out  # was E_MCP_REQUEST_FAILED "rejected"
    assert "within 300 ms" in timed_out["value"]["message"]
    assert "callMs" in timed_out["value"]["suggestion"]
    assert added == {"type": "text", "value": "3"}


def test_an_http_endpoint_nobody_answers_is_e_ext_init_saying_unreachable_not_run_the_command(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = {
        "transport": {"type": "http", "endpoint": f"http://127.0.0.1:{port}/mcp"},
        "timeouts": {"connectMs": 3000},
    }
    root = _bundle(tmp_path, config)
    with pytest.raises(goondan.ExtensionError) as info:
        goondan.run(root, "go", state_root=tmp_path / "state", isolation="inline")
    assert info.value.code == "E_EXT_INIT"
    # was "could not be started" and "Run the command by hand": there is no command for an endpoint
    assert f"(endpoint http://127.0.0.1:{port}/mcp) could not be reached" in info.value.message
    assert "transport.endpoint" in (info.value.suggestion or "")
    assert "command" not in (info.value.suggestion or "")


def test_a_banner_a_server_prints_on_stdout_is_one_warning_without_a_traceback_and_the_tools_work(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    noisy = tmp_path / "noisy_server.py"
    noisy.write_text(f"print('Notes server v1.0 starting...', flush=True)\nexec(open({SERVER!r}).read())\n")
    root = _bundle(tmp_path, {"transport": {"type": "stdio", "command": ["{python}", str(noisy)]}})
    k.MODEL = k.scripted(
        _call("mcp__add", {"a": 2, "b": 3}), _call("mcp__add", {"a": 1, "b": 1}, "c2"), k.text_reply("d")
    )
    with caplog.at_level(logging.WARNING):
        goondan.run(root, "add", state_root=tmp_path / "state", isolation="inline")
    assert _outputs(k.REQUESTS[-1]) == [{"type": "text", "value": "5"}, {"type": "text", "value": "2"}]
    noise = [r for r in caplog.records if r.name == "mcp.client.stdio"]
    # was an ERROR with a pydantic traceback on the terminal ("Failed to parse JSONRPC message")
    assert [(r.levelno, r.getMessage(), r.exc_info) for r in noise] == [
        (
            logging.WARNING,
            "an MCP server wrote a line to stdout that is not an MCP message (ignored): "
            "'Notes server v1.0 starting...'; a stdio server must log to stderr",
            None,
        )
    ]
