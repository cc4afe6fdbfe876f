"""Every error code used in the source is documented in docs/errors.md (the help links point there)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODE = re.compile(
    r"""["']((?:E_[A-Z0-9_]+)|(?:[A-Z]+_[A-Z_]*(?:DETECTED|NOT_FOUND|TIMEOUT|FAILED|ERROR|REJECTED)))["']"""
)


def test_every_error_code_in_src_is_documented():
    documented = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", (ROOT / "docs" / "errors.md").read_text()))
    used: set[str] = set()
    for path in (ROOT / "src" / "goondan").rglob("*.py"):
        used.update(CODE.findall(path.read_text(encoding="utf-8")))
    missing = sorted(used - documented)
    assert missing == [], f"add these codes to docs/errors.md: {missing}"
