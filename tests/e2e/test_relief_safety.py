"""Relief as a user runs it on a real repository: the defects of the first round, each with
the test that failed before its fix.

- ``relieve`` defaulted to the fake harness, which committed to the user's branch and pushed
  to the real origin;
- a relief that could not go on fenced the working body first (halts, breaker, cap, no
  objective, no harness), and a halt on one identity stopped every identity's reliefs;
- the successor received its predecessor's shutdown order;
- a fenced body could still write a brief (stamped with the new generation), messages, notes;
- an agent's own relief request (its brief) was marked delivered and dropped by the lead;
- the lead relieved only on hull tiers, never a dead or silent body, and told nobody when a
  relief ended BLOCKED or QUARANTINED;
- a coordinator was fenced in the middle of an APPROACH exchange, and its scratch file stayed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from onstation.harness.launch import CommandLauncher, LaunchedBody, LaunchSpec
from onstation.ledger import Ledger
from onstation.ledger.bodies import HarnessLedger
from onstation.ledger.relief_records import ReliefLedger
from onstation.relief.relieve import Relief, ReliefOptions

ONSTATION = str(Path(sys.executable).with_name("onstation"))
STUB = str(Path(__file__).with_name("successor_stub.py"))
GIT = {"GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "T",
       "GIT_COMMITTER_EMAIL": "t@e"}  # fmt: skip
STUB_COMMAND = f"{sys.executable} {STUB} ok {ONSTATION}"


def run(
    env: dict[str, str], *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ONSTATION, *args], capture_output=True, text=True, env=env,
                          input=stdin, timeout=120, check=False)  # fmt: skip


def hook(env: dict[str, str], event: str, payload: dict[str, Any]) -> str:
    done = run(env, "hook", "claude-code", event, stdin=json.dumps(payload))
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout) if done.stdout.strip() else {}
    return str(out.get("hookSpecificOutput", {}).get("additionalContext", "") or out)


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True,
                          env={**os.environ, **GIT})  # fmt: skip
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> dict[str, Any]:
    """A user's repository with a bare local ``origin``, an identity bound to it, no body."""
    origin = tmp_path / "origin.git"
    _git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    app = tmp_path / "app"
    _git(tmp_path, "clone", "-q", str(origin), str(app))
    (app / "README.md").write_text("the user's work\n")
    _git(app, "add", "README.md")
    _git(app, "commit", "-q", "-m", "user work")
    _git(app, "push", "-q", "origin", "HEAD:main")
    env = {**os.environ, **GIT, "ONSTATION_DB": str(tmp_path / "ledger.db"),
           "ONSTATION_KEYS_DIR": str(tmp_path / "keys")}  # fmt: skip
    for var in ("ONSTATION_NODE", "ONSTATION_GENERATION"):
        env.pop(var, None)
    assert run(env, "node", "register", "app", "--spawner", "team-lead").returncode == 0
    done = run(env, "install", "claude-code", "--project", str(app), "--node", "app")
    assert done.returncode == 0, done.stderr
    assert run(env, "episode", "open", "app", "--objective", "ship the login").returncode == 0
    return {"app": app, "origin": origin, "env": env, "db": str(tmp_path / "ledger.db"),
            "tmp": tmp_path}  # fmt: skip


def _start_session(repo: dict[str, Any], session_id: str = "user-1") -> str:
    return hook(repo["env"], "SessionStart", {"session_id": session_id, "cwd": str(repo["app"]),
                                              "hook_event_name": "SessionStart",
                                              "source": "startup"})  # fmt: skip


def _snapshot(repo: dict[str, Any]) -> tuple[str, str, list[str]]:
    """The origin's refs, every commit, and the work tree outside onstation's own records
    (a relief files its report under .bridge/reports, and nothing else)."""
    status = _git(repo["app"], "status", "--porcelain", "--untracked-files=all")
    return (
        _git(repo["origin"], "for-each-ref"),
        _git(repo["app"], "log", "--all", "--format=%H %s"),
        [line for line in status.splitlines() if not line[3:].startswith(".bridge/reports/")],
    )


def _generation(repo: dict[str, Any], node: str = "app") -> tuple[int, int | None]:
    with Ledger.open(repo["db"]) as ledger:
        live = ledger.live_lease(node)
        return ledger.get_node(node).generation, None if live is None else live.generation


