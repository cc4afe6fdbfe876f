"""The coordinator's model: ask both workers in one step (two tool calls), then join their replies."""

from typing import Any

WORKERS = ("writer", "reviewer")


def generate(request: Any) -> dict[str, Any]:
    messages = [m for m in request.messages if m["role"] != "system"]
    replies = {}
    for message in messages[-len(WORKERS) :]:
        if message["role"] == "tool":  # one message per tool result, in the order the calls were made
            part = message["content"][0]
            value = part["output"]["value"]
            replies[value["target"]] = value["response"]
    if len(replies) == len(WORKERS):
        return {"text": "; ".join(f"{name} {reply}" for name, reply in replies.items())}
    task = messages[-1]["content"]
    task = task if isinstance(task, str) else task[0]["text"]
    calls = [
        {"name": "agents__request", "args": {"target": name, "input": f"{name}, please handle: {task}"}}
        for name in WORKERS
    ]
    return {"toolCalls": calls}
