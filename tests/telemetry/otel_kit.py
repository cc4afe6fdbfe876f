"""A real OTLP/HTTP receiver on 127.0.0.1 and a two-agent bundle for the telemetry tests.

:class:`Receiver` is a ``http.server`` accepting ``POST /v1/traces`` (protobuf or gzip'd
protobuf), decoded with ``opentelemetry.proto`` into :class:`Got` spans; it records the headers
of every request and can be told to answer 503 (a receiver that is down or refusing).

The bundle: ``front`` answers a user message by calling its ``t__ask`` tool, which asks ``worker``
(another agent process under the process executor); ``worker`` answers, except for a message
containing ``boom``, where it calls ``t__boom``, whose handler raises. Both use a python model
that reports token usage and a finish reason, so every GenAI attribute has a value to check, and
that appends the OpenTelemetry modules its process has loaded to ``otel-modules.jsonl``.
"""

from __future__ import annotations

import dataclasses
import gzip
import http.server
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

import kit

__all__ = ["Got", "Receiver", "loaded_modules", "receiver", "two_agent_bundle"]


@dataclasses.dataclass
class Got:
    """One received span, ids as lowercase hex like runtime-events.jsonl."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    status_code: int  # 0 unset, 1 ok, 2 error
    status_message: str
    resource: dict[str, Any]
    scope: str


def _value(v: AnyValue) -> Any:
    which = v.WhichOneof("value")
    if which == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, which) if which else None


class Receiver:
    def __init__(self) -> None:
        self.spans: list[Got] = []
        self.requests: list[dict[str, str]] = []
        self.paths: list[str] = []
        self.status = 200
        self._lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with outer._lock:
                    outer.requests.append({k.lower(): v for k, v in self.headers.items()})
                    outer.paths.append(self.path)
                if outer.status != 200:
                    self.send_response(outer.status)
                    self.end_headers()
                    return
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                outer._add(request)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def _add(self, request: ExportTraceServiceRequest) -> None:
        got: list[Got] = []
        for rs in request.resource_spans:
            resource = {a.key: _value(a.value) for a in rs.resource.attributes}
            for ss in rs.scope_spans:
                for s in ss.spans:
                    got.append(
                        Got(
                            trace_id=s.trace_id.hex(),
                            span_id=s.span_id.hex(),
                            parent_span_id=s.parent_span_id.hex() or None,
                            name=s.name,
                            kind=s.kind,
                            start_ns=s.start_time_unix_nano,
                            end_ns=s.end_time_unix_nano,
                            attributes={a.key: _value(a.value) for a in s.attributes},
                            status_code=s.status.code,
                            status_message=s.status.message,
                            resource=resource,
                            scope=ss.scope.name,
                        )
                    )
        with self._lock:
            self.spans.extend(got)

    def wait_for(self, count: int, timeout: float = 10.0) -> list[Got]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.spans) >= count:
                    return list(self.spans)
            time.sleep(0.02)
        with self._lock:
            return list(self.spans)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def receiver() -> Iterator[Receiver]:
    r = Receiver()
    try:
        yield r
    finally:
        r.close()


MODEL = """\
import json
import os
import sys
from pathlib import Path


def generate(request):
    loaded = sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry")
    with open(Path(__file__).parent / "otel-modules.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"agent": request.agent_name, "pid": os.getpid(), "modules": loaded}) + "\\n")
    last = request.messages[-1]
    usage = {"promptTokens": 11, "completionTokens": 7, "totalTokens": 18}
    if last["role"] == "tool":
        return {"text": request.agent_name + " done", "usage": usage, "finishReason": "stop"}
    text = last["content"] if isinstance(last["content"], str) else ""
    if request.agent_name == "front":
        call = {"id": "call_ask", "name": "t__ask", "args": {"text": text}}
        return {"text": None, "toolCalls": [call], "usage": usage, "finishReason": "tool-calls"}
    if "boom" in text:
        call = {"id": "call_boom", "name": "t__boom", "args": {}}
        return {"text": None, "toolCalls": [call], "usage": usage, "finishReason": "tool-calls"}
    return {"text": "worker says hi", "usage": usage, "finishReason": "stop"}
"""

TOOLS = """\
from goondan import GoondanError


async def ask(ctx, args):
    result = await ctx.runtime.request("worker", args["text"])
    return result.response


def boom(ctx, args):
    raise GoondanError("E_BOOM", "the boom tool always fails")


handlers = {"ask": ask, "boom": boom}
"""


def two_agent_bundle(root: Path, *, telemetry: dict[str, Any] | None = None) -> Path:
    swarm = kit.swarm_doc(["front", "worker"])
    if telemetry is not None:
        swarm["spec"]["telemetry"] = telemetry
    return kit.write_bundle(
        root,
        kit.package_doc("otel-suite"),
        kit.python_model_doc(model="test-model"),
        kit.tool_doc("t", "./tools.py", [kit.export("ask", {"text": {"type": "string"}}), kit.export("boom")]),
        kit.agent_doc("front", tools=["t"]),
        kit.agent_doc("worker", tools=["t"]),
        swarm,
        files={"model.py": MODEL, "tools.py": TOOLS},
    )


def loaded_modules(root: Path) -> list[dict[str, Any]]:
    """What the model of each call saw of ``opentelemetry`` in its process (``otel-modules.jsonl``)."""
    return kit.read_jsonl(root / "otel-modules.jsonl")
