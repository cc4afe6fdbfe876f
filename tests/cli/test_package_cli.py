"""Goondan packages the Python way, end to end: ``gdn init -t package`` -> ``gdn package build`` (a real
wheel through PEP 517) -> ``gdn package add`` in a fresh virtual environment from a local wheel
directory (no network) -> ``gdn validate`` / ``gdn run`` of a bundle using the package's tool ->
``gdn package install`` from ``goondan.lock`` into another fresh environment, hashes checked.

The fresh environments are real venvs created with ``python -m venv``. They see this checkout's
environment (our runtime and its dependencies) through a ``.pth`` that adds it as a site directory,
the way ``--system-site-packages`` would for a system Python; whatever ``gdn package`` installs goes
into the fresh venv only.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_testkit import env_for, fresh_venv, gdn

from kit import write_files

pytestmark = pytest.mark.slow

BUNDLE = """\
apiVersion: goondan.ai/v1
kind: Package
metadata:
  name: greeter-app   # the app's own comment survives `gdn package add`
spec:
  version: 0.1.0
---
apiVersion: goondan.ai/v1
kind: Model
metadata:
  name: m
spec:
  provider: scripted
  model: m
  options:
    rules:
      - when: {role: user}
        reply: {toolCalls: [{name: greeting__greet, args: {name: Ada}}]}
      - reply: {text: "tool said: {{last}}"}
---
apiVersion: goondan.ai/v1
kind: Agent
metadata:
  name: a
spec:
  modelConfig: {modelRef: Model/m}
  tools: [{kind: Tool, name: greeting, package: acme-tools}]
---
apiVersion: goondan.ai/v1
kind: Swarm
metadata:
  name: default
spec:
  entryAgent: Agent/a
  agents: [Agent/a]
"""


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``gdn init -t package`` + ``gdn package build``, once for the module: a real wheel and sdist."""
    tmp_path = tmp_path_factory.mktemp("package")
    created = gdn(tmp_path, "init", "-t", "package", "acme", "--name", "acme-tools")
    assert created.returncode == 0, created.stderr
    assert (tmp_path / "acme" / "acme_tools" / "goondan.yaml").is_file()
    out = tmp_path / "wheels"
    built = gdn(tmp_path, "package", "build", "--path", "acme", "--no-isolation", "-o", str(out))
    assert built.returncode == 0, built.stderr
    assert "twine upload" in built.stdout
    assert sorted(p.suffix for p in out.iterdir()) == [".gz", ".whl"]
    return out


