"""Each generation records the commit it started from (issue 13): the capsule's diff of the
body's work is taken against it. Hook payloads as Claude Code sends them, a real git workspace.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from hookworld import NODE, Claude, commit, installed_world, sh

from onstation.ledger import Ledger
from onstation.ledger.bodies import HarnessLedger


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Any]:
    return installed_world(tmp_path)


def base_of(world: dict[str, Any], generation: int) -> str | None:
    with Ledger.open(world["db"]) as ledger:
        return HarnessLedger(ledger).base_of(NODE, generation)


def test_the_first_session_of_a_generation_records_where_it_started(
    world: dict[str, Any],
) -> None:
    project = world["project"]
    start = sh(project, "git", "rev-parse", "HEAD")
    claude = Claude(project, world["env"], "sess-1")
    claude.context("SessionStart", source="startup")
    assert base_of(world, 1) == start
    # The body works and commits; a /clear in the same process starts where it already is,
    # but its generation's work still began at the first base.
    commit(project, "a.txt")
    claude.context("SessionStart", source="clear")
    assert base_of(world, 1) == start
    with Ledger.open(world["db"]) as ledger:
        events = [e for e in ledger.history(NODE) if e.kind == "generation.base"]
    assert [(e.generation, e.detail["commit"]) for e in events] == [(1, start)]


def _stamps(world: dict[str, Any]) -> dict[str, Any]:
    with Ledger.open(world["db"]) as ledger:
        return {e.kind: e.at for e in ledger.history(NODE)}


def test_the_base_is_recorded_with_the_admission(world: dict[str, Any]) -> None:
    """Read from the repository's files before the admission's transaction, the base is
    written in it: one durable commit for a session start, not two (the events of one
    transaction share its time stamp)."""
    start = sh(world["project"], "git", "rev-parse", "HEAD")
    Claude(world["project"], world["env"], "sess-1").context("SessionStart", source="startup")
    assert base_of(world, 1) == start
    stamps = _stamps(world)
    assert stamps["generation.base"] == stamps["session.admitted"]


def test_a_base_git_must_be_asked_for_is_recorded_after_the_admission(
    world: dict[str, Any],
) -> None:
    """A repository the files alone do not settle (any ``[extensions]``): git is asked, after
    the admission has committed (no git under the ledger's writer lock)."""
    project = world["project"]
    sh(project, "git", "config", "extensions.worktreeConfig", "true")
    start = sh(project, "git", "rev-parse", "HEAD")
    Claude(project, world["env"], "sess-1").context("SessionStart", source="startup")
    assert base_of(world, 1) == start
    stamps = _stamps(world)
    assert stamps["generation.base"] > stamps["session.admitted"]


def test_a_workspace_without_git_records_no_base(tmp_path: Path) -> None:
    world = installed_world(tmp_path)
    sh(world["project"], "rm", "-rf", ".git")
    Claude(world["project"], world["env"], "sess-1").context("SessionStart", source="startup")
    assert base_of(world, 1) is None


def test_a_base_must_be_a_full_commit_id(tmp_path: Path) -> None:
    from onstation.core.errors import BadInput

    with Ledger.open(str(tmp_path / "l.db")) as ledger:
        ledger.register_node(NODE, role="executor", spawner=None)
        records = HarnessLedger(ledger)
        for bad in ("HEAD", "abc123", "g" * 40, "--all"):
            with pytest.raises(BadInput, match="base commit"):
                records.record_base(NODE, 1, bad, source="test")
        assert records.record_base(NODE, 1, "a" * 40, source="test") == "a" * 40
        assert records.record_base(NODE, 1, "b" * 40, source="test") == "a" * 40  # first wins
        assert records.base_of(NODE, 2) is None


STUB = str(Path(__file__).with_name("successor_stub.py"))


def _relieve(world: dict[str, Any], *prefix: str) -> dict[str, Any]:
    import json
    import subprocess

    from hookworld import ONSTATION

    command = list(prefix) or [ONSTATION]
    done = subprocess.run(
        [*command, "relieve", NODE, "--harness", "command", "--execution-class", "fake",
         "--command", f"{sys.executable} {STUB} ok {ONSTATION}", "--brief-wait", "0",
         "--challenge-wait", "30", "--shutdown-wait", "0.5", "--json"],
        capture_output=True, text=True, env=world["env"], timeout=300, check=False,
    )  # fmt: skip
    assert done.stdout.strip(), done.stderr
    return dict(json.loads(done.stdout))


def test_the_capsule_carries_the_work_since_the_generations_base(world: dict[str, Any]) -> None:
    """The body committed work after it started: the capsule's diff is that work (against the
    recorded base), not only what is uncommitted, and its patch digest is not an empty one."""
    import hashlib
    import json
    import subprocess

    from hookworld import ONSTATION

    from onstation.harness.fake_agent import mark_scratch_workspace

    project = world["project"]
    mark_scratch_workspace(project)
    start = sh(project, "git", "rev-parse", "HEAD")
    Claude(project, world["env"], "sess-1").context("SessionStart", source="startup")
    commit(project, "login.py")
    assert run_episode(world)
    outcome = _relieve(world)
    assert outcome["state"] == "SETTLED", outcome
    report = Path(outcome["report_path"]).read_text()
    digest = report.split("- capsule: ", 1)[1].split(" ", 1)[0]
    shown = subprocess.run([ONSTATION, "capsule", "show", digest, "--json"], env=world["env"],
                           capture_output=True, text=True, check=True)  # fmt: skip
    repository = json.loads(shown.stdout)["payload"]["repository"]
    assert repository["base"] == start
    assert [f["path"] for f in repository["diff"]["files"]] == ["login.py"]
    assert repository["diff"]["patchDigest"] != hashlib.sha256(b"").hexdigest()
    # The successor's generation starts where it was challenged: the head after that work.
    assert base_of(world, 2) == sh(project, "git", "rev-parse", "HEAD")


def run_episode(world: dict[str, Any]) -> bool:
    import subprocess

    from hookworld import ONSTATION

    argv = [ONSTATION, "episode", "open", NODE, "--objective", "log in"]
    done = subprocess.run(argv, env=world["env"], capture_output=True, text=True, check=False)
    return done.returncode == 0


def test_an_invalid_plan_launches_nothing(world: dict[str, Any]) -> None:
    """Every relief runs its plan through the schema and the semantic validator before a
    verdict that permits a launch: a violation (planted here) quarantines the relief."""
    from onstation.harness.fake_agent import mark_scratch_workspace

    mark_scratch_workspace(world["project"])
    Claude(world["project"], world["env"], "sess-1").context("SessionStart", source="startup")
    assert run_episode(world)
    plant = (
        "import onstation.plan.validator as V; from onstation.plan.schemas import Violation; "
        "V.validate_plan = lambda plan, **_: V.Report(semantic=[Violation("
        "'/verdict', 'OS-TEST-001', 'planted for the test')]); "
        "from onstation.cli.entry import main; main()"
    )
    outcome = _relieve(world, sys.executable, "-c", plant)
    assert (outcome["verdict"], outcome["state"]) == ("QUARANTINED", "NOT_LAUNCHED"), outcome
    assert "PLAN_INVALID: OS-TEST-001 /verdict: planted for the test" in outcome["reasons"]
