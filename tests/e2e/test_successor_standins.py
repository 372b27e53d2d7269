"""A relief whose successor is launched through stand-in ``claude`` and ``codex`` binaries that
enforce the hosts' rules (tests/standins/hosts.py): an unknown flag is a usage error, a Bash
call no permission rule allows is refused in print mode, a read-only sandbox cannot write the
ledger. The successor reaches RUNNING only when the launch flags let it run exactly its
challenge command; with the flags onstation used before, the birth fails. The workspace path
holds a ``'`` and a space, and no ``onstation`` is on PATH: the command in the prompt must be
absolute and quoted as a whole.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from onstation.harness.fake_agent import mark_scratch_workspace
from onstation.ledger import Ledger
from onstation.ledger.relief_records import ReliefLedger

ONSTATION = str(Path(sys.executable).with_name("onstation"))
STANDINS = Path(__file__).parents[1] / "standins"
GIT = {
    "GIT_AUTHOR_NAME": "T",
    "GIT_AUTHOR_EMAIL": "t@e",
    "GIT_COMMITTER_NAME": "T",
    "GIT_COMMITTER_EMAIL": "t@e",
}
#: The argv onstation launched successors with before issue 12 (the regression).
OLD_ARGV = {
    "claude": "lambda self, spec, prompt: ['claude', '-p', '--session-id', spec.session_id, "
    "'--output-format', 'json']",
    "codex": "lambda self, spec, prompt: ['codex', 'exec', '--json', '-C', spec.workspace, '-']",
}


def _standins() -> Any:
    found = importlib.util.spec_from_file_location("standins", STANDINS / "standins.py")
    assert found is not None and found.loader is not None
    module = importlib.util.module_from_spec(found)
    found.loader.exec_module(module)
    return module


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ONSTATION, *args], capture_output=True, text=True, env=env, timeout=300, check=False
    )


def _capacity(root: Path, harness: str) -> Path:
    sample = Path(__file__).parents[2] / "src/onstation/plan/examples/sample-input.json"
    evidence = json.loads(sample.read_text())["capacity"]["evidence"]
    now = datetime.now(UTC)

    def stamp(moment: datetime) -> str:
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")

    evidence |= {
        "node": "exec-1",
        "harness": harness,
        "observedAt": stamp(now),
        "validUntil": stamp(now + timedelta(minutes=30)),
    }
    evidence["reservation"]["expiresAt"] = stamp(now + timedelta(minutes=30))
    path = root / f"{harness}-capacity.json"
    path.write_text(json.dumps(evidence))
    return path


@pytest.fixture
def team(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A body of exec-1 in a workspace whose path holds a quote and a space; stand-in hosts
    first on a PATH that has no onstation on it; a SQLite ledger beside the workspace."""
    yield from _team(tmp_path, str(tmp_path / "it's a team" / "ledger.db"))


@pytest.fixture
def pg_team(tmp_path: Path, pg_url: str) -> Iterator[dict[str, Any]]:
    """The same, with the ledger on PostgreSQL."""
    yield from _team(tmp_path, pg_url)


def _team(tmp_path: Path, db: str) -> Iterator[dict[str, Any]]:
    root = tmp_path / "it's a team"
    app = root / "app"
    app.mkdir(parents=True)
    for argv in (
        ["git", "init", "-q", "-b", "main"],
        ["git", "commit", "-q", "--allow-empty", "-m", "init"],
    ):
        subprocess.run(argv, cwd=app, check=True, env={**os.environ, **GIT})
    mark_scratch_workspace(app)
    bin_dir = _standins().install(tmp_path / "bin")
    env = {
        **os.environ,
        **GIT,
        "ONSTATION_DB": db,
        "ONSTATION_KEYS_DIR": str(tmp_path / "keys"),
        "PATH": f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin",
        "STANDIN_RECORD": str(tmp_path / "record.jsonl"),
        "STANDIN_LINGER": "120",
        "CODEX_HOME": str(tmp_path / "codex-home"),
    }
    done = run(env, "install", "claude-code", "--project", str(app), "--node", "exec-1")
    assert done.returncode == 0, done.stderr
    done = run(env, "install", "codex", "--project", str(app), "--node", "exec-1", "--json")
    assert done.returncode == 0, done.stderr
    assert run(env, "episode", "open", "exec-1", "--objective", "build the login").returncode == 0
    payload = json.dumps(
        {
            "session_id": "pred",
            "cwd": str(app),
            "hook_event_name": "SessionStart",
            "source": "startup",
        }
    )
    subprocess.run(
        [ONSTATION, "hook", "claude-code", "SessionStart"],
        input=payload,
        text=True,
        env=env,
        check=True,
        capture_output=True,
    )
    state: dict[str, Any] = {
        "app": app,
        "env": env,
        "db": db,
        "root": root,
        "tmp": tmp_path,
        "bin": bin_dir,
        "pids": [],
    }
    yield state
    for pid in state["pids"]:  # the successors these tests launched, by their id
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)


