"""Record and replay of provider HTTP traffic: a loopback proxy in front of the provider SDKs.

Why a proxy and not a patched SDK: every provider adapter already honours ``Model.spec.endpoint``,
so pointing it at ``http://127.0.0.1:PORT/m/<model>`` captures the exact bytes the SDK sends,
for every provider, in whatever process the turn runs (the ``process`` executor included), without
touching SDK internals. The proxy forwards to the Model's real base URL when recording and answers
from the cassette when replaying; the recorded request body is the match key.

Secrets never reach the file: request headers are not stored at all (``Authorization``,
``x-api-key``, ``x-goog-api-key`` ...), query parameters that carry keys are dropped, and of the
response headers only ``content-type`` is kept. A replayed request that matches no recorded one gets
HTTP 400 (not retried by the SDKs or by goondan) and is kept in :attr:`CassetteProxy.mismatches`;
the runner turns it into :class:`CassetteMismatch` with a diff of messages, tools and params.
Authentication failures (401, 403, 407) while recording are passed on but not recorded.
"""

from __future__ import annotations

import base64
import difflib
import json
import os
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit

from ..errors import GoondanError

CassetteMode = Literal["auto", "record", "replay"]
MODES: tuple[str, ...] = ("auto", "record", "replay")

FORMAT_VERSION = 1
# query parameters that carry credentials (Gemini accepts ?key=...)
_SECRET_QUERY = frozenset({"key", "api_key", "apikey", "access_token", "token", "sig", "signature"})
# request headers never forwarded (hop-by-hop or rewritten by the proxy)
_DROP_REQUEST_HEADERS = frozenset({"host", "content-length", "connection", "accept-encoding", "transfer-encoding"})
# sections of a provider request body, for the diff of a request that no longer matches
_MESSAGE_KEYS = frozenset({"messages", "contents", "input", "system", "systemInstruction", "system_instruction"})
_TOOL_KEYS = frozenset({"tools", "tool_choice", "toolConfig", "tool_config", "parallel_tool_calls"})
_REDIRECTED_PROVIDERS = ("openai", "anthropic", "google")
# answers about the caller's credentials, not about the request: passed on, never recorded
_NOT_RECORDED = frozenset({401, 403, 407})


class CassetteMismatch(AssertionError):
    """A request the code under test sent that the cassette has no recording of."""


@dataclass
class Interaction:
    model: str
    method: str
    path: str
    body: Any  # parsed JSON, or a str when the body is not JSON
    status: int
    content_type: str
    response: str  # the response body as text, or base64 when ``binary``
    binary: bool = False

    def to_json(self) -> dict[str, Any]:
        response: dict[str, Any] = {"status": self.status, "contentType": self.content_type, "body": self.response}
        if self.binary:
            response["binary"] = True
        return {
            "request": {"model": self.model, "method": self.method, "path": self.path, "body": self.body},
            "response": response,
        }

    @classmethod
    def from_json(cls, record: Mapping[str, Any]) -> Interaction:
        req, resp = record["request"], record["response"]
        return cls(
            model=str(req["model"]),
            method=str(req["method"]),
            path=str(req["path"]),
            body=req.get("body"),
            status=int(resp["status"]),
            content_type=str(resp.get("contentType", "application/json")),
            response=str(resp.get("body", "")),
            binary=bool(resp.get("binary", False)),
        )

    def response_bytes(self) -> bytes:
        return base64.b64decode(self.response) if self.binary else self.response.encode("utf-8")


@dataclass
class Mismatch:
    model: str
    method: str
    path: str
    body: Any
    closest: Interaction | None

    def describe(self) -> str:
        head = f"{self.method} {self.path} to Model/{self.model} matches no recorded request"
        if self.closest is None:
            return head + " (the cassette has no unused request for this Model and path)"
        return head + "; what changed against the closest recording:\n" + body_diff(self.closest.body, self.body)


def _section(key: str) -> str:
    if key in _MESSAGE_KEYS:
        return "messages"
    if key in _TOOL_KEYS:
        return "tools"
    return "params"


def body_diff(recorded: Any, sent: Any) -> str:
    """A unified diff per section (messages, tools, params) of two request bodies."""
    if not isinstance(recorded, dict) or not isinstance(sent, dict):
        return _unified(recorded, sent, "body")
    out: list[str] = []
    for section in ("messages", "tools", "params"):
        old = {k: v for k, v in recorded.items() if _section(k) == section}
        new = {k: v for k, v in sent.items() if _section(k) == section}
        if old != new:
            out.append(f"--- {section} changed:\n" + _unified(old, new, section))
    return "\n".join(out) or "(bodies are equal; the path or method differs)"


