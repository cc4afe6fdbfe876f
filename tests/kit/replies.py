"""What a scripted test model answers, and what it saw."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any


class Seen:
    """What one model call received, copied at call time (later turns cannot change it)."""

    def __init__(self, request: Any) -> None:
        self.messages: list[dict[str, Any]] = json.loads(json.dumps(list(request.messages)))
        self.tools: list[dict[str, Any]] = json.loads(json.dumps(list(request.tools)))
        self.params = dict(request.params)
        self.model = request.model
        self.agent_name = request.agent_name
        self.instance_key = request.instance_key

    @property
    def tool_names(self) -> list[str]:
        return [t["name"] for t in self.tools]

    @property
    def last(self) -> dict[str, Any]:
        return self.messages[-1]


def scripted(*replies: Any) -> Callable[[Any], Any]:
    """A model that returns the given replies in order (the last one repeats). A reply that is an
    exception instance is raised; a callable is called with the request."""
    items = list(replies)
    counter = {"n": 0}

    def generate(request: Any) -> Any:
        i = min(counter["n"], len(items) - 1)
        counter["n"] += 1
        reply = items[i]
        if isinstance(reply, BaseException):
            raise reply
        if callable(reply):
            return reply(request)
        return reply

    return generate


def text(value: str, **extra: Any) -> dict[str, Any]:
    return {"text": value, "toolCalls": [], **extra}


def call(name: str, args: Any = None, *, id: str | None = None, text: str | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "args": {} if args is None else args}
    if id is not None:
        c["id"] = id
    return {"text": text, "toolCalls": [c]}
