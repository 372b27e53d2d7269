"""A push whose remote cannot be asked, end to end, as a user meets it: the `onstation` CLI in
subprocesses, hook payloads as Claude Code sends them (the command strings `onstation install`
wrote), real git with a bare remote, a real ledger (SQLite; one flow on PostgreSQL).

The body dispatches a `git push` and its host is killed: PreToolUse seen, no PostToolUse. Then
the remote cannot be asked (moved away, its URL dead, an ssh host that cannot be reached). A
relief must not guess: the push is AMBIGUOUS, with why the remote proved nothing, and the
relief is QUARANTINED until an operator resolves it, or until a later reconcile finds the push
on the remote, back again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hookworld import GIT_ENV, NODE, ONSTATION, Claude, git_project, sh

from onstation.harness.fake_agent import mark_scratch_workspace
from onstation.relief.reconcile import unobserved_why

STUB = str(Path(__file__).with_name("successor_stub.py"))


def run(world: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ONSTATION, *args], capture_output=True, text=True, env=world["env"],
                          timeout=120, check=False)  # fmt: skip


def run_json(world: dict[str, Any], *args: str) -> Any:
    done = run(world, *args, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def _world(tmp_path: Path, db: str) -> dict[str, Any]:
    project, origin = git_project(tmp_path)
    mark_scratch_workspace(project)  # this test made it: a stand-in successor may work in it
    env = {**os.environ, **GIT_ENV, "ONSTATION_DB": db, "XDG_STATE_HOME": str(tmp_path / "state"),
           "ONSTATION_KEYS_DIR": str(tmp_path / "keys")}  # fmt: skip
    for key in ("ONSTATION_NODE", "ONSTATION_GENERATION", "ONSTATION_CHALLENGE", "GIT_SSH_COMMAND"):
        env.pop(key, None)
    world = {"tmp": tmp_path, "project": project, "origin": origin, "env": env, "db": db}
    done = run(world, "install", "claude-code", "--project", str(project), "--node", NODE)
    assert done.returncode == 0, done.stderr
    assert run(world, "episode", "open", NODE, "--objective", "ship a.txt").returncode == 0
    (project / "a.txt").write_text("a\n")
    sh(project, "git", "add", "a.txt")
    sh(project, "git", "commit", "-q", "-m", "a")
    world["commit"] = sh(project, "git", "rev-parse", "HEAD")
    world["before"] = sh(origin, "git", "rev-parse", "main")
    claude = Claude(project, env, "sess-1")
    started = claude.host.fire(claude.session_id, "SessionStart", source="startup")
    assert started is not None and "body of exec-1, generation 1" in str(started)
    world["claude"] = claude
    return world


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Any]:
    return _world(tmp_path, str(tmp_path / "ledger.db"))


@pytest.fixture
def pg_world(tmp_path: Path, pg_url: str) -> dict[str, Any]:
    return _world(tmp_path, pg_url)


def dispatch_push_and_kill_the_host(world: dict[str, Any], *, pushed: bool = False) -> str:
    """What Claude Code does for `git push` up to the kill: the assistant's tool_use in the
    transcript, PreToolUse (allowed, journaled), then (with ``pushed``) git itself runs; the
    host dies before PostToolUse. Returns the push's effect id."""
    claude: Claude = world["claude"]
    line = {"type": "assistant", "sessionId": claude.session_id, "message": {
        "role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01", "name": "Bash",
                                          "input": {"command": "git push"}}]}}  # fmt: skip
    claude.append(line)
    out = claude.host.fire(claude.session_id, "PreToolUse", tool_name="Bash",
                           tool_use_id="toolu_01",
                           tool_input={"command": "git push", "description": "push"})  # fmt: skip
    assert out is None  # allowed: no decision, no context
    if pushed:
        sh(world["project"], "git", "push", "-q")
    (effect,) = run_json(world, "effect", "list", NODE)["effects"]
    assert (effect["operation"], effect["state"]) == ("git.push", "DISPATCHED")
    return str(effect["effect_id"])


def make_unreachable(world: dict[str, Any], how: str) -> None:
    project, origin = world["project"], world["origin"]
    if how == "moved":
        origin.rename(origin.with_name("origin-moved.git"))
    elif how == "dead-file-url":
        sh(project, "git", "remote", "set-url", "origin", (world["tmp"] / "gone.git").as_uri())
    else:  # an ssh remote whose connection cannot be made
        sh(project, "git", "remote", "set-url", "origin", "ssh://git@unreachable.invalid/x.git")
        world["env"]["GIT_SSH_COMMAND"] = "false"


