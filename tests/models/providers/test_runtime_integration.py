"""Real providers inside real Goondan turns: a bundle whose Model is ``openai`` with ``endpoint``
pointing at a loopback OpenAI-compatible server runs a full turn with a tool call, with and without
streaming; SDKs are imported only by bundles that use them; a missing SDK is one clear error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import goondan
import kit
from goondan.errors import ModelError

from .conftest import run
from .fake_http import Reply, Req, sse_event

KEY = "sk-bundle-SECRET-42"


def provider_bundle(root: Path, model_spec: dict[str, Any]) -> Path:
    """One agent with a calculator tool whose Model ``main`` has the given spec."""
    add = kit.export(
        "add", {"a": {"type": "number"}, "b": {"type": "number"}}, required=["a", "b"], additionalProperties=False
    )
    add["description"] = "Add two numbers."
    return kit.write_bundle(
        root,
        kit.package_doc("provider-e2e"),
        {"apiVersion": kit.API, "kind": "Model", "metadata": {"name": "main"}, "spec": model_spec},
        kit.tool_doc("calc", "./calc.py", [add]),
        kit.agent_doc(
            "helper",
            model="main",
            params={"temperature": 0.0, "maxTokens": 200},
            prompt="Use the calculator.",
            tools=["calc"],
        ),
        kit.swarm_doc(["helper"]),
        files={"calc.py": "handlers = {'add': lambda ctx, args: {'sum': args['a'] + args['b']}}\n"},
    )


def chat_server_handler(req: Req) -> Reply:
    body = req.json
    last = body["messages"][-1]
    if last["role"] == "tool":
        words = ["The ", "sum ", "is ", json.loads(last["content"])["sum"].__str__(), "."]
        if body.get("stream"):
            events = [
                sse_event(
                    {
                        "id": "c2",
                        "object": "chat.completion.chunk",
                        "created": 1,
                        "model": "m",
                        "choices": [{"index": 0, "delta": {"content": w}, "finish_reason": None}],
                    }
                )
                for w in words
            ]
            events.append(
                sse_event(
                    {
                        "id": "c2",
                        "object": "chat.completion.chunk",
                        "created": 1,
                        "model": "m",
                        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 30, "completion_tokens": 5, "total_tokens": 35},
                    }
                )
            )
            events.append("data: [DONE]\n\n")
            return Reply(sse=events)
        message: dict[str, Any] = {"role": "assistant", "content": "".join(words)}
        finish, usage = "stop", {"prompt_tokens": 30, "completion_tokens": 5, "total_tokens": 35}
    else:
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_x", "type": "function", "function": {"name": "calc__add", "arguments": '{"a": 2, "b": 3}'}}
            ],
        }
        finish, usage = "tool_calls", {"prompt_tokens": 20, "completion_tokens": 8, "total_tokens": 28}
    if body.get("stream"):
        delta = {k: v for k, v in message.items() if k != "content"}
        if "tool_calls" in delta:
            delta["tool_calls"] = [{"index": 0, **c} for c in delta["tool_calls"]]
        return Reply(
            sse=[
                sse_event(
                    {
                        "id": "c1",
                        "object": "chat.completion.chunk",
                        "created": 1,
                        "model": "m",
                        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                        "usage": usage,
                    }
                ),
                "data: [DONE]\n\n",
            ]
        )
    return Reply(
        body={
            "id": "c",
            "object": "chat.completion",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage,
        }
    )


def run_turn(bundle: Path, state: Path, *, stream_listener: list[str] | None) -> Any:
    async def main() -> Any:
        async with goondan.Runtime(bundle, state_root=state, isolation="inline", env={"TEST_OPENAI_KEY": KEY}) as rt:
            if stream_listener is not None:
                rt.on_text_delta(lambda event: stream_listener.append(event["delta"]))
            return await rt.request("what is 2 + 3?")

    return run(main())


@pytest.mark.parametrize("streaming", [False, True])
def test_an_openai_compatible_endpoint_runs_a_full_turn_with_a_tool_call(
    serve: Any, tmp_path: Path, streaming: bool
) -> None:
    server = serve(chat_server_handler)
    spec = {
        "provider": "openai",
        "model": "served-model",
        "endpoint": server.url + "/v1",
        "apiKey": {"valueFrom": {"env": "TEST_OPENAI_KEY"}},
        "options": {"retryBaseDelaySeconds": 0.01},
    }
    bundle = provider_bundle(tmp_path / "bundle", spec)
    deltas: list[str] | None = [] if streaming else None
    result = run_turn(bundle, tmp_path / "state", stream_listener=deltas)
    assert result.finish_reason != "error", result.error
    assert result.text == "The sum is 5."
    first, second = (r.json for r in server.requests)
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in server.requests)
    assert first["model"] == "served-model" and first["max_tokens"] == 200 and first["temperature"] == 0.0
    # system messages stay where the runtime put them (the Chat API accepts them anywhere)
    assert first["messages"] == [
        {"role": "user", "content": "what is 2 + 3?"},
        {"role": "system", "content": "Use the calculator."},
    ]
    assert first["tools"][0]["function"]["name"] == "calc__add"
    # the step after the tool call sends back the assistant's call and the tool's result
    assert second["messages"][-2]["tool_calls"][0]["id"] == "call_x"
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "call_x", "content": '{"sum": 5}'}
    assert ("stream" in first) is streaming
    if deltas is not None:
        assert "".join(deltas) == "The sum is 5." and len(deltas) == 5
    # the API key never reaches the persisted state
    for path in (tmp_path / "state").rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(errors="replace"), path


def test_validating_a_bundle_never_imports_a_provider_sdk(tmp_path: Path) -> None:
    bundle = provider_bundle(
        tmp_path / "b", {"provider": "anthropic", "model": "claude-x", "apiKey": {"valueFrom": {"env": "K"}}}
    )
    code = (
        "import os, sys, goondan\n"
        "os.environ['K'] = 'set'  # an unset apiKey variable is itself a validation error\n"
        f"report = goondan.validate_bundle({str(bundle)!r})\n"
        "assert not report.errors, report.errors\n"
        "print([m for m in ('anthropic', 'openai', 'google.genai', 'llama_cpp') if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("provider", "module", "extra"),
    [("openai", "openai", "openai"), ("anthropic", "anthropic", "anthropic"), ("google", "google.genai", "google")],
)
def test_a_missing_sdk_names_the_pip_extra(
    monkeypatch: pytest.MonkeyPatch, provider: str, module: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` fail like an absent package
    with pytest.raises(ModelError) as info:
        goondan.models.create_model_adapter(provider, model="m", options={}, api_key="k")
    assert info.value.code == "E_MODEL_SDK_MISSING"
    assert info.value.suggestion == f"Install it with: pip install 'goondan-runtime[{extra}]'"


def test_model_options_are_checked_without_importing_any_sdk() -> None:
    code = (
        "import sys\n"
        "from goondan.models import check_model_options\n"
        "from goondan.errors import ModelError\n"
        "check_model_options('openai', {'timeoutSeconds': 5, 'maxTokensParam': 'max_tokens'})\n"
        "check_model_options('local', {'toolChoice': 'first'})\n"
        "bad = [('openai', {'timeout': 5}), ('anthropic', {'maxRetries': -1}), ('google', {'stream': 'yes'}),\n"
        "       ('local', {'contextSize': 1})]\n"
        "for provider, options in bad:\n"
        "    try:\n"
        "        check_model_options(provider, options)\n"
        "    except ModelError as exc:\n"
        "        print(exc.code)\n"
        "print([m for m in ('anthropic', 'openai', 'google.genai', 'llama_cpp') if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["E_MODEL_CONFIG"] * 4 + ["[]"]


@pytest.mark.parametrize("executor", ["inline", "process"])
def test_a_model_without_api_key_takes_the_providers_variable_from_the_bundle_env_file(
    serve: Any, tmp_path: Path, executor: str
) -> None:
    """``OPENAI_API_KEY`` in the bundle's ``.env`` reaches a Model that leaves ``apiKey`` out, in the
    agent process too: the SDK itself reads only the process environment (which lacks it here), so
    before, the key sent was the endpoint placeholder and a real provider answered 401."""
    server = serve(chat_server_handler)
    spec = {"provider": "openai", "model": "served-model", "endpoint": server.url + "/v1"}
    bundle = provider_bundle(tmp_path / "bundle", spec)
    (bundle.parent if bundle.suffix else bundle).joinpath(".env").write_text(f"OPENAI_API_KEY={KEY}\n")
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "GOONDAN_STATE_ROOT")}
    env.update(GOONDAN_EXECUTOR=executor, GOONDAN_ISOLATION=executor, HOME=str(tmp_path / "home"), NO_COLOR="1")
    state = str(tmp_path / "state")
    out = subprocess.run(
        [sys.executable, "-m", "goondan", "run", str(bundle), "--input", "what is 2 + 3?", "--state-root", state],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "The sum is 5."
    assert [r.headers["authorization"] for r in server.requests] == [f"Bearer {KEY}"] * 2
