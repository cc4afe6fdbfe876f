"""Every example in the documentation runs, offline, and prints what the page says it prints.

The collector reads every page under ``docs/`` and ``README.md`` and, page by page in a fresh sandbox
(a copy of ``examples/`` and ``docs/cookbook/``, its own state root, the project's ``.venv`` on PATH):

- ```` ```console ```` blocks: each ``$ command`` runs with bash; the lines under it are its expected
  output (``...`` on a line of its own stands for any number of lines);
- ```` ```bash ````/```` ```sh ```` blocks run as one ``bash -e`` script; ```` ```python ```` blocks run with this
  interpreter; either is compared with the next block when that one is annotated ``output``;
- ```` ```yaml ````, ```` ```json ```` and ```` ```toml ```` blocks must parse;
- ``--8<-- "path"`` lines (pymdownx.snippets) are replaced by the file, so an included bundle file is
  the file that is shown.

A block may be annotated by an HTML comment on the line before its fence (invisible on the site):
``<!-- docs-test: skip REASON -->`` (never run: needs the network, a cluster, a paid API...),
``<!-- docs-test: file PATH -->`` (write the block to PATH in the sandbox, e.g. a bundle that later
commands run), ``<!-- docs-test: pytest -->`` (a test module: run it with pytest) and
``<!-- docs-test: output -->`` (the expected output of the block before). A block made only of
``--8<--`` lines shows files of the repository that the page's commands run: it only has to compile
or parse. A runnable block that
installs packages or reaches the network without a ``skip`` annotation is refused, so nothing that
cannot run offline slips in unannotated.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(
    [p for p in DOCS.rglob("*.md") if "_hooks" not in p.parts] + [ROOT / "README.md"],
)
RUNNABLE = {"console", "bash", "sh", "python"}
PARSED = {"yaml", "json", "toml"}
ANNOTATION = re.compile(r"^\s*<!--\s*docs-test:\s*(\w+)\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)(.*)$")
SNIPPET = re.compile(r"""^\s*-{1,}8<-{1,}\s+["']([^"']+)["']\s*$""")
# commands that need the network, a package index, a container runtime or a cluster: refused unless
# the block says `skip` and why
UNRUNNABLE = re.compile(
    r"\b(pip install|uv pip|uv add|apt-get|docker|curl|wget|twine|git clone|systemctl|journalctl|ray start|"
    r"ray stop|phoenix serve|gdn package (add|install|lock))\b|https?://(?!127\.0\.0\.1|localhost)"
)
TIMEOUT = 60


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    body: str
    kind: str = ""  # annotation: skip, file, pytest, output ("" when none)
    arg: str = ""
    expected: str | None = None  # the output the page shows for it
    children: list[Block] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def _resolve_snippet(path: str) -> str:
    for base in (DOCS, ROOT):
        candidate = base / path
        if candidate.is_file():
            return candidate.read_text(encoding="utf-8").rstrip("\n")
    raise AssertionError(f"snippet {path!r} not found under docs/ or the repository root")


def parse(page: Path) -> list[Block]:
    """The fenced blocks of a page with their annotations; ``output`` blocks become ``expected``."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    pending: tuple[str, str] | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        note = ANNOTATION.match(line)
        if note:
            pending = (note.group(1), note.group(2))
            i += 1
            continue
        fence = FENCE.match(line)
        if not fence:
            if line.strip():
                pending = None
            i += 1
            continue
        indent, marker, lang = fence.group(1), fence.group(2), fence.group(3).lower()
        body: list[str] = []
        snippets = 0
        start = i + 1
        i += 1
        while i < len(lines) and not re.match(rf"^\s*{re.escape(marker)}\s*$", lines[i]):
            text = lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i].lstrip()
            snip = SNIPPET.match(text)
            body.append(_resolve_snippet(snip.group(1)) if snip else text)
            snippets += bool(snip)
            i += 1
        i += 1
        block = Block(page, start, lang, "\n".join(body) + "\n")
        if pending:
            block.kind, block.arg = pending
            pending = None
        elif snippets and snippets == len(body):
            # a file of the repository shown as it is: the page's commands run it; here it must compile
            block.kind = "included"
        if block.kind == "output":
            assert blocks, f"{block.where}: an output block needs a block before it"
            blocks[-1].expected = block.body
            continue
        blocks.append(block)
    return blocks


