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


def _bundles_of_package(args: argparse.Namespace, name: str, target: Path) -> list[Path]:
    """The other bundle directories (still holding a bundle) whose conversations under the state root
    belong to Package ``name``. A bundle made with that name would continue them: the workspace
    follows the Package name, so that a moved bundle keeps its history (docs/concepts.md)."""
    import os

    from ..storage import read_workspace_record
    from ._state import state_root

    try:
        workspaces = state_root(args, dict(os.environ)) / "workspaces"
        found: list[Path] = []
        for directory in sorted(workspaces.iterdir()) if workspaces.is_dir() else ():
            record = read_workspace_record(directory) or {}
            other = record.get("bundle")
            if record.get("package") != name or not isinstance(other, str) or Path(other) == target:
                continue
            if (Path(other) / "goondan.yaml").is_file() and Path(other) not in found:
                found.append(Path(other))
        return found
    except (OSError, ValueError):  # an unreadable state root: nothing to say, the bundle is written anyway
        return []


def _refuse_existing_bundle(target: Path, dests: list[Path], command: str) -> None:
    """``E_INIT_EXISTS`` (exit 2) when ``target`` already holds a bundle: say which manifest is there,
    exactly which files ``--force`` would overwrite (the user's other files are never touched), and
    that a new directory is the other way."""
    manifests = [d for d in [target / "goondan.yaml", *dests] if d.name == "goondan.yaml" and d.exists()]
    if not manifests and (target / "goondan.yml").is_file():
        # a bundle whose manifest has the .yml spelling: the new goondan.yaml would load it as a resource
        # file beside the template's own resources (two Packages, every name defined twice)
        raise CliError(
            "E_INIT_EXISTS",
            f"{target} already holds a bundle (goondan.yml); gdn init did not change it",
            exit_code=EXIT_USAGE,
            suggestion="Rename it to goondan.yaml, the name gdn reads (`gdn validate --fix` does it), or create "
            "the new bundle in a directory of its own (gdn init NEW_DIR).",
        )
    if not manifests:
        return
    overwritten = ", ".join(str(d.relative_to(target)) for d in dests if d.exists())
    force = (
        f"to overwrite {overwritten} with the template (other files there are kept)"
        if overwritten
        else "to add the template's files beside it (none of them exists yet)"
    )
    raise CliError(
        "E_INIT_EXISTS",
        f"{target} already holds a bundle ({manifests[0].relative_to(target)}); gdn init did not change it",
        exit_code=EXIT_USAGE,
        suggestion=f"Create the new bundle in a directory of its own (gdn init NEW_DIR), or run {command} --force "
        f"{force}.",
    )


def _foreign_resource_files(target: Path) -> list[Path]:
    """Files below ``target`` that the bundle loader would read as resources (``models.yaml``,
    ``tools.yml``... anywhere below goondan.yaml) but that hold other YAML, such as a machine-learning
    project's ``configs/models.yaml``: the new bundle would not load."""
    import yaml

    from ..bundle._loader import Loader
    from ..bundle._yaml import MAX_FILE_BYTES

    if not target.is_dir():
        return []
    found: list[Path] = []
    for file in Loader({}, None)._discover(target, target / "goondan.yaml")[1:]:
        try:
            if file.stat().st_size > MAX_FILE_BYTES:  # the loader refuses it too
                found.append(file)
                continue
            docs = list(yaml.safe_load_all(file.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            found.append(file)
            continue
        docs = [d for d in docs if d is not None]  # an empty document: the loader skips it too
        if not all(isinstance(d, dict) and str(d.get("apiVersion", "")).startswith("goondan.ai/") for d in docs):
            found.append(file)
    return found


def cmd_init(args: argparse.Namespace) -> int:
    target = Path(args.path).resolve()
    name = package_name(args.name or target.name)
    if args.name and name != args.name:
        raise CliError(
            "E_INVALID_ARGUMENT",
            f"package name {args.name!r} is not valid (lowercase letters, digits, '.', '_', '-')",
            exit_code=EXIT_USAGE,
            suggestion=f"Use --name {name}.",
        )
    if target.exists() and not target.is_dir():
        raise CliError(
            "E_INVALID_ARGUMENT",
            f"{target} is a file, not a directory; gdn init did not change it",
            exit_code=EXIT_USAGE,
            suggestion="Give gdn init a directory: a new one (created for you) or one that holds no bundle yet.",
        )
    source = _templates_root() / args.template
    package = args.template == "package"
    taken = [] if package else _bundles_of_package(args, name, target)
    shared_note = ""
    if taken and not args.name:  # a name from the directory: pick one no other bundle uses
        first, owner, n = name, taken[0], 2
        while taken:
            name = f"{first}-{n}"
            n += 1
            taken = _bundles_of_package(args, name, target)
        shared_note = (
            f"Package name '{name}': '{first}' is the bundle in {shlex.quote(str(owner))}, whose "
            f"conversations a bundle of the same name continues (pass --name {first} to share them)\n"
        )
    elif taken:
        shared_note = (
            f"note: Package '{name}' is also the bundle in {shlex.quote(str(taken[0]))}: the two share their "
            "conversations (the workspace follows the Package name); pass another --name to keep them apart\n"
        )
    # a package's import name: the distribution name as an identifier (acme-tools -> acme_tools)
    module = re.sub(r"[^a-z0-9_]", "_", name)
    module = module if module[:1].isalpha() else f"pkg_{module}"
    files: list[tuple[Path, Path]] = []
    for file in sorted(source.rglob("*")):
        if file.is_dir() or "__pycache__" in file.parts:
            continue
        relative = Path(*(module if part == "__MODULE__" else part for part in file.relative_to(source).parts))
        files.append((file, target / relative))
    if not args.force:
        template = "" if args.template == "default" else f" -t {args.template}"
        command = f"gdn init {shlex.quote(args.path)}{template}"
        _refuse_existing_bundle(target, [dest for _, dest in files], command)
        foreign = [] if package else _foreign_resource_files(target)
        if foreign:
            shown = ", ".join(str(f.relative_to(target)) for f in foreign[:5]) + (", ..." if len(foreign) > 5 else "")
            inside = shlex.quote(str(Path(args.path) / "bot"))
            raise CliError(
                "E_INIT_CONFLICT",
                f"{target} holds YAML files a bundle there would read as its resources, and they are not "
                f"Goondan resources: {shown}; gdn init did not change anything",
                exit_code=EXIT_USAGE,
                suggestion="A bundle reads every models.yaml, agents.yaml, tools.yaml, swarm.yaml, ... below its "
                f"goondan.yaml. Create it in a directory of its own (gdn init {inside}), or rename those files; "
                f"{command} --force writes it anyway.",
            )
    written: list[Path] = []
    try:
        for file, dest in files:
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
    except OSError as exc:
        # a parent that is a file, a read-only or missing mount, a full disk: the user's path, not a bug
        done = f" (written before it: {', '.join(str(p.relative_to(target)) for p in written)})" if written else ""
        raise CliError(
            "E_INVALID_ARGUMENT",
            f"cannot write {exc.filename or target}: {exc.strerror or exc}{done}",
            exit_code=EXIT_USAGE,
            suggestion="Choose a directory you can write to (gdn init DIR creates it and its parents).",
        ) from None
    if args.git and not (target / ".git").exists() and shutil.which("git"):
        subprocess.run(["git", "init", "-q", str(target)], check=False)
    if not args.quiet:
        out = sys.stdout
        out.write(f"Created {args.template} bundle '{name}' in {shlex.quote(str(target))}\n")
        if shared_note:
            out.write(shared_note)
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
