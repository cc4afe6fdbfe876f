"""Builders for bundle documents (plain dicts, dumped to YAML by :func:`kit.write_bundle`).

Every builder returns the smallest valid document of its kind, so a test names only what it is
about. References given as strings become ``{ref: Kind/name}``; dicts are used as they are (for
package refs such as ``{kind: Tool, name: bash, package: "@goondan/base"}`` or a ref with config).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

API = "goondan.ai/v1"
BASE = "@goondan/base"


def package_doc(name: str = "test-bundle", version: str = "0.1.0") -> dict[str, Any]:
    return {"apiVersion": API, "kind": "Package", "metadata": {"name": name}, "spec": {"version": version}}


def model_doc(name: str, provider: str, model: str, **spec: Any) -> dict[str, Any]:
    """A Model of any provider; extra keyword arguments (``options=``, ``endpoint=``...) go into spec."""
    return {
        "apiVersion": API,
        "kind": "Model",
        "metadata": {"name": name},
        "spec": {"provider": provider, "model": model, **spec},
    }


def python_model_doc(name: str = "m", entry: str = "./model.py", model: str = "test-model") -> dict[str, Any]:
    """A ``python`` provider Model whose ``generate`` lives in ``entry`` (see :data:`kit.FORWARDING_MODEL`)."""
    return model_doc(name, "python", model, options={"entry": entry})


def base_ref(kind: str, name: str) -> dict[str, Any]:
    """A reference to a built-in resource of ``@goondan/base``."""
    return {"kind": kind, "name": name, "package": BASE}


def _refs(kind: str, items: Sequence[Any]) -> list[Any]:
    return [i if isinstance(i, dict) else {"ref": f"{kind}/{i}"} for i in items]


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
        spec["tools"] = _refs("Tool", tools)
    if extensions:
        spec["extensions"] = _refs("Extension", extensions)
    return {"apiVersion": API, "kind": "Agent", "metadata": {"name": name}, "spec": spec}


def agent_yaml(name: str = "a", model: str = "Model/m") -> str:
    """The smallest Agent as YAML text, for validation tests that compare reported line numbers."""
    return f"apiVersion: {API}\nkind: Agent\nmetadata: {{name: {name}}}\nspec: {{modelConfig: {{modelRef: {model}}}}}\n"


def tool_doc(
    name: str, entry: str, exports: Iterable[Mapping[str, Any]], *, error_message_limit: int | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"entry": entry, "exports": [dict(e) for e in exports]}
    if error_message_limit is not None:
        spec["errorMessageLimit"] = error_message_limit
    return {"apiVersion": API, "kind": "Tool", "metadata": {"name": name}, "spec": spec}


def export(name: str, properties: Mapping[str, Any] | None = None, **schema: Any) -> dict[str, Any]:
    """One Tool export whose parameters are an object with ``properties`` (plus any schema keys)."""
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
    policy: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A Swarm of ``agents`` (entry: the first unless given); ``policy`` is merged into spec.policy."""
    spec: dict[str, Any] = {
        "entryAgent": f"Agent/{entry or agents[0]}",
        "agents": [{"ref": f"Agent/{a}"} for a in agents],
    }
    merged: dict[str, Any] = dict(policy or {})
    if max_steps is not None:
        merged["maxStepsPerTurn"] = max_steps
    if merged:
        spec["policy"] = merged
    if instance_key is not None:
        spec["instanceKey"] = instance_key
    return {"apiVersion": API, "kind": "Swarm", "metadata": {"name": name}, "spec": spec}