def _relieve_stub(repo: dict[str, Any], *extra: str) -> subprocess.CompletedProcess[str]:
    return run(repo["env"], "relieve", "app", "--harness", "command", "--execution-class", "fake",
               "--command", STUB_COMMAND, "--brief-wait", "0", "--challenge-wait", "30",
               "--shutdown-wait", "0.5", "--json", *extra)  # fmt: skip


def _supervise_once(repo: dict[str, Any], *extra: str) -> list[str]:
    """One look of the team lead; what it did."""
    done = run(repo["env"], "supervise", "--once", "--json", "--brief-wait", "0", *extra)
    return list(json.loads(done.stdout)["actions"])


# -- never touch a user's work with a stand-in ----------------------------------------------


def test_relieve_without_a_harness_refuses_and_leaves_the_repository_alone(
    repo: dict[str, Any],
) -> None:
    before = _snapshot(repo)
    done = run(repo["env"], "relieve", "app", "--emergency")
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "--harness" in done.stderr
    for choice in ("claude-code", "codex", "interactive"):
        assert choice in done.stderr
    assert "fake" not in done.stderr
    assert _snapshot(repo) == before
    with Ledger.open(repo["db"]) as ledger:
        assert ReliefLedger(ledger).reliefs("app") == []


def test_relieve_uses_the_harness_the_body_runs_under_and_never_the_fake_one(
    repo: dict[str, Any], tmp_path: Path
) -> None:
    """A Claude Code body on a machine without ``claude``: the relief is refused before the
    fence (it would launch nothing), the body stays live, the origin is untouched."""
    _start_session(repo)
    before = _snapshot(repo)
    env = {**repo["env"], "PATH": str(tmp_path / "empty-bin")}
    done = subprocess.run([ONSTATION, "relieve", "app", "--emergency", "--json"], env=env,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 4, done.stderr
    outcome = json.loads(done.stdout)
    assert (outcome["state"], outcome["fenced"]) == ("NOT_STARTED", False)
    assert any("`claude`" in r and "not on PATH" in r for r in outcome["reasons"])
    assert _generation(repo) == (1, 1)
    assert _snapshot(repo) == before


# -- fence only when the relief can go on ----------------------------------------------------


@pytest.mark.parametrize(
    ("setup", "verdict", "fix"),
    [
        (
            ["halt", "--node", "app", "--why", "maintenance"],
            "BLOCKED",
            "onstation unhalt --node app",
        ),
        (["halt", "--why", "all stop"], "BLOCKED", "onstation unhalt"),
        (
            ["breaker", "open", "app", "--why", "crash loop"],
            "BLOCKED",
            "onstation breaker close app",
        ),
        (["episode", "settle", "app"], "QUARANTINED", "onstation episode open app"),
    ],
)
def test_a_relief_that_cannot_go_on_leaves_the_body_live(
    repo: dict[str, Any], setup: list[str], verdict: str, fix: str
) -> None:
    _start_session(repo)
    done = run(repo["env"], *setup)
    assert done.returncode == 0, done.stderr
    done = _relieve_stub(repo)
    assert done.returncode == 4, done.stderr
    outcome = json.loads(done.stdout)
    assert (outcome["verdict"], outcome["state"], outcome["fenced"]) == (
        verdict, "NOT_STARTED", False)  # fmt: skip
    assert any(f.startswith(fix) for f in outcome["fix"]), outcome["fix"]
    assert _generation(repo) == (1, 1)  # the working session is still the body
    with Ledger.open(repo["db"]) as ledger:
        # The spawner and the operator are told why, with the command that fixes it.
        for recipient in ("team-lead", "operator"):
            told = HarnessLedger(ledger).messages(recipient)
            assert told and told[-1].kind == "relief_not_launched" and fix in told[-1].body
    report = Path(outcome["report_path"]).read_text()
    assert "not fenced: still the live body" in report and fix in report


def test_the_respawn_cap_is_checked_before_the_fence(repo: dict[str, Any]) -> None:
    _start_session(repo)
    for _ in range(3):
        assert run(repo["env"], "respawn", "request", "app").returncode == 0
    done = _relieve_stub(repo)
    assert done.returncode == 4
    outcome = json.loads(done.stdout)
    assert outcome["state"] == "NOT_STARTED" and "RESPAWN_REFUSED" in outcome["reasons"][0]
    assert _generation(repo) == (1, 1)


def test_a_halt_on_another_identity_does_not_stop_this_relief(repo: dict[str, Any]) -> None:
    _start_session(repo)
    assert run(repo["env"], "node", "register", "other").returncode == 0
    assert run(repo["env"], "halt", "--node", "other", "--why", "other work").returncode == 0
    done = _relieve_stub(repo)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["state"] == "SETTLED"


def test_a_session_starting_between_fence_and_launch_cannot_take_the_generation(
    repo: dict[str, Any],
) -> None:
    _start_session(repo)
    seen: dict[str, Any] = {}

    class IntruderFirst(CommandLauncher):
        """Another Claude Code session starts in the workspace just before the launch."""

        def launch(self, spec: LaunchSpec) -> LaunchedBody:
            seen["intruder"] = _start_session(repo, "user-2")
            return super().launch(spec)

    launcher = IntruderFirst(STUB_COMMAND, execution_class="fake")
    env = repo["env"]
    previous = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        with Ledger.open(repo["db"]) as ledger:
            outcome = Relief(ledger, "app", ReliefOptions(
                launcher=launcher, brief_wait=0, challenge_wait=30, shutdown_wait=0.5,
                db=repo["db"], emergency=True)).run()  # fmt: skip
    finally:
        for key, value in previous.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    assert "not the body of app" in seen["intruder"]
    assert (outcome.state, outcome.to_generation) == ("SETTLED", 2)
    with Ledger.open(repo["db"]) as ledger:
        live = ledger.live_lease("app")
        assert live is not None and live.generation == 2
        assert live.holder is not None and "user-2" not in live.holder
        assert HarnessLedger(ledger).session("user-2").state == "REFUSED"  # type: ignore[union-attr]


# -- messages reach the body they are meant for; the old body never acts again --------------


def test_the_shutdown_order_reaches_the_predecessor_and_never_its_successor(
    repo: dict[str, Any],
) -> None:
    _start_session(repo)
    done = _relieve_stub(repo)
    assert done.returncode == 0, done.stderr
    with Ledger.open(repo["db"]) as ledger:
        records = HarnessLedger(ledger)
        orders = [m for m in records.messages("app") if m.kind == "shutdown_request"]
        assert [m.generation for m in orders] == [1]
        # Whatever the successor's hooks take, the order is not among it.
        assert "shutdown_request" not in [
            m.kind for m in records.take_messages("app", delivered_to="g2", generation=2)
        ]
    # The old session, on its next call, is told it was relieved, with its own order.
    told = hook(repo["env"], "PreToolUse", {"session_id": "user-1", "cwd": str(repo["app"]),
                                            "hook_event_name": "PreToolUse",
                                            "tool_name": "Read", "tool_input": {},
                                            "tool_use_id": "t9"})  # fmt: skip
    assert "has been relieved" in told and "shutdown_request" in told


def test_a_fenced_body_is_denied_and_its_late_brief_is_evidence_only(
    repo: dict[str, Any],
) -> None:
    _start_session(repo)
    assert _relieve_stub(repo).returncode == 0
    env = repo["env"]
    writes = [
        ["brief", "write", "app", "--generation", "1", "--task", "old task", "--remaining",
         "finish it"],
        ["message", "send", "--from", "app", "--generation", "1", "--to", "team-lead", "--kind",
         "respawn_triggered", "--body", "relieve me"],
        ["note", "app", "--generation", "1", "--decision", "rewrite everything", "--why", "x"],
        ["manifest", "write", "app", "--generation", "1", "--l3", "auth", "--pun", "old"],
    ]  # fmt: skip
    for args in writes:
        done = run(env, *args)
        assert done.returncode == 3, (args, done.stdout, done.stderr)
    # A body's write without its generation is refused as bad input, never taken as current.
    assert run(env, "brief", "write", "app", "--task", "x").returncode == 2
    with Ledger.open(repo["db"]) as ledger:
        records = HarnessLedger(ledger)
        assert len(ledger.denials("app")) >= 4
        brief = records.latest_document("app", "brief")
        assert brief is not None and brief.generation == 1 and not brief.late  # the relief's
        late = records.late_documents("app")
        assert [d.generation for d in late] == [1] and "/late/" in late[0].path
        assert Path(late[0].path).read_text().startswith("> LATE")
        assert records.notes("app") == []
        assert [m for m in records.messages("team-lead") if m.kind == "respawn_triggered"] == []
        # Offered to the successor, marked for what it is.
        offered = [m for m in records.messages("app") if m.kind == "late_brief"]
        assert [m.generation for m in offered] == [2] and "untrusted" in offered[0].body
    shown = run(env, "report", "app")
    assert "Late evidence (untrusted)" in shown.stdout and late[0].path in shown.stdout


def test_an_agents_own_relief_request_is_acted_on_by_the_lead(repo: dict[str, Any]) -> None:
    _start_session(repo)
    done = run(repo["env"], "brief", "write", "app", "--generation", "1", "--task", "login",
               "--remaining", "cookie", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    # The lead relaunches with what the body runs under; here a stand-in successor is chosen.
    acted = _supervise_once(repo, "--harness", "fake", "--challenge-wait", "1")
    assert any("app: relief requested by itself" in a for a in acted), acted
    with Ledger.open(repo["db"]) as ledger:
        reliefs = ReliefLedger(ledger).reliefs("app")
        assert len(reliefs) == 1 and reliefs[0].cause.startswith("relief requested by itself")
        assert ledger.get_node("app").generation >= 2  # it was fenced: a relief went ahead


def test_a_relief_request_from_a_stale_generation_is_ignored(repo: dict[str, Any]) -> None:
    _start_session(repo)
    with Ledger.open(repo["db"]) as ledger:
        HarnessLedger(ledger).post_message(
            sender="app",
            recipient="team-lead",
            kind="relief_requested",
            body="me",
            sender_generation=1,
        )
        ledger.fence("app", expect_generation=1)  # relieved meanwhile by someone else
    acted = _supervise_once(repo)
    assert any("ignored" in a and "generation 1" in a for a in acted), acted


# -- the lead reacts to everything that needs a relief ---------------------------------------


def _settled_stub_body(repo: dict[str, Any]) -> dict[str, Any]:
    _start_session(repo)
    done = _relieve_stub(repo)  # the stub successor lives on, renewing its lease
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def test_the_lead_relieves_a_body_whose_process_died(repo: dict[str, Any]) -> None:
    outcome = _settled_stub_body(repo)
    os.kill(outcome["successor_pid"], signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and Path(f"/proc/{outcome['successor_pid']}").exists():
        time.sleep(0.1)
    acted = _supervise_once(repo, "--challenge-wait", "30")
    assert any("body lost (crash" in a for a in acted), acted
    with Ledger.open(repo["db"]) as ledger:
        relief = ReliefLedger(ledger).reliefs("app")[-1]
        assert relief.cause == "body lost (crash)"
        events = [e for e in ledger.history("app") if e.kind == "relief.decided"]
        assert events
    report = Path(str(relief.report_path)).read_text()
    assert "process-death" in report or "PROCESS_DEATH" in report


def test_the_lead_relieves_a_silent_body(repo: dict[str, Any]) -> None:
    _start_session(repo)
    with Ledger.open(repo["db"]) as ledger:
        ledger.renew_lease("app", generation=1, ttl=timedelta(seconds=1))
    time.sleep(1.2)
    acted = _supervise_once(repo, "--harness", "fake", "--challenge-wait", "1")
    assert any("body lost (hang" in a for a in acted), acted


# -- the coordinator rules --------------------------------------------------------------------


def test_a_coordinator_mid_exchange_is_not_fenced_until_an_emergency(repo: dict[str, Any]) -> None:
    _start_session(repo)
    with Ledger.open(repo["db"]) as ledger:
        approach = HarnessLedger(ledger).post_message(
            sender="exec-9", recipient="app", kind="APPROACH", body="may I refactor auth?"
        )
    done = _relieve_stub(repo, "--exchange-wait", "0.5")
    assert done.returncode == 4
    outcome = json.loads(done.stdout)
    assert outcome["state"] == "NOT_STARTED" and "EXCHANGE_OPEN" in outcome["reasons"][0]
    assert _generation(repo) == (1, 1)
    done = _relieve_stub(repo, "--emergency")
    assert done.returncode == 0, done.stdout + done.stderr
    outcome = json.loads(done.stdout)
    report = Path(outcome["report_path"]).read_text()
    assert f"APPROACH from exec-9 (message {approach.message_id})" in report
    assert "Lost at this relief" in report
    with Ledger.open(repo["db"]) as ledger:
        brief = HarnessLedger(ledger).latest_document("app", "brief")
        assert brief is not None
        assert any(f"message {approach.message_id}" in loss for loss in brief.content["losses"])
        assert "### Lost At This Relief" in brief.content["markdown"]


def test_a_coordinator_respawn_tells_the_spawner_and_removes_its_scratch(
    repo: dict[str, Any],
) -> None:
    _start_session(repo)
    coords = repo["app"] / "memory" / "agents" / "coords"
    coords.mkdir(parents=True)
    scratch = coords / "coord-auth-bosun-scratch.md"
    scratch.write_text("## Status\n2 of 5\n")
    done = run(repo["env"], "manifest", "write", "app", "--generation", "1", "--l3", "auth",
               "--pun", "bosun", "--l3-task", "auth flow", "--completed", "exec-1: ACKed — login",
               "--not-started", "cookie: sessions", "--in-flight", "exec-2: APPROACH pending",
               "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    manifest = json.loads(done.stdout)
    assert "Respawn count: 1/3" in Path(manifest["path"]).read_text()
    with Ledger.open(repo["db"]) as ledger:
        sent = [m for m in HarnessLedger(ledger).messages("team-lead")
                if m.kind == "respawn_triggered"]  # fmt: skip
    assert len(sent) == 1 and sent[0].sender_generation == 1
    assert sent[0].body.splitlines() == [
        "coord-auth-bosun: COORD_RESPAWN TRIGGERED",
        "Context at respawn: unknown",
        "Respawn count: 1/3",
        "L3: auth flow — 1/3 sub-tasks done",
        f"Continuation manifest: {manifest['path']}",
        "A fresh Coord session is needed to continue this L3.",
        "Spawner should start a new coord-auth-bosun with the manifest path in the spawn prompt.",
    ]
    acted = _supervise_once(repo, "--harness", "fake", "--challenge-wait", "1")
    assert any("coordinator self-respawn" in a for a in acted), acted
    assert not scratch.exists()
    with Ledger.open(repo["db"]) as ledger:
        counted = [e for e in ledger.history("app") if e.kind == "respawn.counted"]
        assert [e.detail["respawn_kind"] for e in counted] == ["coordinator"]


def test_an_unsafe_report_directory_stops_the_relief_before_the_fence(
    repo: dict[str, Any], tmp_path: Path
) -> None:
    """Regression (issue 10): with .bridge/reports a symlink, the relief fenced, launched and
    settled the successor and only then stopped (ABORTED, exit 2)."""
    _start_session(repo)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (repo["app"] / ".bridge").mkdir()
    (repo["app"] / ".bridge" / "reports").symlink_to(elsewhere)
    done = _relieve_stub(repo)
    assert done.returncode == 4, done.stdout + done.stderr
    outcome = json.loads(done.stdout)
    assert (outcome["state"], outcome["fenced"]) == ("NOT_STARTED", False)
    assert "WORKSPACE_UNSAFE" in outcome["reasons"][0] and "symlink" in outcome["reasons"][0]
    assert _generation(repo) == (1, 1)
    assert list(elsewhere.iterdir()) == []  # nothing written through the symlink


def test_input_files_are_read_once_before_the_fence(repo: dict[str, Any], tmp_path: Path) -> None:
    """Before the fix --facts and --capacity were read again after the fence: a file removed
    (or replaced by something unreadable) in between aborted a relief that had fenced."""
    _start_session(repo)
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps({"objective": "finish the parser"}))
    capacity = tmp_path / "capacity.json"
    evidence = json.loads(
        (Path(__file__).parents[2] / "src/onstation/plan/examples/sample-input.json").read_text()
    )["capacity"]["evidence"]
    capacity.write_text(json.dumps(evidence | {"node": "app"}))
    said: list[str] = []

    def progress(line: str) -> None:
        said.append(line)
        if line.startswith("fence generation"):
            facts.unlink()
            capacity.write_text("{not json")

    env = repo["env"]
    previous = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        with Ledger.open(repo["db"]) as ledger:
            outcome = Relief(ledger, "app", ReliefOptions(
                launcher=CommandLauncher(STUB_COMMAND, execution_class="fake"), brief_wait=0,
                challenge_wait=30, shutdown_wait=0.5, db=repo["db"], emergency=True,
                facts_file=str(facts), capacity_file=str(capacity),
                progress=progress)).run()  # fmt: skip
    finally:
        for key, value in previous.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    assert any(line.startswith("fence generation") for line in said)
    assert outcome.state != "ABORTED", outcome
    assert not any("--facts" in r or "--capacity" in r for r in outcome.reasons), outcome.reasons
    with Ledger.open(repo["db"]) as ledger:
        [relief] = ReliefLedger(ledger).reliefs("app")
        assert relief.state == outcome.state
