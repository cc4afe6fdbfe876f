"""Package dependencies resolve against installed Python distributions (entry point group goondan.packages).

The distributions here are real installed-distribution layouts (``*.dist-info`` with ``METADATA`` and
``entry_points.txt`` next to the import package) in a directory put on ``sys.path``, exactly what pip
leaves in site-packages; ``importlib.metadata`` finds them the way it finds any other. The full flow
(build a wheel, install it into a fresh venv, run a bundle) is tests/cli/test_package_cli.py.
"""

from __future__ import annotations

import importlib
from importlib import metadata
from pathlib import Path

import pytest
from bundle_testkit import MODEL_DOC, only
from hypothesis import given
from hypothesis import strategies as st
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from goondan.bundle import load_bundle, validate_bundle
from goondan.bundle._packages import (
    DIST_NAME,
    ENTRY_POINT_GROUP,
    _as_specifier,
    default_distribution,
)
from goondan.bundle._packages import base_package_root as resolved_base_root
from kit import write_files

PACKAGE_YAML = """
apiVersion: goondan.ai/v1
kind: Package
metadata: {name: "@acme/tools"}
spec: {version: 1.2.0}
---
apiVersion: goondan.ai/v1
kind: Tool
metadata: {name: hello}
spec:
  entry: ./hello.py
  exports: [{name: say, description: d, parameters: {type: object}}]
"""


def install_dist(
    site: Path, *, dist: str = "acme-tools", version: str = "1.2.0", ep_name: str = "@acme/tools", manifest: bool = True
) -> None:
    """Lay out an installed distribution the way pip does: import package + ``.dist-info``."""
    module = dist.replace("-", "_")
    files = {f"{module}/__init__.py": "", f"{module}/hello.py": "handlers = {'say': lambda ctx, i: 'hi'}\n"}
    if manifest:
        files[f"{module}/goondan.yaml"] = PACKAGE_YAML
    info = f"{module}-{version}.dist-info"
    files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n"
    files[f"{info}/entry_points.txt"] = f"[{ENTRY_POINT_GROUP}]\n{ep_name} = {module}\n"
    write_files(site, files)
    importlib.invalidate_caches()


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "site-packages"
    path.mkdir()
    monkeypatch.syspath_prepend(str(path))
    return path


def app(tmp_path: Path, dependency: str) -> Path:
    manifest = (
        "apiVersion: goondan.ai/v1\nkind: Package\nmetadata: {name: app}\n"
        f"spec:\n  dependencies: [{dependency}]\n---\n"
    )
    agent = (
        "apiVersion: goondan.ai/v1\nkind: Agent\nmetadata: {name: a}\nspec:\n  modelConfig: {modelRef: Model/m}\n"
        "  tools: [{kind: Tool, name: hello, package: '@acme/tools'}]\n  requiredTools: [hello__say]\n"
    )
    return write_files(tmp_path / "app", {"goondan.yaml": manifest + MODEL_DOC + "---\n" + agent})


def test_dependency_resolves_to_the_installed_distribution_in_range(tmp_path: Path, site: Path) -> None:
    install_dist(site)
    bundle = load_bundle(app(tmp_path, "{name: '@acme/tools', version: '>=1.0,<2'}"), env={})
    tool = bundle.agent_plan("a").tools[0]
    assert (tool.package, tool.name) == ("@acme/tools", "hello")
    assert tool.root == (site / "acme_tools").resolve()


def test_missing_package_names_the_install_command(tmp_path: Path, site: Path) -> None:
    report = validate_bundle(app(tmp_path, "{name: '@acme/tools', version: '>=1.0'}"), env={})
    issue = only(report.errors, "E_PACKAGE_MISSING")
    assert issue.path == "goondan.yaml#0.spec.dependencies[0]"
    assert issue.suggestion is not None and "gdn package add 'acme-tools>=1.0'" in issue.suggestion


