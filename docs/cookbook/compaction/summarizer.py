"""The summary model: a real one would condense the dropped turns; this one lists what the user said.

It gets the dropped messages as a transcript ("user: ...", "assistant: ..." lines), the previous
summary included, so summaries roll forward.
"""

from typing import Any

PREFIX = "earlier the user said: "


def generate(request: Any) -> dict[str, Any]:
    said: list[str] = []
    for message in request.messages:
        text = message["content"] if isinstance(message["content"], str) else ""
        for line in text.splitlines():
            if PREFIX in line and not line.startswith("assistant: "):  # the previous summary
                said.extend(line.split(PREFIX, 1)[1].split(", "))
            elif line.startswith("user: "):
                said.append(line.removeprefix("user: "))
    return {"text": PREFIX + ", ".join(said)}
