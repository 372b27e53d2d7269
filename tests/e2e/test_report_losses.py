"""The discontinuity report lists every loss a relief had, as a user meets it: `onstation
relieve` in a subprocess, a stand-in successor (successor_stub.py) launched by the `command`
harness, a real SQLite ledger and real git.

Each loss kind of relief/losses.py is produced by a real run and must appear in the report's
"## Losses" section and in the review's "What is unknown"; a relief with nothing lost says
so. The report names the one reservation this attempt made, the one its successor echoed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hookworld import ONSTATION, git_project, sh
from test_relief import STUB, relieve, run, team
from test_unreachable_remote import dispatch_push_and_kill_the_host, make_unreachable, world
from test_unreachable_remote import relieve as relieve_world

from onstation.ledger import Ledger
from onstation.ledger.bodies import HarnessLedger
from onstation.ledger.relief_records import ReliefLedger

__all__ = ["team", "world"]  # fixtures, imported for their use below

SAMPLE = Path(__file__).parents[2] / "src/onstation/plan/examples/sample-input.json"


def losses_of(report: str) -> list[str]:
    """The "## Losses" section's items."""
    section = report.split("## Losses\n", 1)[1].split("\n## ", 1)[0].split("\n# ", 1)[0]
    return [line[2:] for line in section.splitlines() if line.startswith("- ")]


def unknown_of(report: str) -> str:
    return report.split("## What is unknown\n", 1)[1].split("\n## ", 1)[0]


def report_of(done: Any) -> tuple[dict[str, Any], str]:
    outcome = json.loads(done.stdout)
    return outcome, Path(outcome["report_path"]).read_text()


def assert_listed(report: str, kind: str, *texts: str) -> str:
    """The loss of ``kind`` naming every one of ``texts`` is in Losses and What is unknown."""
    found = [x for x in losses_of(report) if x.startswith(f"{kind}: ")]
    match = [x for x in found if all(t in x for t in texts)]
    assert match, (kind, texts, losses_of(report))
    unknown = unknown_of(report)
    assert f"- {kind}:" in unknown and unknown.strip() != "- none", unknown
    return match[0]


def write_brief(team: dict[str, Any], *args: str) -> None:
    done = run(team["env"], "brief", "write", "exec-1", "--generation", "1", *args)
    assert done.returncode == 0, done.stdout + done.stderr


def capacity_file(tmp_path: Path, **change: Any) -> Path:
    """Capacity evidence a fake successor could use, changed by ``change``."""
    now = datetime.now(UTC)
    stamp = lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: E731 - one-line helper
    evidence = json.loads(SAMPLE.read_text())["capacity"]["evidence"]
    until = stamp(now + timedelta(minutes=30))
    evidence |= {"node": "exec-1", "harness": "claude-code", "executionClass": "fake",
                 "observedAt": stamp(now), "validUntil": until}  # fmt: skip
    evidence["reservation"]["expiresAt"] = stamp(now + timedelta(minutes=30))
    evidence |= change
    path = tmp_path / "capacity.json"
    path.write_text(json.dumps(evidence))
    return path


# -- the hand-over ---------------------------------------------------------------------------


def test_an_emergency_relief_says_no_brief_came_and_what_the_capsule_omitted(
    team: dict[str, Any],
) -> None:
    done = relieve(team, "ok", "--challenge-wait", "30")
    assert done.returncode == 0, done.stdout + done.stderr
    outcome, report = report_of(done)
    assert outcome["state"] == "SETTLED"
    assert_listed(report, "no-brief", "no brief arrived before the fence", "emergency brief")
    assert_listed(report, "capsule-omission", "tests", "no test results supplied")
    assert_listed(report, "capsule-omission", "toolPairs")
    assert f"\n{len(losses_of(report))} loss(es): " in report  # the summary counts them all
    # The capsule cites the capacity evidence the verdict used: no contradiction to report.
    assert not [x for x in losses_of(report) if x.startswith("capacity-contradiction")]


