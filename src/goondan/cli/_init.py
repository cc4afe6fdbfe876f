"""``gdn init``: a new bundle from a template that validates and runs offline right away."""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from ._output import EXIT_OK, EXIT_USAGE, CliError

TEMPLATES = ("default", "multi-agent", "minimal", "package")
_DOTFILES = {"dot-env": ".env", "dot-gitignore": ".gitignore"}


def _templates_root() -> Path:
    return Path(__file__).resolve().parent.parent / "templates"


def package_name(raw: str) -> str:
    """A valid package name from a directory name: lowercase, other characters as ``-``."""
    name = re.sub(r"[^a-z0-9._-]+", "-", raw.strip().lower()).strip("-._")
    return name or "my-swarm"


def cmd_init(args: argparse.Namespace) -> int:
    target = Path(args.path).resolve()
    manifest = target / "goondan.yaml"
    if manifest.exists() and not args.force:
        raise CliError(
            "E_INIT_EXISTS",
            f"{manifest} already exists",
            exit_code=EXIT_USAGE,
            suggestion="Pick another directory, or pass --force to overwrite the template files.",
        )
    name = package_name(args.name or target.name)
    if args.name and name != args.name:
        raise CliError(
            "E_INVALID_ARGUMENT",
            f"package name {args.name!r} is not valid (lowercase letters, digits, '.', '_', '-')",
            exit_code=EXIT_USAGE,
            suggestion=f"Use --name {name}.",
        )
    source = _templates_root() / args.template
    package = args.template == "package"
    # a package's import name: the distribution name as an identifier (acme-tools -> acme_tools)
    module = re.sub(r"[^a-z0-9_]", "_", name)
    module = module if module[:1].isalpha() else f"pkg_{module}"
    if package and (target / module / "goondan.yaml").exists() and not args.force:
        raise CliError(
            "E_INIT_EXISTS",
            f"{target / module / 'goondan.yaml'} already exists",
            exit_code=EXIT_USAGE,
            suggestion="Pick another directory, or pass --force to overwrite the template files.",
        )
    written: list[Path] = []
    for file in sorted(source.rglob("*")):
        if file.is_dir() or "__pycache__" in file.parts:
            continue
        relative = Path(*(module if part == "__MODULE__" else part for part in file.relative_to(source).parts))
        dest = target / relative
        dest.parent.mkdir(parents=True, exist_ok=True)
        text = file.read_text(encoding="utf-8").replace("__NAME__", name).replace("__MODULE__", module)
        dest.write_text(text, encoding="utf-8")
        written.append(dest)
    for src_name, dest_name in _DOTFILES.items():
        if package and dest_name == ".env":
            continue  # a package has no runs of its own: its users' bundles hold the .env
        dest = target / dest_name
        if not dest.exists():
            shutil.copyfile(_templates_root() / src_name, dest)
            written.append(dest)
    if args.git and not (target / ".git").exists() and shutil.which("git"):
        subprocess.run(["git", "init", "-q", str(target)], check=False)
    if not args.quiet:
        out = sys.stdout
        out.write(f"Created {args.template} bundle '{name}' in {shlex.quote(str(target))}\n")
        for path in written:
            out.write(f"  {shlex.quote(str(path.relative_to(target)))}\n")
        # a command to paste: a directory like "My Project" must stay one argument
        where = "" if target == Path.cwd() else f" {shlex.quote(args.path)}"
        if package:
            inside = shlex.quote(str(Path(args.path) / module))
            out.write(f"Next: gdn validate {inside} && gdn package build --path {shlex.quote(args.path)}\n")
        else:
            out.write(f"Next: gdn validate{where} && gdn run{where}\n")
    return EXIT_OK
