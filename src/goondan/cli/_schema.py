"""``gdn schema``: a JSON Schema of goondan.yaml resources, generated from the bundle's pydantic specs.

Point an editor at it (e.g. ``# yaml-language-server: $schema=./goondan.schema.json``) to get
completion and checking of every document. Fields that the loader parses with custom validators (refs,
ValueSources, extension items, scalar match values) get hand-written schemas of their accepted forms.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Literal

from ._output import EXIT_OK, EXIT_USAGE, CliError

_REF_OBJECT = {
    "type": "object",
    "description": "A reference written as a mapping.",
    "properties": {
        "kind": {"type": "string", "description": "Kind of the referenced resource, e.g. Tool."},
        "name": {"type": "string", "description": "metadata.name of the referenced resource."},
        "package": {"type": "string", "description": 'Package holding it, e.g. "@goondan/base" (default: this one).'},
    },
    "required": ["kind", "name"],
    "additionalProperties": False,
}
_REF = {
    "anyOf": [
        {"type": "string", "pattern": "^[A-Z][A-Za-z]*/[^/]+$", "description": "Kind/name, e.g. Tool/calc."},
        _REF_OBJECT,
    ]
}
_REF_ITEM = {
    "anyOf": [
        *_REF["anyOf"],
        {
            "type": "object",
            "properties": {"ref": {**_REF, "description": "The referenced resource."}},
            "required": ["ref"],
            "additionalProperties": False,
        },
    ]
}
_VALUE_SOURCE = {
    "oneOf": [
        {
            "type": "object",
            "properties": {"value": {"type": "string", "description": "The value itself."}},
            "required": ["value"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {
                "valueFrom": {
                    "description": "Where the value comes from: an environment variable or a secret.",
                    "oneOf": [
                        {
                            "type": "object",
                            "properties": {
                                "env": {
                                    "type": "string",
                                    "minLength": 1,
                                    "description": "Environment variable to read (also from .env files).",
                                }
                            },
                            "required": ["env"],
                            "additionalProperties": False,
                        },
                        {
                            "type": "object",
                            "properties": {
                                "secretRef": {
                                    "type": "object",
                                    "description": "Read GOONDAN_SECRET_<NAME>_<KEY> from the environment.",
                                    "properties": {
                                        "ref": {
                                            "type": "string",
                                            "pattern": "^Secret/[^/]+$",
                                            "description": "Secret/<name>.",
                                        },
                                        "key": {"type": "string", "minLength": 1, "description": "Key in the secret."},
                                    },
                                    "required": ["ref", "key"],
                                    "additionalProperties": False,
                                }
                            },
                            "required": ["secretRef"],
                            "additionalProperties": False,
                        },
                    ],
                }
            },
            "required": ["valueFrom"],
            "additionalProperties": False,
        },
    ]
}
_EXTENSION_ITEM = {
    "anyOf": [
        *_REF["anyOf"],
        {
            "type": "object",
            "properties": {
                "ref": {**_REF, "description": "The Extension."},
                "config": {"type": "object", "description": "Shallow-merged over the Extension's spec.config."},
            },
            "required": ["ref"],
            "additionalProperties": False,
        },
    ]
}
_CUSTOM: dict[str, dict[str, Any]] = {
    "_ref": _REF,
    "_ref_item": _REF_ITEM,
    "_value_source": _VALUE_SOURCE,
    "_extension_item": _EXTENSION_ITEM,
    "_scalar": {"type": ["string", "number", "boolean"]},
}


def build_schema() -> dict[str, Any]:
    from pydantic import BaseModel
    from pydantic.json_schema import GenerateJsonSchema, models_json_schema

    from ..bundle._loader import API_VERSION
    from ..bundle._schemas import SPEC_MODELS

    class Generator(GenerateJsonSchema):
        def function_plain_schema(self, schema: Any) -> Any:
            function = (schema.get("function") or {}).get("function")
            custom = _CUSTOM.get(getattr(function, "__name__", ""))
            return json.loads(json.dumps(custom)) if custom is not None else super().function_plain_schema(schema)

    models: list[tuple[type[BaseModel], Literal["validation"]]] = [
        (model, "validation") for model in SPEC_MODELS.values()
    ]
    refs, top = models_json_schema(models, by_alias=True, schema_generator=Generator, ref_template="#/$defs/{model}")
    defs = dict(top.get("$defs", {}))
    branches = []
    for kind, model in SPEC_MODELS.items():
        spec_ref = refs[(model, "validation")]
        branches.append(
            {
                "if": {"properties": {"kind": {"const": kind, "description": kind}}, "required": ["kind"]},
                "then": {
                    "properties": {"spec": {**spec_ref, "description": f"Specification of the {kind}."}},
                    **({} if kind == "Package" else {"required": ["spec"]}),
                },
            }
        )
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://goondan.ai/schema/goondan.json",
        "title": "Goondan resource (one YAML document of goondan.yaml)",
        "type": "object",
        "properties": {
            "apiVersion": {"const": API_VERSION, "description": "Resource format version."},
            "kind": {"enum": list(SPEC_MODELS), "description": "Kind of resource this document defines."},
            "metadata": {
                "type": "object",
                "description": "Identity of the resource.",
                "properties": {
                    "name": {
                        "type": "string",
                        "minLength": 1,
                        "description": "Unique per kind: lowercase letters, digits and '-' (@scope/name for Package).",
                    },
                    "labels": {
                        "type": "object",
                        "additionalProperties": {"type": "string"},
                        "description": "Free-form string labels.",
                    },
                    "annotations": {
                        "type": "object",
                        "additionalProperties": {"type": "string"},
                        "description": "Free-form string annotations.",
                    },
                },
                "required": ["name"],
                "additionalProperties": False,
            },
            "spec": {"type": "object", "description": "The kind's specification (see the kind's definition)."},
        },
        "required": ["apiVersion", "kind", "metadata"],
        "additionalProperties": False,
        "allOf": branches,
        "$defs": defs,
    }


def cmd_schema(args: argparse.Namespace) -> int:
    schema = build_schema()
    if args.kind:
        from ..bundle._schemas import SPEC_MODELS

        name = SPEC_MODELS[args.kind].__name__
        schema = {"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": f"#/$defs/{name}"}
    text = json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
    if args.output:
        try:
            with open(args.output, "w", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as exc:  # a missing directory, a directory given as FILE: the user's path
            raise CliError(
                "E_INVALID_ARGUMENT",
                f"cannot write the schema to {args.output}: {exc.strerror or exc}",
                exit_code=EXIT_USAGE,
                suggestion="Give -o a file path in a directory that exists (e.g. -o goondan.schema.json).",
            ) from None
        if not args.quiet:
            sys.stderr.write(f"wrote {args.output}\n")
    else:
        sys.stdout.write(text)
    return EXIT_OK
