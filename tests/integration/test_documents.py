"""Turnover briefs and continuation manifests: from evidence, atomic, inside the workspace."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from onstation.core.errors import BadInput, Conflict
from onstation.harness.files import write_inside
from onstation.ledger import Ledger
from onstation.ledger.bodies import HarnessLedger
from onstation.relief.documents import (
    _BRIEF_KEYS,
    _MANIFEST_KEYS,
    MISSING,
    Supplied,
    write_brief,
    write_manifest,
)

GIT = {"GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "T",
       "GIT_COMMITTER_EMAIL": "t@e"}  # fmt: skip


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={**os.environ, **GIT})  # fmt: skip


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Ledger, Path]:
    repo = tmp_path / "ws"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "a.py").write_text("a\n")
    _git(repo, "add", "a.py")
    _git(repo, "commit", "-q", "-m", "a")
    _git(repo, "checkout", "-q", "-b", "feature")
    (repo / "b.py").write_text("b\n")
    _git(repo, "add", "b.py")
    _git(repo, "commit", "-q", "-m", "b")
    (repo / "c.py").write_text("untracked\n")
    ledger = Ledger.open(str(tmp_path / "ledger.db"))
    ledger.register_node("exec-1")
    ledger.open_episode("exec-1", "build the login page")
    HarnessLedger(ledger).bind_workspace(str(repo), "exec-1", harness="claude-code", by="t")
    return ledger, repo


def test_brief_is_filled_from_evidence_and_marks_missing(setup: tuple[Ledger, Path]) -> None:
    ledger, repo = setup
    records = HarnessLedger(ledger)
    records.add_note("exec-1", kind="decision", text="use bcrypt", rationale="team standard",
                     by="agent")  # fmt: skip
    supplied = Supplied.load(None, _BRIEF_KEYS, remaining=("wire cookies",))
    path, content = write_brief(ledger, "exec-1", supplied)
    assert path.parent == repo / ".bridge" / "turnovers"
    assert path.name.startswith("exec-1-") and path.suffix == ".md"
    assert content["current_task"]["description"] == "build the login page"  # the episode
    assert content["files_modified"] == ["b.py", "c.py"]  # diff against main + untracked
    assert content["evidence"]["git"]["branch"] == "feature"
    assert content["decisions"] == [{"decision": "use bcrypt", "rationale": "team standard"}]
    assert "completed_work" in content["missing"] and "current_task.status" in content["missing"]
    text = path.read_text()
    assert MISSING in text and "wire cookies" in text
    kept = records.latest_document("exec-1", "brief")
    assert kept is not None and kept.content == content


def test_the_brief_names_effects_settled_after_the_fact(setup: tuple[Ledger, Path]) -> None:
    """A push an operator resolved (or reconcile observed) is done: the brief says so and by
    whom, so that the next body never repeats it; one still open stays under not settled."""
    ledger, _repo = setup
    ledger.acquire_lease("exec-1")
    done, _ = ledger.intend_effect("exec-1", generation=1, operation="git.push",
                                   destination="origin", arguments={"ref": "main"})  # fmt: skip
    ledger.dispatch_effect(done.effect_id, generation=1)
    ledger.fence("exec-1", expect_generation=1)
    ledger.reconcile("exec-1")
    ledger.resolve_effect(done.effect_id, outcome="observed", by="alice", why="seen on origin")
    path, content = write_brief(ledger, "exec-1", Supplied.load(None, _BRIEF_KEYS))
    (effect,) = content["evidence"]["effects"]
    assert (effect["resolved_by"], effect["state"]) == ("alice", "COMMITTED")
    text = path.read_text()
    settled = text.split("### Effects Settled After the Fact (done: never repeat them)\n", 1)[1]
    assert settled.splitlines()[0] == (
        f"- {done.effect_id} COMMITTED git.push -> origin: observed: seen on origin (by alice)"
    )
    assert text.split("### Effects Not Yet Settled\n", 1)[1].startswith("- none")


def test_brief_from_a_json_file_and_bad_files(setup: tuple[Ledger, Path], tmp_path: Path) -> None:
    ledger, _repo = setup
    good = tmp_path / "brief.json"
    good.write_text(json.dumps({"task": "t", "status": "blocked", "completed": ["a.py — x"]}))
    _path, content = write_brief(ledger, "exec-1", Supplied.load(str(good), _BRIEF_KEYS))
    assert content["completed_work"] == [{"path": "a.py", "what": "x"}]
    for bad, why in (('{"task": 1}', "must be a string"), ('{"nope": "x"}', "unknown field"),
                     ('{"task": "a", "task": "b"}', "duplicate key")):  # fmt: skip
        good.write_text(bad)
        with pytest.raises(BadInput, match=why):
            Supplied.load(str(good), _BRIEF_KEYS)


def test_symlinks_and_traversal_are_refused_with_nothing_written(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws / ".bridge").symlink_to(outside)
    with pytest.raises(BadInput, match="not a plain directory"):
        write_inside(ws, [".bridge", "turnovers", "x.md"], "data")
    assert list(outside.iterdir()) == []
    (ws / ".bridge").unlink()
    (ws / ".bridge" / "turnovers").mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (ws / ".bridge" / "turnovers" / "x.md").symlink_to(victim)
    with pytest.raises(BadInput, match="not a regular file"):
        write_inside(ws, [".bridge", "turnovers", "x.md"], "data")
    assert victim.read_text() == "keep"
    for parts in ([".."], ["..", "x.md"], ["a/b"], ["-x"], ["ok", "."], ["a\x00b"]):
        with pytest.raises(BadInput):
            write_inside(ws, parts, "data")
    leftovers = [p for p in ws.rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []


def test_manifest_refuses_while_an_exchange_is_open(setup: tuple[Ledger, Path]) -> None:
    ledger, repo = setup
    records = HarnessLedger(ledger)
    approach = records.post_message(sender="exec-2", recipient="exec-1", kind="APPROACH",
                                    body="may I refactor auth?")  # fmt: skip
    supplied = Supplied.load(None, _MANIFEST_KEYS, next_action="spawn exec-3")
    with pytest.raises(Conflict, match="not a clean boundary"):
        write_manifest(ledger, "exec-1", supplied, l3="auth", pun="bosun")
    assert not (repo / "memory").exists()
    records.post_message(sender="exec-1", recipient="exec-2", kind="ACK", body="approved",
                         reply_to=approach.message_id)  # fmt: skip
    path, content = write_manifest(ledger, "exec-1", supplied, l3="auth", pun="bosun")
    assert path.parent == repo / "memory" / "agents" / "coords"
    assert path.name.startswith("coord-auth-bosun-respawn-")
    assert content["next_action"] == "spawn exec-3" and "l3_task" in content["missing"]
    # This respawn counts: the first self-respawn says 1/3, as the procedure does.
    assert "Respawn count: 1/3" in path.read_text()
    with pytest.raises(BadInput):
        write_manifest(ledger, "exec-1", supplied, l3="../x", pun="bosun")


def test_brief_takes_the_current_task_from_the_ledger(setup: tuple[Ledger, Path]) -> None:
    from onstation.ledger.relief_records import ReliefLedger

    ledger, _repo = setup
    task = ReliefLedger(ledger).create_task(
        "wire the session cookie", owner="exec-1", status="in_progress", by="lead"
    )
    _path, content = write_brief(ledger, "exec-1", Supplied.load(None, _BRIEF_KEYS))
    assert content["current_task"] == {
        "id": str(task.task_id),
        "description": "wire the session cookie",
        "status": "in_progress",
    }
    assert content["evidence"]["tasks"][0]["title"] == "wire the session cookie"


def test_writing_a_brief_tells_the_spawner_where_it_is(tmp_path: Path) -> None:
    ledger = Ledger.open(str(tmp_path / "ledger.db"))
    ledger.register_node("exec-2", spawner="coord-auth")
    ws = tmp_path / "ws"
    ws.mkdir()
    records = HarnessLedger(ledger)
    records.bind_workspace(str(ws), "exec-2", harness="claude-code", by="t")
    path, _content = write_brief(ledger, "exec-2", Supplied.load(None, _BRIEF_KEYS))
    (message,) = records.messages("coord-auth")
    assert message.kind == "relief_requested" and message.sender == "exec-2"
    assert f"Turnover brief at: {path}" in message.body
