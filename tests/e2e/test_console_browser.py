"""The operator's console in a real browser, used as a person would use it.

Debian's Chromium (``/usr/bin/chromium``, installed by ``.ci/run``; never downloaded) driven
by Playwright opens the page of a real ``onstation serve --port 0`` on a scratch SQLite
ledger, signs in with an operator token made by the CLI, and watches a scratch team of fake
agents (see ``console_team.py``) while it works: the reliefs appear without a reload, one
relief settles and one ends QUARANTINED on an AMBIGUOUS push, which the operator resolves
through the page's dialog; then a halt is set and lifted, and a breaker opened from the CLI
is closed from the page. The CLI checks what the page did.
Screenshots are kept under ``$ONSTATION_ARTIFACTS`` (default ``.artifacts/console/``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from console_team import WAIT, Team, wait_until

CHROMIUM = "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parents[2]
OPERATOR = "alice"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]  # fmt: skip
RED_OR_WORSE = re.compile("^(red|critical)$")
UI_WAIT_MS = int(WAIT * 1000)  # a bound for a page that never shows it; nothing is timed

pytestmark = pytest.mark.browser


def artifacts() -> Path:
    where = Path(os.environ.get("ONSTATION_ARTIFACTS") or ROOT / ".artifacts" / "console")
    where.mkdir(parents=True, exist_ok=True)
    return where


@pytest.fixture(scope="module")
def chromium() -> str:
    if os.environ.get("ONSTATION_SKIP_BROWSER") == "1":
        pytest.skip("ONSTATION_SKIP_BROWSER=1")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium "
                    "(or set ONSTATION_SKIP_BROWSER=1)", pytrace=False)  # fmt: skip
    return CHROMIUM


@pytest.fixture
def team(tmp_path: Path) -> Iterator[Team]:
    built = Team(tmp_path).build()
    try:
        yield built
    finally:
        built.stop()


@pytest.fixture
def page(chromium: str, tmp_path: Path) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=chromium, headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1366, "height": 768},
        )  # fmt: skip
        try:
            context.set_default_timeout(UI_WAIT_MS)
            yield context.pages[0] if context.pages else context.new_page()
        finally:
            context.close()


def shot(page: Any, name: str) -> Path:
    path = artifacts() / f"{name}.png"
    page.screenshot(path=str(path))
    return path


def by_id(page: Any, testid: str) -> Any:
    return page.get_by_test_id(testid)


def test_the_operator_watches_a_relief_live_resolves_an_effect_and_halts(
    page: Any, team: Team
) -> None:
    from playwright.sync_api import expect

    url = team.serve()
    token = team.operator_token(OPERATOR)

    # Signing in: a wrong token is refused on the page, the real one opens the console.
    page.goto(url)
    by_id(page, "login-token").fill("onst_0000000000000000_not-a-token")
    by_id(page, "login-submit").click()
    expect(by_id(page, "login-error")).to_contain_text("not valid")
    by_id(page, "login-token").fill(token)
    by_id(page, "login-submit").click()
    expect(by_id(page, "login")).to_be_hidden()
    expect(by_id(page, "operator")).to_contain_text(OPERATOR)
    for node in ("coord-auth", "exec-login", "exec-cookie"):
        expect(by_id(page, f"team-row-{node}")).to_be_visible()
    expect(by_id(page, "live")).to_have_text("live")
    expect(by_id(page, "queue-empty")).to_be_visible()
    # Survives only while the page is not reloaded: everything below arrives live.
    page.evaluate("window.__same_page = 'yes'")

    # The team at work: a body killed after dispatching a push whose remote then vanishes.
    team.start_agent("coord-auth")
    team.start_agent("exec-login")
    cookie = team.start_agent("exec-cookie", "--push-every", "1", "--crash-after-dispatch", "1")
    cookie.wait(timeout=WAIT)
    assert cookie.returncode == -9, team.agent_events("exec-cookie")[-3:]
    moved = team.scratch / "exec-cookie-origin-moved.git"
    (team.scratch / "exec-cookie-origin.git").rename(moved)
    quarantine = team.relieve("exec-cookie", "--emergency")
    wait_until("exec-login at Red", lambda: team.tier("exec-login") in ("red", "critical"))
    expect(by_id(page, "tier-exec-login")).to_have_attribute("data-tier", RED_OR_WORSE)
    relief = team.relieve("exec-login")
    out, err = quarantine.communicate(timeout=WAIT)
    assert quarantine.returncode == 4, out + err
    quarantined = json.loads(out)
    assert quarantined["verdict"] == "QUARANTINED"
    out, err = relief.communicate(timeout=WAIT)
    assert relief.returncode == 0, out + err
    settled = json.loads(out)
    assert (settled["state"], settled["to_generation"]) == ("SETTLED", 2)

    # Both reliefs on the page, as the ledger has them, without a reload.
    row = by_id(page, f"relief-row-{settled['relief_id']}")
    expect(row).to_have_attribute("data-state", "SETTLED")
    expect(row).to_have_attribute("data-verdict", "REBODIMENT_READY")
    expect(by_id(page, f"relief-row-{quarantined['relief_id']}")).to_have_attribute(
        "data-verdict", "QUARANTINED"
    )
    expect(by_id(page, "gen-exec-login")).to_have_text("g2")
    (effect,) = team.cli_json("effect", "list", "exec-cookie")["effects"]
    assert effect["state"] == "AMBIGUOUS"
    effect_id = effect["effect_id"]
    expect(by_id(page, f"queue-effect-{effect_id}")).to_contain_text("git.push")
    expect(by_id(page, f"queue-relief-{quarantined['relief_id']}")).to_be_visible()
    expect(by_id(page, "timeline-exec-login-g2")).to_have_count(1)
    expect(by_id(page, f"plot-relief-{settled['relief_id']}")).to_have_count(1)
    assert page.evaluate("window.__same_page") == "yes"
    shot(page, "01-team-with-reliefs-and-queue")
    if os.environ.get("ONSTATION_CONSOLE_PNG"):  # the README's picture: docs/console.png
        shutil.copyfile(artifacts() / "01-team-with-reliefs-and-queue.png",
                        os.environ["ONSTATION_CONSOLE_PNG"])  # fmt: skip

    # One relief, whole: its steps, verdict, brief, capsule and every loss of its report.
    row.click()
    panel = by_id(page, "relief-panel")
    expect(by_id(panel, "relief-verdict")).to_have_text("REBODIMENT_READY")
    expect(by_id(panel, "relief-steps")).to_contain_text("settled")
    expect(by_id(panel, "relief-brief")).to_contain_text("Turnover Brief")
    expect(by_id(panel, "relief-capsule")).to_contain_text("digest")
    report = Path(settled["report_path"]).read_text()
    losses = report.split("## Losses\n", 1)[1].split("\n## ", 1)[0]
    listed = [line for line in losses.splitlines() if line.startswith("- ")]
    assert listed, report
    expect(by_id(panel, "relief-losses").locator("li")).to_have_count(len(listed))
    shot(page, "02-relief")
    # The report opened by the operator stays open across a live refresh of an unchanged
    # relief (the panel was drawn again on every refresh: the report closed, and an element
    # a test held was detached from the page).
    report_details = by_id(panel, "relief-report").locator("details")
    report_details.locator("summary").click()
    expect(report_details).to_have_attribute("open", "")
    page.evaluate("() => refresh()")
    page.wait_for_function("() => !state.refreshing && state.refreshTimer === null")
    expect(report_details).to_have_attribute("open", "")
    by_id(panel, "relief-losses").scroll_into_view_if_needed()
    shot(page, "03-relief-report")
    # A live refresh whose answer for the open relief arrives after the operator closed the
    # panel must not bring it back over the queue (it did, and hid the Resolve button).
    held: list[Any] = []

    def hold_the_first(route: Any) -> None:
        if held:
            route.continue_()
        else:
            held.append(route)

    def asked() -> bool:
        page.wait_for_timeout(50)  # lets Playwright hand the held request over
        return bool(held)

    detail_url = re.compile(rf"/api/v1/reliefs/{settled['relief_id']}$")
    page.route(detail_url, hold_the_first)
    page.evaluate("() => { void refresh(); }")
    wait_until("the refresh asks for the open relief", asked)
    by_id(panel, "relief-close").click()
    expect(panel).to_be_hidden()
    held[0].continue_()
    page.wait_for_function("() => !state.refreshing && state.refreshTimer === null")
    page.unroute(detail_url)
    assert not panel.is_visible()

    # Resolving the AMBIGUOUS push: the dialog asks first; cancel changes nothing.
    by_id(page, f"resolve-{effect_id}").click()
    dialog = by_id(page, "confirm-dialog")
    expect(dialog).to_be_visible()
    expect(by_id(dialog, "confirm-as")).to_contain_text(OPERATOR)
    by_id(dialog, "confirm-cancel").click()
    expect(dialog).to_be_hidden()
    assert team.cli_json("effect", "show", effect_id)["state"] == "AMBIGUOUS"
    by_id(page, f"resolve-{effect_id}").click()
    by_id(dialog, "confirm-outcome").select_option("compensated")
    by_id(dialog, "confirm-why").fill("the push never reached origin; branch re-pushed by hand")
    shot(page, "04-resolve-dialog")
    by_id(dialog, "confirm-ok").click()
    expect(dialog).to_be_hidden()
    expect(by_id(page, f"queue-effect-{effect_id}")).to_have_count(0)
    resolved = team.cli_json("effect", "show", effect_id)
    assert resolved["state"] == "COMPENSATED"
    assert resolved["resolved_by"] == OPERATOR
    assert "re-pushed by hand" in json.dumps(resolved["resolution"])

    # The halt gate: set for everyone through the dialog, seen by the CLI, lifted again.
    by_id(page, "halt-all").click()
    by_id(dialog, "confirm-why").fill("incident review")
    by_id(dialog, "confirm-ok").click()
    expect(by_id(page, "gate")).to_have_attribute("data-state", "halted")
    expect(by_id(page, "halt-row-global")).to_contain_text("incident review")
    (halt,) = team.cli_json("halts")["halts"]
    assert (halt["node"], halt["by"], halt["why"]) == (None, OPERATOR, "incident review")
    shot(page, "05-halted")
    by_id(page, "lift-global").click()
    by_id(dialog, "confirm-ok").click()
    expect(by_id(page, "gate")).to_have_attribute("data-state", "open")
    assert team.cli_json("halts")["halts"] == []
    shot(page, "06-lifted")

    # A breaker opened from the CLI reaches the queue live; the page closes it.
    team.cli("breaker", "open", "exec-login", "--why", "crash loop")
    expect(by_id(page, "queue-breaker-exec-login")).to_be_visible()
    by_id(page, "close-breaker-exec-login").click()
    by_id(dialog, "confirm-why").fill("fixed the launcher")
    by_id(dialog, "confirm-ok").click()
    expect(by_id(page, "queue-breaker-exec-login")).to_have_count(0)
    node = team.cli_json("node", "show", "exec-login")
    assert node["breaker_open"] is False
    assert page.evaluate("window.__same_page") == "yes"
    shot(page, "07-breaker-closed")