def gdn_in(python: Path, tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = env_for(tmp_path, GOONDAN_STATE_ROOT=str(tmp_path / "state"), **extra)
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run(
        [str(python), "-m", "goondan", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )


def test_package_built_added_and_locked_runs_in_a_fresh_venv(tmp_path: Path, wheels: Path) -> None:

    python = fresh_venv(tmp_path / "venv")
    app = write_files(tmp_path / "app", {"goondan.yaml": BUNDLE})
    unknown = gdn_in(python, tmp_path, "validate", "app")
    assert unknown.returncode == 4
    assert "E_CONFIG_REF_NOT_FOUND" in unknown.stdout and "gdn package add acme-tools" in unknown.stdout
    declared = write_files(
        tmp_path / "declared",
        {
            "goondan.yaml": BUNDLE.replace(
                "version: 0.1.0\n", "version: 0.1.0\n  dependencies: [{name: acme-tools, version: '>=0.1'}]\n", 1
            )
        },
    )
    missing = gdn_in(python, tmp_path, "validate", str(declared))
    assert missing.returncode == 4
    assert "E_PACKAGE_MISSING" in missing.stdout and "gdn package add 'acme-tools>=0.1'" in missing.stdout

    added = gdn_in(
        python,
        tmp_path,
        "package",
        "add",
        "acme-tools>=0.1",
        "--path",
        "app",
        "--no-index",
        "--find-links",
        str(wheels),
    )
    assert added.returncode == 0, added.stderr
    manifest = (app / "goondan.yaml").read_text()
    assert '- {name: "acme-tools", version: ">=0.1"}' in manifest
    assert "# the app's own comment survives" in manifest
    lock = (app / "goondan.lock").read_text()
    (wheel,) = wheels.glob("*.whl")
    assert "acme-tools==0.1.0" in lock and f"--hash=sha256:{hashlib.sha256(wheel.read_bytes()).hexdigest()}" in lock
    # installed into the fresh venv, not into the environment running the tests
    assert list((tmp_path / "venv" / "lib").glob("python3*/site-packages/acme_tools/goondan.yaml"))
    assert subprocess.run([sys.executable, "-c", "import acme_tools"], capture_output=True).returncode != 0

    valid = gdn_in(python, tmp_path, "validate", "app")
    assert valid.returncode == 0, valid.stdout + valid.stderr
    ran = gdn_in(python, tmp_path, "run", "app", "--input", "hi")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "tool said: Hello, Ada!"

    # another machine: a fresh venv gets exactly what goondan.lock pins
    other = fresh_venv(tmp_path / "venv2")
    assert gdn_in(other, tmp_path, "validate", "app").returncode == 4
    installed = gdn_in(
        other, tmp_path, "package", "install", "--path", "app", "--no-index", "--find-links", str(wheels)
    )
    assert installed.returncode == 0, installed.stderr
    assert gdn_in(other, tmp_path, "run", "app", "--input", "hi").stdout.strip() == "tool said: Hello, Ada!"


def test_pip_does_the_same_when_uv_is_not_there(tmp_path: Path, wheels: Path) -> None:
    app = write_files(tmp_path / "app", {"goondan.yaml": BUNDLE})
    python = fresh_venv(tmp_path / "venv")
    added = gdn_in(
        python,
        tmp_path,
        "package",
        "add",
        "acme-tools",
        "--path",
        "app",
        "--no-index",
        "--find-links",
        str(wheels),
        GOONDAN_INSTALLER="pip",
    )
    assert added.returncode == 0, added.stderr
    assert " -m pip install" in added.stderr and "uv pip" not in added.stderr
    (wheel,) = wheels.glob("*.whl")
    assert f"--hash=sha256:{hashlib.sha256(wheel.read_bytes()).hexdigest()}" in (app / "goondan.lock").read_text()
    assert '- {name: "acme-tools", version: ">=0.1.0"}' in (app / "goondan.yaml").read_text()
    assert gdn_in(python, tmp_path, "run", "app", "--input", "hi").stdout.strip() == "tool said: Hello, Ada!"


def test_lock_pins_the_installed_version_not_the_newest_in_range(tmp_path: Path, wheels: Path) -> None:
    newer = tmp_path / "newer"
    assert gdn(tmp_path, "init", "-t", "package", "acme2", "--name", "acme-tools").returncode == 0
    pyproject = tmp_path / "acme2" / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('version = "0.1.0"', 'version = "0.2.0"'))
    assert gdn(tmp_path, "package", "build", "--path", "acme2", "--no-isolation", "-o", str(newer)).returncode == 0
    links = ["--no-index", "--find-links", str(wheels), "--find-links", str(newer)]
    app = write_files(tmp_path / "app", {"goondan.yaml": BUNDLE})
    python = fresh_venv(tmp_path / "venv")
    assert gdn_in(python, tmp_path, "package", "add", "acme-tools<0.2", "--path", "app", *links).returncode == 0
    manifest = app / "goondan.yaml"
    manifest.write_text(manifest.read_text().replace('version: "<0.2"', 'version: ">=0.1"'))
    relocked = gdn_in(python, tmp_path, "package", "lock", "--path", "app", *links)
    assert relocked.returncode == 0, relocked.stderr
    assert "acme-tools==0.1.0" in (app / "goondan.lock").read_text()
    manifest.write_text(manifest.read_text().replace('version: ">=0.1"', 'version: ">=0.2"'))
    assert gdn_in(python, tmp_path, "package", "lock", "--path", "app", *links).returncode == 0
    assert "acme-tools==0.2.0" in (app / "goondan.lock").read_text()  # outside the range: resolved anew


def test_install_refuses_a_wheel_whose_hash_differs_from_the_lock(tmp_path: Path, wheels: Path) -> None:
    write_files(tmp_path / "app", {"goondan.yaml": BUNDLE})
    empty = gdn(tmp_path, "package", "lock", "--path", "app")  # no dependency yet: empty lock
    assert (
        empty.returncode == 0
        and "app/goondan.yaml lists no dependencies: app/goondan.lock pins nothing" in empty.stdout
    )
    (tmp_path / "app" / "goondan.lock").write_text("acme-tools==0.1.0 --hash=sha256:" + "0" * 64 + "\n")
    python = fresh_venv(tmp_path / "venv")
    refused = gdn_in(python, tmp_path, "package", "install", "--path", "app", "--no-index", "--find-links", str(wheels))
    assert refused.returncode == 1
    assert "E_PACKAGE_INSTALL_FAILED" in refused.stderr
    assert not list((tmp_path / "venv" / "lib").glob("python3*/site-packages/acme_tools"))


def test_add_to_a_goondan_yaml_that_does_not_parse_installs_nothing(tmp_path: Path) -> None:
    write_files(tmp_path / "app", {"goondan.yaml": "kind: Package\nmetadata: {name: [\n"})
    result = gdn(tmp_path, "package", "add", "acme-tools", "--path", "app", "--no-index")
    assert result.returncode == 2
    assert "E_CONFIG_PARSE_ERROR" in result.stderr and "Traceback" not in result.stderr
    assert "$ " not in result.stderr  # no installer was started


def test_install_without_a_lock_says_how_to_make_one(tmp_path: Path) -> None:
    write_files(tmp_path / "app", {"goondan.yaml": BUNDLE})
    result = gdn(tmp_path, "package", "install", "--path", "app")
    assert result.returncode == 2
    assert "E_PACKAGE_LOCK_MISSING" in result.stderr and "gdn package lock" in result.stderr


def test_adding_a_plain_library_is_refused_with_a_reason(tmp_path: Path) -> None:
    lib = write_files(
        tmp_path / "plain",
        {
            "pyproject.toml": '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n'
            '[project]\nname = "plain-lib"\nversion = "1.0"\n'
            '[tool.hatch.build.targets.wheel]\npackages = ["plain_lib"]\n',
            "plain_lib/__init__.py": "",
        },
    )
    wheels = tmp_path / "wheels"
    assert gdn(tmp_path, "package", "build", "--path", str(lib), "--no-isolation", "-o", str(wheels)).returncode == 0
    write_files(tmp_path / "app", {"goondan.yaml": BUNDLE})
    python = fresh_venv(tmp_path / "venv")
    result = gdn_in(
        python, tmp_path, "package", "add", "plain-lib", "--path", "app", "--no-index", "--find-links", str(wheels)
    )
    assert result.returncode == 2
    assert "E_PACKAGE_INVALID" in result.stderr and "declares no Goondan package" in result.stderr
    assert "dependencies" not in (tmp_path / "app" / "goondan.yaml").read_text()


def test_build_without_pyproject_points_at_the_template(tmp_path: Path) -> None:
    result = gdn(tmp_path, "package", "build", "--path", ".")
    assert result.returncode == 2
    assert "E_PACKAGE_BUILD_FAILED" in result.stderr and "gdn init -t package" in result.stderr


if os.name != "posix":  # pragma: no cover
    pytestmark = pytest.mark.skip(reason="venv layout of POSIX")


def _lock_pinning(wheels: Path, version: str) -> str:
    """A goondan.lock pinning acme-tools==VERSION with the real hash of the built wheel."""
    (wheel,) = wheels.glob("*.whl")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    return f"# goondan.lock\nacme-tools=={version} \\\n    --hash=sha256:{digest}\n"


@pytest.mark.parametrize(
    ("dependency", "why"),
    [
        ('{name: acme-tools, version: ">=0.2"}', "acme-tools needs >=0.2, it pins acme-tools==0.1.0"),
        ('{name: acme-tools, version: ">=0.1"}, {name: other-tools}', "other-tools is not in it"),
    ],
)
def test_install_refuses_a_lock_that_no_longer_matches_goondan_yaml(
    tmp_path: Path, wheels: Path, dependency: str, why: str
) -> None:
    """goondan.yaml edited after locking (a raised range, a new dependency): install said "installed
    what goondan.lock pins" and the next gdn run failed with E_PACKAGE_INCOMPATIBLE or E_PACKAGE_MISSING."""
    manifest = BUNDLE.replace("  version: 0.1.0\n", f"  version: 0.1.0\n  dependencies: [{dependency}]\n", 1)
    write_files(tmp_path / "app", {"goondan.yaml": manifest, "goondan.lock": _lock_pinning(wheels, "0.1.0")})
    python = fresh_venv(tmp_path / "venv")
    refused = gdn_in(python, tmp_path, "package", "install", "--path", "app", "--no-index", "--find-links", str(wheels))
    assert refused.returncode == 3, refused.stderr
    assert refused.stderr.startswith("[E_PACKAGE_LOCK_STALE]") and why in refused.stderr
    assert "gdn package lock" in refused.stderr and "Traceback" not in refused.stderr
    assert not list((tmp_path / "venv" / "lib").glob("python3*/site-packages/acme_tools"))


def test_lock_of_an_invalid_version_range_is_a_config_error(tmp_path: Path) -> None:
    """A range with a typo ('>=0.1.O') was an INTERNAL_ERROR with a traceback hint (exit 1)."""
    manifest = BUNDLE.replace(
        "  version: 0.1.0\n", '  version: 0.1.0\n  dependencies: [{name: acme-tools, version: ">=0.1.O"}]\n', 1
    )
    write_files(tmp_path / "app", {"goondan.yaml": manifest})
    result = gdn(tmp_path, "package", "lock", "--path", "app", "--no-index")
    assert result.returncode == 3, result.stderr
    assert result.stderr.startswith("[E_CONFIG_SCHEMA_INVALID]") and "'>=0.1.O' is not a PEP 440" in result.stderr
    assert "spec.dependencies[0] (acme-tools)" in result.stderr
    assert not (tmp_path / "app" / "goondan.lock").exists()


def test_add_given_a_package_directory_or_a_wheel_says_the_command_that_works(tmp_path: Path, wheels: Path) -> None:
    """`gdn package add ./acme` (the package's source) or a wheel's path: the parse error of pip's
    requirement grammar, with 'write NAME'; it now says how to add that very package by name."""
    write_files(tmp_path / "app", {"goondan.yaml": BUNDLE})
    source = wheels.parent / "acme"
    by_dir = gdn(tmp_path, "package", "add", str(source), "--path", "app")
    assert by_dir.returncode == 2 and by_dir.stderr.startswith("[E_INVALID_ARGUMENT]")
    local = f"gdn package add acme-tools --no-index --find-links {source / 'dist'}"
    assert f"gdn package build --path {source} && {local}" in by_dir.stderr
    (wheel,) = wheels.glob("*.whl")
    by_file = gdn(tmp_path, "package", "add", str(wheel), "--path", "app")
    assert by_file.returncode == 2
    assert f"gdn package add 'acme-tools==0.1.0' --no-index --find-links {wheels}" in by_file.stderr
    assert "$ " not in by_dir.stderr + by_file.stderr  # no installer was started


def test_a_misspelt_name_offline_names_what_find_links_offers(tmp_path: Path, wheels: Path) -> None:
    write_files(tmp_path / "app", {"goondan.yaml": BUNDLE})
    result = gdn(tmp_path, "package", "add", "acme-tols", "--path", "app", "--no-index", "--find-links", str(wheels))
    assert result.returncode == 1 and "[E_PACKAGE_INSTALL_FAILED]" in result.stderr
    assert "suggestion: did you mean 'acme-tools'? --find-links offers: acme-tools 0.1.0" in result.stderr
    assert "dependencies" not in (tmp_path / "app" / "goondan.yaml").read_text()


def test_a_second_build_after_a_version_bump_names_only_its_own_files(tmp_path: Path) -> None:
    """The second release: dist/ still holds 0.1.0, and build said 'built <0.1.0 and 0.2.0 files>' and
    'upload with: twine upload dist/*', which sends 0.1.0 again (the index refuses it, and twine stops)."""
    assert gdn(tmp_path, "init", "-q", "-t", "package", "acme", "--name", "acme-tools").returncode == 0
    first = gdn(tmp_path, "package", "build", "--path", "acme", "--no-isolation")
    assert first.returncode == 0, first.stderr
    pyproject = tmp_path / "acme" / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('version = "0.1.0"', 'version = "0.2.0"'))
    second = gdn(tmp_path, "package", "build", "--path", "acme", "--no-isolation")
    assert second.returncode == 0, second.stderr
    built = ["acme_tools-0.2.0-py3-none-any.whl", "acme_tools-0.2.0.tar.gz"]
    assert f"built {', '.join(built)} in acme/dist\n" in second.stdout
    assert f"upload with: twine upload acme/dist/{built[0]} acme/dist/{built[1]}\n" in second.stdout
    assert len(list((tmp_path / "acme" / "dist").iterdir())) == 4  # the earlier release is kept


