"""Helpers for the runtime behaviour tests: bundle builders and an in-process model/probe hook.

Bundles are real YAML directories written under ``tmp_path``. The model is the ``python`` provider:
the generated ``model.py`` forwards every call to :data:`MODEL` (a plain function the test sets), so a
test scripts the model's answers per step and records what the model received. Extension and tool
files written by the tests can append to :data:`TRACE` / :data:`PROBE` through ``import rt_testkit``
(``tests/runtime`` is on ``sys.path`` while the tests run).
"""

from __future__ import annotations

import asyncio
import json
import textwrap
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

API = "goondan.ai/v1"

# what the python model does; set by each test (reset by the autouse fixture in conftest.py)
MODEL: Callable[[Any], Any] | None = None
# every ModelRequest the model received, in order
REQUESTS: list[Any] = []
# free-form trace list that extension/tool files append to
TRACE: list[Any] = []
# free-form dict for values extension/tool files want to hand back to the test
PROBE: dict[str, Any] = {}

FORWARDING_MODEL = """\
import rt_testkit


def generate(request):
    rt_testkit.REQUESTS.append(rt_testkit.snapshot(request))
    return rt_testkit.MODEL(request)
"""


class Seen:
    """What one model call received, copied at call time."""

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


# --- documents ------------------------------------------------------------------------------------


def package_doc(name: str = "test-bundle") -> dict[str, Any]:
    return {"apiVersion": API, "kind": "Package", "metadata": {"name": name}, "spec": {"version": "0.1.0"}}


def python_model_doc(name: str = "m", entry: str = "./model.py") -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "Model",
        "metadata": {"name": name},
        "spec": {"provider": "python", "model": "test-model", "options": {"entry": entry}},
    }


def agent_doc(
    name: str,
    *,
    model: str = "m",
    tools: Sequence[Any] = (),
    extensions: Sequence[Any] = (),
    prompt: str | None = None,
    params: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"modelConfig": {"modelRef": f"Model/{model}"}}
    if params is not None:
        spec["modelConfig"]["params"] = dict(params)
    if prompt is not None:
        spec["prompt"] = {"system": prompt}
    if tools:
        spec["tools"] = [t if isinstance(t, dict) else {"ref": f"Tool/{t}"} for t in tools]
    if extensions:
        spec["extensions"] = [e if isinstance(e, dict) else {"ref": f"Extension/{e}"} for e in extensions]
    return {"apiVersion": API, "kind": "Agent", "metadata": {"name": name}, "spec": spec}


def tool_doc(
    name: str, entry: str, exports: Iterable[Mapping[str, Any]], *, error_message_limit: int | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"entry": entry, "exports": [dict(e) for e in exports]}
    if error_message_limit is not None:
        spec["errorMessageLimit"] = error_message_limit
    return {"apiVersion": API, "kind": "Tool", "metadata": {"name": name}, "spec": spec}


def export(name: str, properties: Mapping[str, Any] | None = None, **schema: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"type": "object", "properties": dict(properties or {})}
    params.update(schema)
    return {"name": name, "description": f"the {name} export", "parameters": params}


def extension_doc(name: str, entry: str, config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"entry": entry}
    if config is not None:
        spec["config"] = dict(config)
    return {"apiVersion": API, "kind": "Extension", "metadata": {"name": name}, "spec": spec}


def swarm_doc(
    agents: Sequence[str],
    *,
    entry: str | None = None,
    name: str = "default",
    max_steps: int | None = None,
    instance_key: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "entryAgent": f"Agent/{entry or agents[0]}",
        "agents": [{"ref": f"Agent/{a}"} for a in agents],
    }
    if max_steps is not None:
        spec["policy"] = {"maxStepsPerTurn": max_steps}
    if instance_key is not None:
        spec["instanceKey"] = instance_key
    return {"apiVersion": API, "kind": "Swarm", "metadata": {"name": name}, "spec": spec}


def write_bundle(root: Path, docs: Sequence[Mapping[str, Any]], files: Mapping[str, str] | None = None) -> Path:
    """Write ``goondan.yaml`` (the documents, Package first) and extra files (dedented) under ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "goondan.yaml").write_text(yaml.safe_dump_all(list(docs), sort_keys=False), encoding="utf-8")
    for rel, text in (files or {}).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def simple_bundle(
    root: Path,
    *,
    agents: Sequence[Mapping[str, Any]] | None = None,
    tools: Sequence[Mapping[str, Any]] = (),
    extensions: Sequence[Mapping[str, Any]] = (),
    swarm: Mapping[str, Any] | None = None,
    files: Mapping[str, str] | None = None,
) -> Path:
    """A bundle with the forwarding python model, the given resources and one swarm."""
    agents = list(agents or [agent_doc("a")])
    docs: list[Mapping[str, Any]] = [package_doc(), python_model_doc(), *tools, *extensions, *agents]
    docs.append(swarm or swarm_doc([str(a["metadata"]["name"]) for a in agents]))
    all_files = {"model.py": FORWARDING_MODEL}
    all_files.update(files or {})
    return write_bundle(root / "bundle", docs, all_files)


# --- model scripting ------------------------------------------------------------------------------


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


# --- reading state --------------------------------------------------------------------------------


def instance_dirs(state_root: Path) -> list[Path]:
    return sorted(p for p in state_root.glob("workspaces/*/instances/*") if p.is_dir())


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def roles(messages: Iterable[Mapping[str, Any]]) -> list[str]:
    return [str(m["role"]) for m in messages]


def parts(message: Mapping[str, Any], kind: str) -> list[dict[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [p for p in content if isinstance(p, dict) and p.get("type") == kind]


def tool_results(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.get("role") == "tool":
            out.extend(parts(m, "tool-result"))
    return out


def history(rt: Any, agent: str | None = None, key: str | None = None) -> list[dict[str, Any]]:
    """The committed conversation of an instance (``base.jsonl`` plus residual events) as LLM messages."""
    name = agent or rt.entry_agent
    store = rt.workspace  # the bundle's workspace (its id derives from the bundle and the swarm)
    path = store.instance_path(name, key or rt.swarm_instance_key) / "messages"
    records = read_jsonl(path / "base.jsonl")
    assert read_jsonl(path / "events.jsonl") == [], "history() expects a committed conversation"
    return [r["data"] for r in records]


def instance_dir(state_root: Path, agent: str, key: str) -> Path:
    """The directory of one instance, found through its ``metadata.json``."""
    for path in instance_dirs(state_root):
        meta = path / "metadata.json"
        if meta.exists():
            data = json.loads(meta.read_text(encoding="utf-8"))
            if data.get("agentName") == agent and data.get("instanceKey") == key:
                return path
    raise AssertionError(f"no instance {agent}@{key} under {state_root}")