def test_the_fields_a_brief_left_out_are_listed(team: dict[str, Any]) -> None:
    write_brief(team, "--task", "the login form", "--remaining", "wire the button")
    done = relieve(team, "ok", "--challenge-wait", "30")
    assert done.returncode == 0, done.stdout + done.stderr
    _, report = report_of(done)
    loss = assert_listed(report, "brief-fields-missing", "current_task.id", "decisions",
                         "completed_work", "context_used_percent")  # fmt: skip
    assert "remaining_work" not in loss  # it was given
    assert not [x for x in losses_of(report) if x.startswith("no-brief")]


def test_a_brief_that_arrives_after_the_fence_is_a_loss(team: dict[str, Any]) -> None:
    # The old body writes its brief once the fence has passed (the successor's command runs
    # after it): the write is denied and kept as late evidence, before the report is written.
    late = (f"{ONSTATION} brief write exec-1 --generation 1 --task 'too late'; "
            f"exec {sys.executable} {STUB} ok {ONSTATION}")  # fmt: skip
    done = run(team["env"], "relieve", "exec-1", "--harness", "command", "--execution-class",
               "fake", "--command", f"sh -c {json.dumps(late)}", "--brief-wait", "0",
               "--challenge-wait", "30", "--shutdown-wait", "0.5", "--json")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    _, report = report_of(done)
    with Ledger.open(team["db"]) as ledger:
        (doc,) = HarnessLedger(ledger).late_documents("exec-1")
    assert_listed(report, "late-brief", doc.path, "after its fence", "untrusted")
    assert "## Late evidence (untrusted)" in report  # still said apart, as before


# -- what the old body left open -------------------------------------------------------------


def test_an_exchange_expired_at_an_emergency_fence_is_counted_as_a_loss(
    team: dict[str, Any],
) -> None:
    with Ledger.open(team["db"]) as ledger:
        approach = HarnessLedger(ledger).post_message(
            sender="exec-9", recipient="exec-1", kind="APPROACH", body="may I refactor auth?"
        )
    done = relieve(team, "ok", "--challenge-wait", "30", "--emergency")
    assert done.returncode == 0, done.stdout + done.stderr
    _, report = report_of(done)
    assert_listed(
        report, "expired-exchange", f"APPROACH from exec-9 (message {approach.message_id})"
    )
    assert "## Lost at this relief" in report
    assert "1 expired-exchange" in report


def test_an_ambiguous_push_is_listed_with_why_its_remote_was_not_observed(
    world: dict[str, Any],
) -> None:
    effect_id = dispatch_push_and_kill_the_host(world)
    make_unreachable(world, "moved")
    code, outcome = relieve_world(world)
    assert code == 4 and outcome["verdict"] == "QUARANTINED", outcome
    report = Path(outcome["report_path"]).read_text()
    loss = assert_listed(report, "ambiguous-effect", effect_id, "git.push",
                         "its destination could not be observed")  # fmt: skip
    assert "does not appear to be a git repository" in loss
    # Listed once, with its why, not again as a bare unknown.
    assert not [x for x in losses_of(report) if x.startswith(f"unknown: effect {effect_id}")]


def test_a_scratch_file_removed_without_scratch_state_is_a_loss(team: dict[str, Any]) -> None:
    coords = team["app"] / "memory" / "agents" / "coords"
    coords.mkdir(parents=True)
    scratch = coords / "coord-auth-bosun-scratch.md"
    scratch.write_text("## Status\n2 of 5\n")
    done = run(team["env"], "manifest", "write", "exec-1", "--generation", "1", "--l3", "auth",
               "--pun", "bosun", "--l3-task", "auth flow", "--json")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    done = relieve(team, "ok", "--challenge-wait", "30")
    assert done.returncode == 0, done.stdout + done.stderr
    _, report = report_of(done)
    assert not scratch.exists()
    assert_listed(report, "scratch-not-carried", str(scratch), "no Scratch State")


def test_a_scratch_file_carried_in_the_manifest_is_no_loss(team: dict[str, Any]) -> None:
    coords = team["app"] / "memory" / "agents" / "coords"
    coords.mkdir(parents=True)
    (coords / "coord-auth-bosun-scratch.md").write_text("## Status\n2 of 5\n")
    done = run(team["env"], "manifest", "write", "exec-1", "--generation", "1", "--l3", "auth",
               "--pun", "bosun", "--l3-task", "auth flow", "--scratch", "2 of 5 done",
               "--json")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    _, report = report_of(relieve(team, "ok", "--challenge-wait", "30"))
    assert "coordinator scratch file removed" in report
    assert not [x for x in losses_of(report) if x.startswith("scratch-not-carried")]


