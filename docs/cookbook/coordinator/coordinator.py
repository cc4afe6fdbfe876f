"""The coordinator's model: ask both workers in one step (two tool calls), then join their replies."""

from typing import Any

WORKERS = ("writer", "reviewer")


def generate(request: Any) -> dict[str, Any]:
    messages = [m for m in request.messages if m["role"] != "system"]
    targets = {  # tool call id -> the worker it asked (from the assistant's tool-call parts)
        part["toolCallId"]: part["input"]["target"]
        for m in messages
        if m["role"] == "assistant" and isinstance(m["content"], list)
        for part in m["content"]
        if part["type"] == "tool-call"
    }
    replies = {}
    for message in messages[-len(WORKERS) :]:
        if message["role"] == "tool":  # one message per tool result, in the order the calls were made
            part = message["content"][0]
            output, value = part["output"]["type"], part["output"]["value"]
            if output == "error-json":  # the call failed: {code, message, suggestion}
                replies[targets[part["toolCallId"]]] = f"failed: [{value['code']}] {value['message']}"
            else:
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
