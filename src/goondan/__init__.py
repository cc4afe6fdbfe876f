"""Goondan for Python: a declarative runtime for swarms of LLM agents.

The public surface is re-exported here. Heavy parts (bundle loading with pydantic and YAML, the
runtime) are imported on first use so that ``import goondan`` and ``gdn --help`` stay fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .conversation import ConversationState
from .errors import AgentRequestError, ConfigError, ExtensionError, GoondanError, ModelError, StorageError
from .messages import Message, assistant_message, system_message, user_message
from .results import PendingApproval, StepResult, ToolCall, ToolCallResult, TurnResult

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .bundle import Bundle, ValidationReport, load_bundle, validate_bundle
    from .runtime import Runtime, run
    from .types import ExtensionApi, ModelRequest, StepContext, ToolCallContext, ToolContext, TurnContext

_LAZY = {
    "load_bundle": ("goondan.bundle", "load_bundle"),
    "validate_bundle": ("goondan.bundle", "validate_bundle"),
    "Bundle": ("goondan.bundle", "Bundle"),
    "ValidationReport": ("goondan.bundle", "ValidationReport"),
    "Runtime": ("goondan.runtime", "Runtime"),
    "run": ("goondan.runtime", "run"),
    # the types extension, tool and model authors annotate with (all of them: goondan.types)
    "ExtensionApi": ("goondan.types", "ExtensionApi"),
    "ModelRequest": ("goondan.types", "ModelRequest"),
    "StepContext": ("goondan.types", "StepContext"),
    "ToolCallContext": ("goondan.types", "ToolCallContext"),
    "ToolContext": ("goondan.types", "ToolContext"),
    "TurnContext": ("goondan.types", "TurnContext"),
}


if not TYPE_CHECKING:  # type checkers see the imports above: a misspelled name stays an error

    def __getattr__(name: str) -> Any:
        target = _LAZY.get(name)
        if target is None:
            raise AttributeError(f"module 'goondan' has no attribute {name!r}")
        import importlib

        value = getattr(importlib.import_module(target[0]), target[1])
        globals()[name] = value
        return value


__all__ = [
    "AgentRequestError",
    "Bundle",
    "ConfigError",
    "ConversationState",
    "ExtensionApi",
    "ExtensionError",
    "GoondanError",
    "Message",
    "ModelError",
    "ModelRequest",
    "PendingApproval",
    "Runtime",
    "StepContext",
    "StepResult",
    "StorageError",
    "ToolCall",
    "ToolCallContext",
    "ToolCallResult",
    "ToolContext",
    "TurnContext",
    "TurnResult",
    "ValidationReport",
    "__version__",
    "assistant_message",
    "load_bundle",
    "run",
    "system_message",
    "user_message",
    "validate_bundle",
]
