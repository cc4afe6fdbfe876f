"""The test tree is easy to find one's way in: one set of bundle helpers (``tests/kit``) instead of a
copy per directory, and test directories that mirror ``src/goondan`` so a module's tests sit where the
module sits."""

from __future__ import annotations

import ast
from pathlib import Path

import yaml

import kit

TESTS = Path(__file__).resolve().parent
SRC = TESTS.parent / "src" / "goondan"

# helpers that exist once, in tests/kit; a directory-specific builder gets a name of its own
SHARED = {
    "write_bundle",
    "write_files",
    "package_doc",
    "model_doc",
    "python_model_doc",
    "agent_doc",
    "tool_doc",
    "extension_doc",
    "swarm_doc",
    "read_jsonl",
    "instance_dir",
    "instance_dirs",
    "tool_results",
}

# test directories that mirror something outside src/goondan
NOT_SOURCE = {"kit": "the shared helpers", "bench": "bench/ at the top of the repository"}
# test directories still waiting for their move (the executor work is reshaping them)
PENDING: dict[str, str] = {}
# test directories that group the tests of several modules of one package
GROUPS = {"models/providers": "goondan/models/_openai.py, _anthropic.py, _google.py, _local.py ..."}


def _definitions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_bundle_helpers_are_defined_once_in_the_kit() -> None:
    copies = sorted(
        f"{path.relative_to(TESTS)}: {name}"
        for path in TESTS.rglob("*.py")
        if "kit" not in path.relative_to(TESTS).parts[:1]
        for name in _definitions(path) & SHARED
    )
    assert copies == [], "use the helper from tests/kit instead of a local copy"


def test_test_directories_mirror_the_source_tree() -> None:
    strays = sorted(
        str(rel)
        for d in TESTS.rglob("*")
        if d.is_dir() and d.name != "__pycache__"
        for rel in [d.relative_to(TESTS)]
        if rel.parts[0] not in NOT_SOURCE | PENDING.keys()
        and str(rel) not in GROUPS
        and not (SRC / rel / "__init__.py").exists()
    )
    assert strays == [], "a test directory is named after the source package it tests"


def test_write_bundle_dumps_dict_documents_like_one_yaml_stream(tmp_path: Path) -> None:
    docs = [kit.package_doc(), kit.python_model_doc(), kit.agent_doc("a", tools=["t"]), kit.swarm_doc(["a"])]
    kit.write_bundle(tmp_path, *docs)
    text = (tmp_path / "goondan.yaml").read_text(encoding="utf-8")
    assert text == yaml.safe_dump_all(docs, sort_keys=False)
    assert list(yaml.safe_load_all(text)) == docs


def test_write_bundle_keeps_text_documents_as_written_after_dedent(tmp_path: Path) -> None:
    head = "    kind: Package\n    metadata: {name: p}\n"
    kit.write_bundle(tmp_path, head, "kind: Agent\nmetadata: {name: a}", kit.agent_yaml("b"))
    text = (tmp_path / "goondan.yaml").read_text(encoding="utf-8")
    assert text == "kind: Package\nmetadata: {name: p}\n---\nkind: Agent\nmetadata: {name: a}\n---\n" + kit.agent_yaml(
        "b"
    )


def test_write_files_dedents_bodies_and_drops_leading_blank_lines(tmp_path: Path) -> None:
    kit.write_bundle(tmp_path, kit.package_doc(), files={"tools/t.py": "\n    def f():\n        return 1\n"})
    assert (tmp_path / "tools" / "t.py").read_text(encoding="utf-8") == "def f():\n    return 1\n"


def test_test_modules_outside_packages_have_unique_names() -> None:
    """pytest imports a test file outside a package by its bare name, so two ``test_x.py`` in plain
    directories stop the whole run at collection ("import file mismatch")."""
    seen: dict[str, Path] = {}
    clashes = []
    for path in sorted(TESTS.rglob("test_*.py")):
        if (path.parent / "__init__.py").exists():
            continue
        if path.name in seen:
            clashes.append(f"{seen[path.name].relative_to(TESTS)} and {path.relative_to(TESTS)}")
        seen.setdefault(path.name, path)
    assert not clashes, "test files with the same name (rename one): " + "; ".join(clashes)
