"""A relief whose successor is the real Claude Code, launched as onstation launches it.

Runs only where a real ``claude`` is given (``ONSTATION_REAL_CLAUDE``, the program's path):
``./dev realhosts`` installs the pinned version from the npm registry and runs this folder.
The model provider is the one fake (tests/realhosts/fake_provider.py, a Messages API on
127.0.0.1 through ``ANTHROPIC_BASE_URL``); the rest is real: Claude Code's option parser,
its permission rules in ``dontAsk`` mode, its hooks from the project's
``.claude/settings.local.json``, the process onstation witnesses.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_provider import FakeProvider
from realworld import GIT, ONSTATION, body_at_work, relieve, workspace

from onstation.ledger import Ledger
from onstation.ledger.relief_records import ReliefLedger

REAL_CLAUDE = os.environ.get("ONSTATION_REAL_CLAUDE")
pytestmark = pytest.mark.skipif(
    not REAL_CLAUDE, reason="no real claude given (ONSTATION_REAL_CLAUDE; ./dev realhosts)"
)


@pytest.fixture
def team(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """exec-1 at work in a workspace whose path holds a quote and a space; the real claude
    first on a PATH without onstation; its home (user settings) a fresh folder."""
    assert REAL_CLAUDE is not None
    root, app = workspace(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    with FakeProvider(work_seconds=30) as provider:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "ANTHROPIC"))},
            **GIT,
            "HOME": str(home),
            "ONSTATION_DB": str(root / "ledger.db"),
            "ONSTATION_KEYS_DIR": str(tmp_path / "keys"),
            "PATH": f"{Path(REAL_CLAUDE).parent}{os.pathsep}/usr/bin{os.pathsep}/bin",
            "ANTHROPIC_BASE_URL": provider.url,
            "ANTHROPIC_API_KEY": "sk-ant-test-not-a-key",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
        }
        body_at_work(env, app, "claude-code")
        state: dict[str, Any] = {"app": app, "env": env, "root": root, "tmp": tmp_path,
                                 "provider": provider, "pids": []}  # fmt: skip
        yield state
        for pid in state["pids"]:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGTERM)


def test_a_real_claude_successor_answers_its_challenge_and_runs(team: dict[str, Any]) -> None:
    outcome = relieve(team["env"], team["root"], "claude-code", "claude-code", "120")
    if outcome.get("successor_pid"):
        team["pids"].append(outcome["successor_pid"])
    assert (outcome["state"], outcome["to_generation"]) == ("SETTLED", 2), outcome
    with Ledger.open(str(team["root"] / "ledger.db")) as ledger:
        birth = ReliefLedger(ledger).birth("exec-1", 2)
        assert birth is not None and birth.state == "RUNNING", birth
        kinds = [e.kind for e in ledger.history("exec-1")]
        lease = next(ls for ls in ledger.leases("exec-1") if ls.generation == 2)
    assert "birth.answered" in kinds and birth.answered_at is not None
    # The answer came from the host process itself (Claude Code runs each Bash command in a
    # shell of its own, gone by the time the relief looks), never from that passing shell.
    assert birth.answer_witness is not None
    assert birth.answer_witness["pid"] == outcome["successor_pid"]
    # The model asked for the exact challenge command, and Claude Code's permission rules
    # let it run (the answer is in the ledger); the hooks of the real host renewed the lease.
    calls = [r["command"] for r in team["provider"].requests if r["command"]]
    assert calls and calls[0].startswith(f"{ONSTATION} challenge answer exec-1")
    assert lease.renewed_at > lease.acquired_at
