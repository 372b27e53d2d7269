"""Capsules built from a real SQLite ledger and git, and durable replay refusal."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from onstation.core.errors import Conflict
from onstation.harness.evidence import collect
from onstation.ledger import Ledger
from onstation.plan.build import build_payload
from onstation.plan.capsule import CapsuleRejected, seal, verify
from onstation.plan.signing import key_id, public_raw
from onstation.plan.validator import capsule_defects

NOW = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)
KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
TRUST = {key_id(public_raw(KEY)): public_raw(KEY)}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    _git(path, "init", "-q")
    _git(path, "config", "user.email", "t@example.org")
    _git(path, "config", "user.name", "t")
    (path / "a.txt").write_text("one\n")
    _git(path, "add", ".")
    _git(path, "commit", "-qm", "one")
    _git(path, "tag", "base")
    (path / "b.txt").write_text("two\n")
    _git(path, "add", ".")
    _git(path, "commit", "-qm", "two")
    _git(path, "remote", "add", "origin", "https://bot:s3cret@github.com/example/webapp.git")
    (path / "a.txt").write_text("one changed\n")
    return path


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    led = Ledger.open(str(tmp_path / "l.db"))
    led.register_node("executor-7")
    led.open_episode("executor-7", "Add rate limiting to POST /login")
    led.acquire_lease("executor-7")
    return led


def _dispatch_push(ledger: Ledger) -> str:
    effect, _ = ledger.intend_effect(
        "executor-7",
        generation=1,
        operation="git.push",
        destination="git@github.com:example/webapp.git",
        arguments={"ref": "main"},
    )
    ledger.dispatch_effect(effect.effect_id, generation=1)
    return effect.effect_id


def test_capsule_built_from_ledger_and_git(ledger: Ledger, repo: Path) -> None:
    effect_id = _dispatch_push(ledger)
    ledger.fence("executor-7", expect_generation=1)
    payload = build_payload(
        ledger, "executor-7", evidence=collect(repo, "base"), agent=None, now=NOW
    )
    assert payload["subject"]["node"] == "executor-7"
    assert payload["subject"]["generation"] == 1  # the fenced predecessor's capsule
    assert payload["subject"]["episode"] is not None
    assert payload["repository"]["head"] == _git(repo, "rev-parse", "HEAD")
    assert payload["repository"]["tree"] == _git(repo, "rev-parse", "HEAD^{tree}")
    assert payload["repository"]["base"] == _git(repo, "rev-parse", "base")
    assert payload["repository"]["remote"] == (
        "https://[redacted: url-credentials]@github.com/example/webapp.git"
    )
    assert {f["path"] for f in payload["repository"]["diff"]["files"]} == {"a.txt", "b.txt"}
    assert payload["repository"]["dirty"] is True
    assert [(e["effectId"], e["state"]) for e in payload["effects"]] == [(effect_id, "DISPATCHED")]
    assert payload["objective"] == "Add rate limiting to POST /login"
    omitted = {o["part"] for o in payload["omissions"]}
    assert {"tests", "transcript", "capabilityRequirements", "planFrontier"} <= omitted
    # A dispatched push is not "reconciled": that fact is absent, so the capsule quarantines.
    assert "effects.reconciled" not in {f["type"] for f in payload["facts"]}
    assert "OS-FACT-001" in {
        d.rule for d in capsule_defects(seal(payload, KEY, issued_at="2026-03-02T09:30:00Z"))
    }


def test_agent_supplied_parts_are_checked(ledger: Ledger, repo: Path) -> None:
    agent = {
        "transcript": {
            "cursor": "t.jsonl:9",
            "tail": [{"role": "tool", "text": f"line {i}\u200b\u202e"} for i in range(30)],
        }
    }
    payload = build_payload(ledger, "executor-7", evidence=collect(repo), agent=agent, now=NOW)
    assert len(payload["transcript"]["tail"]) == 20
    assert payload["transcript"]["truncated"] is True
    assert payload["transcript"]["trust"] == "untrusted-evidence"
    assert all(
        "\u200b" not in e["text"] and "\u202e" not in e["text"]
        for e in payload["transcript"]["tail"]
    )
    from onstation.core.errors import BadInput

    with pytest.raises(BadInput, match="unknown part"):
        build_payload(ledger, "executor-7", evidence=collect(repo), agent={"soul": 1}, now=NOW)
    with pytest.raises(BadInput, match="--base"):
        build_payload(
            ledger, "executor-7", evidence=collect(repo, "no-such-ref"), agent=None, now=NOW
        )


def test_replay_is_refused_durably_through_the_ledger(ledger: Ledger, repo: Path) -> None:
    first = seal(
        build_payload(ledger, "executor-7", evidence=collect(repo), agent=None, now=NOW),
        KEY,
        issued_at="2026-03-02T09:30:00Z",
    )
    ok = verify(first, TRUST)
    assert (
        ledger.accept_capsule(
            "executor-7",
            generation=ok.generation,
            sequence=ok.sequence,
            digest=ok.digest,
            key_id=ok.key_ids[0],
        )
        is True
    )
    # The same capsule again is idempotent.
    assert (
        ledger.accept_capsule(
            "executor-7",
            generation=ok.generation,
            sequence=ok.sequence,
            digest=ok.digest,
            key_id=ok.key_ids[0],
        )
        is False
    )
    # A newer capsule (more ledger events) raises the mark; the older one is then refused.
    ledger.fence("executor-7", expect_generation=1)
    second = seal(
        build_payload(ledger, "executor-7", evidence=collect(repo), agent=None, now=NOW),
        KEY,
        issued_at="2026-03-02T09:31:00Z",
    )
    newer = verify(second, TRUST)
    assert (newer.generation, newer.sequence) > (ok.generation, ok.sequence)
    assert (
        ledger.accept_capsule(
            "executor-7",
            generation=newer.generation,
            sequence=newer.sequence,
            digest=newer.digest,
            key_id=newer.key_ids[0],
        )
        is True
    )
    replay = verify(first, TRUST)  # cryptographically still a fine capsule...
    with pytest.raises(Conflict, match="replay refused"):  # ...but the ledger remembers
        ledger.accept_capsule(
            "executor-7",
            generation=replay.generation,
            sequence=replay.sequence,
            digest=replay.digest,
            key_id=replay.key_ids[0],
        )
    kinds = [e.kind for e in ledger.history("executor-7")]
    assert kinds.count("capsule.accepted") == 2


def test_older_generation_is_refused_before_the_ledger(ledger: Ledger, repo: Path) -> None:
    old = seal(
        build_payload(ledger, "executor-7", evidence=collect(repo), agent=None, now=NOW),
        KEY,
        issued_at="2026-03-02T09:30:00Z",
    )
    ledger.fence("executor-7", expect_generation=1)
    ledger.acquire_lease("executor-7")
    ledger.fence("executor-7", expect_generation=2)
    current = ledger.get_node("executor-7").generation
    with pytest.raises(CapsuleRejected, match="older"):
        verify(old, TRUST, min_generation=current - 1)