def test_installed_version_outside_the_range_is_incompatible(tmp_path: Path, site: Path) -> None:
    install_dist(site, version="1.2.0")
    report = validate_bundle(app(tmp_path, "{name: '@acme/tools', version: '>=2'}"), env={})
    issue = only(report.errors, "E_PACKAGE_INCOMPATIBLE")
    assert "acme-tools 1.2.0" in issue.message and ">=2" in issue.message
    assert issue.suggestion is not None and "acme-tools>=2" in issue.suggestion


def test_bare_version_means_exactly_that_version(tmp_path: Path, site: Path) -> None:
    install_dist(site, version="1.2.0")
    assert not validate_bundle(app(tmp_path, "{name: '@acme/tools', version: 1.2.0}"), env={}).errors
    report = validate_bundle(app(tmp_path, "{name: '@acme/tools', version: 1.2.1}"), env={})
    only(report.errors, "E_PACKAGE_INCOMPATIBLE")


def test_package_shipped_under_another_distribution_name_is_found(tmp_path: Path, site: Path) -> None:
    install_dist(site, dist="goondan-acme-kit")
    assert not validate_bundle(app(tmp_path, "{name: '@acme/tools'}"), env={}).errors
    # naming the distribution explicitly pins it: a different one providing the name is not used
    report = validate_bundle(app(tmp_path, "{name: '@acme/tools', distribution: other-dist}"), env={})
    issue = only(report.errors, "E_PACKAGE_MISSING")
    assert issue.suggestion is not None and "other-dist" in issue.suggestion


def test_entry_point_without_goondan_yaml_is_an_invalid_package(tmp_path: Path, site: Path) -> None:
    install_dist(site, manifest=False)
    report = validate_bundle(app(tmp_path, "{name: '@acme/tools'}"), env={})
    only(report.errors, "E_PACKAGE_INVALID")


def test_package_whose_manifest_names_another_package_is_invalid(tmp_path: Path, site: Path) -> None:
    install_dist(site, ep_name="@acme/other")
    report = validate_bundle(app(tmp_path, "{name: '@acme/other', distribution: acme-tools}"), env={})
    assert "E_PACKAGE_INVALID" in {e.code for e in report.errors}


def test_version_that_is_no_pep440_range_is_a_schema_error(tmp_path: Path, site: Path) -> None:
    install_dist(site)
    report = validate_bundle(app(tmp_path, "{name: '@acme/tools', version: '^1.2'}"), env={})
    issue = only(report.errors, "E_CONFIG_SCHEMA_INVALID")
    assert "PEP 440" in issue.message


def test_base_package_is_found_through_our_own_entry_point() -> None:
    dist = metadata.distribution(DIST_NAME)
    (ep,) = [e for e in dist.entry_points if e.group == ENTRY_POINT_GROUP]
    assert ep.name == "@goondan/base"
    assert resolved_base_root() == Path(importlib.import_module(ep.value).__file__ or "").parent.resolve()


def test_default_distribution_of_a_scoped_name() -> None:
    assert default_distribution("@acme/tools") == "acme-tools"
    assert default_distribution("tools") == "tools"


@given(st.from_regex(r"\A(0|[1-9][0-9]{0,3})(\.(0|[1-9][0-9]{0,3})){0,3}\Z"))
def test_a_bare_version_admits_exactly_itself(raw: str) -> None:
    spec = SpecifierSet(_as_specifier(raw))
    version = Version(raw)
    assert spec.contains(version, prereleases=True)
    assert not spec.contains(Version(f"{raw}.1"), prereleases=True)


def test_a_dependency_that_cannot_load_is_one_error_not_also_each_reference(tmp_path: Path, site: Path) -> None:
    """A raised range: besides E_PACKAGE_INCOMPATIBLE, every reference to the package's resources
    said 'references package ..., which is not available' with 'install it and record it: gdn package
    add ...', though it is installed (in another version)."""
    install_dist(site, version="1.2.0")
    report = validate_bundle(app(tmp_path, "{name: '@acme/tools', version: '>=2'}"), env={})
    assert [e.code for e in report.errors] == ["E_PACKAGE_INCOMPATIBLE"], [e.message for e in report.errors]
