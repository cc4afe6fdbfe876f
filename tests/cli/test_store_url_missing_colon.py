"""A store URL whose ':' was forgotten (`postgresql//db-host/app`) is refused with E_STORE_URL_INVALID
and the URL it was meant to be; it was taken for a relative directory and the conversations went to
./postgresql/db-host/app instead of the database, silently. A directory of that name that exists is
still used. Real `gdn run` subprocesses."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_testkit import ECHO_BUNDLE, gdn

from kit import write_bundle


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("postgresql//u:hunter2@db-host/app", "postgresql://u:***@db-host/app"),
        ("postgres/db-host/app", "postgres://db-host/app"),
        ("file//srv/goondan", "file:///srv/goondan"),
        ("memory", "memory:"),
    ],
    ids=["postgresql-double-slash", "postgres-one-slash", "file", "memory"],
)
def test_a_store_url_without_its_colon_is_refused_not_taken_for_a_directory(
    tmp_path: Path, typo: str, meant: str
) -> None:
    bundle = write_bundle(tmp_path / "b", ECHO_BUNDLE)
    proc = gdn(tmp_path, "run", str(bundle), "--input", "hi", "--store", typo)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("[E_STORE_URL_INVALID] "), proc.stderr
    assert f"Write '{meant}' for that store" in proc.stderr
    assert "hunter2" not in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / typo.split("/", 1)[0]).exists()  # nothing written beside the typo


def test_an_existing_directory_named_like_a_scheme_is_still_a_store_directory(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "b", ECHO_BUNDLE)
    (tmp_path / "postgresql" / "mine").mkdir(parents=True)
    proc = gdn(tmp_path, "run", str(bundle), "--input", "hi", "--store", "postgresql/mine")
    assert proc.returncode == 0, proc.stderr
    assert list((tmp_path / "postgresql" / "mine").glob("workspaces/*/instances/talker__default"))
