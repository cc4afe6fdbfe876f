"""The LLM summary of message-compaction: asks a configured model to summarize what is dropped.

Design: the extension API deliberately gives no access to bundle resources, so the summary model is
configured *inline* in the extension config (``summaryModel: {provider, model, options, endpoint,
apiKeyEnv}``, the same fields as a ``Model`` resource's spec) and built with
``goondan.models.create_model_adapter``. Relative paths in ``options`` (the ``python`` provider's
``entry``) resolve against the agent's bundle root (``ctx.runtime.agent.bundle_root``), where the
config was written. The adapter is created on first use and reused for the agent instance.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from goondan.errors import ExtensionError
from goondan.models import KNOWN_PROVIDERS, ModelAdapter, ModelRequest, create_model_adapter

DEFAULT_INSTRUCTION = (
    "You compress conversation history for an AI agent. Summarize the transcript below so the agent can "
    "continue the conversation without it: keep user goals, decisions, facts, names, numbers, file paths, "
    "tool outcomes and open tasks; drop chit-chat. Answer with the summary only."
)

MODEL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        # an enum, so that `gdn validate` reports a misspelt provider (the check in Summarizer ran only at start)
        "provider": {"enum": sorted(KNOWN_PROVIDERS)},
        "model": {"type": "string"},
        "options": {"type": "object"},
        "endpoint": {"type": "string", "minLength": 1},
        "apiKeyEnv": {"type": "string", "minLength": 1},
    },
    "required": ["provider"],
    "additionalProperties": False,
}


def _render_part(part: Any) -> str:
    if not isinstance(part, dict):
        return ""
    kind = part.get("type")
    if kind == "text":
        return str(part.get("text", ""))
    if kind in ("tool-call", "tool_call", "tool_use"):
        args = json.dumps(part.get("input", part.get("args")), ensure_ascii=False, default=str)
        return f"[tool-call {part.get('toolName') or part.get('name')}] {args}"
    if kind in ("tool-result", "tool_result"):
        output = part.get("output", part.get("content"))
        if isinstance(output, dict) and "value" in output:
            output = output["value"]
        body = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False, default=str)
        return f"[tool-result {part.get('toolName') or part.get('name')}] {body}"
    if kind in ("image", "file"):  # the summary model gets a note, never the bytes
        return f"[{kind} {part.get('name') or part.get('mediaType') or ''}]".replace(" ]", "]")
    return ""


def transcript(messages: Sequence[Any], limit: int) -> str:
    """A plain-text rendering of ``messages`` (``role: text`` lines), keeping the newest ``limit``
    characters when it is longer (the newest history matters most for continuing)."""
    lines: list[str] = []
    for message in messages:
        content = message.data.get("content")
        if isinstance(content, str):
            body = content
        elif isinstance(content, list):
            body = "\n".join(s for s in (_render_part(p) for p in content) if s)
        else:
            body = ""
        lines.append(f"{message.data.get('role', '?')}: {body}")
    text = "\n\n".join(lines)
    if len(text) > limit:
        text = "[... earlier history omitted ...]\n" + text[len(text) - limit :]
    return text


class Summarizer:
    """One summary model for one agent instance."""

    def __init__(self, spec: dict[str, Any], instruction: str, max_input: int, timeout: float) -> None:
        provider = spec["provider"]
        if provider not in KNOWN_PROVIDERS:
            raise ExtensionError(
                "E_EXT_CONFIG",
                f"summaryModel.provider {provider!r} is not a known model provider",
                suggestion=f"Use one of: {', '.join(sorted(KNOWN_PROVIDERS))}.",
            )
        key_env = spec.get("apiKeyEnv")
        if key_env is not None and not os.environ.get(key_env):
            raise ExtensionError(
                "E_EXT_CONFIG",
                f"summaryModel.apiKeyEnv names environment variable {key_env}, which is not set",
                suggestion=f"Export {key_env} (or a .env entry) before starting the agent.",
            )
        self._spec = spec
        self._instruction = instruction
        self._max_input = max_input
        self._timeout = timeout
        self._adapter: ModelAdapter | None = None

    def _get_adapter(self, bundle_root: str) -> ModelAdapter:
        if self._adapter is None:
            spec = self._spec
            key_env = spec.get("apiKeyEnv")
            self._adapter = create_model_adapter(
                spec["provider"],
                model=str(spec.get("model", "")),
                options=dict(spec.get("options") or {}),
                root=Path(bundle_root),
                api_key=os.environ.get(key_env) if key_env else None,
                endpoint=spec.get("endpoint"),
            )
        return self._adapter

    async def summarize(self, messages: Sequence[Any], *, bundle_root: str, agent: str, instance: str) -> str:
        """The model's summary of ``messages``; raises on model errors, timeouts and empty answers."""
        adapter = self._get_adapter(bundle_root)
        request = ModelRequest(
            messages=[
                {"role": "system", "content": self._instruction},
                {"role": "user", "content": transcript(messages, self._max_input)},
            ],
            tools=[],
            params={},
            model=str(self._spec.get("model", "")),
            agent_name=agent,
            instance_key=instance,
        )
        response = await asyncio.wait_for(adapter.generate(request), self._timeout)
        text = (response.text or "").strip()
        if not text:
            raise ValueError("the summary model returned no text")
        return text
