"""``gdn package add|install|lock|build``: Goondan packages through the Python packaging tools.

A Goondan package is a Python distribution (README.md#packages), so installing, locking and building
are the jobs of uv or pip and of PEP 517 build backends; this module only drives them and keeps the
bundle's two files in step:

- ``goondan.yaml``: ``add`` records the dependency in the Package document by inserting (or replacing)
  one line of YAML text at the position PyYAML's composer reports, so comments and formatting of the
  rest of the file survive. Only a Package written in flow style (``spec: {...}``) is rewritten as a
  whole document.
- ``goondan.lock``: a requirements file with exact versions and sha256 hashes of every distribution
  the packages need (uv's ``pip compile --generate-hashes``, or pip's install report when uv is not
  there). ``install`` installs it with ``--require-hashes``, so a changed file on the index is refused.

uv is used when it is on PATH or installed as the ``uv`` Python package; otherwise pip, run as
``sys.executable -m pip`` so the packages land in the environment gdn itself runs in.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from .._hints import did_you_mean, join_hints
from ._files import replace_text
from ._init import package_name
from ._output import EXIT_CONFIG, EXIT_INTERNAL, EXIT_OK, EXIT_USAGE, CliError

LOCK = "goondan.lock"
MANIFEST = "goondan.yaml"


def _uv() -> str | None:
    if os.environ.get("GOONDAN_INSTALLER") == "pip":
        return None
    found = shutil.which("uv")
    if found:
        return found
    try:
        import uv  # type: ignore[import-not-found, unused-ignore]

        return str(uv.find_uv_bin())
    except (ImportError, FileNotFoundError):
        return None


def _index_options(args: argparse.Namespace) -> list[str]:
    out: list[str] = []
    for link in getattr(args, "find_links", None) or []:
        out += ["--find-links", link]
    if getattr(args, "no_index", False):
        out.append("--no-index")
    return out


def _install_argv(args: argparse.Namespace) -> list[str]:
    uv = _uv()
    if uv is not None:
        return [uv, "pip", "install", "--python", sys.executable, *_index_options(args)]
    return [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", *_index_options(args)]


def _run(argv: list[str], code: str, what: str, *, capture: bool = False) -> str:
    """Run an installer/build command; its own output goes to the terminal (stderr when captured)."""
    if not capture:
        sys.stderr.write("$ " + " ".join(argv) + "\n")
    try:
        done = subprocess.run(argv, stdout=subprocess.PIPE if capture else sys.stderr, text=True, check=False)
    except OSError as exc:
        raise CliError(code, f"{what}: cannot run {argv[0]}: {exc}", exit_code=EXIT_INTERNAL) from None
    if done.returncode != 0:
        raise CliError(
            code,
            f"{what} failed (exit {done.returncode}): {' '.join(argv)}",
            exit_code=EXIT_INTERNAL,
            suggestion="read the installer's output above; offline, pass --no-index --find-links DIR",
        )
    return done.stdout or ""


def _manifest(args: argparse.Namespace) -> Path:
    manifest = Path(args.path) / MANIFEST
    if not manifest.is_file():
        raise CliError(
            "E_CONFIG_FILE_NOT_FOUND",
            f"no {MANIFEST} in {args.path}",
            exit_code=EXIT_USAGE,
            suggestion="run inside a bundle directory or pass --path DIR",
        )
    return manifest


def _dist_of(file: Path) -> tuple[str, str] | None:
    """``(name, version)`` of a wheel or sdist from its file name (PEP 427 / PEP 625), else None."""
    name = file.name
    if name.endswith(".whl"):
        parts = name[: -len(".whl")].split("-")
        return (parts[0], parts[1]) if len(parts) >= 5 else None
    for suffix in (".tar.gz", ".zip"):
        if name.endswith(suffix):
            stem, _, version = name[: -len(suffix)].rpartition("-")
            return (stem, version) if stem and version else None
    return None


def _offered(args: argparse.Namespace) -> dict[str, set[str]]:
    """Distributions (canonical name -> versions) in the local ``--find-links`` directories."""
    from ..bundle._packages import canonical

    out: dict[str, set[str]] = {}
    for link in getattr(args, "find_links", None) or []:
        folder = Path(link)
        if not folder.is_dir():
            continue
        for file in folder.iterdir():
            found = _dist_of(file)
            if found is not None:
                out.setdefault(canonical(found[0]), set()).add(found[1])
    return out


_LOCAL = "--no-index --find-links"  # local wheels only: never a project of the same name from the index


def _local_hint(given: Path) -> str | None:
    """What to type instead when ``gdn package add`` was given a package's directory or built file:
    packages are added by name, from the directory of built wheels, so that the lock can pin them;
    ``--no-index``, so that a project of the same name on the package index is never taken instead."""
    from ..bundle._packages import canonical

    if given.is_dir() and (given / "pyproject.toml").is_file():
        name = _project_name(given / "pyproject.toml") or "NAME"
        dist = shlex.quote(str(given / "dist"))
        return (
            f"{given} is a package's source: build it, then add it by name from its wheels: "
            f"gdn package build --path {shlex.quote(str(given))} && gdn package add {name} {_LOCAL} {dist}"
        )
    found = _dist_of(given)
    if found is not None:
        folder = shlex.quote(str(given.parent))
        pinned = f"{canonical(found[0])}=={found[1]}"
        return f"add a built file by name from its directory: gdn package add '{pinned}' {_LOCAL} {folder}"
    return None


def _project_name(pyproject: Path) -> str | None:
    import tomllib

    try:
        name = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {}).get("name")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    return name if isinstance(name, str) else None


# ---------------------------------------------------------------- goondan.yaml editing


def _dependency_line(dep: dict[str, str]) -> str:
    return "{" + ", ".join(f"{k}: {json.dumps(v)}" for k, v in dep.items()) + "}"


def add_dependency(text: str, dep: dict[str, str], default_name: str) -> str:
    """``text`` (a goondan.yaml) with ``dep`` in the Package document's ``spec.dependencies``.

    An entry with the same name is replaced. Everything else keeps its bytes: the edit is one inserted
    or replaced line at a position the YAML composer reports.
    """
    import yaml

    lines = text.splitlines(keepends=True)
    item = _dependency_line(dep)
    docs = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    first = docs[0] if docs else None
    kind = _get(first, "kind")
    if first is None or not isinstance(first, yaml.MappingNode) or getattr(kind, "value", None) != "Package":
        header = (
            "apiVersion: goondan.ai/v1\nkind: Package\nmetadata:\n"
            f"  name: {json.dumps(default_name)}\nspec:\n  dependencies:\n    - {item}\n---\n"
        )
        return header + text
    spec_key, spec = _entry(first, "spec")
    if spec is None or spec_key is None:
        return _rewrite_first(text, first, dep)
    if not isinstance(spec, yaml.MappingNode) or spec.flow_style:
        return _rewrite_first(text, first, dep)
    deps_key, deps = _entry(spec, "dependencies")
    if deps is None or deps_key is None:
        indent = spec.value[0][0].start_mark.column if spec.value else spec_key.start_mark.column + 2
        at = spec_key.start_mark.line + 1
        new = f"{' ' * indent}dependencies:\n{' ' * (indent + 2)}- {item}\n"
        return "".join([*lines[:at], new, *lines[at:]])
    if not isinstance(deps, yaml.SequenceNode) or deps.flow_style or not deps.value:
        return _rewrite_first(text, first, dep)
    for node in deps.value:
        if getattr(_get(node, "name"), "value", None) == dep["name"]:
            start = node.start_mark
            last, tail = _node_end(lines, node.end_mark)
            lines[start.line : last + 1] = [lines[start.line][: start.column] + item + tail]
            return "".join(lines)
    dash_column = deps.value[0].start_mark.column - 2
    at = _node_end(lines, deps.value[-1].end_mark)[0] + 1
    return "".join([*lines[:at], f"{' ' * max(dash_column, 0)}- {item}\n", *lines[at:]])


def _node_end(lines: list[str], mark: Any) -> tuple[int, str]:
    """Last line a node occupies and what follows it there (a comment, or just the newline).

    A block node's end mark is where the next token starts, which may be the indentation of the
    following line: then the node really ended on the line before.
    """
    if mark.line >= len(lines) or not lines[mark.line][: mark.column].strip():
        return mark.line - 1, "\n"
    return mark.line, lines[mark.line][mark.column :] or "\n"


def _get(node: Any, key: str) -> Any:
    return _entry(node, key)[1]


def _entry(node: Any, key: str) -> tuple[Any, Any]:
    import yaml

    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if getattr(k, "value", None) == key:
                return k, v
    return None, None


def _rewrite_first(text: str, first: Any, dep: dict[str, str]) -> str:
    """Flow-style or empty Package spec: re-emit just that document (its comments are lost)."""
    import yaml

    data = yaml.safe_load(text[: first.end_mark.index])
    spec = data.setdefault("spec", None) or {}
    data["spec"] = spec
    deps = [d for d in spec.get("dependencies") or [] if isinstance(d, dict) and d.get("name") != dep["name"]]
    spec["dependencies"] = [*deps, dep]
    dumped = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    end = first.end_mark.index
    rest = text[end:]
    if not rest.lstrip().startswith("---") and rest.strip():
        rest = "---\n" + rest.lstrip()
    return dumped + rest


def read_dependencies(manifest: Path) -> list[dict[str, Any]]:
    import yaml

    try:
        first = next(iter(yaml.safe_load_all(manifest.read_text(encoding="utf-8"))), None)
    except yaml.YAMLError as exc:
        raise CliError("E_CONFIG_PARSE_ERROR", f"{manifest}: {exc}", exit_code=EXIT_USAGE) from None
    if not isinstance(first, dict) or first.get("kind") != "Package":
        return []
    deps = (first.get("spec") or {}).get("dependencies") or []
    # @goondan/base ships inside the runtime itself: nothing to install or lock for it
    return [d for d in deps if isinstance(d, dict) and isinstance(d.get("name"), str) and d["name"] != "@goondan/base"]


# ---------------------------------------------------------------- commands


def cmd_package_add(args: argparse.Namespace) -> int:
    from importlib import metadata

    from packaging.requirements import InvalidRequirement, Requirement

    from .._dist import PACKAGES_ENTRY_POINT_GROUP as ENTRY_POINT_GROUP
    from ..bundle._packages import canonical, default_distribution

    manifest = _manifest(args)
    read_dependencies(manifest)  # a goondan.yaml that does not parse is reported before installing anything
    try:
        req = Requirement(args.requirement)
    except InvalidRequirement as exc:
        raise CliError(
            "E_INVALID_ARGUMENT",
            f"{args.requirement!r} is not a requirement: {str(exc).splitlines()[0]}",
            exit_code=EXIT_USAGE,
            suggestion=_local_hint(Path(args.requirement))
            or "write NAME or NAME followed by a PEP 440 range, e.g. 'acme-tools>=1.2,<2'",
        ) from None
    try:
        _run([*_install_argv(args), str(req)], "E_PACKAGE_INSTALL_FAILED", f"installing {req}")
    except CliError as exc:
        # a misspelt name or a range nothing matches, offline: say what the wheel directories hold
        offered = _offered(args)
        if offered:
            near = did_you_mean(req.name, offered)
            listing = "; ".join(f"{n} {', '.join(sorted(v))}" for n, v in sorted(offered.items()))
            exc.suggestion = join_hints(near, f"--find-links offers: {listing}")
        raise
    import importlib

    importlib.invalidate_caches()
    try:
        dist = metadata.distribution(req.name)
    except metadata.PackageNotFoundError:
        raise CliError(
            "E_PACKAGE_INSTALL_FAILED", f"{req.name} was installed but cannot be found", exit_code=EXIT_INTERNAL
        ) from None
    provided = [ep for ep in dist.entry_points if ep.group == ENTRY_POINT_GROUP]
    if not provided:
        raise CliError(
            "E_PACKAGE_INVALID",
            f"{dist.metadata['Name']} {dist.version} is installed but declares no Goondan package "
            f"(no entry point in group {ENTRY_POINT_GROUP})",
            exit_code=EXIT_USAGE,
            suggestion="it is a plain Python library: add it to your project's own dependencies instead",
        )
    text = manifest.read_text(encoding="utf-8")
    had_package = _has_package(text)
    new_name = package_name(Path(args.path).resolve().name)
    for ep in provided:
        dep = {"name": ep.name, "version": str(req.specifier) or f">={dist.version}"}
        if canonical(default_distribution(ep.name)) != canonical(str(dist.metadata["Name"])):
            dep["distribution"] = str(dist.metadata["Name"])
        text = add_dependency(text, dep, new_name)
        if not args.quiet:
            sys.stdout.write(f"added {ep.name} ({dist.metadata['Name']} {dist.version}) to {manifest}\n")
    _check_written(text, [ep.name for ep in provided])
    replace_text(manifest, text)
    _lock(args, manifest)
    if not had_package:
        _identity_note(args, manifest.parent, new_name)
    return EXIT_OK


def _has_package(text: str) -> bool:
    """Whether goondan.yaml's first document is a Package (``add`` parsed the file already)."""
    import yaml

    first = next(iter(yaml.safe_load_all(text)), None)
    return isinstance(first, dict) and first.get("kind") == "Package"