def _unified(old: Any, new: Any, label: str) -> str:
    a = json.dumps(old, indent=2, sort_keys=True, ensure_ascii=False).splitlines()
    b = json.dumps(new, indent=2, sort_keys=True, ensure_ascii=False).splitlines()
    return "\n".join(difflib.unified_diff(a, b, f"recorded {label}", f"sent {label}", lineterm="", n=2))


def _parse_body(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", errors="replace")


def _clean_query(query: str) -> str:
    kept = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k.lower() not in _SECRET_QUERY]
    return urlencode(kept)


class Cassette:
    """One cassette file. ``mode``: ``auto`` replays when the file exists and records when it does not;
    ``record`` always records (overwriting); ``replay`` never reaches the network."""

    def __init__(self, path: str | os.PathLike[str], mode: str = "auto") -> None:
        if mode not in MODES:
            raise GoondanError(
                "E_CASSETTE_MODE",
                f"unknown cassette mode {mode!r}",
                suggestion=f"Use one of: {', '.join(MODES)}.",
            )
        self.path = Path(path)
        if mode == "auto":
            mode = "replay" if self.path.exists() else "record"
        self.mode: Literal["record", "replay"] = "record" if mode == "record" else "replay"
        self.interactions: list[Interaction] = []
        self._used: set[int] = set()
        self._lock = threading.Lock()
        if self.mode == "replay":
            self.interactions = self._read()

    @property
    def recording(self) -> bool:
        return self.mode == "record"

    def _read(self) -> list[Interaction]:
        if not self.path.exists():
            raise GoondanError(
                "E_CASSETTE_MISSING",
                f"cassette {self.path} does not exist and the mode is replay",
                suggestion="Record it once against the real provider (pytest --goondan-record, or "
                "Cassette(path, mode='record')), then commit the file.",
            )
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if data.get("version") != FORMAT_VERSION:
                raise ValueError(f"version {data.get('version')!r}, expected {FORMAT_VERSION}")
            return [Interaction.from_json(r) for r in data["interactions"]]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise GoondanError(
                "E_CASSETTE_INVALID",
                f"cassette {self.path} cannot be read: {type(exc).__name__}: {exc}",
                suggestion="Record it again (pytest --goondan-record) instead of editing it by hand.",
            ) from None

    def save(self) -> None:
        """Write what was recorded; a recording that caught nothing leaves any older file alone."""
        if not self.recording or not self.interactions:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = {"version": FORMAT_VERSION, "interactions": [i.to_json() for i in self.interactions]}
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, self.path)

    def add(self, interaction: Interaction) -> None:
        with self._lock:
            self.interactions.append(interaction)

    def take(self, model: str, method: str, path: str, body: Any) -> Interaction | Mismatch:
        """The first unused recording of this exact request, or a :class:`Mismatch` naming the closest
        unused one (same Model and path). Concurrent requests may come in any order: matching is by
        content, and each recording answers once."""
        with self._lock:
            closest: Interaction | None = None
            for index, item in enumerate(self.interactions):
                if index in self._used or item.model != model or item.method != method or item.path != path:
                    continue
                if item.body == body:
                    self._used.add(index)
                    return item
                closest = closest or item
            return Mismatch(model, method, path, body, closest)

    @property
    def unused(self) -> list[Interaction]:
        return [item for index, item in enumerate(self.interactions) if index not in self._used]