def lines_match(expected: list[str], actual: list[str]) -> bool:
    """``expected`` equals ``actual`` line by line (trailing spaces ignored); a line that is just ``...``
    matches any run of lines."""
    if not expected:
        return not actual
    head = expected[0]
    if head.strip() == "...":
        return any(lines_match(expected[1:], actual[k:]) for k in range(len(actual) + 1))
    return bool(actual) and _line_matches(head, actual[0]) and lines_match(expected[1:], actual[1:])


def _line_matches(expected: str, actual: str) -> bool:
    """Equal lines, where ``...`` inside an expected line stands for any text (an id, a duration)."""
    parts = [re.escape(p) for p in expected.rstrip().split("...")]
    return re.fullmatch(".*".join(parts), actual.rstrip()) is not None


def _console_commands(body: str) -> list[tuple[str, list[str]]]:
    commands: list[tuple[str, list[str]]] = []
    lines = body.splitlines()
    k = 0
    while k < len(lines):
        line = lines[k]
        if line.startswith("$ "):
            command = line[2:]
            while command.endswith("\\") and k + 1 < len(lines):
                k += 1
                command = command[:-1] + "\n" + lines[k]
            commands.append((command, []))
        elif commands:
            commands[-1][1].append(line)
        elif line.strip():
            raise AssertionError(f"console block line before any '$ ' command: {line!r}")
        k += 1
    return commands


class Sandbox:
    def __init__(self, root: Path) -> None:
        self.root = root
        shutil.copytree(ROOT / "examples", root / "examples", ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copytree(
            DOCS / "cookbook", root / "docs" / "cookbook", ignore=shutil.ignore_patterns("__pycache__", "*.md")
        )
        (root / ".venv").symlink_to(sys.prefix, target_is_directory=True)  # the README says .venv/bin/gdn
        venv_bin = str(Path(sys.executable).parent)
        self.env = {
            **os.environ,
            "PATH": venv_bin + os.pathsep + os.environ.get("PATH", ""),
            "GOONDAN_STATE_ROOT": str(root / "state"),
            "NO_COLOR": "1",
            "COLUMNS": "100",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        self.env.pop("PYTEST_ADDOPTS", None)
        self.env.pop("PYTEST_CURRENT_TEST", None)
        self.count = 0

    def run(self, argv: list[str], where: str) -> str:
        proc = subprocess.run(
            argv, cwd=self.root, env=self.env, capture_output=True, text=True, timeout=TIMEOUT, check=False
        )
        assert proc.returncode == 0, (
            f"{where}: {' '.join(argv)[:200]} exited {proc.returncode}\n"
            f"--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}"
        )
        return proc.stdout

    def script(self, suffix: str, text: str) -> Path:
        self.count += 1
        path = self.root / f"_docs_block_{self.count}{suffix}"
        path.write_text(text, encoding="utf-8")
        return path


def _check_output(block: Block, printed: str, expected: str | None) -> None:
    if expected is None:
        return
    want = expected.rstrip("\n").splitlines()
    got = printed.rstrip("\n").splitlines()
    assert lines_match(want, got), f"{block.where}: printed\n{printed}\nbut the page shows\n{expected}"


def run_block(box: Sandbox, block: Block) -> None:
    if block.kind == "skip":
        return
    # never run what needs the network or installs packages, even when the page forgot to say so
    assert not (block.lang in RUNNABLE and UNRUNNABLE.search(block.body)), (
        f"{block.where}: needs the network or a cluster; annotate <!-- docs-test: skip REASON -->"
    )
    if block.kind == "included":
        if block.lang == "python":
            compile(block.body, block.where, "exec")
    elif block.kind == "file":
        target = box.root / block.arg
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.body, encoding="utf-8")
        if block.lang not in PARSED:
            return
    if block.lang == "yaml":
        list(yaml.safe_load_all(block.body))
    elif block.lang == "json":
        json.loads(block.body)
    elif block.lang == "toml":
        tomllib.loads(block.body)
    elif block.lang == "python":
        if block.kind == "pytest":
            path = box.script(".py", block.body)
            path = path.rename(path.with_name("test" + path.name))
            box.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(path)], block.where)
        elif block.kind not in ("file", "included"):
            out = box.run([sys.executable, str(box.script(".py", block.body))], block.where)
            _check_output(block, out, block.expected)
    elif block.lang in ("bash", "sh") and block.kind not in ("file", "included"):
        out = box.run(["bash", "-e", "-o", "pipefail", str(box.script(".sh", block.body))], block.where)
        _check_output(block, out, block.expected)
    elif block.lang == "console":
        for command, shown in _console_commands(block.body):
            proc = subprocess.run(
                ["bash", "-o", "pipefail", "-c", command],
                cwd=box.root,
                env=box.env,
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
                check=False,
            )
            assert proc.returncode == 0, (
                f"{block.where}: $ {command} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
            )
            if any(s.strip() for s in shown):
                _check_output(block, proc.stdout, "\n".join(shown))


