"""The note ``gdn run`` prints when a copied bundle continues the conversations of its original.

A workspace id follows the bundle's ``Package`` name when it declares one (docs/concepts.md), on
purpose: a moved bundle keeps its history, and two checkouts of one project share it. The price is
that ``cp -r my-bot my-bot-v2`` (or a second ``gdn init`` template copied by hand) silently answers
from the first bundle's conversations. The identity rule stays; what changes is that the user is told.

``workspace.json`` records the directory of the bundle that last opened the workspace. When that
directory is another one, still holds a bundle and that bundle is still the same Package, the two
directories share the workspace right now: the note names the other one and both ways on (rename the
Package to split, nothing to keep sharing). A recorded directory that is gone is a move, said nothing
about. Only the filesystem store is looked at: it costs one small file read, and the directory test
means nothing on another machine's store.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

MANIFEST = "goondan.yaml"


def _package_of(bundle_dir: Path) -> str | None:
    """The ``Package`` name in ``bundle_dir/goondan.yaml`` (``None`` when unreadable or absent)."""
    import yaml

    try:
        docs = list(yaml.safe_load_all((bundle_dir / MANIFEST).read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == "Package":
            name = (doc.get("metadata") or {}).get("name") if isinstance(doc.get("metadata"), dict) else None
            return name if isinstance(name, str) else None
    return None


def shared_with(args: argparse.Namespace, bundle: Any, env: Mapping[str, str]) -> tuple[Path, str, str] | None:
    """``(other bundle dir, package, workspace id)`` when another existing directory with the same
    Package last used this bundle's workspace in the filesystem store; else ``None``."""
    if getattr(args, "no_persist", False) or not getattr(bundle, "package_name", None):
        return None
    from ..storage import FileStoreBackend, bundle_workspace_identity, open_store
    from ._state import state_root

    try:
        backend = open_store(getattr(args, "store", None), state_root=state_root(args, dict(env)), env=env)
    except Exception:  # a store URL problem is reported by the run itself, with its own code
        return None
    if not isinstance(backend, FileStoreBackend):
        return None
    identity = bundle_workspace_identity(bundle, bundle.select_swarm(args.swarm))
    record = backend.workspace(identity.workspace_id).record() or {}
    recorded = record.get("bundle")
    if not isinstance(recorded, str) or not recorded or identity.package is None:  # None: for mypy
        return None
    other = Path(recorded)
    try:
        if other.resolve() == Path(identity.bundle) or not (other / MANIFEST).is_file():
            return None  # the same directory, or a moved bundle: its history follows it
    except OSError:
        return None
    if _package_of(other) != identity.package:
        return None  # the other directory was renamed to another Package since
    return other, identity.package, identity.workspace_id


def warn_if_shared(args: argparse.Namespace, bundle: Any, env: Mapping[str, str]) -> None:
    """Print the note of this module's docstring on stderr (``-q`` silences it, like other notes)."""
    if getattr(args, "quiet", False):
        return
    found = shared_with(args, bundle, env)
    if found is None:
        return
    other, package, workspace = found
    here = Path(bundle.root)
    from ._init import package_name

    fresh = package_name(here.name)
    fresh = fresh if fresh != package else f"{package}-2"
    manifest = here / MANIFEST
    sys.stderr.write(
        f"warning: this bundle shares its conversations with the bundle in {other}: both are Package "
        f"{package!r} and the workspace ({workspace}) follows the Package name, so each directory "
        "continues the other's history (a copied bundle does this).\n"
        f"  to give this one its own history: change metadata.name of the Package in {manifest} "
        f"(e.g. to {fresh!r})\n"
        "  to keep sharing on purpose (two checkouts of one project): nothing to do; "
        "this note shows when the other directory ran last\n"
    )
    sys.stderr.flush()


__all__ = ["shared_with", "warn_if_shared"]