class CassetteProxy:
    """The loopback HTTP server that records or replays; ``upstreams`` maps a Model name to the base
    URL its requests go to when recording."""

    def __init__(self, cassette: Cassette, upstreams: Mapping[str, str]) -> None:
        self.cassette = cassette
        self.upstreams = dict(upstreams)
        self.mismatches: list[Mismatch] = []
        self.errors: list[str] = []
        self._client: Any = None
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
                return

            def _handle(self) -> None:
                proxy._serve(self)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="goondan-cassette", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def endpoint_for(self, model: str) -> str:
        return f"{self.url}/m/{model}"

    def start(self) -> CassetteProxy:
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
        if self._client is not None:
            self._client.close()
        self.cassette.save()

    def __enter__(self) -> CassetteProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def take_mismatches(self) -> list[Mismatch]:
        found, self.mismatches = self.mismatches, []
        return found

    # --- serving ----------------------------------------------------------------------------------

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("content-length") or 0)
        raw = handler.rfile.read(length) if length else b""
        parts = urlsplit(handler.path)
        segments = parts.path.split("/", 3)  # "", "m", model, rest
        if len(segments) < 3 or segments[1] != "m":
            self._reply(handler, 404, "application/json", b'{"error": {"message": "not a goondan cassette route"}}')
            return
        model = segments[2]
        path = "/" + (segments[3] if len(segments) > 3 else "")
        query = _clean_query(parts.query)
        key_path = path + ("?" + query if query else "")
        body = _parse_body(raw)
        if self.cassette.recording:
            self._record(handler, model, key_path, parts.query, raw, body)
            return
        found = self.cassette.take(model, handler.command, key_path, body)
        if isinstance(found, Mismatch):
            self.mismatches.append(found)
            message = {"error": {"type": "cassette_mismatch", "message": found.describe()}}
            self._reply(handler, 400, "application/json", json.dumps(message).encode())
            return
        self._reply(handler, found.status, found.content_type, found.response_bytes())

    def _record(
        self, handler: BaseHTTPRequestHandler, model: str, key_path: str, query: str, raw: bytes, body: Any
    ) -> None:
        upstream = self.upstreams.get(model)
        if upstream is None:
            self._reply(handler, 404, "application/json", b'{"error": {"message": "no upstream for this Model"}}')
            return
        import httpx  # installed with every provider SDK; only recording needs it

        if self._client is None:
            self._client = httpx.Client(timeout=httpx.Timeout(600.0, connect=30.0))
        path = key_path.split("?", 1)[0]
        url = upstream.rstrip("/") + path + ("?" + query if query else "")
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in _DROP_REQUEST_HEADERS}
        try:
            response = self._client.request(handler.command, url, content=raw, headers=headers)
        except httpx.HTTPError as exc:
            self.errors.append(f"{url}: {type(exc).__name__}: {exc}")
            self._reply(handler, 502, "application/json", json.dumps({"error": {"message": str(exc)}}).encode())
            return
        content = response.content
        content_type = response.headers.get("content-type", "application/octet-stream")
        if response.status_code in _NOT_RECORDED:  # a bad key must not be replayed forever
            self.errors.append(f"{url}: HTTP {response.status_code} (not recorded)")
            self._reply(handler, response.status_code, content_type, content)
            return
        try:
            text, binary = content.decode("utf-8"), False
        except UnicodeDecodeError:
            text, binary = base64.b64encode(content).decode("ascii"), True
        self.cassette.add(
            Interaction(model, handler.command, key_path, body, response.status_code, content_type, text, binary)
        )
        self._reply(handler, response.status_code, content_type, content)

    @staticmethod
    def _reply(handler: BaseHTTPRequestHandler, status: int, content_type: str, data: bytes) -> None:
        handler.send_response(status)
        handler.send_header("content-type", content_type)
        handler.send_header("content-length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)


def default_upstream(provider: str) -> str:
    """The base URL a provider adapter uses when ``Model.spec.endpoint`` is not set."""
    if provider == "openai":
        from ..models._openai import OpenAIModel

        return str(OpenAIModel.default_endpoint)
    if provider == "anthropic":
        from ..models._anthropic import AnthropicModel

        return str(AnthropicModel.default_endpoint)
    from ..models._google import GoogleModel

    return str(GoogleModel.default_endpoint)


def redirect_models(bundle: Any, proxy_factory: Any, skip: set[str]) -> Iterator[tuple[str, str]]:
    """Point every network Model of ``bundle`` (but ``skip``) at the proxy; yields (name, upstream).

    An OpenAI Model without an endpoint keeps sending ``max_completion_tokens``: the adapter picks
    ``max_tokens`` for custom endpoints (OpenAI-compatible servers), which would change the recorded
    request."""
    for resource in bundle.of_kind("Model"):
        spec = resource.spec
        if resource.name in skip or spec.provider not in _REDIRECTED_PROVIDERS:
            continue
        upstream = spec.endpoint or default_upstream(spec.provider)
        options = dict(spec.options)
        if spec.provider == "openai" and not spec.endpoint:
            options.setdefault("maxTokensParam", "max_completion_tokens")
        resource.spec = spec.model_copy(update={"endpoint": proxy_factory(resource.name), "options": options})
        yield resource.name, upstream


__all__ = [
    "MODES",
    "Cassette",
    "CassetteMismatch",
    "CassetteMode",
    "CassetteProxy",
    "Interaction",
    "Mismatch",
    "body_diff",
    "redirect_models",
]