ALL_BLOCKS = {page: parse(page) for page in PAGES}


def test_every_runnable_block_runs_offline_or_says_why_not() -> None:
    problems = []
    for blocks in ALL_BLOCKS.values():
        for block in blocks:
            if block.kind == "skip" and not block.arg:
                problems.append(f"{block.where}: 'skip' needs a reason")
            if block.lang in RUNNABLE and block.kind != "skip" and UNRUNNABLE.search(block.body):
                problems.append(
                    f"{block.where}: needs the network or a cluster; annotate <!-- docs-test: skip REASON -->"
                )
            if block.kind not in ("", "skip", "file", "pytest", "included"):
                problems.append(f"{block.where}: unknown annotation {block.kind!r}")
    assert problems == []


def test_the_pages_have_examples_to_run() -> None:
    """The collector is not vacuous: the cookbook and getting-started pages carry runnable blocks."""
    ran = [b for blocks in ALL_BLOCKS.values() for b in blocks if b.lang in RUNNABLE and b.kind != "skip"]
    assert len(ran) >= 20
    assert any(b.page.name == "getting-started.md" for b in ran)
    assert sum(1 for b in ran if "cookbook" in b.page.parts) >= 5


def test_output_matching_treats_dots_as_any_lines() -> None:
    assert lines_match(["a", "...", "z"], ["a", "b", "c", "z"])
    assert lines_match(["a", "...", "z"], ["a", "z"])
    assert not lines_match(["a", "z"], ["a", "b", "z"])
    assert not lines_match(["a", "...", "z"], ["a", "b"])
    assert lines_match(["id appr_... ok"], ["id appr_12ab ok"])
    assert not lines_match(["id appr_... ok"], ["id appr_12ab failed"])


def run_page(page: Path, root: Path) -> None:
    box = Sandbox(root)
    for block in ALL_BLOCKS[page]:
        run_block(box, block)


RUNNABLE_PAGES = [p for p, blocks in ALL_BLOCKS.items() if any(b.kind != "skip" for b in blocks)]


@pytest.fixture(scope="module")
def page_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[Path, Future[None]]:
    """Start every selected page at once, two at a time: each page is a chain of child processes that
    mostly wait on each other, so the pages share the machine well and the whole run takes about half
    the time of one page after another. Each test then waits for its own page and reports it."""
    selected = [
        item.callspec.params["page"]
        for item in request.session.items
        if item.originalname == "test_page_examples_run_and_print_what_the_page_shows"
    ]
    pool = ThreadPoolExecutor(max_workers=2)
    request.addfinalizer(lambda: pool.shutdown(wait=True, cancel_futures=True))
    return {page: pool.submit(run_page, page, tmp_path_factory.mktemp("docs-page")) for page in selected}


@pytest.mark.parametrize("page", RUNNABLE_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_page_examples_run_and_print_what_the_page_shows(page: Path, page_runs: dict[Path, Future[None]]) -> None:
    page_runs[page].result()
