"""The diary's model: reports how much history it was given and the summary it starts from, if any."""

from typing import Any


def generate(request: Any) -> dict[str, Any]:
    messages = list(request.messages)
    summaries = [m["content"] for m in messages if m["role"] == "system"]
    summary = summaries[0].splitlines()[-1] if summaries else "none"
    return {"text": f"{len(messages)} messages in view; summary: {summary}"}
