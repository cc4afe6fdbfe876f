"""Checks of a built-in extension's config that its ``CONFIG_SCHEMA`` cannot express.

A schema says that ``message-compaction``'s ``summaryModel.options.entry`` is a string; only the
bundle knows whether the file is there. The extension builds its summary model when compaction first
runs, which may be hours into a conversation, so a missing file is found by ``gdn validate`` and by
``gdn run``'s load (which runs these checks too) instead. Paths resolve against the agent's bundle
root, as the extension resolves them (``ctx.runtime.agent.bundle_root``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from goondan.errors import GoondanError

from ._paths import PathProblem, resolve_inside

COMPACTION = "message-compaction"


@dataclass(frozen=True, slots=True)
class ConfigProblem:
    """One problem of an extension config; ``field`` is its path under the config."""

    field: str
    code: str
    message: str
    suggestion: str | None = None
    severity: str = "error"


def builtin_config_problems(name: str, config: Mapping[str, Any], root: Path) -> list[ConfigProblem]:
    """The problems of the config an agent gives the built-in extension ``name``."""
    if name != COMPACTION:
        return []
    return _summary_model_problems(config.get("summaryModel"), root) + _retain_problems(config)


def _summary_model_problems(model: Any, root: Path) -> list[ConfigProblem]:
    if not isinstance(model, Mapping):
        return []  # absent, or reported by the schema
    provider, options = model.get("provider"), model.get("options")
    if options is not None and not isinstance(options, Mapping):
        return []  # reported by the schema
    options = dict(options or {})
    if provider == "python":
        entry = options.get("entry")
        if not isinstance(entry, str):
            return [
                ConfigProblem(
                    "summaryModel.options",
                    "E_CONFIG_SCHEMA_INVALID",
                    "summaryModel with provider python needs options.entry, the module that writes the summary",
                    "add options: {entry: ./summarizer.py} (a module with def generate(request): ...)",
                )
            ]
        try:
            path = resolve_inside(root, entry, python=True, what="summaryModel.options.entry")
        except PathProblem as exc:
            return [ConfigProblem("summaryModel.options.entry", exc.code, exc.message, exc.suggestion)]
        return _summary_module_problems(path, entry)
    elif isinstance(provider, str):
        from goondan.models import check_model_options

        try:
            check_model_options(provider, options, root)
        except GoondanError as exc:
            return [ConfigProblem("summaryModel.options", exc.code, f"summaryModel: {exc.message}", exc.suggestion)]
    return []


def _summary_module_problems(path: Path, entry: str) -> list[ConfigProblem]:
    """What the file's syntax tree tells (never run): it compiles and defines ``generate``, as a
    python Model's entry is checked. Cheap enough for the run's load too, where nothing else would
    look at this file before compaction first runs."""
    from ._code import REQUIRED_ATTRIBUTE, inspect_entry

    module = inspect_entry(path)
    field = "summaryModel.options.entry"
    if module.problem is not None:
        where = f"{entry}:{module.problem.line}" if module.problem.line else entry
        return [
            ConfigProblem(
                field,
                "E_CONFIG_ENTRY_SYNTAX",
                f"summaryModel: {where} does not compile: {module.problem.message}",
                f"fix the Python file; `python -m py_compile {entry}` shows the same error",
            )
        ]
    attribute = REQUIRED_ATTRIBUTE["Model"]
    if module.opaque or attribute in module.names:
        return []
    return [
        ConfigProblem(
            field,
            "E_CONFIG_ENTRY_EXPORT_MISSING",
            f"summaryModel: {entry} defines no module-level `{attribute}`",
            f"add `def {attribute}(request): ...` to {entry}",
        )
    ]


def _retain_problems(config: Mapping[str, Any]) -> list[ConfigProblem]:
    from goondan.base.extensions._compaction_plan import Limits, tail_never_fits, tail_never_fits_message
    from goondan.base.extensions.message_compaction import DEFAULTS

    cfg = {**DEFAULTS, **config}
    numbers = [cfg.get(k) for k in ("maxMessages", "retainLastMessages")]
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in numbers) or not isinstance(
        cfg.get("appendSummary"), bool
    ):
        return []  # reported by the schema (or a value from the environment)
    if cfg["maxMessages"] < 1 or cfg["retainLastMessages"] < 0:
        return []  # out of range: the schema's error; a warning would suggest a negative retainLastMessages
    limits = Limits(int(cfg["maxMessages"]), 1, int(cfg["retainLastMessages"]), bool(cfg["appendSummary"]))
    if not tail_never_fits(limits):
        return []
    return [
        ConfigProblem(
            "retainLastMessages" if "retainLastMessages" in config else "maxMessages",
            "E_CONFIG_EXTENSION_CONFIG_INVALID",
            tail_never_fits_message(limits),
            f"make retainLastMessages at most {limits.max_messages - (1 if limits.summary_slot else 0)}, "
            "or raise maxMessages",
            severity="warning",
        )
    ]
