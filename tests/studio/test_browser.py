"""Studio in a real headless Chromium (Playwright's Python API on Debian's chromium), over the state
of a real two-agent run served by a real ``gdn studio`` subprocess: the instance list, a conversation
with a tool call and its result, the trace waterfall across both agents, a live update while the page
is open, no console errors. Also measures first paint and time to interactive on a large state root
(printed, loosely bounded). One browser per module."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import sync_playwright
from studio_testkit import Studio, big_state, delegation_bundle, delegation_run, gdn_studio, run_turns

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# the README's picture; refreshed only when asked, so a test run leaves the checkout clean
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "images" / "studio.png"
UPDATE_SCREENSHOT = os.environ.get("GOONDAN_UPDATE_SCREENSHOT") == "1"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium package (.ci/run does)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return delegation_run(tmp_path_factory.mktemp("studio-browser"))


@pytest.fixture(scope="module")
def studio(run: tuple[Path, Path]) -> Iterator[Studio]:
    bundle, state = run
    with gdn_studio(str(bundle), "--state-root", str(state)) as s:
        yield s


class Page:
    """A fresh page that records console errors and uncaught exceptions."""

    def __init__(self, browser: Any) -> None:
        self.page = browser.new_page(viewport={"width": 1400, "height": 860})
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))


@pytest.fixture
def page(browser: Any) -> Iterator[Page]:
    p = Page(browser)
    yield p
    p.page.close()
    assert p.errors == [], "the page logged errors"


def open_instance(page: Page, studio: Studio, agent: str, tab: str = "conversation") -> None:
    page.page.goto(studio.url)
    page.page.wait_for_selector("[data-testid=instance-row]")
    page.page.click(f"[data-testid=instance-row][data-agent={agent}]")
    if tab != "conversation":
        page.page.click(f"button[data-tab={tab}]")


def test_the_instance_list_shows_both_agents_with_status_and_turns(page: Page, studio: Studio) -> None:
    page.page.goto(studio.url)
    rows = page.page.locator("[data-testid=instance-row]")
    rows.first.wait_for()
    assert sorted(rows.evaluate_all("els => els.map(e => e.dataset.agent)")) == ["helper", "lead"]
    lead = page.page.locator("[data-testid=instance-row][data-agent=lead]")
    assert lead.locator("[data-testid=status]").inner_text() == "idle"
    assert lead.locator("[data-testid=turn-count]").inner_text() == "1 turn"
    assert "studio-demo" in lead.inner_text()


def test_a_conversation_shows_the_tool_call_with_its_result_folded_under_it(page: Page, studio: Studio) -> None:
    open_instance(page, studio, "helper")
    call = page.page.locator("[data-testid=tool-call][data-tool=calc__add]")
    call.wait_for()
    assert '"a": 2' in call.inner_text() and '"sum": 5' in call.locator("[data-testid=tool-result]").inner_text()
    roles = page.page.locator("[data-testid=conversation-row]").evaluate_all("els => els.map(e => e.dataset.role)")
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert page.page.locator("[data-testid=source-label]").first.inner_text() == "from agent lead"
    assert "shown under its call" in page.page.locator("[data-testid=conversation-row][data-role=tool]").inner_text()


def test_the_trace_waterfall_nests_the_helpers_turn_under_the_leads_request(page: Page, studio: Studio) -> None:
    open_instance(page, studio, "lead", tab="trace")
    spans = page.page.locator("[data-testid=span-row]")
    spans.first.wait_for()
    rows = spans.evaluate_all(
        "els => els.map(e => [e.dataset.kind, Number(e.dataset.depth), e.dataset.agent,"
        " e.dataset.span, e.dataset.parent])"
    )
    assert len(rows) == 12
    assert {r[2] for r in rows} == {"lead", "helper"}
    (request,) = [r for r in rows if r[0] == "request"]
    callee = rows[rows.index(request) + 1]
    assert (callee[0], callee[1], callee[2], callee[4]) == ("turn", request[1] + 1, "helper", request[3])
    assert [r[0] for r in rows if r[2] == "helper"].count("model") == 2
    page.page.click("[data-testid=span-row][data-kind=step][data-agent=helper]")
    assert "tokens" in page.page.locator("#span-detail").inner_text()
    shot = page.page.screenshot(path=str(SCREENSHOT) if UPDATE_SCREENSHOT else None)
    assert shot[:8] == b"\x89PNG\r\n\x1a\n" and len(shot) > 10_000  # a rendered page, not a blank one


def test_a_turn_run_while_the_page_is_open_appears_without_a_reload(
    page: Page, studio: Studio, run: tuple[Path, Path]
) -> None:
    open_instance(page, studio, "lead")
    rows = page.page.locator("[data-testid=conversation-row]")
    page.page.wait_for_function("document.querySelectorAll('[data-testid=conversation-row]').length === 4")
    page.page.wait_for_function("document.getElementById('live').classList.contains('on')")
    before = page.page.evaluate("performance.getEntriesByType('navigation').length")
    worker = threading.Thread(target=run_turns, args=(run[0], run[1], ["once more"]))
    worker.start()
    worker.join(60)
    page.page.wait_for_function(
        "document.querySelectorAll('[data-testid=conversation-row]').length === 8", timeout=15_000
    )
    assert "once more" in rows.nth(4).locator(".msg").inner_text() and rows.nth(4).get_attribute("data-role") == "user"
    page.page.wait_for_function(
        "document.querySelector('[data-testid=instance-row][data-agent=lead] [data-testid=turn-count]')"
        ".textContent === '2 turns'",
        timeout=15_000,
    )
    assert page.page.evaluate("performance.getEntriesByType('navigation').length") == before  # no reload


def test_studio_opened_before_the_first_run_offers_the_new_workspace_in_its_filter(page: Page, tmp_path: Path) -> None:
    bundle = delegation_bundle(tmp_path / "bundle")
    state = tmp_path / "state"  # nothing has run here yet: the directory does not even exist
    with gdn_studio("--state-root", str(state)) as s:
        page.page.goto(s.url)
        page.page.wait_for_selector("body[data-ready='1']")
        page.page.wait_for_function("document.getElementById('live').classList.contains('on')")
        assert page.page.locator("#ws-filter option").first.inner_text() == "all workspaces (0)"
        worker = threading.Thread(target=run_turns, args=(bundle, state, ["hello"]))
        worker.start()
        worker.join(60)
        page.page.wait_for_selector("[data-testid=instance-row]", timeout=15_000)
        # was stuck at "(0)" with no option to pick the workspace until the page was reloaded
        page.page.wait_for_function(
            "document.querySelector('#ws-filter option').textContent === 'all workspaces (1)'", timeout=15_000
        )
        assert page.page.locator("#ws-filter option").count() == 2


# ---------------------------------------------------------------------------------------- large state


@pytest.fixture(scope="module")
def big() -> Iterator[tuple[Path, str]]:
    base = "/dev/shm" if Path("/dev/shm").is_dir() else None  # fsyncs of 1,000 instances are free there
    root = Path(tempfile.mkdtemp(prefix="studio-big-", dir=base))
    try:
        ws, _key = big_state(root)
        yield root, ws
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_first_paint_and_interactive_on_1000_instances_and_10000_messages(page: Page, big: tuple[Path, str]) -> None:
    root, ws = big
    with gdn_studio("--state-root", str(root)) as studio:
        p = page.page
        p.goto(studio.url)
        p.wait_for_selector("body[data-ready='1']")
        paint = p.evaluate("performance.getEntriesByName('first-contentful-paint')[0].startTime")
        interactive = p.evaluate("performance.getEntriesByName('studio-interactive')[0].startTime")
        assert "of 1001" in p.locator("#page-info").inner_text()
        assert p.locator("[data-testid=instance-row]").count() == 50  # server-side pages
        p.goto(f"{studio.url}#/{ws}/big/long/conversation")
        p.reload()
        p.wait_for_function("performance.getEntriesByName('studio-conversation-ready').length > 0", timeout=20_000)
        conv_paint = p.evaluate("performance.getEntriesByName('first-contentful-paint')[0].startTime")
        conv_ready = p.evaluate("performance.getEntriesByName('studio-conversation-ready')[0].startTime")
        assert "10000 messages" in p.locator("#inst-meta").inner_text()
        shown = p.locator("[data-testid=conversation-row]")
        assert shown.count() == 100 and shown.last.get_attribute("data-index") == "9999"
        for _ in range(6):  # scroll up through six pages: the DOM keeps a window of them
            first = shown.first.get_attribute("data-index")
            p.evaluate("document.getElementById('conversation').scrollTop = 0")
            p.wait_for_function(
                f"document.querySelector('[data-testid=conversation-row]').dataset.index !== '{first}'",
                timeout=10_000,
            )
        assert shown.count() <= 400 and int(shown.first.get_attribute("data-index") or 0) <= 9300
        p.goto("about:blank")  # leave before the server stops: its event stream would be cut mid-chunk
    print(
        f"\nStudio, 1,000 instances: first paint {paint:.0f} ms, interactive {interactive:.0f} ms; "
        f"10,000-message instance: first paint {conv_paint:.0f} ms, conversation ready {conv_ready:.0f} ms"
    )
    assert max(paint, interactive, conv_paint, conv_ready) < 10_000
