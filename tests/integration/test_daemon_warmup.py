"""The daemon's warm-up of the hook paths (``cli/daemon_warmup.py``): one made-up session's
hook calls run once in the daemon before its first fork, on a scratch ledger of its own, so
that every child starts with the hook paths' bytecode specialized. It must exercise the
paths it is for, leave nothing behind (no directory, no open descriptor, the standard input
as it was), and never stop a daemon from starting when it fails."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from onstation.cli import daemon_warmup
from onstation.ledger import Ledger, fastpath
from onstation.ledger.bodies import HarnessLedger


@pytest.fixture(autouse=True)
def no_notes_left() -> Iterator[None]:
    """The warm-up notes its statements in the process (ledger.fastpath): not kept for
    other tests."""
    yield
    fastpath._NOTED.clear()


def test_the_warm_up_runs_a_whole_session_through_both_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from onstation.harness import evidence

    def no_git(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"the warm-up ran git {args}")

    monkeypatch.setattr(evidence, "git", no_git)  # the base is read from the files alone
    daemon_warmup._session(tmp_path)
    with Ledger.open(str(tmp_path / "ledger.db")) as ledger:
        kinds = [e.kind for e in ledger.history(daemon_warmup.NODE)]
        records = HarnessLedger(ledger)
        base = records.base_of(daemon_warmup.NODE, 1)
        outcomes = records.tool_outcomes(daemon_warmup.NODE, generation=1)
        leases = ledger.leases(daemon_warmup.NODE)
    # The full path's admission with its base (the hand-written HEAD), the fast path's first
    # reading (a Green tier) and journal rows, and the fast path's release at the end.
    assert "session.admitted" in kinds and "generation.base" in kinds
    assert base == daemon_warmup._HEAD
    assert "hull.tier" in kinds
    assert [o.tool_use_id for o in outcomes] == ["warm-1", "warm-2"]
    # Then the identity's next session, admitted at the next generation, and released.
    assert [(lease.generation, lease.state.value) for lease in leases] == [
        (1, "RELEASED"),
        (2, "RELEASED"),
    ]


def test_the_warm_up_leaves_nothing_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str] = []
    real_mkdtemp = tempfile.mkdtemp

    def recording(*args: object, **kwargs: object) -> str:
        path = real_mkdtemp(*args, **kwargs)  # type: ignore[arg-type]
        made.append(path)
        return path

    monkeypatch.setattr(tempfile, "mkdtemp", recording)
    stdin = sys.stdin
    assert daemon_warmup.warm_hooks() is True
    assert made and not any(os.path.exists(path) for path in made)
    assert sys.stdin is stdin
    # No descriptor left open on anything of the scratch directory (a ledger connection
    # left open would hold its file and WAL, deleted).
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            held.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            continue  # the listing's own descriptor, closed by now
    assert not [path for path in held if any(path.startswith(m) for m in made)], held


def test_a_warm_up_that_fails_is_given_up(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str] = []

    def failing(root: Path) -> None:
        made.append(str(root))
        raise RuntimeError("no room")

    monkeypatch.setattr(daemon_warmup, "_session", failing)
    assert daemon_warmup.warm_hooks() is False
    assert made and not os.path.exists(made[0])