def make_reachable(world: dict[str, Any], how: str) -> None:
    project, origin = world["project"], world["origin"]
    if how == "moved":
        origin.with_name("origin-moved.git").rename(origin)
    else:
        sh(project, "git", "remote", "set-url", "origin", str(origin))
        world["env"].pop("GIT_SSH_COMMAND", None)


def relieve(world: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    done = run(world, "relieve", NODE, "--harness", "command", "--execution-class", "fake",
               "--command", f"{sys.executable} {STUB} ok {ONSTATION}", "--brief-wait", "0",
               "--challenge-wait", "60", "--shutdown-wait", "0.5", "--json")  # fmt: skip
    return done.returncode, json.loads(done.stdout)


def effect_of(world: dict[str, Any], effect_id: str) -> dict[str, Any]:
    return dict(run_json(world, "effect", "show", effect_id))


def effect_events(world: dict[str, Any], effect_id: str) -> list[dict[str, Any]]:
    events = run_json(world, "history", NODE)["events"]
    return [e for e in events if e["detail"].get("effect_id") == effect_id]


def assert_quarantined_on(world: dict[str, Any], effect_id: str) -> dict[str, Any]:
    """The relief ends QUARANTINED naming the effect; the effect is AMBIGUOUS and says why
    its remote could not be asked. Returns the relief's outcome."""
    code, outcome = relieve(world)
    assert code == 4, outcome
    assert (outcome["verdict"], outcome["state"]) == ("QUARANTINED", "NOT_LAUNCHED")
    (reason,) = [r for r in outcome["reasons"] if r.startswith("AMBIGUOUS_EFFECT")]
    assert effect_id in reason and "git.push" in reason
    report = Path(outcome["report_path"]).read_text()
    assert f"`{effect_id}` git.push" in report and "**AMBIGUOUS**" in report
    assert "onstation effect resolve EFFECT_ID --as observed|compensated" in report
    return outcome


def unobserved(effect: dict[str, Any]) -> dict[str, Any]:
    assert effect["state"] == "AMBIGUOUS"
    return dict(effect["result"]["uncertain"]["unobserved"])


@pytest.mark.parametrize(
    ("how", "said"),
    [
        ("moved", "does not appear to be a git repository"),
        ("dead-file-url", "does not appear to be a git repository"),
        ("ssh", "Could not read from remote repository"),
    ],
)
def test_a_push_whose_remote_cannot_be_asked_quarantines_the_relief_and_says_why(
    world: dict[str, Any], how: str, said: str
) -> None:
    effect_id = dispatch_push_and_kill_the_host(world)
    make_unreachable(world, how)
    assert_quarantined_on(world, effect_id)
    effect = effect_of(world, effect_id)
    why = unobserved(effect)
    assert unobserved_why(effect["result"]) == why["why"]
    assert why["asked"] == "git ls-remote" and why["remote"] == "origin"
    assert why["why"].startswith("git ls-remote origin exited with 128: fatal:"), why
    assert said in why["why"]
    # How to ask again is kept, and the transcript's word on the call (none: it was killed).
    assert why["observe"]["refs"]["refs/heads/main"] == {
        "before": world["before"], "intended": world["commit"]}  # fmt: skip
    assert "transcript" not in why
    (ambiguous,) = [e for e in effect_events(world, effect_id) if e["kind"] == "effect.ambiguous"]
    assert ambiguous["detail"]["previous_state"] == "DISPATCHED"
    assert ambiguous["detail"]["evidence"]["unobserved"]["why"] == why["why"]
    # Asked again while it is still unreachable: still AMBIGUOUS, never settled on a guess.
    again = run_json(world, "effect", "reconcile", NODE)
    assert again["unresolved_ambiguous"] == [effect_id]
    assert effect_of(world, effect_id)["state"] == "AMBIGUOUS"


def test_the_quarantined_relief_itself_says_why_the_remote_was_not_observed(
    world: dict[str, Any],
) -> None:
    effect_id = dispatch_push_and_kill_the_host(world)
    make_unreachable(world, "dead-file-url")
    done = run(world, "relieve", NODE, "--harness", "command", "--execution-class", "fake",
               "--command", f"{sys.executable} {STUB} ok {ONSTATION}", "--brief-wait", "0",
               "--shutdown-wait", "0.5")  # fmt: skip
    assert done.returncode == 4, done.stderr
    why = unobserved(effect_of(world, effect_id))["why"]
    (line,) = [x for x in (done.stdout + done.stderr).splitlines() if effect_id in x]
    assert why in line


def test_a_relief_after_a_quarantine_stays_quarantined_while_the_push_is_ambiguous(
    world: dict[str, Any],
) -> None:
    effect_id = dispatch_push_and_kill_the_host(world)
    make_unreachable(world, "moved")
    assert_quarantined_on(world, effect_id)
    assert_quarantined_on(world, effect_id)  # nothing changed: the same answer


def _operator_resolves_and_the_next_relief_proceeds(world: dict[str, Any]) -> None:
    effect_id = dispatch_push_and_kill_the_host(world, pushed=True)
    make_unreachable(world, "moved")
    assert_quarantined_on(world, effect_id)
    # The operator looks: what is ambiguous, and why it could not be observed.
    listed = run_json(world, "effect", "list", NODE, "--state", "AMBIGUOUS")["effects"]
    assert [e["effect_id"] for e in listed] == [effect_id]
    shown = run(world, "effect", "show", effect_id)
    assert shown.returncode == 0 and "does not appear to be a git repository" in shown.stdout
    node = run_json(world, "node", "show", NODE)
    assert [e["effect_id"] for e in node["open_effects"]] == [effect_id]
    # ... checks the remote where it now lives, finds the commit, and records it.
    moved = world["origin"].with_name("origin-moved.git")
    assert sh(moved, "git", "rev-parse", "main") == world["commit"]
    done = run(world, "effect", "resolve", effect_id, "--as", "observed", "--by", "alice",
               "--why", "main is at the pushed commit on the moved remote", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    resolved = json.loads(done.stdout)
    assert (resolved["state"], resolved["resolved_by"]) == ("COMMITTED", "alice")
    assert resolved["resolution"] == "observed: main is at the pushed commit on the moved remote"
    (event,) = [e for e in effect_events(world, effect_id) if e["kind"] == "effect.committed"]
    assert event["actor"] == "alice"
    assert (
        event["detail"] | {"resolution": "observed", "previous_state": "AMBIGUOUS"}
        == (event["detail"])
    )
    # The next relief is not quarantined: its successor is launched and answers.
    code, outcome = relieve(world)
    assert code == 0, outcome
    assert (outcome["verdict"], outcome["state"]) == ("REBODIMENT_READY", "SETTLED")
    effects = run_json(world, "effect", "list", NODE)["effects"]
    assert [(e["effect_id"], e["state"]) for e in effects] == [(effect_id, "COMMITTED")]


def test_an_operator_resolves_it_and_the_next_relief_proceeds(world: dict[str, Any]) -> None:
    _operator_resolves_and_the_next_relief_proceeds(world)


def test_an_operator_resolves_it_and_the_next_relief_proceeds_on_postgresql(
    pg_world: dict[str, Any],
) -> None:
    _operator_resolves_and_the_next_relief_proceeds(pg_world)


def test_the_successor_is_told_what_became_of_the_resolved_push(world: dict[str, Any]) -> None:
    effect_id = dispatch_push_and_kill_the_host(world, pushed=True)
    make_unreachable(world, "moved")
    assert_quarantined_on(world, effect_id)
    done = run(world, "effect", "resolve", effect_id, "--as", "observed", "--by", "alice",
               "--why", "seen on the moved remote")  # fmt: skip
    assert done.returncode == 0, done.stderr
    code, outcome = relieve(world)
    assert code == 0, outcome
    prompt = (world["project"] / ".bridge" / "bodies"
              / f"{NODE}-g{outcome['to_generation']}-prompt.md").read_text()  # fmt: skip
    # Told in the prompt's own section and in the quoted brief; nowhere as still open.
    lines = [x for x in prompt.splitlines() if effect_id in x]
    assert lines and all("COMMITTED" in x and "alice" in x for x in lines), lines
    assert "never repeat" in prompt.lower()


@pytest.mark.parametrize("how", ["moved", "dead-file-url", "ssh"])
def test_a_remote_back_before_any_operator_settles_the_push_by_itself(
    world: dict[str, Any], how: str
) -> None:
    effect_id = dispatch_push_and_kill_the_host(world, pushed=True)
    make_unreachable(world, how)
    assert_quarantined_on(world, effect_id)
    make_reachable(world, how)
    code, outcome = relieve(world)
    assert code == 0, outcome
    assert (outcome["verdict"], outcome["state"]) == ("REBODIMENT_READY", "SETTLED")
    effect = effect_of(world, effect_id)
    assert effect["state"] == "COMMITTED"
    assert effect["resolved_by"] == "root (reconcile)" or effect["resolved_by"].endswith(
        " (reconcile)"
    )
    assert effect["resolution"].startswith("observed: observed at its destination by reconcile")
    assert f"refs/heads/main at {world['commit']}" in effect["resolution"]
    kinds = [(e["kind"], e["actor"].endswith("(reconcile)")) for e in
             effect_events(world, effect_id)]  # fmt: skip
    assert kinds[-2:] == [("effect.ambiguous", False), ("effect.committed", True)]


def test_a_remote_name_now_leading_elsewhere_proves_nothing(world: dict[str, Any]) -> None:
    """`origin` answers again, but from another repository (a mirror that has the commit):
    that is not the destination the push went to, so the push stays AMBIGUOUS."""
    effect_id = dispatch_push_and_kill_the_host(world, pushed=False)
    make_unreachable(world, "dead-file-url")
    assert_quarantined_on(world, effect_id)
    mirror = world["tmp"] / "mirror.git"
    sh(world["tmp"], "git", "clone", "-q", "--bare", str(world["origin"]), str(mirror))
    sh(world["project"], "git", "push", "-q", str(mirror), "main")
    sh(world["project"], "git", "remote", "set-url", "origin", str(mirror))
    report = run_json(world, "effect", "reconcile", NODE)
    assert report["unresolved_ambiguous"] == [effect_id]
    assert effect_of(world, effect_id)["state"] == "AMBIGUOUS"
    make_reachable(world, "dead-file-url")  # the real one: the push never reached it
    assert run_json(world, "effect", "reconcile", NODE)["unresolved_ambiguous"] == [effect_id]


def test_a_remote_back_without_the_push_stays_ambiguous(world: dict[str, Any]) -> None:
    """Back, and showing the ref as before: the push did not land, but an AMBIGUOUS effect
    is never settled as not run by reconcile alone; the operator decides."""
    effect_id = dispatch_push_and_kill_the_host(world, pushed=False)
    make_unreachable(world, "dead-file-url")
    assert_quarantined_on(world, effect_id)
    make_reachable(world, "dead-file-url")
    report = run_json(world, "effect", "reconcile", NODE)
    assert report["unresolved_ambiguous"] == [effect_id]
    assert effect_of(world, effect_id)["state"] == "AMBIGUOUS"


def test_the_next_reconcile_settles_it_when_the_remote_came_back(world: dict[str, Any]) -> None:
    """`onstation effect reconcile` (no relief) is a reconcile too."""
    effect_id = dispatch_push_and_kill_the_host(world, pushed=True)
    make_unreachable(world, "moved")
    assert_quarantined_on(world, effect_id)
    make_reachable(world, "moved")
    report = run_json(world, "effect", "reconcile", NODE)
    assert report["unresolved_ambiguous"] == []
    assert effect_of(world, effect_id)["state"] == "COMMITTED"


def ledger_dump(world: dict[str, Any]) -> tuple[Any, Any]:
    return (run_json(world, "effect", "list", NODE), run_json(world, "history", NODE))


@pytest.mark.parametrize(
    ("case", "code", "message"),
    [
        ("unknown-id", 2, "onstation: bad input: no such effect 'eff-0000000000000000000000ff'"),
        ("unknown-word", 2, "onstation: bad input: Invalid value for '--as': 'executed' is not "
                            "one of 'observed', 'compensated'. "
                            "(see 'onstation effect resolve --help')"),
        ("already-settled", 5, "onstation: conflict: effect {id} is COMMITTED; only an "
                               "AMBIGUOUS effect is resolved by an operator"),
        ("no-operator", 2, "onstation: bad input: resolve: --by and --why must both be given"),
    ],
)  # fmt: skip
def test_bad_operator_input_is_one_line_an_exit_code_and_no_change(
    world: dict[str, Any], case: str, code: int, message: str
) -> None:
    effect_id = dispatch_push_and_kill_the_host(world, pushed=True)
    make_unreachable(world, "moved")
    assert_quarantined_on(world, effect_id)
    if case == "already-settled":
        done = run(world, "effect", "resolve", effect_id, "--as", "observed", "--by", "alice",
                   "--why", "seen on the moved remote")  # fmt: skip
        assert done.returncode == 0, done.stderr
    target = "eff-0000000000000000000000ff" if case == "unknown-id" else effect_id
    word = "executed" if case == "unknown-word" else "compensated"
    by = "" if case == "no-operator" else "bob"
    before = ledger_dump(world)
    done = run(world, "effect", "resolve", target, "--as", word, "--by", by, "--why", "undone")
    assert done.returncode == code, done.stdout + done.stderr
    assert done.stdout == ""
    assert done.stderr.splitlines() == [message.format(id=effect_id)]
    assert ledger_dump(world) == before
    # The same with --json: one JSON object, the same exit code, nothing written.
    done = run(world, "effect", "resolve", target, "--as", word, "--by", by, "--why", "undone",
               "--json")  # fmt: skip
    assert done.returncode == code
    (line,) = (done.stdout + done.stderr).strip().splitlines()
    assert json.loads(line)["message"] in message.format(id=effect_id)
    assert ledger_dump(world) == before
    # The exit codes are the documented ones.
    assert f"{code}  {'bad input' if code == 2 else 'conflict'}" in run(world, "--help").stdout
