"""A body is a host process, not a session id (issue 12).

Claude Code issues a new ``session_id`` on ``/clear``, ``/resume``, a compaction or a fork, and
its SessionStart hook says so (``source``: ``clear``, ``resume``, ``compact``, ``fork``); the
same process goes on. Each "host" here is a real, separate process that runs the installed
hook command strings through ``sh -c`` as Claude Code does, so the hooks see a real parent
chain: the same host process continues the body under the same generation; another process
is a second body and is refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hookworld import Host, installed_world

from onstation.ledger import Ledger
from onstation.ledger.bodies import HarnessLedger


def denied(answer: dict[str, Any] | None) -> bool:
    if answer is None:
        return False
    specific = answer.get("hookSpecificOutput", {})
    return specific.get("permissionDecision") == "deny"


@pytest.fixture
def world(tmp_path: Path) -> Any:
    # What is tested is admission; a loaded machine must not turn a push into an over-budget
    # denial.
    world = installed_world(tmp_path, ONSTATION_HOOK_BUDGET="60")
    hosts: list[Host] = []

    def host() -> Host:
        hosts.append(Host(world["project"], world["env"]))
        return hosts[-1]

    yield {**world, "host": host}
    for each in hosts:
        each.close()


def _events(db: str, kind: str) -> list[dict[str, Any]]:
    with Ledger.open(db) as ledger:
        return [e.detail for e in ledger.history("exec-1") if e.kind == kind]


@pytest.mark.parametrize("source", ["clear", "resume", "compact", "fork"])
def test_a_new_session_id_in_the_same_process_continues_the_body(
    world: dict[str, Any], source: str
) -> None:
    claude = world["host"]()
    assert "generation 1" in claude.context("s-first", "SessionStart", source="startup")
    # /clear (or /resume, a compaction, a fork): a new session id, the same process.
    started = claude.context("s-second", "SessionStart", source=source)
    assert "continues the body of exec-1, generation 1" in started
    answer = claude.push("s-second", "toolu_after_clear")
    assert not denied(answer), answer  # before the fix: refused as "a second body"
    with Ledger.open(world["db"]) as ledger:
        records = HarnessLedger(ledger)
        second = records.session("s-second")
        first = records.session("s-first")
        assert second is not None and first is not None
        assert second.state == "ADMITTED" and second.generation == 1
        assert second.lease_id == first.lease_id
        assert ledger.get_node("exec-1").generation == 1
        lease = ledger.live_lease("exec-1")
        assert lease is not None and lease.holder == "claude-code session s-second"
    continued = _events(world["db"], "session.continued")
    assert continued and continued[-1]["continues"] == "s-first"
    assert continued[-1]["source"] == source


def test_another_process_is_still_a_second_body(world: dict[str, Any]) -> None:
    first = world["host"]()
    other = world["host"]()
    first.context("s-first", "SessionStart", source="startup")
    # A concurrent second process is refused, whatever source it claims.
    for session_id, source in (("s-other", "startup"), ("s-other-clear", "clear")):
        text = other.context(session_id, "SessionStart", source=source)
        assert "already has a live body" in text
        assert denied(other.push(session_id, f"toolu_{session_id}"))
    assert not _events(world["db"], "session.continued")


def test_a_fresh_start_in_the_same_process_is_not_a_continuation(world: dict[str, Any]) -> None:
    claude = world["host"]()
    claude.context("s-first", "SessionStart", source="startup")
    text = claude.context("s-new", "SessionStart", source="startup")
    assert "already has a live body" in text
    assert denied(claude.push("s-new", "toolu_new"))


def test_a_continuation_of_a_fenced_body_is_not_admitted(world: dict[str, Any]) -> None:
    claude = world["host"]()
    claude.context("s-first", "SessionStart", source="startup")
    with Ledger.open(world["db"]) as ledger:
        ledger.fence("exec-1", expect_generation=1, by="operator", reason="test")
    # The old process clears: its new session id belongs to a body that was fenced.
    claude.context("s-after-fence", "SessionStart", source="clear")
    assert denied(claude.push("s-after-fence", "toolu_fenced"))
    with Ledger.open(world["db"]) as ledger:
        # Recorded as what it is: the fenced body of generation 1, never a body of 2.
        after = HarnessLedger(ledger).session("s-after-fence")
        assert after is not None and after.generation == 1
        assert ledger.get_node("exec-1").generation == 2
        assert ledger.live_lease("exec-1") is None
    [continued] = _events(world["db"], "session.continued")
    assert continued["fenced"] is True and continued["continues"] == "s-first"
    # A new process is admitted as the next body.
    fresh = world["host"]()
    assert "generation 2" in fresh.context("s-fresh", "SessionStart", source="startup")


def test_session_end_releases_the_body_and_the_next_process_is_admitted_at_once(
    world: dict[str, Any],
) -> None:
    claude = world["host"]()
    claude.context("s-first", "SessionStart", source="startup")
    # /clear ends the old session id with reason "clear": not an end of the body.
    claude.fire("s-first", "SessionEnd", reason="clear")
    assert "continues the body" in claude.context("s-second", "SessionStart", source="clear")
    with Ledger.open(world["db"]) as ledger:
        assert ledger.live_lease("exec-1") is not None
    # A clean exit releases the lease: another process is admitted at once.
    claude.fire("s-second", "SessionEnd", reason="prompt_input_exit")
    claude.close()
    with Ledger.open(world["db"]) as ledger:
        assert ledger.live_lease("exec-1") is None
    later = world["host"]()
    assert "body of exec-1, generation 2" in later.context(
        "s-later", "SessionStart", source="startup"
    )
    assert not denied(later.push("s-later", "toolu_later"))


def test_a_host_that_died_without_a_session_end_does_not_hold_the_body(
    world: dict[str, Any],
) -> None:
    """Regression: a crashed host (or `claude -p`, which sends no SessionEnd on a normal exit)
    kept its lease for the whole lease time (12 h): the user's next session was refused."""
    crashed = world["host"]()
    crashed.context("s-crashed", "SessionStart", source="startup")
    crashed.process.kill()  # no SessionEnd: the process is simply gone
    crashed.process.wait(timeout=30)
    later = world["host"]()
    text = later.context("s-next", "SessionStart", source="startup")
    assert "body of exec-1, generation 2" in text, text
    assert not denied(later.push("s-next", "toolu_next"))
    [gone] = _events(world["db"], "session.previous_body_gone")
    assert gone["previous_holder"] == "claude-code session s-crashed"
    assert gone["evidence"][0]["session_id"] == "s-crashed"
    # The dead body's generation is fenced: its session is never admitted again.
    with Ledger.open(world["db"]) as ledger:
        assert ledger.get_node("exec-1").generation == 2


def test_a_live_host_keeps_its_body_against_a_newcomer(world: dict[str, Any]) -> None:
    alive = world["host"]()
    alive.context("s-alive", "SessionStart", source="startup")
    newcomer = world["host"]()
    assert "already has a live body" in newcomer.context("s-new", "SessionStart", source="startup")
    assert not _events(world["db"], "session.previous_body_gone")
