"""Rewriting a user's file (goondan.yaml, goondan.lock) so that it is never left half-written.

``Path.write_text`` truncates the file first and then writes: a Ctrl+C, a full disk or a crash in
between leaves the user's goondan.yaml empty or cut off. The new text goes to a temporary file beside
it, with the file's own permissions (not the state root's private mode: it is the user's file, under
their version control), and replaces it with one rename, so a reader sees the old text or the new.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def replace_text(path: Path, text: str) -> None:
    """Replace ``path``'s content with ``text`` (UTF-8) in one rename, keeping its permissions."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        if path.exists():
            shutil.copymode(path, tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
