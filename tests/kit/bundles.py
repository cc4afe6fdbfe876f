"""Writing bundles: ``goondan.yaml`` from documents, and the files next to it."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml


def write_files(root: Path, files: Mapping[str, str]) -> Path:
    """Write each file under ``root`` (parents created), dedented and without leading blank lines,
    so tests can indent file bodies with the code around them."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root


def _render(doc: Mapping[str, Any] | str) -> str:
    if isinstance(doc, str):
        text = textwrap.dedent(doc)
        return text if text.endswith("\n") else text + "\n"
    return yaml.safe_dump(dict(doc), sort_keys=False)


def write_bundle(root: Path, *docs: Mapping[str, Any] | str, files: Mapping[str, str] | None = None) -> Path:
    """Write ``root/goondan.yaml`` from ``docs`` (in order, separated by ``---``) and ``files``.

    A document is a dict (dumped as YAML) or YAML text (dedented, written as it is: tests that check
    reported line numbers or exact text pass text).
    """
    root.mkdir(parents=True, exist_ok=True)
    (root / "goondan.yaml").write_text("---\n".join(_render(d) for d in docs), encoding="utf-8")
    return write_files(root, files or {})
