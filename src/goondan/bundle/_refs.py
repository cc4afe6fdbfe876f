"""ObjectRef syntax: ``"Kind/name"`` or ``{kind, name, package?, apiVersion?}``.

Parsing is kept free of pydantic so the runtime can resolve refs it receives at run time (for
example from ``Bundle.resolve_ref``) with exactly the rules the loader applied to the YAML.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_REF_KEYS = frozenset({"kind", "name", "package", "apiVersion"})


class RefSyntaxError(ValueError):
    """A value is not an ObjectRefLike. ``subpath`` names the offending key inside the value."""

    def __init__(self, message: str, subpath: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.subpath = subpath


@dataclass(frozen=True)
class ObjectRef:
    """A parsed reference; ``package`` None means "the referencing resource's own package"."""

    kind: str
    name: str
    package: str | None = None
    api_version: str | None = None

    @property
    def key(self) -> str:
        return f"{self.kind}/{self.name}"

    def to_dict(self) -> dict[str, str]:
        """The object form, as YAML would spell it (used when specs are dumped)."""
        out = {"kind": self.kind, "name": self.name}
        if self.package is not None:
            out["package"] = self.package
        if self.api_version is not None:
            out["apiVersion"] = self.api_version
        return out

    def __str__(self) -> str:
        if self.package:
            return f"{self.key} (package {self.package})"
        return self.key


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def parse_ref(value: Any) -> ObjectRef:
    """Parse an ObjectRefLike (string or mapping); raise :class:`RefSyntaxError` otherwise."""
    if isinstance(value, str):
        parts = value.split("/")
        if len(parts) != 2:
            extra = " (multiple slashes)" if len(parts) > 2 else ""
            raise RefSyntaxError(f"invalid ObjectRef string {value!r}{extra}: expected 'Kind/name'")
        kind, name = parts
        if not kind or not name:
            raise RefSyntaxError(f"invalid ObjectRef string {value!r}: expected 'Kind/name'")
        return ObjectRef(kind, name)
    if isinstance(value, Mapping):
        unknown = [k for k in value if k not in _REF_KEYS]
        if unknown:
            raise RefSyntaxError(
                f"unknown key {unknown[0]!r} in ObjectRef (allowed: kind, name, package, apiVersion)",
                str(unknown[0]),
            )
        for key in ("kind", "name"):
            item = value.get(key)
            if not isinstance(item, str) or not item:
                raise RefSyntaxError(f"ObjectRef needs a non-empty string {key!r}", key)
        for key in ("package", "apiVersion"):
            item = value.get(key)
            if item is not None and (not isinstance(item, str) or not item):
                raise RefSyntaxError(f"ObjectRef {key!r} must be a non-empty string", key)
        return ObjectRef(value["kind"], value["name"], value.get("package"), value.get("apiVersion"))
    raise RefSyntaxError(f"invalid ObjectRef {_short(value)}: expected 'Kind/name' or {{kind, name, package?}}")


def parse_ref_item(value: Any, *, allow_config: bool = False) -> ObjectRef:
    """A list item of ``tools``/``agents``: a RefItem ``{ref: ...}`` or a bare ObjectRefLike.

    ``allow_config`` admits ``config`` next to ``ref`` (``tools`` items: per-agent Tool config).
    """
    if isinstance(value, Mapping) and "ref" in value:
        unknown = [k for k in value if k != "ref" and not (allow_config and k == "config")]
        if unknown:
            raise RefSyntaxError(f"unknown key {unknown[0]!r} next to 'ref'", str(unknown[0]))
        try:
            return parse_ref(value["ref"])
        except RefSyntaxError as exc:
            raise RefSyntaxError(exc.message, _sub("ref", exc.subpath)) from None
    return parse_ref(value)


def _sub(head: str, tail: str) -> str:
    return f"{head}.{tail}" if tail else head
