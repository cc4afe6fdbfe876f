"""Importing a provider SDK only when a bundle actually uses that provider.

``gdn validate`` and bundles on other providers never pay an SDK's import time, and a missing
optional extra becomes one clear error naming the exact ``pip install`` command.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ..errors import ModelError


def import_sdk(module: str, *, provider: str, extra: str, package: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ModelError(
            "E_MODEL_SDK_MISSING",
            f"the '{provider}' model provider needs the Python package '{package}', which is not installed "
            f"({type(exc).__name__}: {exc})",
            suggestion=f"Install it with: pip install 'goondan-runtime[{extra}]'",
        ) from exc
