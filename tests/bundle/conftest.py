from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from bundle_testkit import SAMPLE_FILES

from goondan.bundle import _loader
from kit import write_files

REAL_BASE = Path(_loader.__file__).resolve().parent.parent / "base"


@pytest.fixture(autouse=True)
def base_package(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of @goondan/base whose Python entries exist even before the runtime files are written."""
    root = tmp_path_factory.mktemp("base")
    shutil.copy(REAL_BASE / "goondan.yaml", root / "goondan.yaml")
    (root / "extensions").mkdir()
    (root / "extensions" / "context_message.py").write_text("def register(api, config):\n    pass\n")
    monkeypatch.setattr(_loader, "base_package_root", lambda: root)
    return root


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    return write_files(tmp_path, SAMPLE_FILES)


@pytest.fixture
def bundle_dir(tmp_path: Path) -> Callable[..., Path]:
    """Write a bundle: ``bundle_dir(manifest_text, **other_files)`` (``tools__x_py`` -> ``tools/x.py``)."""

    def make(manifest: str, extra: dict[str, str] | None = None) -> Path:
        files = {"goondan.yaml": manifest}
        files.update(extra or {})
        return write_files(tmp_path, files)

    return make
