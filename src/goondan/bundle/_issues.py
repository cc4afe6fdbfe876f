"""Turning pydantic validation errors into readable, located bundle problems."""

from __future__ import annotations

import re
import typing
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ValidationError

from .._hints import did_you_mean as did_you_mean
from .._hints import join_hints as join_hints

_PARENT = re.compile(r"^(.*?)(?:\.[^.\[\]]*|\[\d+\])$")


def join_path(base: str, loc: Iterable[Any]) -> str:
    out = base
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out = f"{out}.{part}" if out else str(part)
    return out


def parent_path(path: str) -> str | None:
    """``spec.tools[0].ref`` -> ``spec.tools[0]`` -> ``spec.tools`` -> ``spec`` -> ``""`` -> None."""
    if not path:
        return None
    match = _PARENT.match(path)
    return match.group(1) if match else ""


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        found.extend(_models_in(arg))
    return found


def _model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model class that owns the field at ``loc`` (aliases), following nested annotations."""
    current: type[BaseModel] | None = model
    for part in loc:
        if current is None:
            return None
        if isinstance(part, int):
            continue
        by_alias = {(f.alias or name): f for name, f in current.model_fields.items()}
        info = by_alias.get(part)
        if info is None:
            # a dict key (e.g. Connection.config.<key>) keeps the current value annotation
            continue
        candidates = _models_in(info.annotation)
        current = candidates[0] if candidates else None
    return current


def allowed_fields(model: type[BaseModel]) -> list[str]:
    return [f.alias or name for name, f in model.model_fields.items()]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 50 else text[:47] + "..."


def pydantic_problems(exc: ValidationError, model: type[BaseModel]) -> list[tuple[str, str, str | None, str]]:
    """``(relative field path, message, suggestion, issue code)`` for each error in ``exc``."""
    out: list[tuple[str, str, str | None, str]] = []
    errors = exc.errors(include_url=False)
    # `modelConfg:` gives "unknown field 'modelConfg', did you mean 'modelConfig'?" and "missing
    # required field 'modelConfig'": one typo, one report (the first one says all there is to say)
    misspelt = {
        (tuple(e.get("loc", ()))[:-1], str(tuple(e.get("loc", ()))[-1]))
        for e in errors
        if e.get("type") == "extra_forbidden" and e.get("loc")
    }
    for err in errors:
        loc = tuple(err.get("loc", ()))
        meant = err.get("type") == "missing" and loc
        if meant and any(parent == loc[:-1] and did_you_mean(extra, [str(loc[-1])]) for parent, extra in misspelt):
            continue
        kind = err.get("type", "")
        ctx = err.get("ctx") or {}
        subpath = ctx.get("subpath") if isinstance(ctx, dict) else None
        path = join_path("", loc)
        if subpath:
            path = f"{path}.{subpath}" if path else str(subpath)
        code = "E_CONFIG_INVALID_REF" if kind == "invalid_ref" else "E_CONFIG_SCHEMA_INVALID"
        suggestion: str | None = None
        last = str(loc[-1]) if loc else ""
        if kind == "missing":
            message = f"missing required field {last!r}"
        elif kind == "extra_forbidden":
            owner = _model_at(model, loc[:-1])
            allowed = allowed_fields(owner) if owner is not None else []
            message = f"unknown field {last!r}"
            hint = did_you_mean(last, allowed)
            listing = f"allowed fields: {', '.join(allowed)}" if allowed else None
            suggestion = join_hints(hint, listing)
        else:
            message = str(err.get("msg", "invalid value"))
            message = message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
            message = message.replace("Input should be", "should be")
            show_input = kind not in ("invalid_ref", "value_source") and not kind.endswith("_xor")
            if kind == "value_source" and not isinstance(err.get("input"), dict | list):
                # never the value itself: under `secrets:` it would be a secret printed in CI logs
                suggestion = f'write {last}: {{value: "..."}} (quoted), or {{valueFrom: {{env: VARIABLE}}}}'
            if show_input and "input" in err and not isinstance(err["input"], dict | list):
                message += f" (got {_short(err['input'])})"
            if kind == "invalid_ref":
                suggestion = _ref_suggestion(loc, err.get("input"))
            if suggestion is None and isinstance(ctx, dict) and isinstance(ctx.get("suggestion"), str):
                suggestion = ctx["suggestion"]  # a validator's own (e.g. an invalid JSON Schema)
        out.append((path, message, suggestion, code))
    return out


#: the kind a reference field names (the field, or the list it is an item of)
_REF_KINDS = {
    "entryAgent": "Agent",
    "agentRef": "Agent",
    "agents": "Agent",
    "modelRef": "Model",
    "tools": "Tool",
    "requiredTools": "Tool",
    "extensions": "Extension",
    "connectorRef": "Connector",
    "swarmRef": "Swarm",
}


def _ref_suggestion(loc: tuple[Any, ...], given: Any) -> str | None:
    """``write Agent/assistant`` for ``entryAgent: assistant`` (a bare name, the usual slip)."""
    field = next((str(part) for part in reversed(loc) if isinstance(part, str) and part != "ref"), "")
    kind = _REF_KINDS.get(field)
    if isinstance(given, dict):  # a RefItem {ref: calc}
        given = given.get("ref")
    if kind is None or not isinstance(given, str) or "/" in given or not given.strip():
        return None
    return f"write {kind}/{given.strip()} (a reference is Kind/name)"


__all__ = ["allowed_fields", "did_you_mean", "join_path", "parent_path", "pydantic_problems"]