def _identity_note(args: argparse.Namespace, bundle: Path, name: str) -> None:
    """Say what the new Package document does to the bundle's conversations. A workspace belongs to
    the bundle's Package name once it has one, and to its directory before (storage/_identity.py),
    so after ``add`` wrote the first Package, ``gdn run`` starts new conversations and the earlier
    ones stay in the directory's workspace, unseen: a user read that as lost history."""
    from ._manage import _instances, _Scope
    from ._state import store_backend

    try:
        old = _instances(store_backend(args), None, _Scope(str(bundle.resolve()), None))
    except Exception:  # a store that cannot be read here: the note is a courtesy, the add is done
        return
    if not old:
        return
    workspaces = ", ".join(sorted({ws for ws, _, _ in old}))
    sys.stderr.write(
        f"note: {bundle / MANIFEST} had no Package document; gdn package add added one named {name!r}. A bundle "
        f"with a Package keeps its conversations under the Package's name, so gdn run starts new ones: the "
        f"{len(old)} instance(s) so far stay in workspace {workspaces} (gdn instance list --all-workspaces).\n"
    )


def _check_written(text: str, names: list[str]) -> None:
    import yaml

    first = next(iter(yaml.safe_load_all(text)), None)
    deps = ((first or {}).get("spec") or {}).get("dependencies") or []
    recorded = {d.get("name") for d in deps if isinstance(d, dict)}
    if not set(names) <= recorded:  # pragma: no cover - a bug in add_dependency; never write a broken file
        raise CliError("INTERNAL_ERROR", "could not record the dependency in goondan.yaml", exit_code=EXIT_INTERNAL)