def test_build_inside_the_package_points_at_its_project(tmp_path: Path) -> None:
    """`gdn package build` where the package's goondan.yaml is (acme/acme_tools, where `gdn validate`
    runs) said 'start one with gdn init -t package DIR', as if there were no package at all."""
    assert gdn(tmp_path, "init", "-q", "-t", "package", "acme", "--name", "acme-tools").returncode == 0
    inner = gdn(tmp_path / "acme" / "acme_tools", "package", "build")
    assert inner.returncode == 2 and "E_PACKAGE_BUILD_FAILED" in inner.stderr
    assert "suggestion: build the package project that holds it: gdn package build --path .." in inner.stderr


def test_adding_the_first_package_document_says_where_the_conversations_so_far_stay(
    tmp_path: Path, wheels: Path
) -> None:
    """A bundle without a Package document: `add` writes one, which moves the bundle's identity from
    its directory to the Package name, so the next gdn run started a new conversation and the earlier
    ones were nowhere to be seen. The add says so, and where they are."""
    no_package = BUNDLE.split("---\n", 1)[1]
    tool = "  tools: [{kind: Tool, name: greeting, package: acme-tools}]\n"
    state = str(tmp_path / "state")  # gdn_in's state root too
    # a conversation of the bundle while its directory is its identity (before it uses the package)
    write_files(tmp_path / "app", {"goondan.yaml": no_package.replace(tool, "")})
    assert gdn(tmp_path, "run", "app", "--input", "hi", GOONDAN_STATE_ROOT=state).returncode == 0
    write_files(tmp_path / "app", {"goondan.yaml": no_package})
    python = fresh_venv(tmp_path / "venv")
    added = gdn_in(
        python, tmp_path, "package", "add", "acme-tools", "--path", "app", "--no-index", "--find-links", str(wheels)
    )
    assert added.returncode == 0, added.stderr
    assert "note: app/goondan.yaml had no Package document; gdn package add added one named 'app'." in added.stderr
    assert "the 1 instance(s) so far stay in workspace app-default-" in added.stderr
