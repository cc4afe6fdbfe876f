"""The PostgreSQL store under real runtimes: turns of the inline and process executors (the agent
process writes) land in the database and the conversation continues in the next runtime."""

from __future__ import annotations

import logging
import socket
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

import goondan
import kit as k
from goondan.storage._postgres import PostgresStoreBackend
from kit import simple_bundle

COUNTING_MODEL = "def generate(request):\n    return {'text': f'seen {len(request.messages)}'}\n"


def _count(url: str, table: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("executor", ["inline", "process"])  # Ray + PostgreSQL: tests/executors/ray
def test_turns_of_both_local_executors_are_committed_to_postgres_and_continue_across_runtimes(
    tmp_path: Path, state_root: Path, executor: str, postgres_url: str
) -> None:
    k.MODEL = None
    root = simple_bundle(tmp_path, files={"model.py": COUNTING_MODEL})

    async def main() -> list[str]:
        out = []
        for _ in range(2):  # a second runtime continues the same conversation from the database
            async with goondan.Runtime(root, state_root=state_root, executor=executor, store=postgres_url) as rt:
                assert isinstance(rt.store, PostgresStoreBackend)
                out.append((await rt.request("one")).text)
                out.append((await rt.request("two")).text)
                infos = await rt.instances()
                assert [(i.agent_name, i.status) for i in infos] == [(rt.entry_agent, "idle")]
        return out

    assert k.run(main()) == ["seen 1", "seen 3", "seen 5", "seen 7"]
    assert _count(postgres_url, "goondan_messages") == 8
    assert _count(postgres_url, "goondan_events") == 0
    assert _count(postgres_url, "goondan_runtime_events") > 0
    assert list(state_root.glob("workspaces/*/instances/*")) == []


@pytest.mark.parametrize("executor", ["inline", "process"])
def test_a_runtime_on_an_unreachable_server_fails_its_turn_fast_with_store_unavailable(
    tmp_path: Path, state_root: Path, executor: str, caplog: pytest.LogCaptureFixture
) -> None:
    k.MODEL = None
    root = simple_bundle(tmp_path, files={"model.py": COUNTING_MODEL})
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    async def main() -> object:
        url = f"postgresql://u:hunter2@127.0.0.1:{port}/db"
        async with goondan.Runtime(root, state_root=state_root, executor=executor, store=url) as rt:
            try:
                return await rt.request("one")
            except goondan.GoondanError as exc:
                return exc

    started = time.monotonic()
    with caplog.at_level(logging.WARNING):
        outcome = k.run(main())
    code = getattr(outcome, "code", None) or (getattr(outcome, "error", None) or {}).get("code")
    assert code == "E_STORE_UNAVAILABLE", outcome
    assert "hunter2" not in str(outcome) and time.monotonic() - started < 20
    # an agent process that cannot open its conversation says why (not E_AGENT_START_FAILED), and
    # the host logs no traceback of its own about it
    assert [r.getMessage() for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR] == []


@pytest.mark.parametrize(
    ("change", "code", "hint"),
    [
        (lambda url: url.rsplit("/", 1)[0] + "/no_such_db", "E_STORE_DATABASE_NOT_FOUND", "createdb"),
        (
            lambda url: url.replace("postgresql://postgres@", "postgresql://no_such_role@"),
            "E_STORE_AUTH",
            "user",
        ),
        (lambda url: url + "?no_such_option=1", "E_STORE_URL_INVALID", "postgresql://USER"),
    ],
    ids=["missing-database", "unknown-role", "unknown-option"],
)
def test_a_server_that_refuses_the_login_or_a_bad_option_is_not_reported_as_a_server_that_is_down(
    tmp_path: Path, state_root: Path, postgres_url: str, change: Any, code: str, hint: str
) -> None:
    k.MODEL = None
    root = simple_bundle(tmp_path, files={"model.py": COUNTING_MODEL})
    url = change(postgres_url)
    assert url != postgres_url

    async def main() -> object:
        async with goondan.Runtime(root, state_root=state_root, executor="inline", store=url) as rt:
            try:
                return await rt.request("one")
            except goondan.GoondanError as exc:
                return exc

    outcome = k.run(main())
    assert isinstance(outcome, goondan.GoondanError), outcome
    assert outcome.code == code, outcome
    assert outcome.suggestion and hint in outcome.suggestion
    assert "server is running" not in outcome.suggestion
