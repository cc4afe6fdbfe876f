"""The goondan pytest plugin (entry point ``pytest11: goondan``): fixtures for testing agents.

* ``goondan_runner``: a factory, ``goondan_runner(bundle, override_models=..., cassette=...)``,
  returning a started :class:`goondan.testing.AgentRunner` on a state root under the test's
  ``tmp_path``; every runner is closed when the test ends.
* ``goondan_cassette``: the path of this test's cassette, ``<test dir>/cassettes/<module>/<test>.json``.
* ``--goondan-record``: record cassettes again against the real providers (default: replay a cassette
  that exists, record one that does not; ``--goondan-record=none`` never records, for CI).

Fixture and option names carry the ``goondan_`` prefix so they never collide with a project's own
(``state_root``, ``runner``...). Nothing heavy is imported until a fixture is used: every pytest run
in an environment with goondan installed loads this module.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ._runner import AgentRunner

_RECORD_MODES = {"new": "auto", "all": "record", "none": "replay"}
_STATE_ROOTS = pytest.StashKey[list[Path]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("goondan", "goondan agent tests")
    group.addoption(
        "--goondan-record",
        nargs="?",
        const="all",
        default="new",
        choices=sorted(_RECORD_MODES),
        help="provider cassettes: 'new' records missing ones and replays the rest (default), 'all' "
        "(the option alone) records every one again, 'none' only replays (CI)",
    )


def _cassette_mode(config: pytest.Config) -> str:
    return _RECORD_MODES[str(config.getoption("goondan_record"))]


@pytest.fixture
def goondan_cassette(request: pytest.FixtureRequest) -> Path:
    """Where this test's cassette lives: next to the test file, one JSON file per test."""
    test_file = Path(str(request.node.path))
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    return test_file.parent / "cassettes" / test_file.stem / f"{name}.json"


@pytest.fixture
def goondan_runner(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., AgentRunner]]:
    """``goondan_runner(bundle, **options)`` starts an :class:`~goondan.testing.AgentRunner`."""
    from ._runner import AgentRunner

    runners: list[AgentRunner] = []
    mode = _cassette_mode(request.config)
    roots = request.node.stash.setdefault(_STATE_ROOTS, [])

    def start(bundle: Any, **options: Any) -> AgentRunner:
        options.setdefault("state_root", tmp_path / f"goondan-state-{len(runners)}")
        if options.get("cassette") is not None:
            options.setdefault("cassette_mode", mode)
        runner = AgentRunner(bundle, **options)
        runners.append(runner)
        roots.append(runner.state_root)
        return runner.start()

    yield start
    for runner in reversed(runners):
        runner.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A failed test that ran agents says where their state is (``gdn logs --state-root DIR``)."""
    report = yield
    roots = item.stash.get(_STATE_ROOTS, None)
    if roots and report.failed and call.when == "call":
        lines = [f"gdn logs --state-root {root}" for root in roots]
        report.sections.append(("goondan state roots", "\n".join(lines)))
    return report
