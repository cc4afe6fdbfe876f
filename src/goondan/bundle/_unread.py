"""YAML files of a bundle that the loader does not read (not ``goondan.yaml`` and not named after a
kind: ``researcher.yaml``, ``team-swarm.yaml``), looked into only on an error path: a reference "not
found", or "no Swarm", while the user can see the resource in their editor."""

from __future__ import annotations

from pathlib import Path

from ._yaml import MAX_FILE_BYTES, YamlProblem, parse_documents

#: unread YAML files looked into for a missing resource
MAX_UNREAD = 50


def unread_definition(files: list[Path], kind: str, name: str | None) -> Path | None:
    """The first of ``files`` with a document of ``kind`` (named ``name``, unless None), or None."""
    for file in files:
        try:
            if file.stat().st_size > MAX_FILE_BYTES:
                continue
            data = file.read_bytes()
            if kind.encode() not in data or (name is not None and name.encode() not in data):
                continue
            docs = [d.value for d in parse_documents(data)]  # with the loader's limits (aliases, depth)
        except (OSError, YamlProblem):
            continue
        for doc in docs:
            if not isinstance(doc, dict) or doc.get("kind") != kind:
                continue
            metadata = doc.get("metadata")
            if name is None or (isinstance(metadata, dict) and metadata.get("name") == name):
                return file
    return None


def not_read(shown: str, kind: str) -> str:
    """Why a file that defines a resource does not count, and what to do."""
    return (
        f"{shown}, which the bundle does not read: it reads goondan.yaml and files named after a kind "
        "(agents.yaml, tools.yaml, models.yaml, swarm.yaml, resources.yaml, ...); rename "
        f"{shown} (e.g. to {kind.lower()}s.yaml in the same directory) or move its documents into one of those"
    )


__all__ = ["MAX_UNREAD", "not_read", "unread_definition"]
