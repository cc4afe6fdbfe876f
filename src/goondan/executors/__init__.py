"""Executors: where agent instances run and how events reach them.

``inline`` runs them in the caller's process, ``process`` (the default) one OS process per instance,
``ray`` one named Ray actor per instance (extra ``goondan-runtime[ray]``).
Each implements :class:`Executor`; the ``Runtime`` facade (``goondan.runtime``) picks one by name
with :func:`open_executor` and delegates to it. Executors drive the engine (``goondan.engine``) and
never import the facade; import contracts in ``pyproject.toml`` check both directions.

A third-party executor registers its name with :func:`register_executor`, or without code through
the ``goondan.executors`` entry point group (``name = "pkg.module:factory"``, where
``factory(options: ExecutorOptions) -> Executor``).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..errors import GoondanError
from ._protocol import Executor, ExecutorFactory, ExecutorHost, ExecutorOptions, RuntimeEventListener

if TYPE_CHECKING:
    from ._inline import InlineExecutor
    from .process._executor import ProcessExecutor

ENTRY_POINT_GROUP = "goondan.executors"
ENV_EXECUTOR = "GOONDAN_EXECUTOR"
ENV_ISOLATION = "GOONDAN_ISOLATION"  # the first name of the same setting, still read
DEFAULT_EXECUTOR = "process"
BUILTIN_EXECUTORS = ("inline", "process", "ray")
CODE_UNSUPPORTED = "E_EXECUTOR_UNSUPPORTED"

_NAME = re.compile(r"[a-z][a-z0-9_-]{0,63}")
_REGISTRY: dict[str, ExecutorFactory] = {}
_REGISTRY_LOCK = threading.Lock()


def register_executor(name: str, factory: ExecutorFactory) -> None:
    """Make ``executor=name`` build ``factory(options)`` (replaces an earlier registration)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name in BUILTIN_EXECUTORS:
        raise GoondanError(
            CODE_UNSUPPORTED,
            f"cannot register an executor named {name!r}",
            suggestion="Use a lowercase name ([a-z][a-z0-9_-]*) other than 'inline', 'process' and 'ray'.",
        )
    with _REGISTRY_LOCK:
        _REGISTRY[name] = factory


def _builtin(name: str) -> ExecutorFactory | None:
    if name == "inline":
        from ._inline import InlineExecutor

        return InlineExecutor
    if name == "process":
        from .process._executor import ProcessExecutor

        return ProcessExecutor
    if name == "ray":
        from .ray._executor import RayExecutor

        return RayExecutor
    return None


def _entry_point_factory(name: str) -> ExecutorFactory | None:
    """The factory an installed distribution publishes for ``name`` (looked up only for names that
    are not built in, so the usual runtimes never scan the installed packages)."""
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            factory = ep.load()  # a broken plugin keeps its own traceback
            if not callable(factory):
                raise GoondanError(
                    CODE_UNSUPPORTED,
                    f"the entry point {ep.value!r} for executor {name!r} is not callable",
                    suggestion="Point the goondan.executors entry point at a factory(options) -> Executor.",
                )
            return factory  # type: ignore[no-any-return]
    return None


def executor_names() -> list[str]:
    """Names ``executor=`` accepts in this process (built in and registered; entry points not scanned)."""
    with _REGISTRY_LOCK:
        return sorted({*BUILTIN_EXECUTORS, *_REGISTRY})


def resolve_executor_name(
    executor: str | None, isolation: str | None = None, environ: Mapping[str, str] | None = None
) -> str:
    """The executor a runtime uses: ``executor=``, else its alias ``isolation=``, else
    ``GOONDAN_EXECUTOR``, else ``GOONDAN_ISOLATION``, else ``"process"``. The name is checked when
    the executor is built (:func:`open_executor`)."""
    for value, what in ((executor, "executor"), (isolation, "isolation")):
        if value is not None and not isinstance(value, str):
            raise GoondanError(
                "E_RUNTIME_OPTION",
                f"{what} must be an executor name, got {type(value).__name__}",
                suggestion=f"Use one of: {', '.join(executor_names())}.",
            )
    if executor and isolation and executor.strip().lower() != isolation.strip().lower():
        raise GoondanError(
            "E_RUNTIME_OPTION",
            f"executor={executor!r} and isolation={isolation!r} disagree",
            suggestion="isolation= is the old name of executor=: give only executor=.",
        )
    env = os.environ if environ is None else environ
    for value in (executor, isolation, env.get(ENV_EXECUTOR), env.get(ENV_ISOLATION)):
        if value is not None and value.strip():
            return value.strip().lower()
    return DEFAULT_EXECUTOR


def open_executor(name: str, options: ExecutorOptions | None = None) -> Executor:
    """Build the executor called ``name`` or raise ``E_EXECUTOR_UNSUPPORTED``."""
    factory = _builtin(name)
    if factory is None:
        with _REGISTRY_LOCK:
            factory = _REGISTRY.get(name)
    if factory is None and _NAME.fullmatch(name):
        factory = _entry_point_factory(name)
    if factory is None:
        known = ", ".join(executor_names())
        raise GoondanError(
            CODE_UNSUPPORTED,
            f"no executor is named {name!r}",
            suggestion=f"Use one of: {known}. A third-party executor registers its name with "
            f"goondan.executors.register_executor or the {ENTRY_POINT_GROUP!r} entry point group.",
        )
    return factory(options or ExecutorOptions())


def __getattr__(name: str) -> object:
    """The two built-in executors, imported on first use (the process one pulls in the IPC stack)."""
    if name == "InlineExecutor":
        from ._inline import InlineExecutor

        return InlineExecutor
    if name == "ProcessExecutor":
        from .process._executor import ProcessExecutor

        return ProcessExecutor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BUILTIN_EXECUTORS",
    "DEFAULT_EXECUTOR",
    "ENTRY_POINT_GROUP",
    "ENV_EXECUTOR",
    "ENV_ISOLATION",
    "Executor",
    "ExecutorFactory",
    "ExecutorHost",
    "ExecutorOptions",
    "InlineExecutor",
    "ProcessExecutor",
    "RuntimeEventListener",
    "executor_names",
    "open_executor",
    "register_executor",
    "resolve_executor_name",
]
