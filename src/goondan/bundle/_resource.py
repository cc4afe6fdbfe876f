"""The loaded form of one YAML document."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from goondan.errors import ConfigError, ConfigIssue

from ._issues import parent_path
from ._paths import PathProblem, resolve_inside
from ._schemas import ModelSpec, Spec

Position = tuple[int, int]


@dataclass(eq=False)
class Resource:
    """A validated resource. ``package`` is None for the local bundle, else the package name."""

    kind: str
    name: str
    package: str | None
    api_version: str
    metadata: dict[str, Any]
    spec: Spec
    raw: dict[str, Any]
    root: Path
    file: str
    doc_index: int
    positions: dict[str, Position] = field(default_factory=dict, repr=False)

    @property
    def key(self) -> str:
        return f"{self.kind}/{self.name}"

    def __repr__(self) -> str:
        scope = f" package={self.package}" if self.package else ""
        return f"<Resource {self.key}{scope} at {self.file}#{self.doc_index}>"

    def location(self, field_path: str) -> tuple[int, int] | None:
        """1-based ``(line, column)`` of ``field_path`` or, failing that, of its nearest parent."""
        path: str | None = field_path
        while path is not None:
            if path in self.positions:
                return self.positions[path]
            path = parent_path(path)
        return None

    def issue_path(self, field_path: str) -> str:
        return f"{self.file}#{self.doc_index}" + (f".{field_path}" if field_path else "")

    def issue(
        self,
        code: str,
        message: str,
        field_path: str,
        suggestion: str | None = None,
        severity: str = "error",
    ) -> ConfigIssue:
        line, column = self.location(field_path) or (None, None)
        return ConfigIssue(
            code,
            message,
            path=self.issue_path(field_path),
            file=self.file,
            line=line,
            column=column,
            suggestion=suggestion,
            severity=severity,
        )

    def error(self, code: str, message: str, field_path: str, suggestion: str | None = None) -> ConfigError:
        return ConfigError.from_issue(self.issue(code, message, field_path, suggestion))

    def entry_field(self) -> str | None:
        """Field path of the Python entry this resource names, if it has one."""
        if self.kind in ("Tool", "Extension", "Connector"):
            return "spec.entry"
        if isinstance(self.spec, ModelSpec) and self.spec.provider == "python":
            return "spec.options.entry"
        return None

    def resolve_file(self, relative: str, field_path: str, *, python: bool) -> Path:
        """Resolve a path field against :attr:`root`; raise ConfigError pointing at ``field_path``."""
        what = field_path.rsplit(".", 1)[-1]
        try:
            return resolve_inside(self.root, relative, python=python, what=what)
        except PathProblem as exc:
            raise self.error(exc.code, f"{self.key}: {exc.message}", field_path, exc.suggestion) from None

    def entry_path(self) -> Path:
        """Absolute, resolved path of this resource's Python entry, verified to be inside :attr:`root`."""
        field_path = self.entry_field()
        if field_path is None:
            raise self.error("E_CONFIG_SCHEMA_INVALID", f"{self.key} has no entry", "spec")
        value: Any = self.raw.get("spec", {})
        for part in field_path.split(".")[1:]:
            value = value.get(part) if isinstance(value, dict) else None
        if not isinstance(value, str):
            raise self.error("E_CONFIG_SCHEMA_INVALID", f"{self.key} has no entry", field_path)
        return self.resolve_file(value, field_path, python=True)
