"""The loaded bundle: every resource in scope, with lookups that follow package scoping."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import EllipsisType
from typing import Any

from goondan.errors import ConfigError

from ._issues import did_you_mean
from ._plan import AgentPlan, build_plan
from ._refs import ObjectRef, RefSyntaxError, parse_ref
from ._resource import Resource
from ._schemas import SwarmSpec

BASE_PACKAGE = "@goondan/base"
ALL_PACKAGES = "*"

ScopeKey = tuple[str | None, str, str]  # (package scope, kind, name)


def ref_scope(ref: ObjectRef, owner_scope: str | None, local_package: str | None) -> str | None:
    """Package scope a ref points into: its own ``package``, else the referencing resource's scope."""
    if ref.package is None:
        return owner_scope
    if local_package is not None and ref.package == local_package:
        return None
    return ref.package


class Bundle:
    """Resources of the local bundle, of ``@goondan/base`` and of installed dependency packages."""

    def __init__(
        self,
        root: Path,
        package_name: str | None,
        resources: list[Resource],
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.root = root
        self.package_name = package_name
        self.resources = resources
        self.env: Mapping[str, str] = env if env is not None else {}
        self._index: dict[ScopeKey, Resource] = {}
        for res in resources:
            self._index.setdefault((res.package, res.kind, res.name), res)
        self.packages: set[str | None] = {None, *(r.package for r in resources)}
        self.unread_yaml: list[Path] = []  # the loader's: YAML files it did not read (see _unread)

    def __repr__(self) -> str:
        return f"<Bundle {self.root} resources={len(self.resources)}>"

    def _scope(self, package: str | None) -> str | None:
        return None if package is not None and package == self.package_name else package

    def get(self, kind: str, name: str, package: str | None = None) -> Resource | None:
        """Look up ``kind/name`` in one package scope (None: the local bundle)."""
        return self._index.get((self._scope(package), kind, name))

    def of_kind(self, kind: str, *, package: str | EllipsisType | None = ...) -> list[Resource]:
        """Resources of ``kind`` in the local bundle (default or None), one package, or ``"*"`` (all)."""
        if package is ALL_PACKAGES:
            return [r for r in self.resources if r.kind == kind]
        scope = None if package is ... or package is None else self._scope(package)
        return [r for r in self.resources if r.kind == kind and r.package == scope]

    def select_swarm(self, name: str | None = None) -> Resource:
        """The named swarm, else ``default``, else the only one; local swarms only."""
        swarms = self.of_kind("Swarm")
        names = [s.name for s in swarms]
        listing = ", ".join(names) if names else "none"
        if name is not None:
            found = self.get("Swarm", name)
            if found is None:
                hint = did_you_mean(name, names)
                raise ConfigError(
                    "E_CONFIG_SWARM_NOT_FOUND",
                    f"no Swarm named {name!r} in the bundle",
                    suggestion=(hint + " " if hint else "") + f"available swarms: {listing}",
                )
            return found
        default = self.get("Swarm", "default")
        if default is not None:
            return default
        if len(swarms) == 1:
            return swarms[0]
        if not swarms:
            from ._unread import not_read, unread_definition

            unread = unread_definition(self.unread_yaml, "Swarm", None)
            shown = unread.relative_to(self.root).as_posix() if unread is not None else ""
            raise ConfigError(
                "E_CONFIG_SWARM_NOT_FOUND",
                "the bundle defines no Swarm",
                suggestion="add a Swarm resource (kind: Swarm) listing your agents"
                if unread is None
                else "its Swarm is in " + not_read(shown, "Swarm"),
            )
        raise ConfigError(
            "E_CONFIG_SWARM_AMBIGUOUS",
            f"the bundle has {len(swarms)} swarms and none is named 'default'",
            suggestion=f"choose one with --swarm NAME; available swarms: {listing}",
        )

    def resolve_ref(
        self, ref: str | Mapping[str, Any] | ObjectRef, owner: Resource, expected_kind: str | None = None
    ) -> Resource:
        """Resolve a ref written in ``owner``: no ``package`` means ``owner``'s own package scope."""
        if not isinstance(ref, ObjectRef):
            try:
                ref = parse_ref(ref)
            except RefSyntaxError as exc:
                raise ConfigError("E_CONFIG_INVALID_REF", f"{owner.key}: {exc.message}") from None
        if expected_kind is not None and ref.kind != expected_kind:
            raise ConfigError(
                "E_CONFIG_INVALID_REF",
                f"{owner.key}: expected a reference to a {expected_kind}, got {ref.key}",
            )
        scope = ref_scope(ref, owner.package, self.package_name)
        found = self._index.get((scope, ref.kind, ref.name))
        if found is None:
            candidates = [n for (s, k, n) in self._index if s == scope and k == ref.kind]
            hint = did_you_mean(ref.name, candidates)
            where = f" in package {scope}" if scope else ""
            raise ConfigError(
                "E_CONFIG_REF_NOT_FOUND",
                f"{owner.key} references {ref.key}{where}, which does not exist",
                suggestion=hint,
            )
        return found

    def agent_plan(self, agent_name: str, swarm: Resource | None = None) -> AgentPlan:
        """Resolve everything agent ``agent_name`` needs; with a swarm, the agent must be one of its."""
        agent: Resource | None = None
        if swarm is not None and isinstance(swarm.spec, SwarmSpec):
            members = [self.resolve_ref(r, swarm, "Agent") for r in swarm.spec.agents]
            agent = next((a for a in members if a.name == agent_name), None)
            if agent is None:
                raise ConfigError(
                    "E_CONFIG_REF_NOT_FOUND",
                    f"agent {agent_name!r} is not part of Swarm/{swarm.name}",
                    suggestion=f"agents of this swarm: {', '.join(a.name for a in members)}",
                )
        else:
            agent = self.get("Agent", agent_name)
            if agent is None:
                names = [a.name for a in self.of_kind("Agent")]
                raise ConfigError(
                    "E_CONFIG_REF_NOT_FOUND",
                    f"no Agent named {agent_name!r} in the bundle",
                    suggestion=did_you_mean(agent_name, names),
                )
        return build_plan(self, agent, swarm)
