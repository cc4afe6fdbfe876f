"""Test support shipped with goondan: testing your agents, and the suites that extension points prove
themselves with.

For your agents (docs/guides/testing.md):

* :class:`AgentRunner` / :class:`AsyncAgentRunner` run your real bundle (real tools, extensions and
  state files) with chosen Models replaced by a function or a list of replies
  (``override_models={"main": fn}``), on a throwaway state root, and hand back each :class:`Turn`;
* :class:`Turn` has readable assertions (``assert_tool_called``, ``assert_text``,
  ``assert_output``, ``assert_event`` ...) whose failures show a compact transcript;
* :class:`Cassette` records a real provider's HTTP traffic once (no keys or auth headers are written)
  and replays it offline; a request that no longer matches fails with a diff (:class:`CassetteMismatch`).

The pytest plugin (``goondan.testing.pytest_plugin``, registered through the ``pytest11`` entry point)
provides the ``goondan_runner`` and ``goondan_cassette`` fixtures and the ``--goondan-record`` option.

For projects that extend goondan: :mod:`goondan.testing.store_conformance`, the suite a store backend
proves itself with.

Names are imported on first use so that loading the pytest plugin costs nothing in test runs that do
not use it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._cassette import Cassette, CassetteMismatch
    from ._models import ScriptedReplies, text, tool_call
    from ._runner import AgentRunner, AsyncAgentRunner
    from ._turn import CallRecord, ResultRecord, Turn, is_subset

_LAZY = {
    "AgentRunner": "._runner",
    "AsyncAgentRunner": "._runner",
    "Cassette": "._cassette",
    "CassetteMismatch": "._cassette",
    "ScriptedReplies": "._models",
    "text": "._models",
    "tool_call": "._models",
    "CallRecord": "._turn",
    "ResultRecord": "._turn",
    "Turn": "._turn",
    "is_subset": "._turn",
}

__all__ = [
    "AgentRunner",
    "AsyncAgentRunner",
    "CallRecord",
    "Cassette",
    "CassetteMismatch",
    "ResultRecord",
    "ScriptedReplies",
    "Turn",
    "is_subset",
    "text",
    "tool_call",
]

if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module 'goondan.testing' has no attribute {name!r}")
        import importlib

        value = getattr(importlib.import_module(module, __name__), name)
        globals()[name] = value
        return value