def cmd_package_lock(args: argparse.Namespace) -> int:
    _lock(args, _manifest(args))
    return EXIT_OK


def _lock(args: argparse.Namespace, manifest: Path) -> None:
    from ..bundle._packages import default_distribution, specifier_problem

    for i, dep in enumerate(read_dependencies(manifest)):
        problem = specifier_problem(str(dep["version"])) if dep.get("version") is not None else None
        if problem is not None:  # what gdn validate says of it, before uv or pip fails on it
            raise CliError(
                "E_CONFIG_SCHEMA_INVALID",
                f"{manifest}: spec.dependencies[{i}] ({dep['name']}): {problem}",
                exit_code=EXIT_CONFIG,
                suggestion="fix the range in goondan.yaml (`gdn validate` shows where), then lock again",
            )
    reqs = [
        _installed_or_range(str(d.get("distribution") or default_distribution(d["name"])), d.get("version"))
        for d in read_dependencies(manifest)
    ]
    lock = manifest.parent / LOCK
    header = "# goondan.lock: written by `gdn package lock`; install with `gdn package install` (hashes checked)\n"
    if not reqs:
        replace_text(lock, header)
        if not args.quiet:  # it said nothing at all, which read as if it had not run
            sys.stdout.write(f"{manifest} lists no dependencies: {lock} pins nothing\n")
        return
    uv = _uv()
    body = _compile_uv(uv, reqs, args) if uv is not None else _compile_pip(reqs, args)
    replace_text(lock, header + body)
    if not args.quiet:
        sys.stdout.write(f"locked {len(reqs)} package(s) in {lock}\n")


