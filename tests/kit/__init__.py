"""The shared test kit: bundle documents, bundle writing, a python model the test scripts, and
readers for what a run left on disk. Importable from every test directory (``tests/conftest.py``
puts ``tests/`` on ``sys.path``).

The model hook: a bundle whose Model is :func:`python_model_doc` with :data:`FORWARDING_MODEL` as
its ``model.py`` forwards every call to :data:`MODEL` (a plain function the test sets, e.g.
:func:`scripted`) and records what the model received in :data:`REQUESTS`. Tool and extension files
written by tests can ``import kit`` and append to :data:`TRACE` / :data:`PROBE`. The hook state lives
in this module (not a submodule) so ``kit.MODEL = ...`` is what the forwarding model reads; the
autouse fixture in ``tests/conftest.py`` resets it around every test.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any

from kit.bundles import write_bundle, write_files
from kit.docs import (
    API,
    BASE,
    agent_doc,
    agent_yaml,
    base_ref,
    export,
    extension_doc,
    model_doc,
    package_doc,
    python_model_doc,
    swarm_doc,
    tool_doc,
)
from kit.replies import Seen, call, scripted, text
from kit.state import history, instance_dir, instance_dirs, parts, read_jsonl, roles, tool_results

# the runtime events of a turn with one tool call (two steps), in the order they are emitted
ONE_TOOL_TURN_EVENTS = [
    "turn.started",
    "step.started",
    "tool.called",
    "tool.completed",
    "step.completed",
    "step.started",
    "step.completed",
    "turn.completed",
]

__all__ = [
    "API",
    "BASE",
    "FORWARDING_MODEL",
    "MODEL",
    "ONE_TOOL_TURN_EVENTS",
    "PROBE",
    "REQUESTS",
    "TRACE",
    "Seen",
    "agent_doc",
    "agent_yaml",
    "base_ref",
    "call",
    "export",
    "extension_doc",
    "history",
    "instance_dir",
    "instance_dirs",
    "model_doc",
    "package_doc",
    "parts",
    "python_model_doc",
    "read_jsonl",
    "reset",
    "roles",
    "run",
    "scripted",
    "simple_bundle",
    "snapshot",
    "swarm_doc",
    "text",
    "tool_doc",
    "tool_results",
    "write_bundle",
    "write_files",
]

# what the python model does; set by each test
MODEL: Callable[[Any], Any] | None = None
# every model call, in order, as a Seen copy
REQUESTS: list[Seen] = []
# free-form trace list that extension/tool files append to
TRACE: list[Any] = []
# free-form dict for values extension/tool files want to hand back to the test
PROBE: dict[str, Any] = {}

FORWARDING_MODEL = """\
import kit


def generate(request):
    kit.REQUESTS.append(kit.snapshot(request))
    assert kit.MODEL is not None, "the test did not set kit.MODEL"
    return kit.MODEL(request)
"""


def snapshot(request: Any) -> Seen:
    return Seen(request)


def reset() -> None:
    global MODEL
    MODEL = None
    REQUESTS.clear()
    TRACE.clear()
    PROBE.clear()


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(coro)


def simple_bundle(
    root: Path,
    *,
    agents: Sequence[Mapping[str, Any]] | None = None,
    tools: Sequence[Mapping[str, Any]] = (),
    extensions: Sequence[Mapping[str, Any]] = (),
    swarm: Mapping[str, Any] | None = None,
    files: Mapping[str, str] | None = None,
) -> Path:
    """``root/bundle``: the forwarding python model, the given resources and one swarm."""
    agents = list(agents or [agent_doc("a")])
    docs: list[Mapping[str, Any]] = [package_doc(), python_model_doc(), *tools, *extensions, *agents]
    docs.append(swarm or swarm_doc([str(a["metadata"]["name"]) for a in agents]))
    return write_bundle(root / "bundle", *docs, files={"model.py": FORWARDING_MODEL, **(files or {})})