# -- capacity and the reservation ------------------------------------------------------------


def test_a_capsule_saying_capacity_unknown_beside_used_evidence_is_a_contradiction(
    team: dict[str, Any], tmp_path: Path
) -> None:
    facts = tmp_path / "facts.json"
    unknown = {"evidenceDigest": None, "executionClass": None, "note": "unknown"}
    facts.write_text(json.dumps({"capacityState": unknown}))
    done = relieve(team, "ok", "--challenge-wait", "30", "--facts", str(facts))
    assert done.returncode == 0, done.stdout + done.stderr
    _, report = report_of(done)
    assert_listed(report, "capacity-contradiction", "the capsule says capacity is unknown",
                  "while the verdict used evidence")  # fmt: skip


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"node": "someone-else"}, "is for node someone-else"),
        ({"freshness": "stale"}, "had expired"),
    ],
)
def test_capacity_evidence_for_another_node_or_expired_is_a_contradiction(
    team: dict[str, Any], tmp_path: Path, change: dict[str, Any], said: str
) -> None:
    done = relieve(team, "ok", "--capacity", str(capacity_file(tmp_path, **change)))
    outcome, report = report_of(done)
    assert outcome["state"] == "NOT_LAUNCHED", outcome
    assert_listed(report, "capacity-contradiction", said)


def test_the_report_names_the_reservation_the_successor_echoed(team: dict[str, Any]) -> None:
    done = relieve(team, "ok", "--challenge-wait", "30")
    assert done.returncode == 0, done.stdout + done.stderr
    _, report = report_of(done)
    with Ledger.open(team["db"]) as ledger:
        birth = ReliefLedger(ledger).birth("exec-1", 2)
        made = [e.detail["reservation_id"] for e in ledger.history("exec-1")
                if e.kind == "reservation.made"]  # fmt: skip
    assert birth is not None and birth.answered_at is not None
    (reserved,) = made
    assert birth.challenge["reservation"] == reserved
    assert f"- reservation: {reserved} (made for this attempt, bound in its challenge, echoed" in (
        report
    )
    capacity = report.split("## Capacity\n", 1)[1]
    assert f"reservation `{reserved}` (made for this attempt" in capacity
    # Any other reservation id in the report is the capacity evidence's own, and says so.
    for line in capacity.splitlines():
        if "`res-" in line and reserved not in line:
            assert "not this attempt's reservation" in line, line


def test_the_capacity_evidences_hold_is_the_one_reservation_and_holds_once(
    team: dict[str, Any], tmp_path: Path
) -> None:
    """One reservation id per attempt: the id the capacity evidence holds is the one the
    ledger reserves, the challenge binds and the report names (before, the evidence carried
    its own id beside the ledger's); the same evidence given to a second attempt is refused."""
    evidence = capacity_file(tmp_path)
    held = json.loads(evidence.read_text())["reservation"]["reservationId"]
    done = relieve(team, "ok", "--challenge-wait", "30", "--capacity", str(evidence))
    outcome, report = report_of(done)
    assert outcome["state"] == "SETTLED", report
    assert f"- reservation: {held} (made for this attempt, bound in its challenge" in report
    with Ledger.open(team["db"]) as ledger:
        birth = ReliefLedger(ledger).birth("exec-1", 2)
        assert birth is not None and birth.challenge["reservation"] == held
    again = relieve(team, "ok", "--challenge-wait", "30", "--capacity", str(evidence))
    outcome, report = report_of(again)
    assert outcome["state"] == "BLOCKED", report
    assert any(f"CAPACITY_REUSED: reservation {held}" in r for r in outcome["reasons"])


# -- nothing lost ----------------------------------------------------------------------------


