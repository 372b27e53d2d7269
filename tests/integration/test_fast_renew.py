"""``onstation lease renew`` on the fast path (issue 14): a live body's heartbeat is renewed with
sqlite3 alone, exactly as the full path renews it; anything else (a stale, fenced or expired
generation, --json, another backend) is left to the full path, which denies durably."""

from __future__ import annotations

import subprocess
from datetime import timedelta
from pathlib import Path

import pytest

from onstation.cli import fast_renew
from onstation.cli.fast_renew import try_renew
from onstation.ledger import Ledger
from onstation.ledger.base import MAX_LEASE_TTL

ONSTATION = str(Path(__import__("sys").executable).with_name("onstation"))


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "ledger.db")
    with Ledger.open(path) as ledger:
        ledger.register_node("n1")
        ledger.acquire_lease("n1", holder="body", ttl=timedelta(seconds=60))
    return path


def expiry(db: str) -> object:
    with Ledger.open(db) as ledger:
        live = ledger.live_lease("n1")
        assert live is not None
        return live.expires_at


def test_a_live_body_is_renewed_on_the_fast_path(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = expiry(db)
    assert try_renew(["n1", "--generation", "1", "--ttl", "600", "--db", db])
    assert expiry(db) > before  # type: ignore[operator]
    assert capsys.readouterr().out.startswith("renewed n1 generation 1 until ")
    with Ledger.open(db) as ledger:
        assert ledger.denials("n1") == []


@pytest.mark.parametrize("args", [
    ["n1", "--generation", "2"],                 # not yet issued
    ["n1", "--generation", "1", "--json"],       # JSON is the full path's
    ["n1", "--generation", "1", "--ttl", "0"],   # the full path refuses it
    ["n1", "--generation", "1", "--ttl", str(10**9)],
    ["nobody", "--generation", "1"],
    ["n1", "--generation", "x"],
    ["n1", "--help"],
])  # fmt: skip
def test_anything_but_a_live_bodys_renewal_is_left_to_the_full_path(
    db: str, args: list[str]
) -> None:
    before = expiry(db)
    assert not try_renew([*args, "--db", db])
    assert expiry(db) == before


def test_a_stale_or_fenced_body_gets_the_full_paths_durable_denial(db: str) -> None:
    with Ledger.open(db) as ledger:
        ledger.fence("n1", expect_generation=1, by="test", reason="relief")
    assert not try_renew(["n1", "--generation", "1", "--db", db])
    done = subprocess.run([ONSTATION, "lease", "renew", "n1", "--generation", "1", "--db", db],
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 3 and "may not act" in done.stderr
    with Ledger.open(db) as ledger:
        (denial,) = ledger.denials("n1")
        assert (denial.presented_generation, denial.action) == (1, "lease renew")


def test_the_fast_paths_bounds_are_the_full_paths() -> None:
    assert timedelta(seconds=fast_renew.MAX_TTL_SECONDS) == MAX_LEASE_TTL
    from onstation.cli.ledger_commands import lease_renew

    ttl = next(p for p in lease_renew.params if p.name == "ttl")
    assert ttl.default == fast_renew.DEFAULT_TTL_SECONDS


def test_an_expired_lease_is_not_renewed_there(tmp_path: Path) -> None:
    import time

    path = str(tmp_path / "ledger.db")
    with Ledger.open(path) as ledger:
        ledger.register_node("n1")
        ledger.acquire_lease("n1", holder="body", ttl=timedelta(seconds=1))
    time.sleep(1.2)  # past the lease's expiry (an ordering, not a timing, assertion)
    assert not try_renew(["n1", "--generation", "1", "--db", path])
    done = subprocess.run([ONSTATION, "lease", "renew", "n1", "--generation", "1", "--db", path],
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 3
    with Ledger.open(path) as ledger:
        assert [d.reason for d in ledger.denials("n1")] == ["lease expired"]


def test_the_hook_fast_path_renews_a_session_lease_running_low(tmp_path: Path) -> None:
    """A body whose hooks run and that also heartbeats with a short lease (the fake agent, a
    launched successor's stub) had every hook call sent to the full path only to renew its
    session lease (issue 14, found by bench_hook); the fast path renews it, as the full path
    would, and answers."""
    import json

    from onstation.harness.adapters import HookCall
    from onstation.ledger.bodies import SESSION_LEASE_TTL
    from onstation.relief import hooks, hotpath

    assert timedelta(microseconds=hotpath._SESSION_LEASE_TTL_US) == SESSION_LEASE_TTL
    assert timedelta(microseconds=hotpath._RENEW_WHEN_LEFT_US) == hooks.RENEW_WHEN_LEFT
    path = str(tmp_path / "ledger.db")
    project = tmp_path / "app"
    (project / ".onstation").mkdir(parents=True)
    (project / ".onstation" / "config.json").write_text(json.dumps({"node": "n1"}))
    with Ledger.open(path) as ledger:
        ledger.register_node("n1")
        runner = hooks.HookRunner(ledger, "claude-code", hooks.WorkspaceConfig(node="n1"))
        runner.handle(HookCall.from_payload("claude-code", "SessionStart", {
            "session_id": "s1", "cwd": str(project), "hook_event_name": "SessionStart",
            "source": "startup"}))  # fmt: skip
        ledger.renew_lease("n1", generation=1, ttl=timedelta(seconds=30))  # a heartbeat
    call = HookCall.from_payload("claude-code", "PreToolUse", {
        "session_id": "s1", "cwd": str(project), "hook_event_name": "PreToolUse",
        "tool_name": "Read", "tool_input": {"file_path": "x"}, "tool_use_id": "t1"})  # fmt: skip
    assert hotpath.try_fast(call, path) is None  # answered there
    with Ledger.open(path) as ledger:
        live = ledger.live_lease("n1")
        assert live is not None
        assert live.expires_at - ledger.now() > timedelta(hours=11)
