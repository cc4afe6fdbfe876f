"""``gdn validate --fix``: the mechanical fixes, shown as a unified diff before anything is written.

Mechanical means there is exactly one right answer and no judgement involved:

- ``goondan.yml`` is renamed to ``goondan.yaml`` (the loader only reads the latter);
- a document without ``apiVersion`` gets ``apiVersion: goondan.ai/v1`` as its first line;
- a field spelled in another case or separator style than the spec's camelCase name, which is what
  Python habits produce (``entry_agent``, ``model_ref``, ``required_tools``, ``Prompt``), is renamed
  to that name, at the top level of a document and inside ``spec`` alike;
- the same for a JSON Schema keyword in a Tool's ``parameters`` or an Agent's output schema
  (``max_length``, ``additional_properties``, ``Required``): validation only warns about those (JSON
  Schema ignores unknown keywords), but the keyword meant is just as certain, and left alone the
  constraint silently does nothing.

Other warnings have no single right answer, so ``--fix`` leaves them reported: a model id missing from
the SDK's list may be newer than the SDK or a proxy's name, and its did-you-mean is a guess; a tool
handler whose parameters "look swapped" is judged by their names, and the fix is in the user's Python;
an Agent in no Swarm may belong in one or be deleted; a bundle without a Swarm needs its entry agent
chosen.

Fixes are driven by what validation reports (a rename is made only where validation says "unknown
field X, did you mean Y" and Y differs from X by case, ``_`` or ``-`` only), applied to a scratch copy
of the bundle and validated again until nothing more changes, because one fix can reveal the next
(a document without ``apiVersion`` has its spec checked only once it has one). Typos that need
judgement (``promt``) stay reported, never guessed.
"""

from __future__ import annotations

import argparse
import difflib
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._files import replace_text

_UNKNOWN = re.compile(r"unknown (?:top-level )?field '([^']+)'")
_MEAN = re.compile(r"did you mean '([^']+)'")
_SKIP = shutil.ignore_patterns(".git", ".venv", "node_modules", "__pycache__", "dist", ".env*")
MAX_ROUNDS = 6


def _same_name(a: str, b: str) -> bool:
    return a != b and a.replace("_", "").replace("-", "").lower() == b.replace("_", "").replace("-", "").lower()


@dataclass
class FixPlan:
    root: Path
    renamed: tuple[str, str] | None = None  # (old file name, new file name)
    texts: dict[str, str] = field(default_factory=dict)  # bundle-relative file -> fixed text
    notes: list[str] = field(default_factory=list)

    def diff(self) -> str:
        out: list[str] = []
        if self.renamed:
            out.append(f"rename {self.renamed[0]} -> {self.renamed[1]}\n")
        for name, new in sorted(self.texts.items()):
            old_name = self.renamed[0] if self.renamed and name == self.renamed[1] else name
            old = (self.root / old_name).read_text(encoding="utf-8")
            out.extend(
                difflib.unified_diff(
                    old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{old_name}", f"b/{name}"
                )
            )
        return "".join(line if line.endswith("\n") else line + "\n" for line in out)

    @property
    def empty(self) -> bool:
        return self.renamed is None and not self.texts

    def apply(self) -> None:
        if self.renamed:
            (self.root / self.renamed[0]).rename(self.root / self.renamed[1])
        for name, text in self.texts.items():
            replace_text(self.root / name, text)  # the user's file: never left half-written


def _has_sibling_key(lines: list[str], index: int, column: int, key: str) -> bool:
    """Whether the block mapping holding ``lines[index]`` (keys at ``column``) already has ``key``:
    renaming onto it would make a duplicate key, which stops the file from loading at all."""

    def indent(text: str) -> int:
        return len(text) - len(text.lstrip(" "))

    for step in (-1, 1):
        at = index + step
        while 0 <= at < len(lines):
            text = lines[at]
            stripped = text.strip()
            if stripped and not stripped.startswith("#"):
                if indent(text) < column or stripped == "---" or (indent(text) == column and stripped.startswith("- ")):
                    break
                if indent(text) == column and stripped.split(":", 1)[0].strip().strip("'\"") == key:
                    return True
            at += step
    return False


