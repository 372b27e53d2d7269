"""A relief whose successor is the real Codex CLI (``codex exec``), launched as onstation does.

Runs only where a real ``codex`` is given (``ONSTATION_REAL_CODEX``; ``./dev realhosts``
installs the pinned npm package, whose ``codex`` is the Node.js wrapper that runs the native
binary as its child). The model provider is the one fake (a Responses API on 127.0.0.1,
tests/realhosts/fake_provider.py); the rest is real: Codex's option parser, its sandbox, its
hook trust (the hashes onstation computes, written as the user's /hooks review would), the
session id Codex picks, and the processes onstation witnesses.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_provider import FakeResponses
from realworld import GIT, ONSTATION, body_at_work, relieve, workspace

from onstation.ledger import Ledger
from onstation.ledger.relief_records import ReliefLedger

REAL_CODEX = os.environ.get("ONSTATION_REAL_CODEX")
pytestmark = pytest.mark.skipif(
    not REAL_CODEX, reason="no real codex given (ONSTATION_REAL_CODEX; ./dev realhosts)"
)


def _codex_config(app: Path, provider: FakeResponses, trusted: bool) -> str:
    """The user's config.toml: the fake provider, the project trusted, and (when ``trusted``)
    each onstation hook reviewed, as Codex's /hooks review records it."""
    lines = ['model_provider = "fake"', 'model = "gpt-5.3-codex"', "",
             "[model_providers.fake]", 'name = "fake"', f'base_url = "{provider.url}"',
             'wire_api = "responses"', 'env_key = "FAKE_PROVIDER_KEY"', "",
             f"[projects.{json.dumps(str(app))}]", 'trust_level = "trusted"', ""]  # fmt: skip
    record = json.loads((app / ".onstation" / "install-codex.json").read_text())
    for entry in record["codex_trust"] if trusted else []:
        lines += [f"[hooks.state.{json.dumps(entry['key'])}]",
                  f'trusted_hash = "{entry["hash"]}"']  # fmt: skip
    return "\n".join(lines) + "\n"


@pytest.fixture(params=[True, False], ids=["hooks-trusted", "hooks-untrusted"])
def team(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, Any]]:
    assert REAL_CODEX is not None
    root, app = workspace(tmp_path)
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    with FakeResponses(work_seconds=30) as provider:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("CODEX", "OPENAI"))},
            **GIT,
            "HOME": str(tmp_path),
            "CODEX_HOME": str(codex_home),
            "FAKE_PROVIDER_KEY": "not-a-key",
            "ONSTATION_DB": str(root / "ledger.db"),
            "ONSTATION_KEYS_DIR": str(tmp_path / "keys"),
            "PATH": f"{Path(REAL_CODEX).parent}{os.pathsep}/usr/bin{os.pathsep}/bin",
        }
        body_at_work(env, app, "claude-code", "codex")
        (codex_home / "config.toml").write_text(_codex_config(app, provider, request.param))
        state: dict[str, Any] = {"app": app, "env": env, "root": root, "tmp": tmp_path,
                                 "provider": provider, "pids": [],
                                 "trusted": request.param}  # fmt: skip
        yield state
        for pid in state["pids"]:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGTERM)


def test_a_real_codex_successor_is_bound_by_its_process_and_runs(team: dict[str, Any]) -> None:
    wait = "120" if team["trusted"] else "45"
    outcome = relieve(team["env"], team["root"], "codex", "codex-cli", wait)
    if outcome.get("successor_pid"):
        team["pids"].append(outcome["successor_pid"])
    calls = [r["command"] for r in team["provider"].requests if r["command"]]
    # Codex ran the exact challenge command the prompt gave, through its own sandbox.
    assert calls and calls[0].startswith(f"{ONSTATION} challenge answer exec-1"), calls
    with Ledger.open(str(team["root"] / "ledger.db")) as ledger:
        birth = ReliefLedger(ledger).birth("exec-1", 2)
        bound = [e for e in ledger.history("exec-1") if e.kind == "session.launch_bound"]
    assert birth is not None and birth.answered_at is not None
    assert birth.answer_witness is not None
    if not team["trusted"]:
        # Codex runs no hook it was not asked to trust: nothing renews the lease, nothing
        # binds, and the birth fails naming where to look.
        assert outcome["state"] == "BIRTH_FAILED", outcome
        assert any("onstation doctor" in str(r) for r in outcome["reasons"]), outcome  # type: ignore[attr-defined]
        assert bound == []
        return
    assert (outcome["state"], outcome["to_generation"]) == ("SETTLED", 2), outcome
    assert birth.state == "RUNNING"
    # Codex chose its own session id; its hooks, run by the native binary (the child of the
    # npm wrapper onstation launched), took the launched lease.
    (event,) = bound
    assert event.detail["session_id"] != event.detail["launched_session"]
    # The answer ran in Codex's sandbox: another PID namespace, the launch marker inherited.
    assert birth.answer_witness["marker"] == birth.launch_witness["marker"]
