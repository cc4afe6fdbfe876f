"""The webhook's ``replyMode: stream`` under a real ``gdn run``: Server-Sent Events read by an httpx
client while a loopback Anthropic Messages API (``tests/models/providers/fake_http.py``) streams the
model's answer, with agent processes (the default isolation) and inline."""

from __future__ import annotations

import json
import select
import signal
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from cn_testkit import free_port, gdn_run, gdn_run_to_end, wait_for
from connector_harness import Running, running_connector

import kit
from goondan.connectors import Reply as ConnectorReply
from goondan.executors.process._ipc import ConnectorEvent
from models.providers.fake_http import FakeServer, Reply, Req, anthropic_message, sse_event

KEY = "sk-ant-webhook-stream"
PIECES = 4


def answer_to(question: str) -> str:
    return f"About {question}: one, two, three."


def split(text: str, pieces: int) -> list[str]:
    size = -(-len(text) // pieces)
    return [text[i : i + size] for i in range(0, len(text), size)]


def stream_events(text: str) -> list[str]:
    """The Messages API's SSE for a one-block text answer, the text in :data:`PIECES` deltas."""
    start = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 1},
    }
    events = [
        sse_event({"type": "message_start", "message": start}, "message_start"),
        sse_event(
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            "content_block_start",
        ),
    ]
    for piece in split(text, PIECES):
        delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}
        events.append(sse_event(delta, "content_block_delta"))
    events += [
        sse_event({"type": "content_block_stop", "index": 0}, "content_block_stop"),
        sse_event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 9},
            },
            "message_delta",
        ),
        sse_event({"type": "message_stop"}, "message_stop"),
    ]
    return events


@dataclass
class Provider:
    """Answers every request with :func:`answer_to` its last user message, streamed. While ``hold`` is
    set, it stops after the first text delta until ``release`` is set (or 10 s pass: ``timed_out``)."""

    hold: bool = False
    release: threading.Event = field(default_factory=threading.Event)
    timed_out: bool = False
    fail_status: int | None = None
    bodies: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, req: Req) -> Reply:
        body = req.json
        self.bodies.append(body)
        if self.fail_status is not None:
            error = {"type": "error", "error": {"type": "invalid_request_error", "message": "bad request, says fake"}}
            return Reply(status=self.fail_status, body=error)
        last = body["messages"][-1]["content"]
        question = last if isinstance(last, str) else "".join(p.get("text", "") for p in last)
        if not body.get("stream"):
            return Reply(body=anthropic_message([{"type": "text", "text": answer_to(question)}]))
        events = stream_events(answer_to(question))
        second_delta = next(i for i, e in enumerate(events) if "text_delta" in e) + 1

        def before(index: int) -> None:
            if self.hold and index == second_delta and not self.release.wait(10):
                self.timed_out = True

        return Reply(sse=events, before_event=before)


def bundle(root: Path, endpoint: str, port: int, reply_mode: str = "stream") -> Path:
    """One agent on the loopback Anthropic API, one webhook Connection on ``port``."""

    def doc(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": "goondan.ai/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}

    model = {
        "provider": "anthropic",
        "model": "claude-test",
        "endpoint": endpoint,
        "apiKey": {"valueFrom": {"env": "TEST_ANTHROPIC_KEY"}},
        "options": {"maxRetries": 0},
    }
    hook = {
        "connectorRef": {"kind": "Connector", "name": "webhook", "package": "@goondan/base"},
        "config": {"port": {"value": str(port)}, "replyMode": {"value": reply_mode}},
    }
    return kit.write_bundle(
        root,
        doc("Model", "claude", model),
        doc("Agent", "talker", {"modelConfig": {"modelRef": "Model/claude", "params": {"maxTokens": 64}}}),
        doc("Swarm", "default", {"entryAgent": "Agent/talker", "agents": ["Agent/talker"]}),
        doc("Connection", "hook", hook),
    )


@dataclass
class Sse:
    event: str
    data: Any


def events_of(response: httpx.Response) -> Iterator[Sse]:
    """The SSE events of a streamed response, as they arrive (comments skipped)."""
    name, data = "message", []
    for line in response.iter_lines():
        if line == "":
            if data:
                yield Sse(name, json.loads("\n".join(data)))
            name, data = "message", []
        elif line.startswith(":"):
            continue
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())


