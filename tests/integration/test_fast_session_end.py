"""A clean SessionEnd on the hook fast path (``relief.hotpath``): the body's lease is
released there as the full path releases it (the lease ended as RELEASED, its
``lease.released`` event), durably: at ``synchronous=FULL`` on SQLite, with a commit that
waits for its WAL flush on PostgreSQL, so that a release is never taken back and the next
session is admitted at once. A /clear or /resume is not an end: answered here, nothing
released. A session that is not the live, current body is the full path's. The rows are
held equal to the full path's by tests/integration/test_fast_path_differential.py
("session ends"), on both backends."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_fast_first_reading import _committed

from onstation.harness.adapters import HookCall
from onstation.harness.config import WorkspaceConfig
from onstation.ledger import Ledger
from onstation.relief import hooks as full_path
from onstation.relief import hotpath
from onstation.relief.hooks import HookRunner

NODE = "exec-1"

#: Connections made ahead in a test are closed and forgotten after it (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("no_connection_left_ahead")


def _call(cwd: Path, event: str, session: str = "sess-1", **fields: Any) -> HookCall:
    return HookCall.from_payload("claude-code", event, {
        "session_id": session, "cwd": str(cwd), "hook_event_name": event,
        "transcript_path": str(cwd / "s.jsonl"), **fields,
    })  # fmt: skip


@pytest.fixture
def world(ledger_url: str, tmp_path: Path) -> tuple[str, Path]:
    """An admitted session of ``NODE`` in ``tmp_path`` (configured there)."""
    (tmp_path / ".onstation").mkdir()
    (tmp_path / ".onstation" / "config.json").write_text(
        json.dumps({"node": NODE, "db": ledger_url})
    )
    (tmp_path / "s.jsonl").touch()
    with Ledger.open(ledger_url) as ledger:
        ledger.register_node(NODE)
        _full(ledger, _call(tmp_path, "SessionStart", source="startup"))
    return ledger_url, tmp_path


def _full(ledger: Ledger, call: HookCall) -> Any:
    return HookRunner(ledger, "claude-code", WorkspaceConfig(node=NODE)).handle(call)


def _leases(url: str) -> list[tuple[str, str | None]]:
    with Ledger.open(url) as ledger:
        return [(lease.state.value, lease.end_reason) for lease in ledger.leases(NODE)]


def _released(url: str) -> list[tuple[str, dict[str, Any]]]:
    with Ledger.open(url) as ledger:
        return [(e.actor, e.detail) for e in ledger.history(NODE) if e.kind == "lease.released"]


def test_a_clean_end_releases_the_lease_here_durably(
    world: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, cwd = world
    committed = _committed(monkeypatch)
    assert hotpath.try_fast(_call(cwd, "SessionEnd", reason="logout"), None) is None  # here
    assert committed == ["full" if not url.startswith("postgresql://") else "waits"]
    assert _leases(url) == [("RELEASED", "released by body")]
    with Ledger.open(url) as ledger:
        lease_id = ledger.leases(NODE)[0].lease_id
    assert _released(url) == [("claude-code session sess-1",
                               {"lease_id": lease_id, "reason": "released by body"})]  # fmt: skip
    # Released: the next session is admitted at once, under the next generation.
    with Ledger.open(url) as ledger:
        _full(ledger, _call(cwd, "SessionStart", session="sess-2", source="startup"))
        assert [(lease.generation, lease.state.value) for lease in ledger.leases(NODE)] == [
            (1, "RELEASED"), (2, "LIVE")]  # fmt: skip


@pytest.mark.parametrize("reason", ["clear", "resume"])
def test_a_clear_or_resume_is_answered_here_and_releases_nothing(
    world: tuple[str, Path], monkeypatch: pytest.MonkeyPatch, reason: str
) -> None:
    url, cwd = world
    committed = _committed(monkeypatch)
    assert hotpath.try_fast(_call(cwd, "SessionEnd", reason=reason), None) is None
    assert committed == ["normal" if not url.startswith("postgresql://") else "relaxed"]
    assert _leases(url) == [("LIVE", None)]
    assert _released(url) == []


def test_an_end_after_the_release_or_a_fence_is_the_full_paths(
    world: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, cwd = world
    assert hotpath.try_fast(_call(cwd, "SessionEnd", reason="other"), None) is None
    committed = _committed(monkeypatch)
    # The lease is no longer live: a second end is not answered here.
    assert hotpath.try_fast(_call(cwd, "SessionEnd", reason="other"), None) is hotpath.NOT_HANDLED
    with Ledger.open(url) as ledger:
        _full(ledger, _call(cwd, "SessionStart", session="sess-2", source="startup"))
        ledger.fence(NODE, expect_generation=2, reason="test")
    # A fenced body's end is not a release of anything: not answered here, nothing written.
    ended = _call(cwd, "SessionEnd", session="sess-2", reason="other")
    assert hotpath.try_fast(ended, None) is hotpath.NOT_HANDLED
    assert committed == []
    assert [state for state, _ in _leases(url)] == ["RELEASED", "FENCED"]
    assert len(_released(url)) == 1


def test_the_fast_path_knows_which_ends_are_not_ends() -> None:
    assert hotpath._CONTINUING_END_REASONS == full_path._CONTINUING_END_REASONS