def relieve(
    team: dict[str, Any],
    host: str,
    *extra: str,
    old: bool = False,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    harness = "claude-code" if host == "claude" else "codex"
    plan = "claude-code" if host == "claude" else "codex-cli"
    args = [
        "relieve",
        "exec-1",
        "--harness",
        harness,
        "--brief-wait",
        "0",
        "--shutdown-wait",
        "0.5",
        "--challenge-wait",
        "90",
        "--capacity",
        str(_capacity(team["tmp"], plan)),
        "--json",
        *extra,
    ]
    if old:
        launcher = "ClaudeLauncher" if host == "claude" else "CodexLauncher"
        code = (
            f"import onstation.harness.launch as L; L.{launcher}.argv = {OLD_ARGV[host]}; "
            f"L.{launcher}.private_files = lambda self, spec, prompt: {{}}; "
            "from onstation.cli.entry import main; main()"
        )
        command = [sys.executable, "-c", code, *args]
    else:
        command = [ONSTATION, *args]
    done = subprocess.run(
        command, capture_output=True, text=True, env=env or team["env"], timeout=300, check=False
    )
    assert done.stdout.strip(), done.stderr
    outcome: dict[str, Any] = json.loads(done.stdout)
    if outcome.get("successor_pid"):
        team["pids"].append(outcome["successor_pid"])
    return outcome


def trust_codex(team: dict[str, Any]) -> None:
    """What the user does once (``install codex`` says so): trust the project and review the
    hooks in Codex's /hooks, which records each handler's hash in ``config.toml``."""
    app = team["app"]
    record = json.loads((app / ".onstation" / "install-codex.json").read_text())
    lines = [f"[projects.{json.dumps(str(app))}]", 'trust_level = "trusted"', ""]
    for entry in record["codex_trust"]:
        lines += [f"[hooks.state.{json.dumps(entry['key'])}]", f'trusted_hash = "{entry["hash"]}"']
    home = Path(team["env"]["CODEX_HOME"])
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text("\n".join(lines) + "\n")


def events(team: dict[str, Any], kind: str) -> list[Any]:
    with Ledger.open(team["db"]) as ledger:
        return [e for e in ledger.history("exec-1") if e.kind == kind]


def records(team: dict[str, Any]) -> list[dict[str, Any]]:
    path = team["tmp"] / "record.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def birth(team: dict[str, Any]) -> Any:
    with Ledger.open(team["db"]) as ledger:
        return ReliefLedger(ledger).birth("exec-1", 2)


def test_a_claude_successor_answers_its_challenge_and_runs(team: dict[str, Any]) -> None:
    outcome = relieve(team, "claude")
    assert (outcome["state"], outcome["to_generation"]) == ("SETTLED", 2), outcome
    assert birth(team).state == "RUNNING"
    ran = [r for r in records(team) if r["host"] == "claude"]
    assert [r["event"] for r in ran] == ["ran"] and ran[0]["exit"] == 0, ran
    assert ran[0]["command"].startswith(f"{ONSTATION} challenge answer exec-1 --generation 2")
    # The allow rule is the command itself: nothing wider went into the settings.
    settings = team["app"] / ".bridge" / "bodies" / "exec-1-g2-settings.json"
    allow = json.loads(settings.read_text())["permissions"]["allow"]
    assert allow[0] == f"Bash({ran[0]['command']})"
    assert oct(settings.stat().st_mode & 0o777) == "0o600"
    # Bound at launch, the session recorded its host at its SessionStart: a /clear in that
    # process continues the body, and a crash of it frees the lease, as for any session.
    with Ledger.open(team["db"]) as ledger:
        lease = next(ls for ls in ledger.leases("exec-1") if ls.generation == 2)
        rows = ledger._read(
            lambda tx, _now: tx.all(
                "SELECT host_witness FROM body_host WHERE lease_id = ?", (lease.lease_id,)
            )
        )
    assert [json.loads(r[0])["pid"] for r in rows] == [outcome["successor_pid"]]


def test_a_codex_successor_writes_the_ledger_from_its_sandbox(team: dict[str, Any]) -> None:
    # /tmp and $TMPDIR taken out of the sandbox's writable roots (a user's config may say
    # so): only --add-dir makes the ledger's directory writable.
    trust_codex(team)
    outcome = relieve(
        team,
        "codex",
        "--arg=-c",
        "--arg=sandbox_workspace_write.exclude_slash_tmp=true",
        "--arg=-c",
        "--arg=sandbox_workspace_write.exclude_tmpdir_env_var=true",
    )
    assert (outcome["state"], outcome["to_generation"]) == ("SETTLED", 2), outcome
    assert birth(team).state == "RUNNING"
    ran = [r for r in records(team) if r["host"] == "codex" and r["event"] == "ran"]
    # The model runs its challenge answer and nothing else: Codex's hooks are the heartbeat.
    assert [r["exit"] for r in ran] == [0] and " challenge answer " in ran[0]["command"], ran
    assert_bound_through_hooks(team)


def assert_bound_through_hooks(team: dict[str, Any]) -> None:
    """Codex chose its own session id; its hooks, from the launched process, took the lease."""
    (bound,) = events(team, "session.launch_bound")
    assert bound.generation == 2
    assert bound.detail["session_id"] != bound.detail["launched_session"]
    with Ledger.open(team["db"]) as ledger:
        lease = next(ls for ls in ledger.leases("exec-1") if ls.generation == 2)
    assert lease.holder == f"codex session {bound.detail['session_id']}"
    hooks = [r for r in records(team) if r["event"] == "hook" and r["hook"] == "PreToolUse"]
    # Admitted: its call was not denied as a second body's.
    assert hooks and all(r["exit"] == 0 for r in hooks), hooks
    assert all(
        (r["output"].get("hookSpecificOutput") or {}).get("permissionDecision") != "deny"
        for r in hooks
    ), hooks


def test_a_codex_successor_under_codexs_npm_wrapper_is_bound_through_its_child(
    team: dict[str, Any],
) -> None:
    """``codex`` from npm is a Node.js wrapper that runs the native program as its child:
    the hooks' host process is that child, a descendant of the process onstation launched."""
    trust_codex(team)
    outcome = relieve(team, "codex", env={**team["env"], "STANDIN_CODEX_NPM": "1"})
    assert (outcome["state"], outcome["to_generation"]) == ("SETTLED", 2), outcome
    assert birth(team).state == "RUNNING"
    assert_bound_through_hooks(team)
    host = events(team, "session.launch_bound")[0].detail["session_id"]
    with Ledger.open(team["db"]) as ledger:
        row = ledger._read(
            lambda tx, _now: tx.one(
                "SELECT host_witness FROM body_host WHERE session_id = ?", (host,)
            )
        )
    assert json.loads(row[0])["pid"] != outcome["successor_pid"]  # the child, not the wrapper


def test_untrusted_codex_hooks_fail_the_birth_and_say_where_to_look(
    team: dict[str, Any],
) -> None:
    """Codex runs no hook it was not asked to trust: nothing renews the successor's lease,
    the birth fails (a body whose calls onstation cannot see never runs) and says why."""
    outcome = relieve(team, "codex", "--challenge-wait", "30")
    assert outcome["state"] == "BIRTH_FAILED", outcome
    assert any("no hook of the successor renewed" in r for r in outcome["reasons"]), outcome
    assert any("onstation doctor" in r for r in outcome["reasons"]), outcome
    assert not [r for r in records(team) if r["event"] == "hook"]
    assert not events(team, "session.launch_bound")


@pytest.mark.parametrize("host", ["claude", "codex"])
def test_with_the_old_launch_flags_the_host_refuses_and_the_birth_fails(
    team: dict[str, Any], host: str
) -> None:
    outcome = relieve(team, host, old=True)
    assert outcome["state"] == "BIRTH_FAILED", outcome
    assert any("exited before the challenge" in r for r in outcome["reasons"]), outcome
    refused = [r for r in records(team) if r["host"] == host and r["event"] == "refused"]
    assert refused and " challenge answer " in refused[0]["command"], records(team)
    assert birth(team).answered_at is None


def test_the_witness_follows_a_wrapper_that_execs_the_host(team: dict[str, Any]) -> None:
    """A version-manager shim: ``claude`` on PATH is a shell script that replaces itself with
    the real program once the relief has witnessed it (so the exec surely comes after)."""
    shim_dir = team["tmp"] / "shims"
    wait = (
        f'until {sys.executable} -c "import sqlite3, sys; row = sqlite3.connect(sys.argv[1])'
        ".execute('SELECT launch_witness FROM birth WHERE node = ? AND generation = 2',"
        " ('exec-1',)).fetchone(); sys.exit(0 if row and row[0] else 1)\" "
        '"$ONSTATION_DB"; do sleep 0.05; done'
    )
    _standins().exec_wrapper(shim_dir / "claude", team["bin"] / "claude", before=wait)
    env = {**team["env"], "PATH": f"{shim_dir}{os.pathsep}{team['env']['PATH']}"}
    outcome = relieve(team, "claude", env=env)
    assert outcome["state"] == "SETTLED", outcome
    witness = birth(team).launch_witness
    # The stored witness names the program the process runs now, not the shell it started as.
    assert witness["executable"] == os.path.realpath(sys.executable)
    assert witness["pid"] == outcome["successor_pid"]


def test_the_standins_enforce_the_hosts_usage_rules(tmp_path: Path) -> None:
    bin_dir = _standins().install(tmp_path / "bin")
    claude = subprocess.run(
        [str(bin_dir / "claude"), "-p", "--allowed-toolz", "Bash"],
        input="x",
        capture_output=True,
        text=True,
        check=False,
    )
    assert claude.returncode == 1 and "unknown option '--allowed-toolz'" in claude.stderr
    codex = subprocess.run(
        [str(bin_dir / "codex"), "exec", "--sandbox-mode", "x", "-"],
        input="x",
        capture_output=True,
        text=True,
        check=False,
    )
    assert codex.returncode == 2 and "unexpected argument '--sandbox-mode'" in codex.stderr
    outside = subprocess.run(
        [str(bin_dir / "codex"), "exec", "-C", str(tmp_path), "-"],
        input="x",
        capture_output=True,
        text=True,
        check=False,
    )
    assert outside.returncode == 1 and "--skip-git-repo-check" in outside.stderr


def test_a_codex_successor_reaches_a_postgres_ledger_from_its_sandbox(
    pg_team: dict[str, Any],
) -> None:
    trust_codex(pg_team)
    outcome = relieve(pg_team, "codex")
    assert (outcome["state"], outcome["to_generation"]) == ("SETTLED", 2), outcome
    assert birth(pg_team).state == "RUNNING"
    ran = [r for r in records(pg_team) if r["host"] == "codex" and r["event"] == "ran"]
    assert [r["exit"] for r in ran] == [0], ran
    assert_bound_through_hooks(pg_team)


def test_with_the_old_flags_a_codex_successor_cannot_reach_a_postgres_ledger(
    pg_team: dict[str, Any],
) -> None:
    outcome = relieve(pg_team, "codex", old=True)
    assert outcome["state"] == "BIRTH_FAILED", outcome
    refused = [r for r in records(pg_team) if r["event"] == "refused"]
    assert refused and "network access is off" in refused[0]["reason"], records(pg_team)