def _fix_issue(lines: list[str], issue: Any) -> str | None:
    """Change ``lines`` (one file) for one issue; return a note saying what, or None."""
    if not issue.line or not issue.column or issue.line > len(lines):
        return None
    index, column = issue.line - 1, issue.column - 1
    line = lines[index]
    if issue.code == "E_CONFIG_UNSUPPORTED_API_VERSION" and "no 'apiVersion'" in issue.message:
        from ..bundle import API_VERSION

        lines.insert(index, " " * column + f"apiVersion: {API_VERSION}\n")
        return f"{issue.file}:{issue.line}: added apiVersion: {API_VERSION}"
    if issue.code == "E_CONFIG_SCHEMA_INVALID":
        unknown = _UNKNOWN.search(issue.message)
        mean = _MEAN.search(issue.suggestion or "")
        if unknown and mean and _same_name(unknown.group(1), mean.group(1)):
            old, new = unknown.group(1), mean.group(1)
            flow_sibling = re.search(r"[{,]\s*['\"]?" + re.escape(new) + r"['\"]?\s*:", line)
            if _has_sibling_key(lines, index, column, new) or flow_sibling:
                return None  # both spellings are there: which value is meant needs judgement
            if line[column:].startswith(old) and line[column + len(old) :].lstrip().startswith(":"):
                lines[index] = line[:column] + new + line[column + len(old) :]
                return f"{issue.file}:{issue.line}: renamed {old} to {new}"
    return None


def plan_fixes(path: str, env: dict[str, str], state_root: Path | None) -> FixPlan:
    """Every mechanical fix for the bundle at ``path``, worked out on a scratch copy."""
    from ..bundle import validate_bundle

    given = Path(path)
    root = (given.parent if given.suffix in (".yaml", ".yml") else given).resolve()
    plan = FixPlan(root)
    if not root.is_dir():
        return plan  # nothing to fix; validation reports the path itself
    with tempfile.TemporaryDirectory(prefix="gdn-fix-") as scratch:
        work = Path(scratch) / "bundle"
        shutil.copytree(root, work, ignore=_SKIP, symlinks=True)
        if not (work / "goondan.yaml").exists() and (work / "goondan.yml").is_file():
            (work / "goondan.yml").rename(work / "goondan.yaml")
            plan.renamed = ("goondan.yml", "goondan.yaml")
            plan.notes.append("renamed goondan.yml to goondan.yaml")
        for _ in range(MAX_ROUNDS):
            report = validate_bundle(work, env=env, state_root=state_root)
            by_file: dict[str, list[Any]] = {}
            # warnings too: _fix_issue acts only on the certain ones (a rename by case or separator)
            for issue in [*report.errors, *report.warnings]:
                if issue.file and not Path(issue.file).is_absolute():
                    by_file.setdefault(issue.file, []).append(issue)
            changed = False
            for name, issues in by_file.items():
                target = work / name
                if not target.is_file():
                    continue
                lines = target.read_text(encoding="utf-8").splitlines(keepends=True)
                # bottom-up, so an inserted line does not move the positions of issues still to fix
                for issue in sorted(issues, key=lambda i: (i.line or 0, i.column or 0), reverse=True):
                    note = _fix_issue(lines, issue)
                    if note:
                        plan.notes.append(note)
                        changed = True
                target.write_text("".join(lines), encoding="utf-8")
            if not changed:
                break
        for file in work.rglob("*"):
            if file.is_file() and file.suffix in (".yaml", ".yml"):
                name = str(file.relative_to(work))
                original = root / (plan.renamed[0] if plan.renamed and name == plan.renamed[1] else name)
                text = file.read_text(encoding="utf-8")
                if not original.is_file() or original.read_text(encoding="utf-8") != text:
                    plan.texts[name] = text
    return plan


def _confirm(question: str) -> bool:
    if not sys.stdin.isatty():
        return False
    try:
        return input(question).strip().lower() in ("y", "yes")
    except EOFError:
        return False


def run_fix(args: argparse.Namespace, env: dict[str, str], state_root: Path | None) -> bool:
    """Show the fixes and apply them when confirmed (or ``--yes``); True when the bundle changed.

    With ``--format json|github`` the diff goes to stderr, so stdout stays machine-readable."""
    plan = plan_fixes(args.path, env, state_root)
    machine = args.json or getattr(args, "format", "text") != "text"
    out = sys.stderr if machine else sys.stdout
    if plan.empty:
        if not args.quiet:
            out.write("Nothing to fix mechanically.\n")
        return False
    out.write(plan.diff())
    for note in plan.notes:
        out.write(f"fix: {note}\n")
    if args.yes or _confirm(f"Apply {len(plan.notes)} fix(es)? [y/N] "):
        plan.apply()
        out.write(f"Applied {len(plan.notes)} fix(es).\n")
        return True
    out.write("Not applied (run with --yes to apply without asking).\n")
    return False
