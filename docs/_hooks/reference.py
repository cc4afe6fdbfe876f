"""mkdocs hook: the Reference pages, generated from the code at build time so they cannot drift.

- reference/resources.md: every kind and field, from the JSON Schema ``gdn schema`` emits;
- reference/builtins.md: every tool, extension and connector of @goondan/base, from its manifests
  (src/goondan/base/**/*.yaml) and each extension's ``CONFIG_SCHEMA``;
- reference/cli.md: every ``gdn`` command's help, from the argparse parser (``build_parser``);
- reference/events.md: every runtime event and its fields, from the TypedDicts in goondan._api_types;
- errors/<CODE>.md: one page per error code of docs/errors.md, so the ``help:`` link a GoondanError
  prints (https://goondan.ai/errors/<CODE>) resolves on the published site.

Nothing here is hand-maintained: a new field, tool, option, event or code shows up on the next build.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import typing
from pathlib import Path
from typing import Any

import yaml
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "src" / "goondan" / "base"


# ---------------------------------------------------------------- JSON Schema rendering


def _type_of(node: Any, defs: dict[str, Any]) -> str:
    """A short human reading of a schema node's type (``string``, ``list of Tool refs``...)."""
    if not isinstance(node, dict):
        return ""
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    if "enum" in node:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in node["enum"])
    for key in ("anyOf", "oneOf"):
        if key in node:
            parts = [_type_of(n, defs) for n in node[key]]
            return " or ".join(dict.fromkeys(p for p in parts if p and p != "`null`" and p != "null"))
    kind = node.get("type")
    if kind == "array":
        return f"list of {_type_of(node.get('items', {}), defs) or 'any'}"
    if kind == "object" and isinstance(node.get("additionalProperties"), dict) and not node.get("properties"):
        return f"map of {_type_of(node['additionalProperties'], defs) or 'any'}"
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    return str(kind or "any")


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _constraints(node: dict[str, Any]) -> str:
    bits = []
    for key, label in (
        ("minimum", "≥"),
        ("exclusiveMinimum", ">"),
        ("maximum", "≤"),
        ("exclusiveMaximum", "<"),
        ("minLength", "min length"),
        ("minItems", "min items"),
        ("pattern", "pattern"),
    ):
        if key in node:
            bits.append(f"{label} `{node[key]}`")
    return ", ".join(bits)


def _inline_objects(node: Any) -> list[dict[str, Any]]:
    """The inline object schemas a property may take (directly, as list items, or as one of its forms)."""
    if not isinstance(node, dict) or "$ref" in node:
        return []
    found = [node] if node.get("properties") else []
    for key in ("anyOf", "oneOf"):
        for branch in node.get(key, []):
            found += _inline_objects(branch)
    if isinstance(node.get("items"), dict):
        found += _inline_objects(node["items"])
    if isinstance(node.get("additionalProperties"), dict):
        found += _inline_objects(node["additionalProperties"])
    return found


def _rows(node: dict[str, Any], defs: dict[str, Any], prefix: str) -> list[str]:
    required = set(node.get("required") or [])
    lines = []
    for name, prop in (node.get("properties") or {}).items():
        prop = prop if isinstance(prop, dict) else {}
        default = f"`{json.dumps(prop['default'])}`" if "default" in prop else ""
        desc = prop.get("description", "")
        extra = _constraints(prop)
        if extra:
            desc = f"{desc} ({extra})" if desc else extra
        lines.append(
            f"| `{prefix}{name}` | {_cell(_type_of(prop, defs))} | {'yes' if name in required else ''} "
            f"| {_cell(default)} | {_cell(desc)} |"
        )
        for inner in _inline_objects(prop):  # nested fields written inline (metadata.labels, valueFrom.env)
            lines += _rows(inner, defs, f"{prefix}{name}.")
    return lines


def _properties_table(node: dict[str, Any], defs: dict[str, Any]) -> list[str]:
    if not node.get("properties"):
        return ["*(no fixed fields)*", ""]
    header = ["| field | type | required | default | description |", "|---|---|---|---|---|"]
    return [*header, *_rows(node, defs, ""), ""]