def _installed_or_range(dist: str, version: str | None) -> str:
    """``dist==<installed>`` when the installed version is in range: the lock pins what runs here."""
    from importlib import metadata

    from ..bundle._packages import requirement, satisfies

    try:
        installed = metadata.version(dist)
    except metadata.PackageNotFoundError:
        return requirement(dist, version)
    return f"{dist}=={installed}" if satisfies(installed, version) else requirement(dist, version)


def _compile_uv(uv: str, reqs: list[str], args: argparse.Namespace) -> str:
    argv = [uv, "pip", "compile", "-", "--generate-hashes", "--no-header", "--quiet", "--python", sys.executable]
    argv += _index_options(args)
    done = subprocess.run(argv, input="\n".join(reqs) + "\n", capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise CliError(
            "E_PACKAGE_LOCK_FAILED",
            f"could not resolve {', '.join(reqs)}: {done.stderr.strip()[-800:]}",
            exit_code=EXIT_INTERNAL,
            suggestion="check the names and ranges in goondan.yaml; offline, pass --no-index --find-links DIR",
        )
    return done.stdout


def _compile_pip(reqs: list[str], args: argparse.Namespace) -> str:
    """pip has no lock command for requirements files: its install report has the hashes."""
    argv = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--report", "-"]
    argv += ["--disable-pip-version-check", *_index_options(args), *reqs]
    report = json.loads(_run(argv, "E_PACKAGE_LOCK_FAILED", "locking", capture=True) or "{}")
    out = []
    for item in report.get("install", []):
        meta = item.get("metadata", {})
        hashes = (item.get("download_info", {}).get("archive_info", {}) or {}).get("hashes", {})
        digest = hashes.get("sha256")
        line = f"{meta.get('name')}=={meta.get('version')}"
        out.append(line + (f" \\\n    --hash=sha256:{digest}" if digest else ""))
    return "\n".join(sorted(out, key=str.lower)) + "\n"


def cmd_package_install(args: argparse.Namespace) -> int:
    lock = Path(args.path) / LOCK
    if not lock.is_file():
        raise CliError(
            "E_PACKAGE_LOCK_MISSING",
            f"no {LOCK} in {args.path}",
            exit_code=EXIT_USAGE,
            suggestion="write it with `gdn package lock` (or `gdn package add NAME`) and commit it",
        )
    _check_lock_current(args, lock)
    if not any(line.strip() and not line.lstrip().startswith("#") for line in lock.read_text("utf-8").splitlines()):
        if not args.quiet:
            sys.stdout.write(f"{lock} pins nothing: nothing to install\n")
        return EXIT_OK
    _run([*_install_argv(args), "--require-hashes", "-r", str(lock)], "E_PACKAGE_INSTALL_FAILED", f"installing {lock}")
    if not args.quiet:
        sys.stdout.write(f"installed what {lock} pins\n")
    return EXIT_OK


def _pins(lock: Path) -> dict[str, str]:
    """``canonical name -> version`` of every ``name==version`` line of a lock file."""
    from ..bundle._packages import canonical

    out: dict[str, str] = {}
    for line in lock.read_text("utf-8").splitlines():
        head = line.split("#", 1)[0].split(";", 1)[0].strip().rstrip("\\").strip()
        name, sep, version = head.partition("==")
        if sep and name and not name.startswith("-"):
            out[canonical(name.split("[", 1)[0].strip())] = version.strip()
    return out


def _check_lock_current(args: argparse.Namespace, lock: Path) -> None:
    """``E_PACKAGE_LOCK_STALE`` when goondan.yaml asks for a package the lock does not pin, or for a
    range its pin is outside: installing the lock would leave the bundle unable to load (it said
    "installed what goondan.lock pins", then `gdn run` failed with E_PACKAGE_INCOMPATIBLE)."""
    from ..bundle._packages import canonical, default_distribution, satisfies

    manifest = lock.parent / MANIFEST
    if not manifest.is_file():
        return
    pins = _pins(lock)
    stale: list[str] = []
    for dep in read_dependencies(manifest):
        dist = str(dep.get("distribution") or default_distribution(dep["name"]))
        version = dep.get("version")
        pinned = pins.get(canonical(dist))
        if pinned is None:
            stale.append(f"{dep['name']} is not in it")
        elif version is not None and not satisfies(pinned, str(version)):
            stale.append(f"{dep['name']} needs {version}, it pins {dist}=={pinned}")
    if stale:
        raise CliError(
            "E_PACKAGE_LOCK_STALE",
            f"{lock} does not match {manifest}'s dependencies ({'; '.join(stale)}); nothing was installed",
            exit_code=EXIT_CONFIG,
            suggestion="Write it again with `gdn package lock` (with the same --find-links / --no-index), then "
            "install and commit both files.",
        )


def cmd_package_build(args: argparse.Namespace) -> int:
    import importlib.util

    root = Path(args.path)
    if not (root / "pyproject.toml").is_file():
        # inside the package (where its goondan.yaml is, or a directory below): the project is above
        above = next((p for p in root.resolve().parents if _declares_package(p / "pyproject.toml")), None)
        where = shlex.quote(os.path.relpath(above)) if above is not None else ""
        raise CliError(
            "E_PACKAGE_BUILD_FAILED",
            f"{root} has no pyproject.toml: a package is a Python distribution",
            exit_code=EXIT_USAGE,
            suggestion=f"build the package project that holds it: gdn package build --path {where}"
            if above is not None
            else "start one with `gdn init -t package DIR`",
        )
    outdir = str(Path(args.outdir) if Path(args.outdir).is_absolute() else root / args.outdir)
    if importlib.util.find_spec("build") is not None:
        argv = [sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", outdir, str(root)]
        argv += ["--no-isolation"] if args.no_isolation else []
    else:
        uv = _uv()
        if uv is None:
            raise CliError(
                "E_PACKAGE_BUILD_FAILED",
                "neither the build package nor uv is installed",
                exit_code=EXIT_INTERNAL,
                suggestion="pip install build",
            )
        argv = [uv, "build", "--sdist", "--wheel", "--out-dir", outdir, str(root)]
        argv += ["--no-build-isolation"] if args.no_isolation else []
    before = _artifacts(Path(outdir))
    _run(argv, "E_PACKAGE_BUILD_FAILED", "building")
    if not args.quiet:
        # only what this build wrote: after a version bump dist/ still holds the previous release,
        # and `twine upload dist/*` would send it again (the index refuses a file it already has)
        built = sorted(name for name, stamp in _artifacts(Path(outdir)).items() if before.get(name) != stamp)
        files = " ".join(shlex.quote(str(Path(outdir) / name)) for name in built)
        sys.stdout.write(f"built {', '.join(built)} in {outdir}\nupload with: twine upload {files}\n")
    return EXIT_OK


def _declares_package(pyproject: Path) -> bool:
    """Whether ``pyproject`` is a Goondan package's project (it declares a ``goondan.packages`` entry point)."""
    try:
        return "goondan.packages" in pyproject.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False


def _artifacts(outdir: Path) -> dict[str, int]:
    """Wheels and sdists in ``outdir`` with their modification times (ns)."""
    if not outdir.is_dir():
        return {}
    return {p.name: p.stat().st_mtime_ns for p in outdir.iterdir() if p.name.endswith((".whl", ".tar.gz", ".zip"))}
