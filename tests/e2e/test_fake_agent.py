"""The fake harness end to end: a real process, real git with a bare origin, the real hook
commands from the settings.json that `onstation install` wrote, a SQLite ledger."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from onstation.core.effects import EffectState
from onstation.harness.fake_agent import (
    EXIT_BLOCKED,
    local_bare_repository,
    mark_scratch_workspace,
)
from onstation.ledger import Ledger
from onstation.ledger.bodies import HarnessLedger

ONSTATION = str(Path(sys.executable).with_name("onstation"))
AGENT = [sys.executable, "-m", "onstation.harness.fake_agent"]
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "t@example.com",
}  # fmt: skip
WAIT = 120.0  # bound on any wait for the agent process (seconds)
#: Where the relief's launcher sends the generation-2 successor's own output.
BODY_LOG = Path(".bridge/bodies/exec-1-g2.log")


def sh(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        args, cwd=cwd, capture_output=True, text=True, env={**os.environ, **GIT_ENV}, check=True
    )
    return done.stdout.strip()


@pytest.fixture
def world(tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, Any]:
    supervised = bool(getattr(request, "param", {}).get("supervised"))
    origin = tmp_path / "origin.git"
    project = tmp_path / "app"
    sh(tmp_path, "git", "init", "-q", "--bare", "-b", "main", str(origin))
    sh(tmp_path, "git", "init", "-q", "-b", "main", str(project))
    (project / "README.md").write_text("app\n")
    sh(project, "git", "add", "README.md")
    sh(project, "git", "commit", "-q", "-m", "init")
    sh(project, "git", "remote", "add", "origin", str(origin))
    sh(project, "git", "push", "-q", "-u", "origin", "main")
    mark_scratch_workspace(project)  # this test made it: the fake agent may work in it
    db = str(tmp_path / "ledger.db")
    env = {**os.environ, **GIT_ENV, "ONSTATION_DB": db, "XDG_STATE_HOME": str(tmp_path / "state")}
    for key in ("ONSTATION_NODE", "ONSTATION_GENERATION", "ONSTATION_CHALLENGE"):
        env.pop(key, None)
    done = subprocess.run(
        [ONSTATION, "install", "claude-code", "--project", str(project), "--node", "exec-1",
         *(["--supervised"] if supervised else [])],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return {"project": project, "origin": origin, "env": env, "db": db, "tmp": tmp_path}


def agent_argv(world: dict[str, Any], *extra: str, session: str = "sess-1") -> list[str]:
    log = str(world["tmp"] / f"{session}.log")
    return [*AGENT, "--workspace", str(world["project"]), "--node", "exec-1",
            "--session-id", session, "--log", log, *extra]  # fmt: skip


def run_agent(world: dict[str, Any], *extra: str, session: str = "sess-1") -> Any:
    return subprocess.run(
        agent_argv(world, *extra, session=session), capture_output=True, text=True,
        env=world["env"], timeout=WAIT, check=False,
    )  # fmt: skip


def log_events(world: dict[str, Any], session: str = "sess-1") -> list[dict[str, Any]]:
    path = world["tmp"] / f"{session}.log"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def wait_for_event(
    world: dict[str, Any], proc: subprocess.Popen[str], event: str, session: str = "sess-1"
) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        for item in log_events(world, session):
            if item["event"] == event:
                return item
        assert proc.poll() is None, f"agent exited ({proc.returncode}) before {event}"
        time.sleep(0.1)
    raise AssertionError(f"no {event} within {WAIT} s")


def wait_for_successor_exit(log: Path, body_log: Path) -> list[dict[str, Any]]:
    """The successor's events once it has logged its exit; on timeout, an error that shows
    what it last did and what its host process printed (the launcher's log)."""
    deadline = time.monotonic() + WAIT
    events: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        lines = log.read_text().splitlines() if log.exists() else []
        events = [json.loads(line) for line in lines if line.strip().endswith("}")]
        if events and events[-1]["event"] == "exit":
            return events
        time.sleep(0.2)
    printed = body_log.read_text()[-4000:] if body_log.exists() else "(no launcher log)"
    raise AssertionError(
        f"the successor logged no exit within {WAIT} s; its last events: {events[-5:]}\n"
        f"its launcher log {body_log}:\n{printed}"
    )


def commit_subjects(repo: Path, ref: str = "HEAD") -> list[str]:
    return sh(repo, "git", "log", "--format=%s", ref).splitlines()


def assistant_calls(transcript: Path) -> list[list[dict[str, Any]]]:
    """The transcript's API calls: the streaming lines of each, grouped by message.id."""
    calls: dict[str, list[dict[str, Any]]] = {}
    for raw in transcript.read_text().splitlines():
        line = json.loads(raw)
        if line["type"] == "assistant":
            calls.setdefault(line["message"]["id"], []).append(line)
    return list(calls.values())


def context_of(line: dict[str, Any]) -> int:
    usage = line["message"]["usage"]
    return int(
        usage["input_tokens"]
        + usage["cache_creation_input_tokens"]
        + usage["cache_read_input_tokens"]
    )


def test_a_run_commits_every_step_and_journals_every_push_once(world: dict[str, Any]) -> None:
    done = run_agent(world, "--steps", "8", "--push-every", "4", "--start-tokens", "15000",
                     "--tokens-per-step", "2000")  # fmt: skip
    assert done.returncode == 0, done.stderr
    project = world["project"]
    subjects = commit_subjects(project)
    assert subjects == [f"fake work: step {n} of 8" for n in range(8, 0, -1)] + ["init"]
    assert sh(project, "git", "log", "-1", "--format=%an <%ae>") == (
        "fake-agent <fake@onstation.invalid>"
    )
    assert sh(project, "git", "rev-parse", "HEAD") == sh(
        world["origin"], "git", "rev-parse", "main"
    )

    with Ledger.open(world["db"]) as ledger:
        effects = ledger.effects("exec-1")
        assert len(effects) == 2  # pushes after steps 4 and 8
        assert all(e.state is EffectState.COMMITTED and e.operation == "git.push" for e in effects)
        committed = Counter(
            e.detail["effect_id"] for e in ledger.history("exec-1") if e.kind == "effect.committed"
        )
        assert sorted(committed.values()) == [1, 1]
        assert set(committed) == {e.effect_id for e in effects}

    transcript = world["tmp"] / "sess-1.jsonl"
    calls = assistant_calls(transcript)
    for call in calls:  # two streaming lines per API call, as real sessions write
        assert len(call) == 2
        assert call[0]["requestId"] == call[1]["requestId"]
        assert call[0]["message"]["stop_reason"] is None
    contexts = [context_of(call[-1]) for call in calls]
    assert contexts == sorted(contexts)
    assert contexts[0] == 15000 and contexts[-1] == 15000 + 8 * 2000

    events = log_events(world)
    assert events[0]["event"] == "start" and events[0]["hooks"] == "settings"
    assert events[-1]["event"] == "exit" and events[-1]["reason"] == "done"
    hooks = [e["hook"] for e in events if e["event"] == "hook"]
    assert hooks[0] == "SessionStart" and hooks[1] == "UserPromptSubmit"
    assert hooks[-2:] == ["Stop", "SessionEnd"]  # a clean end releases the body's lease
    assert hooks.count("PreToolUse") == hooks.count("PostToolUse") == 8 * 2 + 2


def test_red_makes_it_write_the_brief_and_stop_and_a_successor_finishes(
    world: dict[str, Any],
) -> None:
    # 15000 + 7 * 8000 = 71000 tokens (35.5 % of 200k): Red during step 7.
    done = run_agent(world, "--steps", "12", "--push-every", "4")
    assert done.returncode == 0, done.stderr
    project = world["project"]
    assert len(commit_subjects(project)) == 1 + 7  # stopped before finishing
    events = log_events(world)
    assert any(e["event"] == "relief_requested" for e in events)
    (brief_event,) = [e for e in events if e["event"] == "brief"]
    assert events[-1]["event"] == "exit" and events[-1]["reason"] == "relieved"
    brief = Path(brief_event["path"])
    assert brief.parent == project / ".bridge" / "turnovers" and brief.is_file()
    text = brief.read_text()
    assert "fake work: step 7 of 12" in text
    assert "work/step-7.txt — step 7 of 12, committed" in text
    assert "step 8 of 12: write work/step-8.txt and commit it" in text
    assert "stop after step 7: hull integrity Red" in text
    with Ledger.open(world["db"]) as ledger:
        kinds = Counter(e.kind for e in ledger.history("exec-1"))
        assert kinds["brief.written"] == 1
        assert HarnessLedger(ledger).latest_document("exec-1", "brief") is not None
        ledger.fence("exec-1", expect_generation=1, by="team-lead", reason="relief")
        assert ledger.reconcile("exec-1", by="team-lead").ambiguous == []

    # A fresh body continues from the evidence in git; every step is committed once.
    done = run_agent(world, "--steps", "12", "--push-every", "4", session="sess-2")
    assert done.returncode == 0, done.stderr
    subjects = commit_subjects(project)
    assert sorted(Counter(subjects).values()) == [1] * 13
    assert subjects[0] == "fake work: step 12 of 12"
    assert sh(project, "git", "rev-parse", "HEAD") == sh(
        world["origin"], "git", "rev-parse", "main"
    )
    with Ledger.open(world["db"]) as ledger:
        effects = ledger.effects("exec-1")
        assert [e.generation for e in effects] == [1, 2, 2]
        assert all(e.state is EffectState.COMMITTED for e in effects)
    contexts = [context_of(c[-1]) for c in assistant_calls(world["tmp"] / "sess-2.jsonl")]
    assert contexts[-1] == 15000 + 5 * 8000  # the successor's own context, not the old one


def test_crash_after_dispatch_leaves_a_dispatched_push_that_reconciles_ambiguous(
    world: dict[str, Any],
) -> None:
    done = run_agent(world, "--steps", "4", "--push-every", "0", "--crash-after-dispatch", "2")
    assert done.returncode == -9
    project = world["project"]
    # The push really happened; only its result was never recorded.
    assert sh(project, "git", "rev-parse", "HEAD") == sh(
        world["origin"], "git", "rev-parse", "main"
    )
    assert len(commit_subjects(project)) == 1 + 2
    with Ledger.open(world["db"]) as ledger:
        (effect,) = ledger.effects("exec-1")
        assert effect.state is EffectState.DISPATCHED and effect.operation == "git.push"
        ledger.fence("exec-1", expect_generation=1, by="team-lead", reason="body died")
        report = ledger.reconcile("exec-1", by="team-lead")
        assert len(report.ambiguous) == 1
        assert ledger.get_effect(effect.effect_id).state is EffectState.AMBIGUOUS
    assert log_events(world)[-1]["event"] == "crash"


def test_a_fenced_body_that_wakes_is_denied_everything(world: dict[str, Any]) -> None:
    project = world["project"]
    proc = subprocess.Popen(
        agent_argv(world, "--steps", "5", "--push-every", "1", "--wake-after-fence"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=world["env"],
    )  # fmt: skip
    try:
        sleeping = wait_for_event(world, proc, "sleeping_until_fenced")
        assert sleeping["generation"] == 1
        head = sh(project, "git", "rev-parse", "HEAD")
        origin_head = sh(world["origin"], "git", "rev-parse", "main")
        with Ledger.open(world["db"]) as ledger:
            before = [e.effect_id for e in ledger.effects("exec-1")]
            ledger.fence("exec-1", expect_generation=1, by="team-lead", reason="relieved")
        _out, err = proc.communicate(timeout=WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 3, err
    attempts = [e for e in log_events(world) if e["event"] == "wake_attempt"]
    assert attempts and all(a["denied"] for a in attempts)
    assert {a["action"] for a in attempts if a["by"] == "hook"} == {
        "git commit", "git push", "message send"
    }  # fmt: skip
    assert all("relieved" in a["reason"] for a in attempts if a["by"] == "hook")
    # Each of those answers also stopped the session (continue: false), which this woken
    # body ignores so as to prove the deny alone; a real host stops at the first.
    ignored = [e for e in log_events(world) if e["event"] == "stop_ignored"]
    assert {e["action"] for e in ignored} == {"git commit", "git push", "message send"}
    assert all("fenced" in e["reason"] for e in ignored)
    # Nothing happened: no commit, no push, no file, no message, no new effect.
    assert sh(project, "git", "rev-parse", "HEAD") == head
    assert sh(world["origin"], "git", "rev-parse", "main") == origin_head
    assert not (project / "work" / "step-2.txt").exists()
    with Ledger.open(world["db"]) as ledger:
        assert [e.effect_id for e in ledger.effects("exec-1")] == before == before[:1]
        assert HarnessLedger(ledger).messages("team-lead") == []
        denials = ledger.denials("exec-1")
        assert {d.action for d in denials} >= {"git commit", "git push", "message send"}
        assert all(d.presented_generation == 1 and d.current_generation == 2 for d in denials)


def test_crash_at_a_step_dies_by_sigkill_with_nothing_half_written(
    world: dict[str, Any],
) -> None:
    done = run_agent(world, "--steps", "5", "--push-every", "2", "--crash-at", "3")
    assert done.returncode == -9
    project = world["project"]
    assert len(commit_subjects(project)) == 1 + 2
    assert not (project / "work" / "step-3.txt").exists()
    with Ledger.open(world["db"]) as ledger:
        (effect,) = ledger.effects("exec-1")
        assert effect.state is EffectState.COMMITTED
        assert ledger.live_lease("exec-1") is not None  # the body's lease; nothing else open
    events = log_events(world)
    assert events[-1] == events[-1] | {"event": "crash", "step": 3, "kind": "at-step-start"}


def test_hang_keeps_the_process_alive_and_idle(world: dict[str, Any]) -> None:
    proc = subprocess.Popen(
        agent_argv(world, "--steps", "4", "--push-every", "0", "--hang-at", "2"),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True, env=world["env"],
    )  # fmt: skip
    try:
        wait_for_event(world, proc, "hang")
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()
    assert len(commit_subjects(world["project"])) == 1 + 1


def test_bad_input_is_one_line_and_exit_2(world: dict[str, Any], tmp_path: Path) -> None:
    done = run_agent(world, "--steps", "0")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "onstation fake-agent: bad input: argument --steps: must be at least 1 (got 0)"
    ]
    plain = tmp_path / "not-a-repo"
    plain.mkdir()
    done = subprocess.run(
        [*AGENT, "--workspace", str(plain), "--node", "exec-1"],
        capture_output=True, text=True, env=world["env"], timeout=WAIT, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and "is not a git repository" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_forged_challenge_is_refused_and_the_body_does_no_work(world: dict[str, Any]) -> None:
    forged = json.dumps({"node": "exec-1", "generation": 1, "nonce": "n1"})
    env = {**world["env"], "ONSTATION_NODE": "exec-1", "ONSTATION_GENERATION": "1",
           "ONSTATION_CHALLENGE": forged}  # fmt: skip
    done = subprocess.run(
        [*AGENT, "--workspace", str(world["project"]), "--session-id", "sess-forged",
         "--log", str(world["tmp"] / "sess-forged.log"), "--steps", "2"],
        capture_output=True, text=True, env=env, timeout=WAIT, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr  # no birth to answer: onstation says bad input
    assert "challenge answer failed (exit 2)" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    events = log_events(world, "sess-forged")
    assert [e["event"] for e in events if e["event"] in ("challenge_answer", "tool")] == [
        "challenge_answer"
    ]
    assert commit_subjects(world["project"]) == ["init"]


def _challenge_command_exists(env: dict[str, str]) -> bool:
    done = subprocess.run(
        [ONSTATION, "challenge", "answer", "--help"], capture_output=True, env=env, check=False
    )
    return done.returncode == 0


@pytest.mark.parametrize("world", [{"supervised": True}], indirect=True)
def test_a_supervised_relief_launches_a_fake_agent_that_answers_its_challenge(
    world: dict[str, Any],
) -> None:
    """The whole loop: a team lead relieves a working body; it writes its brief and stops;
    the successor launched by onstation answers its challenge, heartbeats, and finishes."""
    env = world["env"]
    if not _challenge_command_exists(env):
        pytest.skip("onstation challenge answer does not exist yet")
    env = {**env, "ONSTATION_KEYS_DIR": str(world["tmp"] / "keys")}
    world["env"] = env
    project = world["project"]
    opened = subprocess.run(
        [ONSTATION, "episode", "open", "exec-1", "--objective", "fake work"],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert opened.returncode == 0, opened.stderr
    steps = "20"
    body = subprocess.Popen(
        agent_argv(world, "--steps", steps, "--push-every", "4", "--tokens-per-step", "500"),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    successor_log = world["tmp"] / "successor.log"
    try:
        wait_for_event(world, body, "step")  # the body is at work
        relieved = subprocess.run(
            [ONSTATION, "relieve", "exec-1", "--harness", "fake", "--brief-wait", "60",
             "--challenge-wait", "60", "--shutdown-wait", "0.5", "--json",
             f"--arg=--steps={steps}", "--arg=--push-every=4", "--arg=--tokens-per-step=500",
             f"--arg=--log={successor_log}"],
            capture_output=True, text=True, env=env, timeout=WAIT, check=False,
        )  # fmt: skip
        _out, err = body.communicate(timeout=WAIT)
    finally:
        if body.poll() is None:
            body.kill()
            body.wait()
    assert relieved.returncode == 0, relieved.stdout + relieved.stderr
    outcome = json.loads(relieved.stdout)
    assert (outcome["state"], outcome["to_generation"]) == ("SETTLED", 2)
    assert body.returncode == 0, err

    events = wait_for_successor_exit(successor_log, world["project"] / BODY_LOG)
    assert events and events[-1] == events[-1] | {"event": "exit", "code": 0, "reason": "done"}
    start = events[0]
    assert start["challenge"] is True and start["generation"] == 2
    assert start["transcript"].startswith(str(project / ".bridge" / "transcripts"))
    (answer,) = [e for e in events if e["event"] == "challenge_answer"]
    assert answer["exit_code"] == 0
    assert any(e["event"] == "heartbeat" and e["ok"] for e in events)
    assert not [e for e in events if e["event"] in ("relief_requested", "gave_up")]
    # The successor continued from the evidence: every step committed once, all pushed.
    subjects = commit_subjects(project)
    assert sorted(Counter(subjects).values()) == [1] * 21
    assert sh(project, "git", "rev-parse", "HEAD") == sh(
        world["origin"], "git", "rev-parse", "main"
    )
    with Ledger.open(world["db"]) as ledger:
        effects = ledger.effects("exec-1")
        assert all(e.state is EffectState.COMMITTED for e in effects)
        assert effects[-1].generation == 2
        assert ledger.get_node("exec-1").generation == 2


def test_the_click_command_delegates_to_main() -> None:
    from onstation.cli.fake_agent_command import register

    group = click.Group("onstation")
    register(group)
    result = CliRunner().invoke(group, ["fake-agent", "--help"])
    assert result.exit_code == 0
    assert "--crash-after-dispatch" in result.output and "--wake-after-fence" in result.output
    result = CliRunner().invoke(group, ["fake-agent", "--window", "123"])
    assert result.exit_code == 2


def test_a_body_killed_mid_push_is_settled_by_its_remote_and_its_push_never_repeated(
    world: dict[str, Any],
) -> None:
    """SIGKILL between dispatch and result, after the push reached origin: the relief asks the
    remote (issue 12), finds the pushed commit there and records the push as observed, so the
    successor is launched at once (before, the relief stopped QUARANTINED until an operator
    resolved it by hand); the successor finishes and the push is on record exactly once."""
    env = {**world["env"], "ONSTATION_KEYS_DIR": str(world["tmp"] / "keys")}
    # A relief needs an objective for its successor (without one it stops before the fence).
    subprocess.run([ONSTATION, "episode", "open", "exec-1", "--objective", "fake work"],
                   env=env, check=True, capture_output=True)  # fmt: skip
    steps = "6"
    crashed = subprocess.run(
        agent_argv(world, "--steps", steps, "--push-every", "2", "--crash-after-dispatch", "2"),
        capture_output=True, text=True, env=env, timeout=WAIT, check=False,
    )  # fmt: skip
    assert crashed.returncode == -9
    with Ledger.open(world["db"]) as ledger:
        (ambiguous,) = ledger.effects("exec-1", state=EffectState.DISPATCHED)
    relieve = [ONSTATION, "relieve", "exec-1", "--harness", "fake", "--brief-wait", "0",
               "--challenge-wait", "60", "--shutdown-wait", "0.5", "--json",
               f"--arg=--steps={steps}", "--arg=--push-every=2",
               f"--arg=--log={world['tmp'] / 'successor.log'}"]  # fmt: skip
    second = subprocess.run(relieve, capture_output=True, text=True, env=env, timeout=WAIT,
                            check=False)  # fmt: skip
    outcome = json.loads(second.stdout)
    assert outcome["state"] == "SETTLED", second.stderr
    # No --incident: the relief read the cause from evidence (its host process is gone).
    report = Path(outcome["report_path"]).read_text()
    assert "- incident: crash (its host process is gone" in report
    events = wait_for_successor_exit(world["tmp"] / "successor.log", world["project"] / BODY_LOG)
    assert events[-1]["code"] == 0 and (world["project"] / "work" / "step-6.txt").exists()
    with Ledger.open(world["db"]) as ledger:
        pushes = [e for e in ledger.effects("exec-1") if e.operation == "git.push"]
        assert sum(e.effect_id == ambiguous.effect_id for e in pushes) == 1
        assert ledger.get_effect(ambiguous.effect_id).state is EffectState.COMMITTED
        assert not ledger.effects("exec-1", state=EffectState.AMBIGUOUS)
        # The successor worked within the grants the relief issued it from the translation.
        assert {"tool:Bash", "tool:Write"} <= ledger.live_grants("exec-1", 2)
        assert not [d for d in ledger.denials("exec-1") if d.reason == "outside its grants"]
    subjects = commit_subjects(world["project"])
    assert sorted(Counter(subjects).values()) == [1] * len(subjects)  # each commit once


def test_native_resume_only_with_proof(world: dict[str, Any]) -> None:
    """A relief resumes the predecessor's provider session only when its process is proven
    gone and its transcript tail is the one seen at the fence; otherwise a fresh successor."""
    env = {**world["env"], "ONSTATION_KEYS_DIR": str(world["tmp"] / "keys")}
    subprocess.run([ONSTATION, "episode", "open", "exec-1", "--objective", "fake work"],
                   env=env, check=True, capture_output=True)  # fmt: skip
    payload = json.dumps({"session_id": "hook-only", "cwd": str(world["project"]),
                          "hook_event_name": "SessionStart", "source": "startup"})  # fmt: skip
    subprocess.run([ONSTATION, "hook", "claude-code", "SessionStart"], input=payload, text=True,
                   env=env, check=True, capture_output=True)  # fmt: skip
    log = world["tmp"] / "bodies.log"

    def relieve(*extra: str) -> dict[str, Any]:
        done = subprocess.run(
            [ONSTATION, "relieve", "exec-1", "--harness", "fake", "--brief-wait", "0",
             "--challenge-wait", "60", "--shutdown-wait", "0.5", "--json", "--arg=--steps=4",
             "--arg=--push-every=0", f"--arg=--log={log}", *extra],
            capture_output=True, text=True, env=env, timeout=WAIT, check=False,
        )  # fmt: skip
        return dict(json.loads(done.stdout))

    def wait_exits(count: int) -> None:
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            lines = log.read_text().splitlines() if log.exists() else []
            if sum(json.loads(x)["event"] == "exit" for x in lines) >= count:
                return
            time.sleep(0.2)
        raise AssertionError("the successor did not finish")

    # The hook-only first body was never witnessed: a native resume has no proof.
    first = relieve("--native")
    assert (first["verdict"], first["state"]) == ("REBODIMENT_READY", "SETTLED"), first
    wait_exits(1)
    with Ledger.open(world["db"]) as ledger:
        (session,) = [s for s in HarnessLedger(ledger).sessions("exec-1") if s.generation == 2]
        assert session.transcript_path is not None
    transcript = Path(session.transcript_path)
    size = transcript.stat().st_size
    # Generation 2's process is gone, its transcript untouched since: resume it natively.
    second = relieve("--native")
    assert (second["verdict"], second["state"]) == ("NATIVE_RESUME_ELIGIBLE", "SETTLED")
    wait_exits(2)
    with Ledger.open(world["db"]) as ledger:
        kinds = [e for e in ledger.history("exec-1") if e.kind == "session.native_resumed"]
        assert [(e.detail["session_id"], e.generation) for e in kinds] == [(session.session_id, 3)]
        # Generation 3's lease went to the resumed session (released when it ended cleanly).
        third = next(ls for ls in ledger.leases("exec-1") if ls.generation == 3)
        assert third.holder == f"claude-code session {session.session_id}"
    assert transcript.stat().st_size > size  # the same provider session went on


# ------------------------------------------------------------------------------------------
# A stand-in never touches a user's work: only scratch repositories, only local bare remotes.


def user_repository(tmp_path: Path, name: str = "user") -> dict[str, Any]:
    """A checkout as a user has one: a clone of a bare origin, onstation installed, no marker."""
    origin = tmp_path / f"{name}-origin.git"
    checkout = tmp_path / name
    sh(tmp_path, "git", "init", "-q", "--bare", "-b", "main", str(origin))
    sh(tmp_path, "git", "clone", "-q", str(origin), str(checkout))
    sh(checkout, "git", "checkout", "-q", "-b", "main")
    (checkout / "app.py").write_text("print('the user's own work')\n")
    sh(checkout, "git", "add", "app.py")
    sh(checkout, "git", "commit", "-q", "-m", "the user's commit")
    sh(checkout, "git", "push", "-q", "-u", "origin", "main")
    (checkout / "notes.txt").write_text("uncommitted, untracked: the user's too\n")
    db = str(tmp_path / f"{name}-ledger.db")
    env = {**os.environ, **GIT_ENV, "ONSTATION_DB": db, "XDG_STATE_HOME": str(tmp_path / "state")}
    for key in ("ONSTATION_NODE", "ONSTATION_GENERATION", "ONSTATION_CHALLENGE"):
        env.pop(key, None)
    done = subprocess.run(
        [ONSTATION, "install", "claude-code", "--project", str(checkout), "--node", "exec-1"],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return {"checkout": checkout, "origin": origin, "env": env, "db": db, "tmp": tmp_path}


def snapshot(repo: Path) -> dict[str, Any]:
    """Every ref, the status, and every file of the repository (its git directory included)."""
    state: dict[str, Any] = {
        "refs": sh(repo, "git", "for-each-ref", "--format=%(refname) %(objectname)"),
        "log": sh(repo, "git", "log", "--all", "--format=%H %s"),
        "status": sh(repo, "git", "status", "--porcelain", "--ignored", "--untracked-files=all"),
    }
    # Taken after git status, which may refresh the index: the agent's reads must not.
    state["files"] = sorted(
        (str(path.relative_to(repo)), path.read_bytes())
        for path in repo.rglob("*") if path.is_file() and not path.is_symlink()
    )  # fmt: skip
    return state


def run_in(repo: dict[str, Any], *extra: str, session: str = "sess-u") -> Any:
    argv = [*AGENT, "--workspace", str(repo["checkout"]), "--node", "exec-1", "--session-id",
            session, "--log", str(repo["tmp"] / f"{session}.log"), "--steps", "3",
            "--push-every", "1", *extra]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, env=repo["env"], timeout=WAIT,
                          check=False)  # fmt: skip


def events_of(repo: dict[str, Any], session: str = "sess-u") -> list[dict[str, Any]]:
    path = repo["tmp"] / f"{session}.log"
    lines = path.read_text().splitlines() if path.exists() else []
    return [json.loads(line) for line in lines if line.strip()]


def assert_nothing_happened(repo: dict[str, Any], before: dict[str, Any], origin_before: str,
                            session: str = "sess-u") -> None:  # fmt: skip
    assert snapshot(repo["checkout"]) == before
    assert sh(repo["origin"], "git", "log", "--all", "--format=%H %s") == origin_before
    assert not (repo["tmp"] / f"{session}.jsonl").exists()  # no transcript either
    with Ledger.open(repo["db"]) as ledger:  # no session, no lease, no effect
        assert ledger.live_lease("exec-1") is None and ledger.effects("exec-1") == []
        assert HarnessLedger(ledger).sessions("exec-1") == []
    events = events_of(repo, session)
    assert [e["event"] for e in events] == ["exit"] and events[0]["code"] == EXIT_BLOCKED


def test_a_users_repository_is_refused_and_left_exactly_as_it_was(tmp_path: Path) -> None:
    repo = user_repository(tmp_path)
    checkout = repo["checkout"]
    before = snapshot(checkout)
    origin_before = sh(repo["origin"], "git", "log", "--all", "--format=%H %s")
    done = run_in(repo)
    assert done.returncode == EXIT_BLOCKED == 4, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("onstation fake-agent: blocked: ")
    assert str(checkout.resolve()) in line and "--scratch-workspace" in line
    assert_nothing_happened(repo, before, origin_before)
    assert commit_subjects(checkout, "main") == ["the user's commit"]
    assert commit_subjects(repo["origin"], "main") == ["the user's commit"]


def test_a_marker_copied_with_the_git_directory_does_not_make_a_scratch_repository(
    tmp_path: Path,
) -> None:
    repo = user_repository(tmp_path)
    elsewhere = user_repository(tmp_path, "elsewhere")
    marker = mark_scratch_workspace(elsewhere["checkout"])
    (repo["checkout"] / ".git" / marker.name).write_bytes(marker.read_bytes())
    before = snapshot(repo["checkout"])
    origin_before = sh(repo["origin"], "git", "log", "--all", "--format=%H %s")
    done = run_in(repo)
    assert done.returncode == EXIT_BLOCKED, done.stderr
    assert_nothing_happened(repo, before, origin_before)


@pytest.mark.parametrize(
    ("key", "url"),
    [
        ("url", "https://example.invalid/x.git"),
        ("url", "ssh://git@example.invalid/x.git"),
        ("url", "git@example.invalid:x.git"),
        ("pushurl", "example.invalid:x.git"),
    ],
)
def test_even_a_scratch_repository_never_pushes_off_this_machine(
    tmp_path: Path, key: str, url: str
) -> None:
    repo = user_repository(tmp_path)
    checkout = repo["checkout"]
    sh(checkout, "git", "config", f"remote.origin.{key}", url)  # pushurl: url stays local
    before = snapshot(checkout)
    origin_before = sh(repo["origin"], "git", "log", "--all", "--format=%H %s")
    done = run_in(repo, "--scratch-workspace")
    assert done.returncode == EXIT_BLOCKED, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert url in line and "bare repository on this machine" in line, line
    # Refused before the first write: no commit, no push attempted (none journaled).
    assert_nothing_happened(repo, before, origin_before)
    assert url in events_of(repo)[0]["reason"]


def test_a_remote_changed_mid_run_is_refused_before_the_push(world: dict[str, Any]) -> None:
    project, origin = world["project"], world["origin"]
    origin_before = sh(origin, "git", "log", "--all", "--format=%H %s")
    proc = subprocess.Popen(
        agent_argv(world, "--steps", "3", "--push-every", "3", "--step-seconds", "1"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=world["env"],
    )  # fmt: skip
    try:
        wait_for_event(world, proc, "step")
        sh(project, "git", "remote", "set-url", "origin", "https://example.invalid/x.git")
        _out, err = proc.communicate(timeout=WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == EXIT_BLOCKED, err
    assert "https://example.invalid/x.git" in err
    assert sh(origin, "git", "log", "--all", "--format=%H %s") == origin_before
    with Ledger.open(world["db"]) as ledger:
        assert ledger.effects("exec-1") == []  # the push never reached PreToolUse
    assert not [e for e in log_events(world) if e["event"] == "tool" and "push" in str(e)]


@pytest.mark.parametrize("form", ["path", "file-url"])
def test_the_scratch_flag_lets_it_work_and_push_to_a_local_bare_origin(
    tmp_path: Path, form: str
) -> None:
    repo = user_repository(tmp_path, "throwaway")
    checkout, origin = repo["checkout"], repo["origin"]
    if form == "file-url":
        sh(checkout, "git", "remote", "set-url", "origin", origin.resolve().as_uri())
    done = run_in(repo, "--scratch-workspace")
    assert done.returncode == 0, done.stderr
    expected = [f"fake work: step {n} of 3" for n in (3, 2, 1)] + ["the user's commit"]
    assert commit_subjects(checkout) == expected
    assert commit_subjects(origin, "main") == expected
    assert events_of(repo)[-1] | {"code": 0} == events_of(repo)[-1]


def test_only_a_bare_repository_on_this_machine_is_a_push_target(tmp_path: Path) -> None:
    bare, checkout = tmp_path / "bare.git", tmp_path / "checkout"
    sh(tmp_path, "git", "init", "-q", "--bare", str(bare))
    sh(tmp_path, "git", "init", "-q", str(checkout))
    assert local_bare_repository(str(bare), tmp_path) is None
    assert local_bare_repository("bare.git", tmp_path) is None  # relative to the workspace
    assert local_bare_repository(bare.as_uri(), tmp_path) is None
    refused = [
        "https://example.invalid/x.git", "http://127.0.0.1/x.git", "ssh://localhost/x.git",
        "git://example.invalid/x.git", "git@example.invalid:x.git", "localhost:" + str(bare),
        "ext::ssh example.invalid x", "file://example.invalid" + str(bare),
        str(checkout), str(checkout / ".git"), checkout.as_uri(), str(tmp_path / "missing.git"),
        "",
    ]  # fmt: skip
    for url in refused:
        assert local_bare_repository(url, tmp_path) is not None, url