def resources_page() -> str:
    from goondan.cli._schema import build_schema

    schema = build_schema()
    defs: dict[str, Any] = schema.get("$defs", {})
    out = [
        "# Resources (goondan.yaml)",
        "",
        "Generated at build time from the JSON Schema that `gdn schema` prints (itself generated from the",
        "loader's pydantic models), so every field below is one the loader accepts. Point your editor at it:",
        "",
        "```console",
        "$ gdn schema > goondan.schema.json",
        "```",
        "",
        "and start `goondan.yaml` with `# yaml-language-server: $schema=./goondan.schema.json`.",
        "",
        "## Every document",
        "",
        *_properties_table(schema, defs),
    ]
    kinds: list[tuple[str, str]] = []
    for branch in schema.get("allOf", []):
        kind = branch["if"]["properties"]["kind"]["const"]
        ref = branch["then"]["properties"]["spec"].get("$ref", "")
        kinds.append((kind, ref.rsplit("/", 1)[-1]))
    out += ["## Kinds", "", "| kind | spec |", "|---|---|"]
    for kind, spec in kinds:
        desc = defs.get(spec, {}).get("description", "")
        out.append(f"| `{kind}` | [{spec}](#{spec.lower()}): {_cell(desc)} |")
    out.append("")
    out += ["## Spec types", ""]
    for name in sorted(defs):
        node = defs[name]
        out += [f"### {name}", "", node.get("description", ""), "", *_properties_table(node, defs)]
    return "\n".join(out)


# ---------------------------------------------------------------- @goondan/base


def _base_documents() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted(BASE.rglob("*.yaml")):
        docs.extend(d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if isinstance(d, dict))
    return docs


def _module_of(entry: str) -> str:
    rel = entry.removeprefix("./").removesuffix(".py").removesuffix("/__init__")
    return "goondan.base." + rel.replace("/", ".")


def _yaml_block(value: Any) -> list[str]:
    return ["```yaml", yaml.safe_dump(value, sort_keys=False, allow_unicode=True).rstrip(), "```", ""]


def builtins_page() -> str:
    docs = _base_documents()
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for d in docs:
        by_kind.setdefault(d.get("kind", ""), []).append(d)
    out = [
        "# Built-in tools, extensions and connectors (`@goondan/base`)",
        "",
        "Generated at build time from the package's own manifests (`src/goondan/base/**/*.yaml`) and each",
        'extension\'s `CONFIG_SCHEMA`. Reference any of them from your bundle with `package: "@goondan/base"`:',
        "",
        "```yaml",
        "tools:",
        '  - {kind: Tool, name: bash, package: "@goondan/base"}',
        "extensions:",
        '  - {kind: Extension, name: message-window, package: "@goondan/base"}',
        "```",
        "",
        "A tool's name as the model sees it is `<Tool>__<export>`, e.g. `bash__exec`.",
        "",
        "## Tools",
        "",
    ]
    for tool in by_kind.get("Tool", []):
        spec = tool["spec"]
        name = tool["metadata"]["name"]
        out += [f"### {name}", ""]
        if spec.get("config"):
            out += [
                "Default `config` (override under the Tool resource or per agent):",
                "",
                *_yaml_block(spec["config"]),
            ]
        for export in spec.get("exports", []):
            out += [f"#### `{name}__{export['name']}`", "", _cell(export.get("description", "")), ""]
            params = export.get("parameters") or {}
            out += _properties_table(params, {})
            if export.get("approval"):
                out += [f"Approval: `{export['approval']}`.", ""]
    out += ["## Extensions", ""]
    for ext in by_kind.get("Extension", []):
        spec = ext["spec"]
        name = ext["metadata"]["name"]
        module = importlib.import_module(_module_of(spec["entry"]))
        doc = (module.__doc__ or "").strip()
        out += [f"### {name}", ""]
        if doc:
            out += [doc.split("\n\n", 1)[0].replace("\n", " "), ""]
        if spec.get("config"):
            out += ["Defaults set by the manifest:", "", *_yaml_block(spec["config"])]
        config_schema = getattr(module, "CONFIG_SCHEMA", None)
        if isinstance(config_schema, dict):
            out += ["Configuration (`config`, checked against the extension's `CONFIG_SCHEMA`):", ""]
            out += _properties_table(config_schema, config_schema.get("$defs", {}))
    out += ["## Connectors", ""]
    for conn in by_kind.get("Connector", []):
        spec = conn["spec"]
        name = conn["metadata"]["name"]
        module = importlib.import_module(_module_of(spec["entry"]))
        doc = (module.__doc__ or "").strip()
        out += [f"### {name}", ""]
        if doc:
            out += [doc.split("\n\n", 1)[0].replace("\n", " "), ""]
        out += ["| event | properties |", "|---|---|"]
        for event in spec.get("events", []):
            props = ", ".join(
                f"`{p}`: {v.get('type', 'any')}{' (optional)' if v.get('optional') else ''}"
                for p, v in (event.get("properties") or {}).items()
            )
            out.append(f"| `{event['name']}` | {props or '—'} |")
        out.append("")
        config_schema = getattr(module, "CONFIG_SCHEMA", None)
        if isinstance(config_schema, dict):
            out += ["Connection `config`/`secrets`:", "", *_properties_table(config_schema, {})]
    return "\n".join(out)


