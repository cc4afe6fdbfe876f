"""Spans reach a real OTLP/HTTP receiver with the ids of runtime-events.jsonl, one trace across
agent processes, GenAI attributes and error status; export off imports nothing of OpenTelemetry;
a receiver that fails never fails a turn."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import otel_kit
import pytest

import goondan
import kit
from goondan._spans import model_span_id

ERROR = 2  # Status.STATUS_CODE_ERROR
KIND_INTERNAL, KIND_CLIENT = 1, 3


def _clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "GOONDAN_"))}
    env.update(HOME=str(tmp_path / "home"), **extra)
    return env


def _gdn(
    root: Path, state_root: Path, env: Mapping[str, str], text: str = "hello boom"
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "goondan", "run", str(root), "--input", text, "--state-root", str(state_root)],
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=60,
    )


def _records(state_root: Path) -> dict[str, list[dict[str, Any]]]:
    return {
        agent: kit.read_jsonl(kit.instance_dir(state_root, agent, "default") / "messages" / "runtime-events.jsonl")
        for agent in ("front", "worker")
    }


def _expected_count(records: dict[str, list[dict[str, Any]]]) -> int:
    ends = [r for rs in records.values() for r in rs if r["type"].endswith((".completed", ".failed"))]
    return len(ends) + sum(1 for r in ends if "model" in r)


def _check_trace(spans: list[otel_kit.Got], records: dict[str, list[dict[str, Any]]]) -> dict[str, otel_kit.Got]:
    """The checks both executors must pass; returns the spans by id."""
    ends = [r for rs in records.values() for r in rs if r["type"].endswith((".completed", ".failed"))]
    by_id = {s.span_id: s for s in spans}
    assert len(by_id) == len(spans), "a span was exported twice"
    # exactly the ids and parents of runtime-events.jsonl, plus one model-call span per step
    expected = {r["spanId"]: r.get("parentSpanId") for r in ends}
    expected.update({model_span_id(r["spanId"]): r["spanId"] for r in ends if "model" in r})
    assert {s.span_id: s.parent_span_id for s in spans} == expected
    # one trace across both agents
    assert {s.trace_id for s in spans} == {r["traceId"] for rs in records.values() for r in rs} != set()
    assert len({s.trace_id for s in spans}) == 1
    # the callee's turn hangs under the caller's tool call, which hangs under the caller's step
    [front_turn] = [by_id[r["spanId"]] for r in records["front"] if r["type"] == "turn.completed"]
    [worker_turn] = [by_id[r["spanId"]] for r in records["worker"] if r["type"] == "turn.completed"]
    ask = by_id[str(worker_turn.parent_span_id)]
    assert ask.name == "execute_tool t__ask" and ask.attributes["gen_ai.agent.name"] == "front"
    assert by_id[str(ask.parent_span_id)].parent_span_id == front_turn.span_id
    assert front_turn.parent_span_id is None
    # GenAI attributes
    for turn, agent in ((front_turn, "front"), (worker_turn, "worker")):
        assert turn.name == f"invoke_agent {agent}"
        assert turn.attributes["gen_ai.operation.name"] == "invoke_agent"
        assert turn.attributes["gen_ai.agent.name"] == agent
        assert turn.attributes["gen_ai.request.model"] == "test-model"
        assert turn.attributes["gen_ai.usage.input_tokens"] == 22  # two model calls of 11
        assert turn.attributes["gen_ai.usage.output_tokens"] == 14
    chats = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert len(chats) == 4 and {s.kind for s in chats} == {KIND_CLIENT}
    assert all(s.name == "chat test-model" and s.attributes["gen_ai.provider.name"] == "python" for s in chats)
    assert sorted(tuple(s.attributes["gen_ai.response.finish_reasons"]) for s in chats) == [
        ("stop",),
        ("stop",),
        ("tool-calls",),
        ("tool-calls",),
    ]
    for chat in chats:
        step = by_id[str(chat.parent_span_id)]
        assert step.start_ns <= chat.start_ns <= chat.end_ns <= step.end_ns
    # the failing tool: error status with our code
    [boom] = [s for s in spans if s.name == "execute_tool t__boom"]
    assert boom.status_code == ERROR
    assert boom.attributes["error.type"] == "E_BOOM"
    assert boom.attributes["gen_ai.tool.call.id"] == "call_boom"
    assert boom.attributes["gen_ai.operation.name"] == "execute_tool"
    assert "always fails" in boom.status_message
    assert all(s.status_code != ERROR for s in spans if s is not boom)
    assert {s.scope for s in spans} == {"goondan"}
    return by_id


def test_every_executor_exports_one_trace_with_the_runtime_event_ids(
    tmp_path: Path, otlp: otel_kit.Receiver, executor: str
) -> None:
    """goondan.Runtime with each executor (inline, agent processes, Ray actors): the host exports
    the spans of every instance, wherever it ran."""
    root = otel_kit.two_agent_bundle(tmp_path / "b")
    state_root = tmp_path / "state"
    env = _clean_env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=otlp.endpoint, OTEL_SERVICE_NAME="suite")

    async def main() -> goondan.TurnResult:
        async with goondan.Runtime(root, state_root=state_root, executor=executor, env=env) as rt:
            return await rt.request("hello boom")

    result = asyncio.run(main())
    assert result.text == "front done"
    records = _records(state_root)
    # close() flushed: everything is there without waiting for the batch delay
    spans = list(otlp.spans)
    assert len(spans) == _expected_count(records)
    _check_trace(spans, records)
    assert {s.resource["service.name"] for s in spans} == {"suite"}
    assert {s.resource["goondan.swarm.name"] for s in spans} == {"default"}
    assert set(otlp.paths) == {"/v1/traces"}


def test_gdn_run_with_agent_processes_exports_one_trace_from_the_bundle_setting(
    tmp_path: Path, otlp: otel_kit.Receiver
) -> None:
    telemetry = {
        "otlp": {
            "endpoint": otlp.endpoint,
            "serviceName": "swarm-under-test",
            "headers": {"Authorization": {"valueFrom": {"env": "OTLP_AUTH"}}},
        }
    }
    root = otel_kit.two_agent_bundle(tmp_path / "b", telemetry=telemetry)
    state_root = tmp_path / "state"
    proc = _gdn(root, state_root, _clean_env(tmp_path, OTLP_AUTH="Bearer s3cret"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "front done"
    records = _records(state_root)
    spans = list(otlp.spans)
    assert len(spans) == _expected_count(records)
    _check_trace(spans, records)
    assert {s.resource["service.name"] for s in spans} == {"swarm-under-test"}
    assert {r.get("authorization") for r in otlp.requests} == {"Bearer s3cret"}
    # the two agents ran in two agent processes, neither of which loaded OpenTelemetry: the host exports
    seen = otel_kit.loaded_modules(root)
    assert len({r["pid"] for r in seen}) == 2
    assert all(r["modules"] == [] for r in seen)


def test_export_off_imports_no_opentelemetry_in_the_host_or_agent_processes(tmp_path: Path) -> None:
    root = otel_kit.two_agent_bundle(tmp_path / "b")
    script = (
        "import sys, goondan\n"
        f"r = goondan.run({str(root)!r}, 'hi', state_root={str(tmp_path / 'state')!r})\n"
        "print(r.text)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'opentelemetry'))\n"
        "import os; print(os.getpid())\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], env=_clean_env(tmp_path), capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    text, modules, host_pid = proc.stdout.splitlines()
    assert (text, modules) == ("front done", "[]")
    seen = otel_kit.loaded_modules(root)
    assert len(seen) == 3 and all(r["modules"] == [] for r in seen)  # front twice, worker once
    assert int(host_pid) not in {r["pid"] for r in seen}  # those were the agent processes


def test_a_failing_receiver_never_fails_a_turn_and_is_logged_once(
    tmp_path: Path, otlp: otel_kit.Receiver, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    otlp.status = 400  # refuses every batch (not retried)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "10")  # export while the runtime runs, several batches
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "2")
    root = otel_kit.two_agent_bundle(tmp_path / "b")
    env = _clean_env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=otlp.endpoint)

    async def main() -> list[goondan.TurnResult]:
        async with goondan.Runtime(root, state_root=tmp_path / "state", executor="inline", env=env) as rt:
            return [await rt.request("hello boom"), await rt.request("again")]

    with caplog.at_level(logging.WARNING):
        results = asyncio.run(main())
    assert [r.text for r in results] == ["front done", "front done"]
    assert len(otlp.requests) >= 2
    warnings = [r for r in caplog.records if r.name.startswith(("goondan.telemetry", "opentelemetry"))]
    assert [r.name for r in warnings] == ["goondan.telemetry"]
    assert "could not export spans" in warnings[0].getMessage()


def _request_then_close(tmp_path: Path, endpoint: str) -> tuple[str | None, float]:
    """One turn exporting to ``endpoint``; returns its answer and how long closing the runtime took."""
    root = otel_kit.two_agent_bundle(tmp_path / "b")
    env = _clean_env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=endpoint)

    async def main() -> tuple[str | None, float]:
        async with goondan.Runtime(root, state_root=tmp_path / "state", executor="inline", env=env) as rt:
            result = await rt.request("hi")
            t0 = time.monotonic()
        return result.text, time.monotonic() - t0

    return asyncio.run(main())


def test_a_receiver_that_is_down_does_not_hold_the_runtime_at_close(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    closed = otel_kit.Receiver()
    closed.close()  # nothing listens on this port any more: every export attempt is refused
    with caplog.at_level(logging.WARNING):
        text, closing = _request_then_close(tmp_path, closed.endpoint)
    assert text == "front done"
    # the exporter would retry with back-off for 10 s; a refused attempt ends the wait at once
    # (it held every one-shot `gdn run` about 3 s before)
    assert closing < 1.0, f"close took {closing:.2f} s"
    assert [r.name for r in caplog.records if "export" in r.getMessage()] == ["goondan.telemetry"]


def test_a_receiver_that_accepts_and_never_answers_does_not_hold_the_runtime_at_close_and_is_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # a hung collector: the connection is accepted (kernel backlog), no response ever comes; the
    # exporter's own timeout is 10 s, which the processor's shutdown used to wait out
    with socket.socket() as hung, caplog.at_level(logging.WARNING):
        hung.bind(("127.0.0.1", 0))
        hung.listen(16)
        endpoint = f"http://127.0.0.1:{hung.getsockname()[1]}"
        text, closing = _request_then_close(tmp_path, endpoint)
    assert text == "front done"
    assert closing < 5, f"close took {closing:.1f} s"
    # the dropped spans are said once, naming the receiver (they vanished without a word before)
    said = [r.getMessage() for r in caplog.records if r.name == "goondan.telemetry"]
    assert said == [
        f"could not export the last spans to {endpoint}/v1/traces: the receiver did not answer within 3.0 s; "
        "they are dropped"
    ]


def test_grpc_protocol_fails_the_run_with_a_clear_error(tmp_path: Path) -> None:
    root = otel_kit.two_agent_bundle(tmp_path / "b")
    env = _clean_env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:4317", OTEL_EXPORTER_OTLP_PROTOCOL="grpc")
    proc = _gdn(root, tmp_path / "state", env, text="hi")
    assert proc.returncode != 0
    assert "[E_TELEMETRY_CONFIG]" in proc.stderr
    assert "Traceback" not in proc.stderr


_WITHOUT_OTEL = (
    "import sys\n"
    "sys.modules['opentelemetry'] = None  # as if the otel extra were not installed\n"
    "import goondan\n"
    "try:\n"
    "    r = goondan.run(sys.argv[1], 'hi', state_root=sys.argv[2], executor='inline')\n"
    "    print('ok', r.text)\n"
    "except goondan.GoondanError as exc:\n"
    "    print(exc.code, exc.suggestion)\n"
)


def test_without_the_extra_a_bundle_setting_is_an_error_and_the_environment_a_warning(tmp_path: Path) -> None:
    asked = otel_kit.two_agent_bundle(tmp_path / "b1", telemetry={"otlp": {"endpoint": "http://127.0.0.1:9"}})
    plain = otel_kit.two_agent_bundle(tmp_path / "b2")

    def run(root: Path, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", _WITHOUT_OTEL, str(root), str(tmp_path / "state")],
            env=_clean_env(tmp_path, **env),
            capture_output=True,
            text=True,
            timeout=60,
        )

    explicit = run(asked)
    assert explicit.stdout.split(" ", 1)[0] == "E_TELEMETRY_UNAVAILABLE", explicit.stderr
    assert "goondan-runtime[otel]" in explicit.stdout
    from_env = run(plain, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9")
    assert from_env.stdout.strip() == "ok front done", from_env.stderr
    assert "traces are not exported" in from_env.stderr


def test_the_span_queue_is_bounded_and_a_full_queue_is_logged_once(
    otlp: otel_kit.Receiver, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from goondan.telemetry import telemetry_config
    from goondan.telemetry._export import SpanExport

    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "50")
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "50")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "60000")  # nothing leaves before the flush at shutdown
    config = telemetry_config(None, {"OTEL_EXPORTER_OTLP_ENDPOINT": otlp.endpoint})
    assert config is not None
    export = SpanExport(config)
    base = {
        "agentName": "a",
        "instanceKey": "k",
        "traceId": "1" * 32,
        "turnId": "t",
        "timestamp": "2026-01-01T00:00:00.000Z",
    }
    with caplog.at_level(logging.WARNING):
        for i in range(200):
            span = f"{i + 1:016x}"
            export.on_event({**base, "type": "turn.started", "spanId": span})
            export.on_event({**base, "type": "turn.completed", "spanId": span, "stepCount": 1, "duration": 0})
        export.shutdown()
    # spans beyond the bound were dropped (the worker may have sent a full batch meanwhile)
    assert 50 <= len(otlp.spans) < 200
    assert sum("Queue full" in r.getMessage() for r in caplog.records) == 1


def test_batch_settings_the_sdk_refuses_are_a_config_error(
    tmp_path: Path, otlp: otel_kit.Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "10")
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "100")
    root = otel_kit.two_agent_bundle(tmp_path / "b")
    env = _clean_env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=otlp.endpoint)

    async def main() -> None:
        async with goondan.Runtime(root, state_root=tmp_path / "state", executor="inline", env=env):
            pass

    with pytest.raises(goondan.GoondanError) as info:
        asyncio.run(main())
    assert info.value.code == "E_TELEMETRY_CONFIG"
    assert "max_export_batch_size" in info.value.message


def test_message_content_is_exported_only_when_asked(
    tmp_path: Path, otlp: otel_kit.Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOONDAN_TRACE_LLM_INPUT", "1")  # the step records its model input
    root = otel_kit.two_agent_bundle(tmp_path / "b")

    def chats(capture: str, key: str) -> list[otel_kit.Got]:
        otlp.spans.clear()
        env = _clean_env(
            tmp_path,
            OTEL_EXPORTER_OTLP_ENDPOINT=otlp.endpoint,
            OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=capture,
        )

        async def main() -> None:
            async with goondan.Runtime(root, state_root=tmp_path / "state", executor="inline", env=env) as rt:
                await rt.request("the secret word is swordfish", instance_key=key)

        asyncio.run(main())
        return [s for s in otlp.spans if s.attributes.get("gen_ai.operation.name") == "chat"]

    assert all("gen_ai.input.messages" not in s.attributes for s in chats("false", "k1"))
    captured = chats("true", "k2")
    assert captured and all("swordfish" in s.attributes["gen_ai.input.messages"] for s in captured)
