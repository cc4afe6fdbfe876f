"""``gdn studio`` as a real subprocess (goondan.studio._server): the host rule, the token on every
kind of request, a taken port, and live updates over Server-Sent Events while a real run writes."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from studio_testkit import delegation_bundle, gdn_studio, run_turns, studio_env

from goondan.studio import is_loopback
from kit.postgres import own_server


def gdn(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "goondan", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env or studio_env(),
    )


def test_only_loopback_hosts_count_as_local() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost", "LOCALHOST"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.5", "192.168.1.2", "example.com"))


def test_a_non_loopback_host_without_a_token_is_refused_before_listening(state_root: Path) -> None:
    proc = gdn("studio", "--host", "0.0.0.0", "--port", "0", "--state-root", str(state_root))
    assert proc.returncode == 2, proc.stderr
    assert "E_STUDIO_HOST_NOT_LOOPBACK" in proc.stderr and "--token" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_a_non_loopback_host_with_a_guessable_token_is_refused_before_listening(state_root: Path) -> None:
    for weak in (" ", "abc", "   eleven-ch   "):
        env = {**studio_env(), "GOONDAN_STUDIO_TOKEN": weak}
        proc = gdn("studio", "--host", "0.0.0.0", "--port", "0", "--state-root", str(state_root), env=env)
        assert proc.returncode == 2, proc.stderr
        assert "E_STUDIO_TOKEN_WEAK" in proc.stderr and "token_urlsafe" in proc.stderr
        assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_with_a_token_every_request_must_carry_it(state_root: Path) -> None:
    env = {**studio_env(), "GOONDAN_STUDIO_TOKEN": "s3cret-token"}
    with gdn_studio("--host", "0.0.0.0", "--state-root", str(state_root), env=env) as studio:
        base = studio.url.rstrip("/")
        with httpx.Client(base_url=base, timeout=10) as client:
            for path in ("/", "/api/overview", "/api/instances", "/static/app.js", "/api/stream"):
                assert client.get(path).status_code == 401, path
                assert client.get(path, headers={"Authorization": "Bearer wrong"}).status_code == 401, path
            assert client.get("/?token=wrong").status_code == 401
            ok = client.get("/api/overview", headers={"Authorization": "Bearer s3cret-token"})
            assert ok.status_code == 200 and ok.json()["workspaces"] == []
            assert client.get("/static/app.js", headers={"X-Goondan-Token": "s3cret-token"}).status_code == 200
            first = client.get("/?token=s3cret-token")  # the first page load: a cookie, and the token leaves the URL
            assert first.status_code == 303 and first.headers["location"] == "/"
            assert "httponly" in first.headers["set-cookie"].lower()
            assert client.get("/").status_code == 200  # the client keeps the cookie
            assert client.get("/api/instances").status_code == 200


def test_without_a_token_only_requests_addressed_to_loopback_are_answered(state_root: Path) -> None:
    with gdn_studio("--state-root", str(state_root)) as studio:
        port = studio.url.rstrip("/").rsplit(":", 1)[1]
        with httpx.Client(base_url=studio.url, timeout=10) as client:
            for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost"):
                assert client.get("/api/overview", headers={"Host": host}).status_code == 200, host
            for host in (f"evil.example:{port}", "evil.example", f"10.0.0.1:{port}"):  # DNS rebinding
                assert client.get("/api/overview", headers={"Host": host}).status_code == 403, host
                assert client.get("/", headers={"Host": host}).status_code == 403, host


def test_a_taken_port_is_a_clear_error(state_root: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        proc = gdn("studio", "--port", str(port), "--state-root", str(state_root))
    assert proc.returncode == 2 and "E_STUDIO_PORT_IN_USE" in proc.stderr and "--port" in proc.stderr


def test_a_bundle_path_that_is_not_a_bundle_is_a_config_error(tmp_path: Path, state_root: Path) -> None:
    proc = gdn("studio", str(tmp_path), "--port", "0", "--state-root", str(state_root))
    assert proc.returncode == 3 and "[E_" in proc.stderr and "Traceback" not in proc.stderr


def _start_refused(*args: str) -> subprocess.CompletedProcess[str]:
    """``gdn studio`` that must exit by itself: before the store check it served forever, so the
    timeout (a TimeoutExpired failure) is what the old behaviour looks like."""
    return subprocess.run(
        [sys.executable, "-m", "goondan", "studio", "--port", "0", *args],
        capture_output=True,
        text=True,
        timeout=30,
        env=studio_env(),
    )


def test_an_unreachable_postgresql_store_fails_at_start_with_the_store_code() -> None:
    with socket.socket() as probe:  # a port nothing listens on any more
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    proc = _start_refused("--store", f"postgresql://u:secret@127.0.0.1:{closed}/goondan")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr.startswith("[E_STORE_UNAVAILABLE]") and "suggestion: " in proc.stderr
    assert "Studio:" not in proc.stdout and "secret" not in proc.stderr and "Traceback" not in proc.stderr


def test_a_state_root_that_cannot_be_read_fails_at_start(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "state-root-file"
    not_a_dir.write_text("not a directory\n", encoding="utf-8")
    proc = _start_refused("--state-root", str(not_a_dir))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr.startswith("[E_STORE_UNAVAILABLE]") and str(not_a_dir) in proc.stderr
    assert "--state-root" in proc.stderr and "Studio:" not in proc.stdout
    broken = tmp_path / "root"
    broken.mkdir()
    (broken / "workspaces").write_text("", encoding="utf-8")  # where the workspaces should be
    proc = _start_refused("--state-root", str(broken))
    assert proc.returncode == 1 and "[E_STORE_UNAVAILABLE]" in proc.stderr and "workspaces" in proc.stderr


def test_a_state_root_nothing_has_run_in_yet_still_starts(tmp_path: Path) -> None:
    with gdn_studio("--state-root", str(tmp_path / "fresh")) as studio:
        assert httpx.get(f"{studio.url.rstrip('/')}/api/overview").json()["workspaces"] == []


def test_a_new_turn_of_a_live_run_arrives_as_a_server_sent_event(tmp_path: Path, state_root: Path) -> None:
    bundle = delegation_bundle(tmp_path / "bundle")
    run_turns(bundle, state_root, ["first"])
    with gdn_studio(str(bundle), "--state-root", str(state_root)) as studio:
        base = studio.url.rstrip("/")
        (ws,) = httpx.get(f"{base}/api/overview").json()["workspaces"]
        params = {"workspace": ws["id"], "agent": "helper", "key": "default"}
        notices: list[dict[str, object]] = []
        with httpx.stream("GET", f"{base}/api/stream", params=params, timeout=30) as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            runner = threading.Thread(target=run_turns, args=(bundle, state_root, ["second"]))
            runner.start()
            event = None
            for line in stream.iter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: ") and event == "instance":
                    notices.append(json.loads(line[6:]))
                    if notices[-1]["turns"] == 2 and notices[-1]["status"] == "idle":
                        break
            runner.join(60)
        assert notices[-1]["messages"] == 8 and notices[-1]["agent"] == "helper"
        assert notices[-1]["lastTurn"]["status"] == "ok"  # type: ignore[index]


@pytest.mark.parametrize("port", ["-1", "70000"])
def test_a_port_outside_the_range_is_a_usage_error(port: str, state_root: Path) -> None:
    proc = gdn("studio", "--port", port, "--state-root", str(state_root))
    assert proc.returncode == 2 and "E_STUDIO_BIND" in proc.stderr


def test_ctrl_c_with_a_page_open_stops_at_once_without_a_traceback(state_root: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "goondan", "studio", "--port", "0", "--state-root", str(state_root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=studio_env(),
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        url = proc.stdout.readline().split()[1]
        with httpx.stream("GET", f"{url}api/stream", timeout=10) as stream:  # an open page's event stream
            assert stream.status_code == 200
            started = time.monotonic()
            proc.send_signal(signal.SIGINT)
            with contextlib.suppress(httpx.HTTPError):
                for _line in stream.iter_lines():
                    pass
        assert proc.wait(10) == 130
        assert time.monotonic() - started < 3
        assert "Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_a_postgresql_store_that_goes_down_is_a_503_with_its_code_and_studio_recovers_when_it_is_back(
    tmp_path: Path, postgres_server: Any, postgres_url: str
) -> None:
    bundle = delegation_bundle(tmp_path / "bundle")
    run_turns(bundle, tmp_path / "state", ["hello"], store=postgres_url)
    url = postgres_url + "?pool_timeout=1"

    def instances(base: str) -> tuple[int, Any]:
        r = httpx.get(base + "api/instances", timeout=30)
        return r.status_code, r.json()

    with gdn_studio("--store", url, "--state-root", str(tmp_path / "state")) as s:
        assert instances(s.url)[0] == 200
        postgres_server.stop()
        try:
            status, body = instances(s.url)
        finally:
            postgres_server.start()
        # was 400, which says the request was wrong: the store is unavailable, retry later
        assert status == 503, body
        assert body["error"]["code"] == "E_STORE_UNAVAILABLE" and "pg_isready" in body["error"]["suggestion"]
        status, body = instances(s.url)
        assert status == 200 and body["total"] == 2


def test_a_postgresql_server_that_is_down_answers_every_request_within_two_seconds_and_serves_again_once_back(
    tmp_path: Path,
) -> None:
    # the default pool_timeout (10 s): each request waited for it before its 503, a frozen Studio
    with own_server() as server:
        url = server.create_database()
        bundle = delegation_bundle(tmp_path / "bundle")
        run_turns(bundle, tmp_path / "state", ["hello"], store=url)
        with gdn_studio("--store", url, "--state-root", str(tmp_path / "state")) as s:
            assert httpx.get(s.url + "api/instances", timeout=30).status_code == 200
            server.stop()
            waits = []
            try:
                for path in ("api/instances", "api/overview", "api/instances", "api/turns?workspace=w&agent=a&key=k"):
                    started = time.monotonic()
                    r = httpx.get(s.url + path, timeout=30)
                    waits.append(round(time.monotonic() - started, 2))
                    assert r.status_code == 503, (path, r.text)
                    assert r.json()["error"]["code"] == "E_STORE_UNAVAILABLE" and "pg_isready" in r.text
            finally:
                server.start()
            assert max(waits) < 2, waits  # was about 10 s each
            deadline = time.monotonic() + 10
            while (r := httpx.get(s.url + "api/instances", timeout=30)).status_code != 200:
                assert time.monotonic() < deadline, r.text
                time.sleep(0.2)
            assert r.json()["total"] == 2  # the same Studio process reads again


def _notices(stream: httpx.Response) -> Iterator[tuple[str, Any]]:
    """``(event, data)`` of each Server-Sent Event of ``stream``."""
    event = None
    for line in stream.iter_lines():
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: ") and event is not None:
            yield event, json.loads(line[6:])


def test_an_open_event_stream_says_the_postgresql_store_is_down_and_notices_again_once_it_is_back(
    tmp_path: Path,
) -> None:
    with own_server() as server:
        url = server.create_database()
        bundle, state = delegation_bundle(tmp_path / "bundle"), tmp_path / "state"
        run_turns(bundle, state, ["first"], store=url)
        with gdn_studio("--store", url, "--state-root", str(state)) as s:
            (ws,) = httpx.get(s.url + "api/overview", timeout=30).json()["workspaces"]
            params = {"workspace": ws["id"], "agent": "helper", "key": "default"}
            seen: list[str] = []
            with httpx.stream("GET", s.url + "api/stream", params=params, timeout=30) as stream:
                notices = _notices(stream)
                server.stop()
                try:
                    # was: the stream broke off (and EventSource never reconnects after a 503)
                    for event, data in notices:
                        seen.append(event)
                        if event == "unavailable":
                            assert data["code"] == "E_STORE_UNAVAILABLE" and "pg_isready" in data["suggestion"]
                            break
                finally:
                    server.start()
                runner = threading.Thread(target=run_turns, args=(bundle, state, ["second"]), kwargs={"store": url})
                runner.start()
                for event, data in notices:
                    seen.append(event)
                    if event == "instance" and data["turns"] == 2 and data["status"] == "idle":
                        break
                runner.join(60)
            assert seen[0] == "unavailable" and "available" in seen and seen[-1] == "instance", seen
        assert s.proc.stderr is not None and "Traceback" not in s.proc.stderr.read()


def test_a_login_the_server_refuses_after_studio_started_is_a_503_with_e_store_auth(tmp_path: Path) -> None:
    import psycopg

    with own_server() as server:
        url = server.require_password("alice", "first-password").replace("alice@", "alice:first-password@")
        with gdn_studio("--store", url, "--state-root", str(tmp_path / "state")) as s:
            assert httpx.get(s.url + "api/instances", timeout=30).status_code == 200
            with psycopg.connect(server.url(), autocommit=True) as conn:  # the password is changed ...
                conn.execute("ALTER ROLE alice PASSWORD 'second-password'")
            server.stop()  # ... and the server restarted: Studio's connections must log in again
            server.start()
            r = httpx.get(s.url + "api/overview", timeout=30)
            assert r.status_code == 503, r.text  # 503 as for a server that is down, not 400 (the request's fault)
            error = r.json()["error"]  # was E_STORE_UNAVAILABLE after the whole pool_timeout
            assert error["code"] == "E_STORE_AUTH" and "'alice'" in error["message"], error
            assert "first-password" not in r.text


def test_studio_shows_a_bundle_whose_secrets_are_not_set_here(tmp_path: Path) -> None:
    # the github-reviewer recipe reads PORT, GITHUB_API_BASE, GITHUB_WEBHOOK_SECRET and GITHUB_TOKEN;
    # Studio never runs it, so a workstation without them must still see its graph
    bundle = Path(__file__).resolve().parents[2] / "docs" / "cookbook" / "github-reviewer"
    env = {k: v for k, v in studio_env().items() if k != "PORT" and not k.startswith("GITHUB_")}
    with gdn_studio(str(bundle), "--state-root", str(tmp_path / "state"), env=env) as s:  # was E_CONFIG_ENV_MISSING
        overview = httpx.get(s.url + "api/overview", timeout=30).json()
        assert overview["bundle"] == str(bundle)
