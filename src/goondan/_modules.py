"""Importing user modules (tool, extension, connector and model entries) from file paths.

Every bundle (or package) root gets its own synthetic package, ``goondan_bundle_<hash of the root>``,
whose ``__path__`` is the root directory, and an entry file is imported as a submodule of it:
``<root>/tools/calc.py`` becomes ``goondan_bundle_<hash>.tools.calc``. Nothing is added to
``sys.path`` and no bare module name enters ``sys.modules``, so two bundles that both keep a
``tools/helpers.py`` each get their own, even in one process. A module is imported once per process,
so two agents using the same tool share it like any other Python import.

The import styles a Python developer would try all work inside a bundle:

* ``from .helpers import x`` / ``from . import helpers`` - relative to the entry's own directory
  (``..`` reaches parent directories up to the bundle root); ``__init__.py`` files are optional.
* ``from helpers import x`` / ``import helpers`` - a module beside the importing file, as when the
  file is run as a script (``python tools/calc.py`` puts ``tools/`` first on ``sys.path``).
* ``from common import x`` / ``import lib.util`` - a module or package at the bundle root.

Bare names are looked up in that order (the importing file's directory, then the bundle root), then
as ordinary installed modules; names of the standard library (and ``goondan``) are never redirected,
so a ``logging.py`` kept beside a tool is imported as ``from . import logging``. The lookup is done
by the ``__import__`` that modules of the bundle see (their ``__builtins__``), so it covers
``import`` statements in entries and in the helpers they import;
``importlib.import_module("helpers")`` is not redirected (use ``import helpers``).

:func:`reproduce_command` gives a shell command that performs exactly this import outside the runtime,
which is what an error's suggestion should tell a user to run.
"""

from __future__ import annotations

import builtins
import hashlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import shlex
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

PREFIX = "goondan_bundle_"
MANIFEST = "goondan.yaml"

_lock = threading.RLock()
_original_import = builtins.__import__


@dataclass
class _BundleSpace:
    """One bundle root and the ``__builtins__`` its modules see."""

    name: str
    root: Path
    builtins: dict[str, Any] = field(default_factory=dict)
    found: dict[tuple[str, str], str | None] = field(default_factory=dict)

    def local_name(self, directory: Path, top: str) -> str | None:
        """Dotted name of module ``top`` in ``directory`` (or at the root) of this bundle, if it exists."""
        key = (str(directory), top)
        if key not in self.found:
            self.found[key] = self._lookup(directory, top)
        return self.found[key]

    def _lookup(self, directory: Path, top: str) -> str | None:
        for place in (directory, self.root) if directory != self.root else (self.root,):
            package = self.package_of(place)
            if package is None:
                continue
            if (place / f"{top}.py").is_file() or ((place / top).is_dir() and _importable_dir(place / top)):
                return f"{package}.{top}"
        return None

    def package_of(self, directory: Path) -> str | None:
        try:
            parts = directory.relative_to(self.root).parts
        except ValueError:
            return None
        if any(not _usable(p) for p in parts):
            return None
        return ".".join((self.name, *parts))


_spaces: dict[str, _BundleSpace] = {}
#: never redirected: a ``logging.py`` beside a tool must not replace the standard library's for it
_STDLIB = frozenset(sys.stdlib_module_names) | frozenset(sys.builtin_module_names) | {"goondan"}


def _usable(part: str) -> bool:
    return bool(part) and "." not in part and not part.startswith("__pycache__")


def _importable_dir(path: Path) -> bool:
    return (path / "__init__.py").is_file() or any(p.suffix == ".py" for p in path.iterdir())


def _bundle_import(space: _BundleSpace) -> Any:
    def bundle_import(
        name: str,
        globals: Mapping[str, Any] | None = None,
        locals: Mapping[str, Any] | None = None,
        fromlist: Sequence[str] = (),
        level: int = 0,
    ) -> ModuleType:
        if level == 0 and globals is not None and name:
            file = globals.get("__file__")
            top = name.partition(".")[0]
            if isinstance(file, str) and top not in _STDLIB:
                mapped = space.local_name(Path(file).parent, top)
                if mapped is not None:
                    full = mapped + name[len(top) :]
                    if fromlist:  # the leaf module, with `from x import submodule` handled as usual
                        return _original_import(full, globals, locals, fromlist, 0)
                    importlib.import_module(full)
                    return sys.modules[mapped]
        return _original_import(name, globals, locals, fromlist, level)

    return bundle_import


class _BundleLoader(importlib.machinery.SourceFileLoader):
    """A source loader that hands modules of a bundle their bundle-aware ``__import__``."""

    def __init__(self, fullname: str, path: str, space: _BundleSpace) -> None:
        super().__init__(fullname, path)
        self.space = space

    def exec_module(self, module: ModuleType) -> None:
        module.__dict__["__builtins__"] = self.space.builtins
        super().exec_module(module)


