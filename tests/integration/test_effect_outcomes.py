"""What became of a dispatched effect's tool call (issue 12): settled on evidence in the ledger
(both backends), read from a Claude Code transcript, observed on a real git remote, and
reconciled by observation instead of left AMBIGUOUS."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest
from old_schema import migrate_below

from onstation.core.effects import EffectState
from onstation.core.errors import Conflict, StaleGeneration
from onstation.harness.effects import classify_all, outcomes
from onstation.ledger import Ledger
from onstation.relief.reconcile import observe_and_reconcile

PUSH = {"operation": "git.push", "destination": "git@example.com:o/r.git"}
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "t@example.com",
}  # fmt: skip
DECLINED = (
    "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it "
    "was a file edit, the new_string was NOT written to the file). STOP what you are doing and "
    "wait for the user to tell you how to proceed."
)


def _born(ledger: Ledger, name: str = "exec-1") -> int:
    ledger.register_node(name, role="executor", spawner="lead")
    return ledger.acquire_lease(name, holder="body-1").generation


def _dispatched(ledger: Ledger, gen: int, commit: str = "abc") -> str:
    effect, _ = ledger.intend_effect(
        "exec-1", generation=gen, arguments={"ref": "refs/heads/main", "commit": commit}, **PUSH
    )
    ledger.dispatch_effect(effect.effect_id, generation=gen)
    return effect.effect_id


# -- the ledger: settlement on evidence, on both backends ---------------------------------


def test_a_call_the_host_did_not_run_is_not_executed_and_may_be_intended_again(
    ledger: Ledger,
) -> None:
    gen = _born(ledger)
    effect_id = _dispatched(ledger, gen)
    with pytest.raises(Conflict):  # dispatched: a repeat is refused, as before
        ledger.intend_effect(
            "exec-1", generation=gen, arguments={"ref": "refs/heads/main", "commit": "abc"},
            **PUSH,
        )  # fmt: skip
    settled = ledger.settle_dispatched(
        effect_id, outcome="not-executed", by="claude-code session s",
        evidence={"host": "PermissionDenied", "reason": "auto mode denied"}, generation=gen,
    )  # fmt: skip
    assert settled is not None and settled.state is EffectState.NOT_EXECUTED
    assert settled.result == {
        "not_executed": {"host": "PermissionDenied", "reason": "auto mode denied"},
        "by": "claude-code session s",
    }
    again, created = ledger.intend_effect(
        "exec-1", generation=gen, arguments={"ref": "refs/heads/main", "commit": "abc"}, **PUSH
    )
    assert again.effect_id == effect_id and not created and again.state is EffectState.INTENDED
    assert ledger.dispatch_effect(effect_id, generation=gen).state is EffectState.DISPATCHED
    kinds = [e.kind for e in ledger.history("exec-1") if e.kind.startswith("effect.")]
    assert kinds == ["effect.intended", "effect.dispatched", "effect.not_executed",
                     "effect.reintended", "effect.dispatched"]  # fmt: skip


def test_uncertain_is_ambiguous_and_observed_is_committed(ledger: Ledger) -> None:
    gen = _born(ledger)
    first = _dispatched(ledger, gen, "aaa")
    second = _dispatched(ledger, gen, "bbb")
    failed = ledger.settle_dispatched(first, outcome="uncertain", by="hook", generation=gen,
                                      evidence={"error": "exit 128"})  # fmt: skip
    assert failed is not None and failed.state is EffectState.AMBIGUOUS
    seen = ledger.settle_dispatched(second, outcome="observed", by="hook", generation=gen,
                                    evidence={"asked": "git ls-remote"})  # fmt: skip
    assert seen is not None and seen.state is EffectState.COMMITTED
    # Settled already: nothing moves, nothing raises.
    assert ledger.settle_dispatched(second, outcome="not-executed", by="hook", generation=gen,
                                    evidence={}) is None  # fmt: skip


def test_a_reconciler_settles_only_a_fenced_generations_effect(ledger: Ledger) -> None:
    gen = _born(ledger)
    effect_id = _dispatched(ledger, gen)
    with pytest.raises(Conflict):  # the live body's own effect is its own to settle
        ledger.settle_dispatched(effect_id, outcome="observed", by="lead", evidence={})
    ledger.fence("exec-1", expect_generation=gen, by="lead", reason="relief")
    with pytest.raises(StaleGeneration):  # the fenced body may not settle it any more
        ledger.settle_dispatched(effect_id, outcome="not-executed", by="body", evidence={},
                                 generation=gen)  # fmt: skip
    settled = ledger.settle_dispatched(effect_id, outcome="observed", by="lead", evidence={})
    assert settled is not None and settled.state is EffectState.COMMITTED


def test_the_call_record_pairs_and_lists_dispatched_calls(ledger: Ledger) -> None:
    gen = _born(ledger)
    effect_id = _dispatched(ledger, gen)
    ledger.record_effect_call(
        effect_id, generation=gen, session_id="s1", tool_name="Bash", input_digest="d" * 64,
        tool_use_id=None, transcript_path="/t.jsonl", transcript_offset=42,
        observe={"kind": "git.push", "refs": {}},
    )  # fmt: skip
    (call,) = ledger.dispatched_calls("exec-1", generation=gen)
    assert (call.effect_id, call.session_id, call.tool_use_id, call.input_digest) == (
        effect_id, "s1", None, "d" * 64,
    )  # fmt: skip
    assert call.transcript_offset == 42 and call.observe == {"kind": "git.push", "refs": {}}
    assert ledger.dispatched_calls("exec-1") == []  # no fenced generation yet
    ledger.fence("exec-1", expect_generation=gen, by="lead", reason="relief")
    assert [c.effect_id for c in ledger.dispatched_calls("exec-1")] == [effect_id]


# -- the transcript ---------------------------------------------------------------------------


def _write(path: Path, *entries: dict[str, object]) -> None:
    with path.open("a") as fh:
        for entry in entries:
            fh.write(json.dumps(entry) + "\n")


def _result(tool_use_id: str, text: str, *, error: bool) -> dict[str, object]:
    return {"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "content": text, "is_error": error, "tool_use_id": tool_use_id},
    ]}}  # fmt: skip


def _interrupt() -> dict[str, object]:
    return {"type": "user", "message": {"role": "user", "content": [
        {"type": "text", "text": "[Request interrupted by user for tool use]"}]}}  # fmt: skip


def test_the_transcript_tells_declined_interrupted_failed_and_completed(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    _write(path, _result("toolu_old", DECLINED, error=True))  # before the call: not read
    offset = outcomes.transcript_offset(str(path))
    assert outcomes.find_call_outcome(str(path), offset, "toolu_old") is None
    assert outcomes.find_call_outcome(str(path), offset, "toolu_1") is None  # not yet there
    _write(path, _result("toolu_1", DECLINED, error=True))
    seen = outcomes.find_call_outcome(str(path), offset, "toolu_1")
    assert seen is not None and seen.kind == "declined"
    _write(path, _result("toolu_2", DECLINED, error=True), _interrupt(),
           _result("toolu_3", "fatal: rejected", error=True),
           _result("toolu_4", "Everything up-to-date", error=False))  # fmt: skip
    kinds = [outcomes.find_call_outcome(str(path), offset, t) for t in
             ("toolu_2", "toolu_3", "toolu_4")]  # fmt: skip
    assert [k.kind if k else None for k in kinds] == ["interrupted", "failed", "completed"]
    # A bound smaller than the file: what lies past it is not read.
    assert outcomes.find_call_outcome(str(path), offset, "toolu_4", max_bytes=64) is None


def test_the_input_digest_pairs_the_same_call_only() -> None:
    a = outcomes.input_digest("Bash", {"command": "git push", "description": "push"})
    assert a == outcomes.input_digest("Bash", {"description": "push", "command": "git push"})
    assert a != outcomes.input_digest("Bash", {"command": "git push origin"})
    assert a != outcomes.input_digest("shell", {"command": "git push", "description": "push"})


# -- the destination: a real bare remote --------------------------------------------------


def sh(cwd: Path, *args: str) -> str:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV}, check=True)  # fmt: skip
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    origin = tmp_path / "origin.git"
    work = tmp_path / "work"
    sh(tmp_path, "git", "init", "-q", "--bare", "-b", "main", str(origin))
    sh(tmp_path, "git", "init", "-q", "-b", "main", str(work))
    (work / "a.txt").write_text("a\n")
    sh(work, "git", "add", "a.txt")
    sh(work, "git", "commit", "-q", "-m", "a")
    sh(work, "git", "remote", "add", "origin", str(origin))
    sh(work, "git", "push", "-q", "-u", "origin", "main")
    (work / "b.txt").write_text("b\n")
    sh(work, "git", "add", "b.txt")
    sh(work, "git", "commit", "-q", "-m", "b")
    return work


def _plan(repo: Path, command: str = "git push") -> dict[str, object]:
    (effect,) = classify_all("Bash", {"command": command}, str(repo))
    plan = outcomes.push_plan(effect.operation, effect.arguments, effect.evidence, 5.0)
    assert plan is not None
    return plan


def test_a_push_is_observed_on_its_remote_or_found_not_to_have_happened(repo: Path) -> None:
    plan = _plan(repo)
    old = sh(repo, "git", "rev-parse", "origin/main")
    new = sh(repo, "git", "rev-parse", "HEAD")
    assert plan["refs"] == {"refs/heads/main": {"intended": new, "before": old}}
    seen = outcomes.observe(plan)
    assert seen is not None and seen[0] == "not-executed"
    assert seen[1]["refs"]["refs/heads/main"]["now"] == old
    sh(repo, "git", "push", "-q")
    seen = outcomes.observe(plan)
    assert seen is not None and seen[0] == "observed"


def test_a_partial_push_is_uncertain_and_an_unreachable_remote_proves_nothing(
    repo: Path,
) -> None:
    sh(repo, "git", "branch", "side")
    plan = _plan(repo, "git push origin main side")
    sh(repo, "git", "push", "-q", "origin", "main")  # one of the two refs only
    seen = outcomes.observe(plan)
    assert seen is not None and seen[0] == "uncertain"
    gone = _plan(repo, "git push origin main")
    os.rename(repo.parent / "origin.git", repo.parent / "moved.git")
    assert outcomes.observe(gone) is None


def test_a_push_observed_on_its_remote_reconciles_itself(repo: Path, tmp_path: Path) -> None:
    """The relief's RECONCILE step: a dispatched push the remote shows is COMMITTED and one it
    does not show is NOT_EXECUTED; neither is left AMBIGUOUS (no QUARANTINE)."""
    with Ledger.open(str(tmp_path / "ledger.db")) as ledger:
        gen = _born(ledger)
        pushed = _plan(repo)
        (effect,) = classify_all("Bash", {"command": "git push"}, str(repo))
        effect_id = _dispatched_as(ledger, gen, effect.operation, effect.destination,
                                   effect.arguments, pushed)  # fmt: skip
        sh(repo, "git", "branch", "never")
        not_pushed = _plan(repo, "git push origin never")
        (other,) = classify_all("Bash", {"command": "git push origin never"}, str(repo))
        other_id = _dispatched_as(ledger, gen, other.operation, other.destination,
                                  other.arguments, not_pushed)  # fmt: skip
        sh(repo, "git", "push", "-q")  # the first push ran; the body then died
        ledger.fence("exec-1", expect_generation=gen, by="lead", reason="relief")
        report = observe_and_reconcile(ledger, "exec-1", by="lead")
        assert report.ambiguous == [] and report.unresolved_ambiguous == []
        assert ledger.get_effect(effect_id).state is EffectState.COMMITTED
        assert ledger.get_effect(other_id).state is EffectState.NOT_EXECUTED
        result = ledger.get_effect(effect_id).result
        assert isinstance(result, dict) and result["observed"]["asked"] == "git ls-remote"


def _dispatched_as(
    ledger: Ledger, gen: int, op: str, dest: str, args: dict[str, object], plan: object
) -> str:
    effect, _ = ledger.intend_effect("exec-1", generation=gen, operation=op, destination=dest,
                                     arguments=args)  # fmt: skip
    ledger.dispatch_effect(effect.effect_id, generation=gen)
    ledger.record_effect_call(effect.effect_id, generation=gen, session_id="s", tool_name="Bash",
                              input_digest="x", observe=plan)  # fmt: skip
    return effect.effect_id


# -- the migration keeps what was there ---------------------------------------------------


def test_schema_9_keeps_effects_and_tool_calls(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA foreign_keys = ON")
    migrate_below(conn, 9)
    conn.execute("INSERT INTO agent_node (name, role, spawner, generation, state, created_at) "
                 "VALUES ('n', 'executor', 'lead', 1, 'ACTIVE', 0)")  # fmt: skip
    conn.execute("INSERT INTO effect (effect_id, node, generation, fingerprint, operation, "
                 "destination, arguments, state, created_at, updated_at) VALUES ('eff-1', 'n', "
                 "1, 'fp', 'git.push', 'd', '{}', 'DISPATCHED', 0, 0)")  # fmt: skip
    conn.execute("INSERT INTO tool_call VALUES ('toolu_1', 's', 'eff-1', 0)")
    conn.commit()
    conn.close()
    with Ledger.open(str(db)) as ledger:
        assert ledger.get_effect("eff-1").state is EffectState.DISPATCHED
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA foreign_keys = ON")
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    assert conn.execute("SELECT effect_id FROM tool_call").fetchall() == [("eff-1",)]
    conn.execute("UPDATE effect SET state = 'NOT_EXECUTED' WHERE effect_id = 'eff-1'")
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute("INSERT INTO tool_call VALUES ('toolu_2', 's', 'eff-missing', 0)")
    conn.close()
