"""PostgreSQL store URLs: goondan's own parameters (pool_size, pool_timeout) are read and removed
before libpq sees the URL, bad values are a clear E_STORE_URL_INVALID, no text after the scheme
ever escapes as a traceback, and a password never appears in what is printed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from goondan.errors import GoondanError
from goondan.storage import open_store
from goondan.storage._postgres import PostgresStoreBackend
from goondan.storage._postgres._db import DEFAULT_POOL_SIZE, DEFAULT_POOL_TIMEOUT, parse_url, redact, unavailable


def test_goondan_parameters_are_read_and_removed_from_the_libpq_url() -> None:
    conninfo, size, timeout = parse_url("postgres://u:p@h:5433/db?sslmode=require&pool_size=7&pool_timeout=2.5")
    assert (size, timeout) == (7, 2.5)
    assert conninfo == "postgresql://u:p@h:5433/db?sslmode=require"
    assert parse_url("postgresql://h/db")[1:] == (DEFAULT_POOL_SIZE, DEFAULT_POOL_TIMEOUT)


@pytest.mark.parametrize("query", ["pool_size=0", "pool_size=x", "pool_timeout=0", "pool_timeout=-1", "pool_timeout=a"])
def test_a_bad_pool_parameter_is_an_invalid_url_naming_the_parameters(query: str) -> None:
    with pytest.raises(GoondanError) as info:
        open_store(f"postgresql://u:secret@h/db?{query}", state_root="/x")
    assert info.value.code == "E_STORE_URL_INVALID"
    assert "pool_size" in (info.value.suggestion or "") and "secret" not in str(info.value)


def test_an_unavailable_error_names_the_server_without_the_password_and_says_what_to_do() -> None:
    error = unavailable("postgresql://u:hunter2@db.internal:5432/x", OSError("connection refused"), "connect")
    assert error.code == "E_STORE_UNAVAILABLE"
    assert "db.internal" in str(error) and "hunter2" not in str(error)
    assert "pg_isready" in (error.suggestion or "") and "Nothing committed is lost" in (error.suggestion or "")


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=60))
def test_any_text_after_the_scheme_opens_a_backend_lazily_or_is_an_invalid_url(rest: str) -> None:
    url = "postgresql://" + rest
    try:
        backend = open_store(url, state_root="/nonexistent", env={})
    except GoondanError as exc:
        assert exc.code == "E_STORE_URL_INVALID", exc
        return
    assert isinstance(backend, PostgresStoreBackend) and backend.url == url.strip()


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_characters="@/:?#", blacklist_categories=("Cs",)), min_size=1))
def test_redact_never_shows_a_password(password: str) -> None:
    shown = redact(f"postgresql://user:{password}@host:5432/db")
    assert f":{password}@" not in shown and "host:5432/db" in shown


def test_without_the_postgres_extra_the_url_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "psycopg" else real(name, *a))
    with pytest.raises(GoondanError) as info:
        open_store("postgresql://u:secret@h/db", state_root="/x")
    assert info.value.code == "E_STORE_UNSUPPORTED" and "psycopg" in str(info.value)
    assert "goondan-runtime[postgres]" in (info.value.suggestion or "")
