"""Helpers for connector tests: bundles with Connections, a real `gdn run`, loopback fake upstream APIs."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import kit
from goondan.connectors import HttpRequest, HttpResponse, serve_http

BUNDLE_HEAD = """\
apiVersion: goondan.ai/v1
kind: Package
metadata:
  name: connector-test
spec:
  version: 0.1.0
---
apiVersion: goondan.ai/v1
kind: Model
metadata:
  name: echo
spec:
  provider: scripted
  model: echo
  options:
    rules:
      - reply:
          text: "echo: {{last}}"
---
apiVersion: goondan.ai/v1
kind: Extension
metadata:
  name: probe
spec:
  entry: ./probe.py
---
apiVersion: goondan.ai/v1
kind: Agent
metadata:
  name: front
spec:
  modelConfig:
    modelRef: Model/echo
  extensions: [Extension/probe]
---
apiVersion: goondan.ai/v1
kind: Agent
metadata:
  name: ops
spec:
  modelConfig:
    modelRef: Model/echo
  extensions: [Extension/probe]
---
apiVersion: goondan.ai/v1
kind: Swarm
metadata:
  name: default
spec:
  entryAgent: Agent/front
  agents: [Agent/front, Agent/ops]
"""

PROBE = """\
import json, os


def register(api):
    async def turn(ctx):
        inbound = ctx.runtime.inbound
        record = {
            "agent": ctx.runtime.agent.name,
            "instanceKey": inbound.instance_key,
            "metadata": inbound.event_metadata,
            "sourceKind": inbound.source_kind,
            "sourceName": inbound.source_name,
        }
        with open(os.environ["PROBE_OUT"], "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\\n")
        return await ctx.next()

    api.pipeline.register("turn", turn)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def connector_bundle(directory: Path, connection_yaml: str) -> Path:
    """The two-agent echo bundle with the probe extension, plus the given Connection document(s)."""
    return kit.write_bundle(directory, BUNDLE_HEAD, connection_yaml, files={"probe.py": PROBE})


def probes(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("condition not met in time")


class GdnRun:
    """A `gdn run` subprocess serving connectors; stop() sends Ctrl+C (SIGINT) like a user."""

    def __init__(self, proc: subprocess.Popen[str], probe_out: Path) -> None:
        self.proc = proc
        self.probe_out = probe_out
        self.stderr_lines: list[str] = []
        self._ready = threading.Event()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr_lines.append(line)
            if line.startswith("Orchestrator started"):
                self._ready.set()
        self._ready.set()

    def wait_ready(self, timeout: float = 60) -> None:
        # 20 s was not always enough for a start on a 2-core machine at load 20 (seen once in 6 runs)
        assert self._ready.wait(timeout), "gdn run did not start"
        assert any(line.startswith("Orchestrator started") for line in self.stderr_lines), self.stderr

    @property
    def stderr(self) -> str:
        return "".join(self.stderr_lines)

    def stop(self, sig: int = signal.SIGINT, timeout: float = 15) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise


def gdn_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "GOONDAN_STATE_ROOT" and not k.endswith("_PROXY")}
    env.update({"HOME": str(tmp_path / "home"), "NO_COLOR": "1", "PROBE_OUT": str(tmp_path / "probe.jsonl")})
    # inline isolation keeps the suite fast; tests that need the default pass GOONDAN_ISOLATION="process"
    env.setdefault("GOONDAN_ISOLATION", "inline")
    env.update(extra)
    return env


@contextmanager
def gdn_run(tmp_path: Path, bundle: Path, *args: str, stdin: str | None = None, **env: str) -> Iterator[GdnRun]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "goondan", "run", str(bundle), "--state-root", str(tmp_path / "state"), *args],
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=gdn_env(tmp_path, **env),
    )
    if stdin is not None:
        assert proc.stdin is not None
        proc.stdin.write(stdin)
        proc.stdin.close()
    run = GdnRun(proc, tmp_path / "probe.jsonl")
    try:
        yield run
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def gdn_run_to_end(tmp_path: Path, bundle: Path, timeout: float = 30, **env: str) -> subprocess.CompletedProcess[str]:
    """`gdn run` that is expected to stop by itself (a start that fails): its exit code and output."""
    return subprocess.run(
        [sys.executable, "-m", "goondan", "run", str(bundle), "--state-root", str(tmp_path / "s")],
        capture_output=True,
        text=True,
        env=gdn_env(tmp_path, **env),
        timeout=timeout,
    )


def post(url: str, body: bytes, headers: dict[str, str] | None = None, timeout: float = 15) -> tuple[int, Any]:
    req = urllib.request.Request(url, data=body, method="POST", headers=headers or {})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=timeout) as resp:
            raw = resp.read()
            status = resp.status
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        status = exc.code
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, raw.decode("utf-8", "replace")


class FakeApi:
    """A loopback HTTP server standing in for a platform API; records requests, answers via ``routes``."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        # path -> record -> (status, payload) or (status, payload, headers)
        self.routes: dict[str, Callable[[dict[str, Any]], tuple[Any, ...]]] = {}
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                record = {
                    "method": self.command,
                    "path": self.path,
                    "headers": dict(self.headers),
                    "body": body,
                    "raw": raw,
                }
                api.requests.append(record)
                route = api.routes.get(self.path.split("?", 1)[0])
                answer = route(record) if route else (200, {"ok": True})
                status, payload = answer[0], answer[1]
                extra: dict[str, str] = answer[2] if len(answer) > 2 else {}  # e.g. Retry-After
                raw_reply = isinstance(payload, bytes)  # a file download
                data = payload if raw_reply else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/octet-stream" if raw_reply else "application/json")
                for name, value in extra.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def matching(self, path_part: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if path_part in r["path"]]


@contextmanager
def echo_server(read_timeout: float = 5.0) -> Iterator[int]:
    """A serve_http server answering ``{path, len}`` on its own loop in a thread; yields the port."""

    async def handler(req: HttpRequest) -> HttpResponse:
        return HttpResponse.json(200, {"path": req.path, "len": len(req.body)})

    loop = asyncio.new_event_loop()
    started = threading.Event()
    box: dict[str, asyncio.AbstractServer] = {}

    def main() -> None:
        asyncio.set_event_loop(loop)
        box["server"] = loop.run_until_complete(serve_http(handler, "127.0.0.1", 0, read_timeout=read_timeout))
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    assert started.wait(5)
    try:
        yield box["server"].sockets[0].getsockname()[1]
    finally:

        async def stop() -> None:
            box["server"].close()
            # connection handlers still finishing (lingering after a refusal) end with the server
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            if others:
                await asyncio.wait(others, timeout=3)
            await box["server"].wait_closed()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()
