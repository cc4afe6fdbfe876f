"""The repository documents itself: every reference a reader meets can be followed inside the repository.

Code comments cite ``docs/architecture.md#anchor`` (or another file under ``docs/``) or state the rule
itself; they never cite section numbers of documents that are not in the repository. The architecture
document and CONTRIBUTING.md name only modules, files and directories that exist, so they cannot
silently drift from the tree.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "goondan"
DOCS = ROOT / "docs"

# Section-number citations of documents that live outside the repository (the original specification
# and its digest): "digest §2.5", "CONTRACT §8", "seed 001 §2.1", or a bare "§2.8".
OUTSIDE_CITATION = re.compile(r"§|\bdigest\s+§|\bCONTRACT\b|\bseed\s+\d{3}\b|\bSSOT\b")
DOC_LINK = re.compile(r"\bdocs/([A-Za-z0-9_.-]+\.md)(?:#([A-Za-z0-9_-]+))?")
# Backticked repository paths and dotted goondan names in the architecture document and CONTRIBUTING.md.
PATH_REF = re.compile(r"`((?:src|tests|bench|docs|examples|\.ci)/[^`\s*]*?)/?`")
MODULE_REF = re.compile(r"`(goondan(?:\.[A-Za-z_][A-Za-z0-9_]*)+)`")

# Anchors that code comments rely on: renaming one of these headings breaks the citations.
REQUIRED_ANCHORS = (
    "layers",
    "import-contracts",
    "the-path-of-a-request",
    "where-a-turn-runs",
    "message-events",
    "where-processes-are-spawned",
    "wire-protocol",
    "durability",
    "single-writer-lease",
    "inter-agent-calls",
    "adding-an-executor",
    "adding-a-store",
    "adding-a-provider",
    "adding-a-built-in-extension",
)


def anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors_of(doc: Path) -> set[str]:
    found: set[str] = set()
    in_fence = False
    for line in doc.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
        elif not in_fence and (match := re.match(r"#{1,6}\s+(.*)", line)):
            found.add(anchor(match.group(1)))
    return found


def source_files() -> list[Path]:
    return sorted(p for p in SRC.rglob("*") if p.suffix in (".py", ".yaml", ".md") and "__pycache__" not in p.parts)


def citing_files() -> list[Path]:
    docs = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted(DOCS.glob("*.md"))]
    return [*source_files(), *(p for p in docs if p.exists())]


def test_source_cites_no_section_of_a_document_outside_the_repository() -> None:
    guides = [ROOT / "CONTRIBUTING.md", *sorted(DOCS.glob("*.md"))]
    offenders = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in [*source_files(), *guides]
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if OUTSIDE_CITATION.search(line)
    ]
    assert offenders == [], "state the rule or cite docs/architecture.md#anchor instead:\n" + "\n".join(offenders)


def test_every_cited_document_and_anchor_exists() -> None:
    broken: list[str] = []
    for path in citing_files():
        for match in DOC_LINK.finditer(path.read_text(encoding="utf-8")):
            name, fragment = match.groups()
            doc = DOCS / name
            if not doc.is_file():
                broken.append(f"{path.relative_to(ROOT)}: docs/{name} does not exist")
            elif fragment is not None and fragment not in anchors_of(doc):
                broken.append(f"{path.relative_to(ROOT)}: docs/{name} has no heading for #{fragment}")
    assert broken == []


def test_architecture_doc_keeps_the_anchors_code_cites() -> None:
    missing = sorted(set(REQUIRED_ANCHORS) - anchors_of(DOCS / "architecture.md"))
    assert missing == []


def _module_resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        try:
            spec = importlib.util.find_spec(module)
        except ModuleNotFoundError:
            spec = None
        if spec is None:
            continue
        obj: object = importlib.import_module(module)
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


@pytest.mark.parametrize("doc", ["docs/architecture.md", "CONTRIBUTING.md"])
def test_guide_names_only_paths_and_modules_that_exist(doc: str) -> None:
    text = (ROOT / doc).read_text(encoding="utf-8")
    paths = {p.split("#")[0].split("::")[0] for p in PATH_REF.findall(text) if "<" not in p}
    missing_paths = sorted(p for p in paths if not (ROOT / p).exists())
    modules = {m for m in MODULE_REF.findall(text) if not m.endswith((".yaml", ".yml", ".json", ".md"))}
    missing_modules = sorted(m for m in modules if not _module_resolves(m))
    assert (missing_paths, missing_modules) == ([], [])


def test_contributing_uses_the_readme_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    contributing = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    for command in (".venv/bin/python -m pytest", ".ci/run"):
        assert command in contributing
    assert ".venv/bin/python -m pytest" in readme
    for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines():
        # every check CI runs is one a contributor is told how to run locally
        for tool in ("ruff check", "ruff format", "mypy", "lint-imports"):
            if tool in line and not line.lstrip().startswith("#"):
                assert tool in contributing, f"CONTRIBUTING.md does not say how to run {tool!r}"


@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=40))
def test_anchor_ignores_code_spans_and_has_no_spaces(heading: str) -> None:
    # "`Executor` protocol" is cited as #executor-protocol; an ASCII anchor is one DOC_LINK reads whole
    assert anchor(heading.replace("`", "")) == anchor(heading)
    assert re.fullmatch(r"[\w-]*", anchor(heading))
    if anchor(heading).isascii() and anchor(heading):
        assert DOC_LINK.fullmatch(f"docs/x.md#{anchor(heading)}")
