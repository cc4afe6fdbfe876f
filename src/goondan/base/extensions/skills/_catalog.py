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


def _front_matter(text: str) -> tuple[dict[str, object], str, str | None]:
    """``(meta, body, problem)``. A front matter that is not a YAML mapping is ignored (the skill is
    still listed, under its directory name) but named in ``problem``, so the author learns why the
    name and description they wrote are not the ones the agent sees."""
    if not text.startswith("---"):
        return {}, text, None
    end = text.find("\n---", 3)
    if end < 0:
        return {}, text, "the front matter has no closing '---' line"
    rest = text[end + 4 :]
    try:
        data = yaml.safe_load(text[3:end])
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        reason = getattr(exc, "problem", None) or type(exc).__name__
        return {}, rest, f"the front matter is not valid YAML{where}: {reason}"
    if data is None:
        return {}, rest, None
    if not isinstance(data, dict):
        return {}, rest, f"the front matter is a YAML {type(data).__name__}, not a mapping of name and description"
    return data, rest, None


def parse_head(text: str, dir_name: str) -> tuple[str, str]:
    """``(name, description)`` from the beginning of a ``SKILL.md``."""
    name, description, _ = parse_head_checked(text, dir_name)
    return name, description


def parse_head_checked(text: str, dir_name: str) -> tuple[str, str, list[str]]:
    """``(name, description, problems)``: :func:`parse_head` plus what in the file was ignored."""
    meta, body, problem = _front_matter(text)
    problems = [problem] if problem else []
    name = meta.get("name")
    description = meta.get("description")
    if name is not None and not (isinstance(name, str) and _NAME.match(name)):
        problems.append(f"name {name!r} is not a plain identifier ([A-Za-z0-9._-]); the directory name is used")
    if not isinstance(description, str) or not description.strip():
        description = next((line.strip() for line in body.splitlines() if line.strip()), "")
        description = description.lstrip("#").strip()
    description = " ".join(description.split()) or f"Skill: {dir_name}"
    if len(description) > _MAX_DESCRIPTION:
        description = description[: _MAX_DESCRIPTION - 3] + "..."
    return (name if isinstance(name, str) and _NAME.match(name) else dir_name), description, problems


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


def scan(dirs: list[Path], problems: list[str] | None = None) -> dict[str, Skill]:
    """All skills under ``dirs`` by name (first directory wins); unreadable entries are skipped.
    What was skipped or ignored in a ``SKILL.md`` (unreadable, not UTF-8, a broken front matter) is
    appended to ``problems`` as ``<path>: <what>``: a skill that silently vanished or lost its
    description would otherwise leave its author guessing."""
    found: dict[str, Skill] = {}
    notes: list[str] = [] if problems is None else problems
    for root in dirs:
        try:
            children = sorted(p for p in root.iterdir() if p.is_dir())
        except OSError:
            continue
        for child in children:
            skill_md = child / SKILL_FILE
            try:
                with skill_md.open("rb") as fh:
                    raw = fh.read(_HEAD_BYTES)
            except FileNotFoundError:
                continue  # a directory without SKILL.md is not a skill
            except OSError as exc:
                notes.append(f"{skill_md}: not read ({exc.strerror or type(exc).__name__}); the skill is not listed")
                continue
            head = raw.decode("utf-8", errors="replace")
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                # a multi-byte character cut by the read limit is not the file's fault
                if not (len(raw) == _HEAD_BYTES and exc.start >= len(raw) - 3):
                    notes.append(f"{skill_md}: not valid UTF-8 (byte {exc.start}); shown with U+FFFD in its place")
            name, description, found_problems = parse_head_checked(head, child.name)
            notes.extend(f"{skill_md}: {p}" for p in found_problems)
            if name not in found:
                found[name] = Skill(name, description, child.resolve(), skill_md.resolve())
    return found


def read_skill(skill: Skill, limit: int) -> tuple[str, bool]:
    """The ``SKILL.md`` text, cut at ``limit`` characters; ``(text, truncated)``."""
    text = skill.path.read_text(encoding="utf-8", errors="replace")
    if len(text) <= limit:
        return text, False
    return text[:limit] + f"\n... [truncated: {len(text) - limit} more characters]", True
