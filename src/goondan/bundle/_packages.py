"""Goondan packages are Python distributions: finding the ones a bundle depends on (README.md#packages).

A package is any installed distribution declaring an entry point in group ``goondan.packages``: the
entry point's *name* is the Package's ``metadata.name`` (``@acme/tools``), its *value* the import
package whose directory holds the package's ``goondan.yaml``, tools and extensions. Installing is
pip's or uv's job; this module only asks :mod:`importlib.metadata` what is installed, so a bundle
resolves exactly what ``import`` would see in the same environment, and versions are compared with
PEP 440 rules by :mod:`packaging` instead of by hand.

The built-in ``@goondan/base`` is found the same way (our own distribution declares it), with the
directory inside ``goondan`` as a fallback for a source checkout that was never installed.
"""

from __future__ import annotations

import functools
import importlib.util
import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from goondan._dist import DIST_NAME
from goondan._dist import PACKAGES_ENTRY_POINT_GROUP as ENTRY_POINT_GROUP
from goondan._hints import did_you_mean, join_hints

MANIFEST = "goondan.yaml"
_EXACT = re.compile(r"^\d+(?:\.\d+)*(?:[-.+]?[0-9A-Za-z.]+)?$")


@dataclass(frozen=True)
class InstalledPackage:
    """A Goondan package found in the environment: where its ``goondan.yaml`` lives and who ships it."""

    name: str
    distribution: str
    version: str
    root: Path


@dataclass(frozen=True)
class PackageProblem:
    """Why a dependency cannot be used; ``code`` is one of the ``E_PACKAGE_*`` codes of docs/errors.md."""

    code: str
    message: str
    suggestion: str


def default_distribution(name: str) -> str:
    """The distribution a package name suggests: ``@acme/tools`` -> ``acme-tools``, ``tools`` -> ``tools``.

    Only used when a dependency does not say ``distribution:``: to find it quickly and to name it in
    the install command of an error. A package shipped under another name is still found by scanning
    the entry points.
    """
    return name.lstrip("@").replace("/", "-")


def canonical(dist: str) -> str:
    """PEP 503 normalized distribution name, for comparing names as pip does."""
    return re.sub(r"[-_.]+", "-", dist).lower()


def specifier_problem(version: str) -> str | None:
    """Why ``version`` is not a PEP 440 specifier (or exact version), None when it is fine."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        SpecifierSet(_as_specifier(version))
    except InvalidSpecifier:
        return f"{version!r} is not a PEP 440 version range (e.g. '>=1.2,<2', '~=1.4', '==1.2.3')"
    return None


def _as_specifier(version: str) -> str:
    """``1.2.3`` (the older exact-version form) means ``==1.2.3``; ``*`` or empty means any version."""
    text = version.strip()
    if text in ("", "*"):
        return ""
    return f"=={text}" if _EXACT.match(text) else text


def satisfies(installed: str, version: str | None) -> bool:
    """Whether version ``installed`` is inside the dependency's range (a PEP 440 specifier or ``1.2.3``)."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        return SpecifierSet(_as_specifier(version or "")).contains(Version(installed), prereleases=True)
    except InvalidVersion:
        return False


def requirement(distribution: str, version: str | None) -> str:
    """A PEP 508 requirement string for install commands: ``acme-tools>=1.0,<2``."""
    return distribution + (_as_specifier(version) if version else "")


def _root_of(value: str) -> Path | None:
    """Directory of the import package an entry point names, without importing the package itself."""
    module = value.split(":", 1)[0].strip()
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(spec.origin).parent if spec.origin else None


def _candidates(name: str, distribution: str | None) -> list[tuple[metadata.EntryPoint, metadata.Distribution]]:
    """Entry points named ``name`` in our group: first from the expected distribution, else from any."""
    wanted = distribution or default_distribution(name)
    try:
        dist = metadata.distribution(wanted)
    except metadata.PackageNotFoundError:
        dist = None
    if dist is not None:
        found = [(ep, dist) for ep in dist.entry_points if ep.group == ENTRY_POINT_GROUP and ep.name == name]
        if found:
            return found
    if distribution is not None:
        return []  # the bundle named the distribution: another one providing the name is not it
    out: list[tuple[metadata.EntryPoint, metadata.Distribution]] = []
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP, name=name):
        owner = ep.dist
        if owner is not None:
            out.append((ep, owner))
    return out


def find_package(
    name: str, version: str | None = None, distribution: str | None = None
) -> InstalledPackage | PackageProblem:
    """The installed package ``name`` whose distribution satisfies ``version`` (a PEP 440 range)."""
    dist_name = distribution or default_distribution(name)
    req = requirement(dist_name, version)
    install = f"gdn package add '{req}'   (or: pip install '{req}')"
    found = _candidates(name, distribution)
    if not found:
        # a misspelt dependency name read as a package to install: name the installed one it is near
        near = did_you_mean(name, {ep.name for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)} - {name})
        return PackageProblem(
            "E_PACKAGE_MISSING",
            f"package {name} is not installed (no distribution in this Python environment declares it in "
            f"entry point group {ENTRY_POINT_GROUP})",
            join_hints(
                near and f"{near[:-1]}, which is installed?",
                f"{'else ' if near else ''}install it into the environment gdn runs in: {install}",
            )
            or install,
        )
    seen: list[str] = []
    for ep, dist in found:
        dist_version = dist.version
        seen.append(f"{dist.metadata['Name']} {dist_version}")
        if not satisfies(dist_version, version):
            continue
        root = _root_of(ep.value)
        if root is None or not (root / MANIFEST).is_file():
            return PackageProblem(
                "E_PACKAGE_INVALID",
                f"distribution {dist.metadata['Name']} {dist_version} declares package {name} as {ep.value!r}, "
                f"but that import package has no {MANIFEST}",
                f"reinstall it ({install}); its author must ship {MANIFEST} inside the import package "
                f"the entry point names",
            )
        return InstalledPackage(name, str(dist.metadata["Name"]), dist_version, root)
    return PackageProblem(
        "E_PACKAGE_INCOMPATIBLE",
        f"package {name} needs version {version}, but the environment has {', '.join(seen)}",
        f"install a matching version: {install}",
    )


@functools.lru_cache(maxsize=1)
def base_package_root() -> Path:
    """Directory of ``@goondan/base``: through our own entry point, else the directory inside ``goondan``."""
    try:
        dist = metadata.distribution(DIST_NAME)
    except metadata.PackageNotFoundError:
        dist = None
    if dist is not None:
        for ep in dist.entry_points:
            if ep.group == ENTRY_POINT_GROUP and ep.name == "@goondan/base":
                root = _root_of(ep.value)
                if root is not None and (root / MANIFEST).is_file():
                    return root.resolve()
    return Path(__file__).resolve().parent.parent / "base"
