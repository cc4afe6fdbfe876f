"""Finding skills: every direct sub-directory of a configured skill directory that holds a
``SKILL.md`` is one skill.

``SKILL.md`` may start with a YAML front matter (``---`` / ``name:`` / ``description:`` / ``---``,
the Agent Skills convention); without one, the description is the first non-empty line with its
leading ``#`` removed. The skill's name is the front matter's ``name`` when it is a
plain identifier, else the directory name. When two directories provide the same name, the one
listed first in ``repoSkillDirs`` wins, so a project can override a shared skill.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

SKILL_FILE = "SKILL.md"
_MAX_DESCRIPTION = 300
_HEAD_BYTES = 8192
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True, slots=True)
class Skill:
    name: str
    description: str
    dir: Path
    path: Path

    def summary(self) -> dict[str, str]:
        return {"name": self.name, "description": self.description, "dir": str(self.dir)}


def _front_matter(text: str) -> tuple[dict[str, object], str]:
    if not text.startswith("---"):
        return {}, text
    end = text.find("\n---", 3)
    if end < 0:
        return {}, text
    try:
        data = yaml.safe_load(text[3:end])
    except yaml.YAMLError:
        return {}, text
    rest = text[end + 4 :]
    return (data if isinstance(data, dict) else {}), rest


def parse_head(text: str, dir_name: str) -> tuple[str, str]:
    """``(name, description)`` from the beginning of a ``SKILL.md``."""
    meta, body = _front_matter(text)
    name = meta.get("name")
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        description = next((line.strip() for line in body.splitlines() if line.strip()), "")
        description = description.lstrip("#").strip()
    description = " ".join(description.split()) or f"Skill: {dir_name}"
    if len(description) > _MAX_DESCRIPTION:
        description = description[: _MAX_DESCRIPTION - 3] + "..."
    return (name if isinstance(name, str) and _NAME.match(name) else dir_name), description


def resolve_dirs(dirs: list[str], base: Path | None) -> list[Path]:
    """Configured directories as absolute paths: ``~`` expanded, relative ones against ``base``
    (the bundle root); relative ones are skipped while ``base`` is unknown."""
    out: list[Path] = []
    for entry in dirs:
        path = Path(entry).expanduser()
        if not path.is_absolute():
            if base is None:
                continue
            path = base / path
        out.append(path)
    return out


def scan(dirs: list[Path]) -> dict[str, Skill]:
    """All skills under ``dirs`` by name (first directory wins); unreadable entries are skipped."""
    found: dict[str, Skill] = {}
    for root in dirs:
        try:
            children = sorted(p for p in root.iterdir() if p.is_dir())
        except OSError:
            continue
        for child in children:
            skill_md = child / SKILL_FILE
            try:
                with skill_md.open("r", encoding="utf-8", errors="replace") as fh:
                    head = fh.read(_HEAD_BYTES)
            except OSError:
                continue
            name, description = parse_head(head, child.name)
            if name not in found:
                found[name] = Skill(name, description, child.resolve(), skill_md.resolve())
    return found


def read_skill(skill: Skill, limit: int) -> tuple[str, bool]:
    """The ``SKILL.md`` text, cut at ``limit`` characters; ``(text, truncated)``."""
    text = skill.path.read_text(encoding="utf-8", errors="replace")
    if len(text) <= limit:
        return text, False
    return text[:limit] + f"\n... [truncated: {len(text) - limit} more characters]", True
