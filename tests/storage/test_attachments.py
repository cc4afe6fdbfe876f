"""Attachments of the filesystem store: private files named by their sha256 beside the conversation."""

from __future__ import annotations

import hashlib
import stat
from pathlib import Path

from goondan.storage._instance import FileInstanceStore


def test_attachments_are_written_0600_under_the_instance_by_sha256(tmp_path: Path) -> None:
    store = FileInstanceStore(tmp_path / "inst", agent_name="a", instance_key="k")
    store.load()
    data = b"\x89PNG\r\n\x1a\n" + b"x" * 100
    digest = store.put_attachment(data)
    path = tmp_path / "inst" / "attachments" / hashlib.sha256(data).hexdigest()
    assert digest == path.name and path.read_bytes() == data
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    store.close()
