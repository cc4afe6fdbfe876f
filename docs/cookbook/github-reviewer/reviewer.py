"""The reviewer's model: a real LLM would read the PR; this one checks the title's conventions."""

from typing import Any


def generate(request: Any) -> dict[str, Any]:
    last = [m for m in request.messages if m["role"] == "user"][-1]
    title = last["content"] if isinstance(last["content"], str) else last["content"][0]["text"]
    if title.lower().startswith(("fix", "feat", "docs", "chore")):
        return {"text": f"Looks good: '{title}' follows the commit convention."}
    return {"text": f"Please prefix the title '{title}' with fix:, feat:, docs: or chore:."}
