"""`gdn logs --trace` accepts the short trace id `gdn logs` prints: any unique prefix of 8+ characters."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cli_testkit import ECHO_BUNDLE, gdn
from hypothesis import given
from hypothesis import strategies as st

from goondan.cli._logs import MIN_TRACE_PREFIX, resolve_trace
from goondan.cli._output import CliError
from kit import write_bundle

hex_ids = st.text("0123456789abcdef", min_size=32, max_size=32)


@given(st.sets(hex_ids, min_size=1, max_size=6), st.data())
def test_a_unique_prefix_resolves_to_its_trace_and_a_shared_one_is_ambiguous(
    ids: set[str], data: st.DataObject
) -> None:
    target = data.draw(st.sampled_from(sorted(ids)))
    length = data.draw(st.integers(MIN_TRACE_PREFIX, 32))
    prefix = target[:length]
    sharing = {t for t in ids if t.startswith(prefix)}
    if len(sharing) == 1:
        assert resolve_trace(prefix.upper(), ids, follow=False) == target
    else:
        with pytest.raises(CliError) as err:
            resolve_trace(prefix, ids, follow=False)
        assert err.value.code == "E_LOGS_TRACE_AMBIGUOUS"
        assert all(t[:12] in err.value.message for t in sharing)


@given(hex_ids, st.integers(0, MIN_TRACE_PREFIX - 1))
def test_a_prefix_shorter_than_the_minimum_is_refused(trace: str, length: int) -> None:
    with pytest.raises(CliError) as err:
        resolve_trace(trace[:length], {trace}, follow=False)
    assert err.value.code == "E_LOGS_TRACE_SHORT" and err.value.suggestion


def test_a_full_id_wins_over_longer_ids_it_prefixes_and_an_unknown_one_is_an_error() -> None:
    assert resolve_trace("abcdefgh", {"abcdefgh", "abcdefgh12"}, follow=False) == "abcdefgh"
    with pytest.raises(CliError) as err:
        resolve_trace("deadbeef", {"abcdefgh"}, follow=False)
    assert err.value.code == "E_LOGS_TRACE_NOT_FOUND"
    assert resolve_trace("deadbeef", {"abcdefgh"}, follow=True) is None  # it may still come


def test_logs_trace_accepts_the_short_id_it_prints(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "b", ECHO_BUNDLE)
    state = str(tmp_path / "state")
    for text in ("one", "two"):
        assert gdn(tmp_path, "run", str(bundle), "--input", text, "--state-root", state).returncode == 0
    shown = gdn(tmp_path, "logs", "--state-root", state).stdout
    short = re.findall(r"trace=([0-9a-f]+)", shown)[0]
    assert len(short) == 12
    proc = gdn(tmp_path, "logs", "--json", "--trace", short, "--state-root", state)
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in proc.stdout.splitlines()]
    assert records and len({r["traceId"] for r in records}) == 1
    assert records[0]["traceId"].startswith(short)
    none = gdn(tmp_path, "logs", "--trace", "ffffffff0000", "--state-root", state)
    assert none.returncode == 1 and none.stderr.startswith("[E_LOGS_TRACE_NOT_FOUND]")
    short_one = gdn(tmp_path, "logs", "--trace", short[:4], "--state-root", state)
    assert short_one.returncode == 2 and "[E_LOGS_TRACE_SHORT]" in short_one.stderr