class _BundleFinder(importlib.abc.MetaPathFinder):
    """Finds ``goondan_bundle_<hash>[.sub...]`` modules; everything else is left to the usual finders."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(PREFIX):
            return None
        top = fullname.partition(".")[0]
        space = _spaces.get(top)
        if space is None:
            return None
        if fullname == top:
            spec = importlib.machinery.ModuleSpec(fullname, None, is_package=True)
            spec.submodule_search_locations = [str(space.root)]
            return spec
        found = importlib.machinery.PathFinder.find_spec(fullname, path)
        if found is not None and isinstance(found.loader, importlib.machinery.SourceFileLoader) and found.origin:
            found.loader = _BundleLoader(fullname, found.origin, space)
        return found


_finder = _BundleFinder()


def bundle_root_of(path: Path) -> Path:
    """The nearest directory at or above ``path``'s directory that holds a ``goondan.yaml``."""
    for directory in path.parents:
        if (directory / MANIFEST).is_file():
            return directory
    return path.parent


def _space_for(root: Path) -> _BundleSpace:
    name = PREFIX + hashlib.sha1(str(root).encode()).hexdigest()[:12]
    with _lock:
        space = _spaces.get(name)
        if space is None:
            space = _BundleSpace(name, root)
            space.builtins = dict(builtins.__dict__)
            space.builtins["__import__"] = _bundle_import(space)
            _spaces[name] = space
        if _finder not in sys.meta_path:
            sys.meta_path.insert(0, _finder)
    return space


def module_name_for(path: Path, root: Path | None = None) -> str:
    """``goondan_bundle_<hash of root>.<dotted path below root>`` (a flat name when no dotted one fits)."""
    path = Path(path).resolve()
    root = (root or bundle_root_of(path)).resolve()
    space = _space_for(root)
    package = space.package_of(path.parent)
    if package is None or not _usable(path.stem) or path.suffix != ".py":
        digest = hashlib.sha1(str(path).encode()).hexdigest()[:12]
        stem = "".join(ch if ch.isalnum() else "_" for ch in path.stem)
        return f"{space.name}.goondan_entry_{stem}_{digest}"
    return f"{package}.{path.stem}"


def import_path(path: Path | str, root: Path | None = None) -> ModuleType:
    """Import (once) and return the module at ``path``. Exceptions from the module propagate;
    ``sys.exit()`` at its top level (a script's ``sys.exit(main())``, a module-level
    ``parser.parse_args()`` refusing gdn's own arguments) is raised as ``E_USER_CODE_EXIT``, an
    error of that module's load like any other: as SystemExit it ended ``gdn run`` silently with
    the module's exit code (inline) or killed the fork server (``[E_FORKSERVER] 3``).

    ``root`` is the bundle (or package) root; by default the nearest directory holding a goondan.yaml.
    """
    try:
        return _import_path(path, root)
    except SystemExit as exc:
        from ._usercode import exit_error

        raise exit_error(f"importing {Path(path).name}", exc) from exc


def _import_path(path: Path | str, root: Path | None) -> ModuleType:
    path = Path(path).resolve()
    name = module_name_for(path, root)
    module = sys.modules.get(name)
    if module is not None:
        return module
    with _lock:
        module = sys.modules.get(name)
        if module is not None:
            return module
        if ".goondan_entry_" not in name:
            return importlib.import_module(name)
        # a file whose path is no dotted name (``my.tool.py``): loaded directly inside the bundle package
        importlib.import_module(name.partition(".")[0])
        space = _spaces[name.partition(".")[0]]
        loader = _BundleLoader(name, str(path), space)
        spec = importlib.machinery.ModuleSpec(name, loader, origin=str(path))
        spec.has_location = True
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        return module


def forget_path(path: Path, root: Path | None = None) -> None:
    """Drop the modules of ``path``'s bundle so the next import re-executes them (a watched file changed).

    Helpers are dropped with the entry: a changed ``helpers.py`` must be seen by the reloaded tool.
    """
    name = module_name_for(Path(path).resolve(), root)
    top = name.partition(".")[0]
    for key in [k for k in sys.modules if k == top or k.startswith(top + ".")]:
        sys.modules.pop(key, None)
    space = _spaces.get(top)
    if space is not None:
        space.found.clear()


def reproduce_command(path: Path | str) -> str:
    """A shell command that imports ``path`` exactly as the runtime does, showing the full traceback."""
    code = f"from goondan._modules import import_path; import_path({str(Path(path).resolve())!r})"
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}"


__all__ = ["bundle_root_of", "forget_path", "import_path", "module_name_for", "reproduce_command"]
