"""Which bundle a workspace belongs to: the workspace id and the ``workspace.json`` record.

A workspace holds the conversations of one swarm of one bundle. Its id used to be the swarm's name
alone, and since the quickstart and every template call their swarm ``default``, unrelated bundles
continued each other's conversations (and ``gdn instance delete default`` deleted all of them). The id
now derives from the bundle's identity - its ``Package`` name when it declares one (a deliberate,
portable identity: moving the directory keeps the history), else its resolved directory - plus the
swarm name and the swarm's ``instanceKey`` when set.

The id stays readable and filesystem safe: ``<bundle slug>-<swarm slug>-<hash>``, where the slugs
follow :func:`~goondan.storage.workspace_id` rules (cut short) and the 10-hex-digit hash covers the
full identity, so two bundles whose names slug alike still get distinct workspaces.

``workspace.json`` (``{bundle, package, swarm, instanceKey, workspaceId}``) is written beside
``instances/`` when the runtime first opens an instance, so that ``gdn instance list`` can say which
bundle a workspace belongs to, and ``gdn instance`` commands can find the current bundle's workspaces.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ._paths import workspace_id

WORKSPACE_FILE = "workspace.json"

_BUNDLE_SLUG_LEN = 40
_SWARM_SLUG_LEN = 60
_HASH_LEN = 10


def _slug(text: str, limit: int) -> str:
    slug = workspace_id(text)
    return slug[:limit].rstrip("-.") or "x"


@dataclass(frozen=True, slots=True)
class WorkspaceIdentity:
    """The identity of one swarm of one bundle, and the workspace id derived from it."""

    bundle: str
    package: str | None
    swarm: str
    instance_key: str | None
    workspace_id: str

    def record(self) -> dict[str, Any]:
        return {
            "workspaceId": self.workspace_id,
            "bundle": self.bundle,
            "package": self.package,
            "swarm": self.swarm,
            "instanceKey": self.instance_key,
        }


def workspace_identity(
    *,
    bundle_dir: str | os.PathLike[str],
    package: str | None,
    swarm: str,
    instance_key: str | None = None,
) -> WorkspaceIdentity:
    """The identity (and workspace id) of ``swarm`` in the bundle at ``bundle_dir``.

    With a ``package`` name the directory does not take part (the same package in another directory
    is the same bundle on purpose); without one the resolved directory does.
    """
    directory = str(Path(bundle_dir).resolve())
    owner = f"package:{package}" if package else f"dir:{directory}"
    full = "\0".join((owner, f"swarm:{swarm}", f"key:{instance_key or ''}"))
    digest = hashlib.sha256(full.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_LEN]
    readable = package.rsplit("/", 1)[-1] if package else (Path(directory).name or "bundle")
    wid = "-".join((_slug(readable, _BUNDLE_SLUG_LEN), _slug(instance_key or swarm, _SWARM_SLUG_LEN), digest))
    return WorkspaceIdentity(directory, package or None, swarm, instance_key or None, wid)


def bundle_workspace_identity(bundle: Any, swarm: Any) -> WorkspaceIdentity:
    """The identity of ``swarm`` (a Swarm resource) of a loaded bundle."""
    return workspace_identity(
        bundle_dir=bundle.root,
        package=getattr(bundle, "package_name", None),
        swarm=swarm.name,
        instance_key=swarm.spec.instance_key,
    )


def read_workspace_record(workspace_dir: Path) -> dict[str, Any] | None:
    """``workspace.json`` of a workspace (``None`` when missing, e.g. written by an older version)."""
    try:
        value = orjson.loads((workspace_dir / WORKSPACE_FILE).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None


__all__ = [
    "WORKSPACE_FILE",
    "WorkspaceIdentity",
    "bundle_workspace_identity",
    "read_workspace_record",
    "workspace_identity",
]