def test_a_relief_with_a_full_hand_over_loses_nothing(tmp_path: Path, team: dict[str, Any]) -> None:
    """A complete brief, the telemetry for its context figure, a git remote, the generation's
    base (recorded at its first session start), and --facts with the tests, tool pairs and
    transcript: nothing is lost, and the report says so."""
    (tmp_path / "world").mkdir()
    project, _origin = git_project(tmp_path / "world")
    env = team["env"]
    done = run(env, "install", "claude-code", "--project", str(project), "--node", "exec-2")
    assert done.returncode == 0, done.stderr
    assert run(env, "episode", "open", "exec-2", "--objective", "ship it").returncode == 0
    payload = json.dumps({"session_id": "pred-2", "cwd": str(project),
                          "hook_event_name": "SessionStart", "source": "startup"})  # fmt: skip
    subprocess.run([ONSTATION, "hook", "claude-code", "SessionStart"], input=payload, text=True,
                   env=env, check=True, capture_output=True)  # fmt: skip
    with Ledger.open(team["db"]) as ledger:
        records = HarnessLedger(ledger)
        (session,) = records.sessions("exec-2")
        records.record_fill(
            session, percent=70.0, used_tokens=140_000, window_tokens=200_000,
            source="transcript", model=None, tier="red", supervised=True,
        )  # fmt: skip
    # What the brief states is supported by artifacts: the work changed app.js, the ledger
    # holds the task and the decision (an unsupported statement would be an unknown).
    (project / "app.js").write_text("button()\n")
    assert run(env, "task", "create", "wire the button", "--owner", "exec-2").returncode == 0
    noted = run(env, "note", "exec-2", "--decision", "keep sessions", "--why", "simpler",
                "--generation", "1")  # fmt: skip
    assert noted.returncode == 0, noted.stderr
    done = run(env, "brief", "write", "exec-2", "--generation", "1", "--task-id", "T-1",
               "--task", "the login form", "--status", "in_progress", "--completed",
               "app.js — wrote it", "--remaining", "wire the button", "--decision",
               "keep sessions: simpler", "--context", "the button is in app.js")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps({
        "planFrontier": [{"id": "next-1", "text": "wire the button", "state": "open"}],
        "decisions": [{"id": "d-1", "decision": "keep sessions", "rationale": "simpler",
                       "artifact": None}],
        "artifacts": [{"id": "run-1", "kind": "test-run", "digest": None, "ref": "pytest -q"}],
        "tests": [{"name": "tests/test_login.py", "status": "passed", "artifact": "run-1"}],
        "toolPairs": [{"callId": "c1", "tool": "Bash", "call": {"command": "pytest -q"},
                       "result": {"exitCode": 0, "summary": "1 passed"}}],
        "transcript": {"cursor": "t.jsonl:12", "tail": [{"role": "assistant", "text": "done"}]},
    }))  # fmt: skip
    done = run(env, "relieve", "exec-2", "--harness", "command", "--execution-class", "fake",
               "--command", f"{sys.executable} {STUB} ok {ONSTATION}", "--brief-wait", "0",
               "--challenge-wait", "30", "--shutdown-wait", "0.5", "--facts", str(facts),
               "--json")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    outcome, report = report_of(done)
    assert outcome["state"] == "SETTLED"
    assert losses_of(report) == ["nothing was lost at this relief"]
    assert unknown_of(report).strip() == "- none"
    # The capsule and the plan the relief used are kept, and their digests named.
    capsule_digest = report.split("- capsule: ", 1)[1].split(" ", 1)[0]
    plan_digest = report.split("- plan: ", 1)[1].split(" ", 1)[0]
    shown = run(env, "capsule", "show", capsule_digest[:12], "--json")
    assert shown.returncode == 0, shown.stderr
    capsule = json.loads(shown.stdout)
    assert capsule["digest"] == capsule_digest
    assert capsule["payload"]["repository"]["base"] == sh(project, "git", "rev-parse", "HEAD")
    plan = json.loads(run(env, "plan", "show", plan_digest, "--json").stdout)
    assert plan["capsule"]["digest"] == capsule_digest
    assert plan["verdict"]["disposition"] == "REBODIMENT_READY"
    missing = run(env, "plan", "show", "0" * 64)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1, missing.stderr