# ---------------------------------------------------------------- CLI


def cli_page() -> str:
    os.environ["COLUMNS"] = "100"  # argparse wraps at the terminal width: fix it for a stable page
    from goondan.cli._parser import build_parser

    parser = build_parser()
    out = [
        "# Command line (`gdn`)",
        "",
        "Generated at build time from the argparse parser itself; `gdn help <command>` prints the same.",
        "",
        "```text",
        parser.format_help().rstrip(),
        "```",
        "",
    ]

    def walk(p: Any, prefix: str) -> None:
        for action in p._actions:
            choices = getattr(action, "choices", None)
            if action.__class__.__name__ == "_SubParsersAction" and isinstance(choices, dict):
                seen: set[int] = set()
                for name, sub in choices.items():
                    if id(sub) in seen:  # aliases point at the same parser
                        continue
                    seen.add(id(sub))
                    title = f"{prefix} {name}"
                    out.extend([f"## `{title}`", "", "```text", sub.format_help().rstrip(), "```", ""])
                    walk(sub, title)

    walk(parser, "gdn")
    return "\n".join(out)


# ---------------------------------------------------------------- runtime events


def _type_name(tp: Any) -> str:
    text = typing.get_args(tp)[0] if typing.get_origin(tp) in (typing.NotRequired, typing.Required) else tp
    name = getattr(text, "__name__", None)
    if name and not typing.get_args(text):
        return str(name)
    return re.sub(r"\b(typing|builtins|goondan\._api_types)\.", "", str(text))


def events_page() -> str:
    from goondan import _api_types
    from goondan.extensions import RUNTIME_EVENT_TYPES

    out = [
        "# Runtime events",
        "",
        "Generated at build time from the typed records in `goondan._api_types`. Each event is appended to",
        "the instance's `runtime-events.jsonl`, shown by `gdn logs` and Studio, exported as OpenTelemetry",
        "spans, and delivered to extensions that subscribe with `api.events.on(type, handler)`",
        f"(the engine emits: {', '.join(f'`{t}`' for t in RUNTIME_EVENT_TYPES)}).",
        "",
    ]
    for name in sorted(vars(_api_types)):
        cls = getattr(_api_types, name)
        if not (isinstance(cls, type) and issubclass(cls, dict) and hasattr(cls, "__annotations__")):
            continue
        hints = typing.get_type_hints(cls, include_extras=True)
        etype = hints.get("type")
        if etype is None or typing.get_origin(etype) is not typing.Literal:
            continue
        kind = typing.get_args(etype)[0]
        optional = getattr(cls, "__optional_keys__", frozenset())
        out += [f"## `{kind}`", "", (cls.__doc__ or "").strip() if cls.__doc__ != dict.__doc__ else "", ""]
        out += ["| field | type | always present |", "|---|---|---|"]
        for field, tp in hints.items():
            out.append(f"| `{field}` | {_cell(_type_name(tp))} | {'' if field in optional else 'yes'} |")
        out.append("")
    return "\n".join(out)


# ---------------------------------------------------------------- error pages


def error_pages() -> dict[str, str]:
    """One page per documented code: its row of docs/errors.md and the section it belongs to."""
    pages: dict[str, str] = {}
    section = ""
    for line in (ROOT / "docs" / "errors.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
            continue
        m = re.match(r"\|([^|]*)\|(.*)\|\s*$", line)
        codes = re.findall(r"`([A-Z][A-Z0-9_]+)`", m.group(1)) if m else []
        for code in codes:
            meaning = m.group(2).strip() if m else ""
            pages[code] = "\n".join(
                [
                    f"# `{code}`",
                    "",
                    f"**{section}**",
                    "",
                    meaning,
                    "",
                    "The error message names what was wrong and, where Goondan can tell, a `suggestion:` line says",
                    "what to do. See [all error codes](../errors.md) for the neighbouring codes of this area.",
                    "",
                ]
            )
    return pages


# ---------------------------------------------------------------- mkdocs entry point


def on_files(files: Files, config: Any) -> Files:
    generated = {
        "reference/resources.md": resources_page(),
        "reference/builtins.md": builtins_page(),
        "reference/cli.md": cli_page(),
        "reference/events.md": events_page(),
    }
    for code, text in error_pages().items():
        generated[f"errors/{code}.md"] = text
    for uri, content in generated.items():
        files.append(File.generated(config, uri, content=content))
    return files