@pytest.fixture
def provider() -> Iterator[tuple[Provider, str]]:
    fake = Provider()
    with FakeServer(fake) as server:
        yield fake, server.url
        fake.release.set()  # a held answer must not hold the server's shutdown


def post_stream(client: httpx.Client, url: str, text: str, key: str = "k1") -> Any:
    return client.stream("POST", url, json={"text": text, "instanceKey": key}, timeout=30)


@pytest.mark.parametrize("isolation", ["process", "inline"])
def test_stream_reply_mode_sends_each_delta_before_the_turn_ends_then_the_whole_reply(
    tmp_path: Path, provider: tuple[Provider, str], isolation: str
) -> None:
    fake, endpoint = provider
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    b = bundle(tmp_path / "b", endpoint, port)
    with gdn_run(tmp_path, b, GOONDAN_ISOLATION=isolation, TEST_ANTHROPIC_KEY=KEY) as run, httpx.Client() as client:
        run.wait_ready()
        # until a client asks for a stream, nobody listens: the model call does not stream
        plain = client.post(url, json={"text": "hi", "instanceKey": "k1"}, headers={"Accept": "application/json"})
        assert plain.json() == {"ok": True, "text": answer_to("hi")}
        assert [body.get("stream", False) for body in fake.bodies] == [False]
        fake.hold = True  # the provider stops after its first token until the client has seen it
        with post_stream(client, url, "cats") as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            seen = events_of(response)
            first = next(seen)
            assert first.event == "delta" and first.data["step"] == 0, first
            fake.release.set()
            rest = list(seen)
        assert not fake.timed_out, "the first delta did not reach the client while the model was still writing"
        deltas = [first] + [e for e in rest if e.event == "delta"]
        assert "".join(d.data["text"] for d in deltas) == answer_to("cats")
        assert [e.event for e in rest][-1] == "done" and [e.event for e in rest].count("done") == 1
        assert rest[-1].data == {"ok": True, "text": answer_to("cats"), "finishReason": "text_response"}
        assert fake.bodies[1]["stream"] is True  # the same agent (process) streams now
        fake.hold = False

        # two streamed requests on one conversation at once: each gets its own turn's text only
        results: dict[str, list[Sse]] = {}

        def ask(question: str) -> None:
            with httpx.Client() as own, post_stream(own, url, question) as response:
                results[question] = list(events_of(response))

        threads = [threading.Thread(target=ask, args=(q,)) for q in ("dogs", "owls")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        for question, events in results.items():
            assert "".join(e.data["text"] for e in events if e.event == "delta") == answer_to(question)
            assert events[-1].data["text"] == answer_to(question)
        assert sorted(results) == ["dogs", "owls"]
        assert run.stop() == 130


def test_stream_reply_mode_ends_a_failed_turn_with_an_error_event_carrying_its_code(
    tmp_path: Path, provider: tuple[Provider, str]
) -> None:
    fake, endpoint = provider
    fake.fail_status = 400
    port = free_port()
    b = bundle(tmp_path / "b", endpoint, port)
    with gdn_run(tmp_path, b, TEST_ANTHROPIC_KEY=KEY) as run, httpx.Client() as client:
        run.wait_ready()
        with post_stream(client, f"http://127.0.0.1:{port}/", "cats") as response:
            assert response.status_code == 200
            events = list(events_of(response))
        assert [e.event for e in events] == ["error"]
        assert events[0].data["ok"] is False
        assert events[0].data["error"]["code"].startswith("E_MODEL"), events[0].data
        # refusals before a turn starts stay plain JSON answers
        bad = client.post(f"http://127.0.0.1:{port}/", json={"text": ""})
        assert bad.status_code == 400 and bad.json()["reason"] == "invalid_payload"
        assert run.stop() == 130


def test_a_streaming_client_that_hangs_up_leaves_its_turn_to_finish_in_the_conversation(
    tmp_path: Path, provider: tuple[Provider, str]
) -> None:
    fake, endpoint = provider
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    b = bundle(tmp_path / "b", endpoint, port)
    with gdn_run(tmp_path, b, "-v", GOONDAN_ISOLATION="process", TEST_ANTHROPIC_KEY=KEY) as run:
        run.wait_ready()
        fake.hold = True
        with httpx.Client() as client, post_stream(client, url, "cats") as response:
            assert next(events_of(response)).event == "delta"
        # the connector notices the hang-up while the model is still writing; then the model finishes
        wait_for(lambda: "a streaming client hung up; its turn runs on" in run.stderr)
        fake.release.set()
        fake.hold = False
        with httpx.Client() as client:
            # Accept: JSON only gets the sync answer on a stream Connection
            answer = client.post(
                url, json={"text": "and dogs?", "instanceKey": "k1"}, headers={"Accept": "application/json"}
            )
        assert answer.status_code == 200 and answer.json() == {"ok": True, "text": answer_to("and dogs?")}
        # the turn the first client left was completed and kept: the model saw its answer
        history = fake.bodies[-1]["messages"]
        assert {"role": "assistant", "content": answer_to("cats")} in history or any(
            m["role"] == "assistant" and answer_to("cats") in json.dumps(m["content"]) for m in history
        ), history
        assert run.stop() == 130


def test_an_unknown_reply_mode_fails_the_start_with_E_CONNECTOR_CONFIG_naming_the_closest_mode_once(
    tmp_path: Path,
) -> None:
    b = bundle(tmp_path / "b", "http://127.0.0.1:9", free_port(), reply_mode="steam")
    proc = gdn_run_to_end(tmp_path, b, timeout=60, TEST_ANTHROPIC_KEY=KEY)
    assert proc.returncode != 0
    assert "[E_CONNECTOR_CONFIG]" in proc.stderr and "'steam'" in proc.stderr, proc.stderr
    assert "sync" in proc.stderr and "did you mean 'stream'?" in proc.stderr, proc.stderr
    # the supervisor names the Connection; the connector's message does not repeat it
    error_line = next(line for line in proc.stderr.splitlines() if "[E_CONNECTOR_CONFIG]" in line)
    assert error_line.count("Connection/") == 1, error_line


def test_a_connection_that_does_not_stream_leaves_model_calls_unstreamed(
    tmp_path: Path, provider: tuple[Provider, str]
) -> None:
    # the cost of streaming (a streamed model call, deltas crossing two processes) is paid only by
    # bundles with a streaming Connection
    fake, endpoint = provider
    port = free_port()
    b = bundle(tmp_path / "b", endpoint, port, reply_mode="sync")
    with gdn_run(tmp_path, b, GOONDAN_ISOLATION="process", TEST_ANTHROPIC_KEY=KEY) as run, httpx.Client() as client:
        run.wait_ready()
        answer = client.post(f"http://127.0.0.1:{port}/", json={"text": "cats"}, timeout=30)
        assert answer.json() == {"ok": True, "text": answer_to("cats")}
        assert [body.get("stream", False) for body in fake.bodies] == [False]
        assert run.stop() == 130


# --- the connector alone, in this process, behind its real HTTP server ----------------------------


def wait_until_sent(conn: Running, count: int = 1) -> ConnectorEvent:
    wait_for(lambda: len(conn.messages) >= count, timeout=5, interval=0.01)
    return conn.messages[count - 1]


def test_a_client_that_stops_reading_holds_back_the_stream_and_gets_the_backlog_joined_in_order() -> None:
    piece = "x" * 8191 + "\n"
    batches, per_batch = 24, 128  # 24 MiB: far more than the kernel's socket buffers take
    with running_connector("webhook", config={"replyMode": "stream"}, auto_reply=False) as conn:
        assert conn.ctx is not None
        # a fixed receive buffer: the kernel would otherwise grow it to hold the whole answer
        small = httpx.HTTPTransport(socket_options=[(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)])
        with httpx.Client(transport=small) as client, post_stream(client, conn.url, "big") as response:
            message = wait_until_sent(conn)
            assert message.stream is True
            stream = conn.ctx._streams[message.id]
            for batch in range(batches):
                for _ in range(per_batch):
                    conn.call(conn.ctx._delta, message.id, f"{batch:02d}" + piece[2:], 0)
                time.sleep(0.01)  # a pause between batches: the client still reads nothing

            def held() -> int:
                return sum(len(part) for _, parts in list(stream._buffer) for part in parts)

            # what the socket buffers (at most a few MiB here) cannot take waits in the connector, as
            # text joined into one entry for the one step, instead of being written to nobody
            wait_for(lambda: held() >= 12 << 20, timeout=10)
            assert len(stream._buffer) == 1
            conn.call(conn.ctx._resolve, message.id, ConnectorReply("done", "text_response"))
            events = list(events_of(response))
    deltas = [e.data["text"] for e in events if e.event == "delta"]
    text = "".join(deltas)
    assert len(text) == batches * per_batch * len(piece)
    assert [text[i : i + 2] for i in range(0, len(text), len(piece) * per_batch)] == [
        f"{b:02d}" for b in range(batches)
    ]
    assert len(deltas) < batches * per_batch // 10  # the backlog went out joined, not one event per delta
    assert events[-1].event == "done"


def test_a_delta_reaches_the_sse_client_from_the_callback_that_delivers_it_before_the_next_loop_iteration() -> None:
    with running_connector("webhook", config={"replyMode": "stream"}, auto_reply=False) as conn:
        assert conn.ctx is not None
        ctx = conn.ctx
        port = int(conn.url.rsplit(":", 1)[1].strip("/"))
        body = json.dumps({"text": "hi", "instanceKey": "k"}).encode()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
            head = b"POST / HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
            client.sendall(head + b"Content-Length: %d\r\n\r\n" % len(body) + body)
            message = wait_until_sent(conn)
            received = b""
            while b"\r\n\r\n" not in received:
                received += client.recv(65536)
            assert received.startswith(b"HTTP/1.1 200")
            # the task that wrote the head went on to wait for text in the same step: it is waiting now
            seen: dict[str, bool] = {}
            done = threading.Event()

            def deliver() -> None:
                # as the host's record callback does; then the loop is held here, so only a write
                # made inside _delta itself can reach the client
                ctx._delta(message.id, "hello", 0)
                seen["readable"] = bool(select.select([client], [], [], 2.0)[0])
                done.set()

            conn.call(deliver)
            assert done.wait(10)
            assert seen["readable"], "the delta waited for another loop iteration"
            received = received.split(b"\r\n\r\n", 1)[1]
            while b"\n\n" not in received:
                received += client.recv(65536)
            assert b'event: delta\ndata: {"text":"hello","step":0}' in received
            conn.call(ctx._resolve, message.id, ConnectorReply("hello", "text_response"))
            while b"event: done" not in received:
                chunk = client.recv(65536)
                assert chunk, "the answer ended without its done event"
                received += chunk


def test_a_silent_stream_sends_keep_alive_comments(monkeypatch: pytest.MonkeyPatch) -> None:
    from goondan.base.connectors import webhook

    monkeypatch.setattr(webhook, "KEEPALIVE_SECONDS", 0.05)
    with running_connector("webhook", config={"replyMode": "stream"}, auto_reply=False) as conn:
        assert conn.ctx is not None
        with httpx.Client() as client, post_stream(client, conn.url, "slow tool") as response:
            message = wait_until_sent(conn)
            lines = response.iter_lines()
            assert next(lines) == ": keep-alive"  # nothing to say yet, but the connection is alive
            conn.call(conn.ctx._delta, message.id, "hi", 0)
            conn.call(conn.ctx._resolve, message.id, ConnectorReply("hi", "text_response"))
            rest = [line for line in lines if line and not line.startswith(":")]
    assert rest[0] == "event: delta" and json.loads(rest[1][5:]) == {"text": "hi", "step": 0}
    assert rest[-2] == "event: done"
    assert json.loads(rest[-1][5:]) == {"ok": True, "text": "hi", "finishReason": "text_response"}


def test_stopping_gdn_run_ends_an_open_stream_with_an_error_event(
    tmp_path: Path, provider: tuple[Provider, str]
) -> None:
    fake, endpoint = provider
    port = free_port()
    b = bundle(tmp_path / "b", endpoint, port)
    with gdn_run(tmp_path, b, TEST_ANTHROPIC_KEY=KEY) as run, httpx.Client() as client:
        run.wait_ready()
        fake.hold = True  # the model never finishes while gdn run stops
        with post_stream(client, f"http://127.0.0.1:{port}/", "cats") as response:
            events = events_of(response)
            assert next(events).event == "delta"
            run.proc.send_signal(signal.SIGINT)
            rest = list(events)
        fake.release.set()
        assert [e.event for e in rest] == ["error"], rest
        assert rest[0].data["error"]["code"] == "E_CONNECTOR_STOPPED", rest
        assert run.stop() == 130
