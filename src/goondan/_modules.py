"""Importing user modules (tool, extension, connector and model entries) from file paths.

Each file becomes one module under a private, path-derived name, imported once per process, so that
two agents using the same tool share its module like any other Python import.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import threading
from pathlib import Path
from types import ModuleType

_lock = threading.Lock()


def module_name_for(path: Path) -> str:
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:12]
    stem = "".join(ch if ch.isalnum() else "_" for ch in path.stem)
    return f"goondan_user_{stem}_{digest}"


def import_path(path: Path) -> ModuleType:
    """Import (once) and return the module at ``path``. Exceptions from the module propagate."""
    path = path.resolve()
    name = module_name_for(path)
    module = sys.modules.get(name)
    if module is not None:
        return module
    with _lock:
        module = sys.modules.get(name)
        if module is not None:
            return module
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {path}: not a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        return module


def forget_path(path: Path) -> None:
    """Drop a module so the next import re-executes it (used when a watched file changes)."""
    sys.modules.pop(module_name_for(path.resolve()), None)
