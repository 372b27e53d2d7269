"""The CLI as people and scripts use it: output, exit codes, and bad input that changes nothing."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from onstation.cli.main import cli

ONSTATION = Path(sys.executable).with_name("onstation")
TABLES = [
    "agent_node", "actor", "work_episode", "body_lease", "agent_run", "capability_grant",
    "denial", "effect", "respawn", "halt", "event", "accepted_capsule", "schema_version",
]  # fmt: skip


def run(url: str, *args: str) -> tuple[int, str, str]:
    full = list(args) if "--db" in args else [*args, "--db", url]
    result = CliRunner().invoke(cli, full, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def dump(url: str) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every table, in a stable order: the ledger's content."""
    if url.startswith("postgresql://"):
        import psycopg

        base, schema = url.split("?schema=")
        with psycopg.connect(base) as conn:
            conn.execute(f'SET search_path TO "{schema}"')
            return {
                t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in TABLES
            }
    with sqlite3.connect(url) as conn:
        return {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in TABLES}


@pytest.fixture
def populated(ledger_url: str) -> tuple[str, str]:
    """A ledger holding a live body, an effect, a fenced node and an ambiguous effect."""
    url = ledger_url
    assert run(url, "node", "register", "x", "--role", "executor")[0] == 0
    assert run(url, "lease", "acquire", "x", "--holder", "body-1")[0] == 0
    code, out, _ = run(url, "effect", "intend", "x", "--generation", "1", "--op", "git.push",
                       "--dest", "origin", "--args", '{"commit": "abc"}', "--json")  # fmt: skip
    assert code == 0
    effect_id = json.loads(out)["effect_id"]
    assert run(url, "effect", "dispatch", effect_id, "--generation", "1")[0] == 0
    assert run(url, "node", "register", "y")[0] == 0
    assert run(url, "lease", "acquire", "y")[0] == 0
    return url, effect_id


INTEND_PUSH = ["effect", "intend", "x", "--generation", "1", "--op", "git.push", "--dest", "origin",
               "--args", '{"commit": "abc"}']  # fmt: skip

BAD_INPUTS: list[list[str]] = [
    ["node", "register", "../x"],
    ["node", "register", ""],
    ["node", "register", "ok", "--spawner", "a/b"],
    ["node", "register", "ok", "--role", "bad role"],
    ["node", "show", "a/b"],
    ["node", "show", "ghost"],
    ["node", "list", "--db", "mysql://nope"],
    ["actor", "add", "a b"],
    ["actor", "add", "office", "--node", "ghost"],
    ["actor", "list", "--db", "ftp://host/x"],
    ["episode", "open", "ghost", "--objective", "x"],
    ["episode", "open", "x", "--objective", ""],
    ["episode", "settle", ".."],
    ["episode", "list", "x" * 129],
    ["lease", "acquire", "x", "--ttl", "0"],
    ["lease", "acquire", "x", "--ttl", "abc"],
    ["lease", "acquire", "x", "--expect-generation", "-1"],
    ["lease", "fence", "x", "--expect-generation", "0"],
    ["lease", "fence", "ghost", "--expect-generation", "1"],
    ["lease", "fence", "x"],
    ["lease", "renew", "x", "--generation", "-1"],
    ["lease", "release", "x"],
    ["lease", "list", "../.."],
    ["guard", "x", "--generation", "0"],
    ["guard", "x", "--generation", "1", "--action", "a\x01b"],
    ["denials", "/etc"],
    ["grant", "issue", "x", "--generation", "1", "--capability", ""],
    ["grant", "list", "ghost"],
    [
        "effect",
        "intend",
        "x",
        "--generation",
        "1",
        "--op",
        "p",
        "--dest",
        "o",
        "--args",
        '{"a":1,"a":2}',
    ],
    ["effect", "intend", "x", "--generation", "1", "--op", "p", "--dest", "o", "--args", "NaN"],
    ["effect", "intend", "x", "--generation", "1", "--op", "p", "--dest", "o", "--args", "[1e400]"],
    ["effect", "intend", "x", "--generation", "1", "--op", "p", "--dest", "o", "--args", "1" * 30],
    ["effect", "intend", "x", "--generation", "1", "--op", "two words", "--dest", "o"],
    ["effect", "intend", "x", "--generation", "1", "--op", "p", "--dest", "  "],
    [*INTEND_PUSH, "--repeat-reason", "re-deploy"],
    [*INTEND_PUSH, "--slot", "slot-2", "--repeat-reason", ""],
    ["effect", "dispatch", "bad/id", "--generation", "1"],
    ["effect", "dispatch", "eff-000000000000000000000000", "--generation", "1"],
    ["effect", "observe", "EFFECT", "--generation", "1", "--result", "{bad"],
    ["effect", "commit", "eff-000000000000000000000000", "--generation", "1"],
    ["effect", "fail", "..", "--generation", "1"],
    ["effect", "reconcile", ".."],
    ["effect", "resolve", "EFFECT", "--as", "retry", "--by", "op", "--why", "x"],
    ["effect", "resolve", "EFFECT", "--as", "observed", "--by", "", "--why", "x"],
    ["effect", "list", "x", "--state", "BOGUS"],
    ["effect", "show", "a/b"],
    ["respawn", "request", ".."],
    ["respawn", "status", "ghost"],
    ["breaker", "open", ".."],
    ["breaker", "close", "ghost"],
    ["halt"],
    ["halt", "--node", "ghost", "--why", "x"],
    ["halt", "--why", ""],
    ["unhalt", "--node", ".."],
    ["halts", "--db", "ftp://host/x"],
    ["history", "x", "--limit", "0"],
    ["history", "ghost"],
    ["db", "status", "--db", "sqlite:"],
    ["db", "migrate", "--db", "redis://localhost"],
    ["tour", "--db", "ftp://x"],
    ["demo", "--timeout", "0"],
    ["no-such-command"],
]


@pytest.mark.parametrize("args", BAD_INPUTS, ids=lambda a: " ".join(a)[:60])
def test_bad_input_exits_2_with_one_line_and_changes_nothing(
    populated: tuple[str, str], args: list[str]
) -> None:
    url, effect_id = populated
    args = [effect_id if a == "EFFECT" else a for a in args]
    before = dump(url)
    code, out, err = run(url, *args)
    assert code == 2, (out, err)
    assert dump(url) == before
    message = [line for line in err.splitlines() if line.strip()]
    assert message, "an error must say what was wrong"
    if err.startswith("onstation:"):
        assert len(message) == 1


def test_json_errors_are_one_object(populated: tuple[str, str]) -> None:
    url, _ = populated
    code, out, _ = run(url, "node", "show", "ghost", "--json")
    assert code == 2
    assert json.loads(out) == {
        "error": "bad_input",
        "message": "no such node 'ghost'",
        "node": "ghost",
    }


def test_exit_codes_for_denied_blocked_and_conflict(populated: tuple[str, str]) -> None:
    url, effect_id = populated
    assert run(url, "lease", "fence", "x", "--expect-generation", "1")[0] == 0
    assert run(url, "lease", "fence", "x", "--expect-generation", "1")[0] == 5
    code, _, err = run(url, "guard", "x", "--generation", "1", "--action", "git push")
    assert code == 3 and "stale generation" in err
    code, out, _ = run(url, "denials", "x", "--json")
    assert json.loads(out)["denials"][-1]["action"] == "git push"
    assert run(url, "effect", "observe", effect_id, "--generation", "1")[0] == 3
    code, out, _ = run(url, "effect", "reconcile", "x", "--json")
    assert json.loads(out)["ambiguous"] == [effect_id]
    assert run(url, "lease", "acquire", "x")[0] == 0
    code, _, err = run(url, "effect", "intend", "x", "--generation", "2", "--op", "GIT.PUSH",
                       "--dest", "origin", "--args", '{ "commit":"abc" }')  # fmt: skip
    assert code == 5 and "AMBIGUOUS" in err
    for _ in range(3):
        assert run(url, "respawn", "request", "x")[0] == 0
    code, _, err = run(url, "respawn", "request", "x")
    assert code == 4 and "reopens at" in err
    assert run(url, "lease", "acquire", "y")[0] == 5  # y already has a live body
    assert run(url, "halt", "--why", "incident")[0] == 0
    assert run(url, "lease", "fence", "y", "--expect-generation", "1")[0] == 0
    assert run(url, "lease", "acquire", "y")[0] == 4  # halted
    assert run(url, "unhalt")[0] == 0
    assert run(url, "lease", "acquire", "y")[0] == 0
    code, out, _ = run(url, "effect", "resolve", effect_id, "--as", "observed", "--by", "ops",
                       "--why", "seen on the remote", "--json")  # fmt: skip
    assert code == 0 and json.loads(out)["state"] == "COMMITTED"


def test_a_new_slot_is_not_a_new_effect_unless_the_repeat_is_declared(
    populated: tuple[str, str],
) -> None:
    """Issue 9: `effect intend --slot slot-99` of a dispatched push recorded it a second time."""
    url, effect_id = populated
    push = [*INTEND_PUSH, "--slot", "slot-99"]
    before = dump(url)
    code, _, err = run(url, *push)
    assert code == 5 and effect_id in err and "--repeat-reason" in err
    assert dump(url) == before and len(before["effect"]) == 1

    code, out, _ = run(url, *push, "--repeat-reason", "re-deploy after rollback", "--json")
    repeat = json.loads(out)
    assert code == 0 and repeat["created"] and repeat["effect_id"] != effect_id
    assert (repeat["approval_slot"], repeat["repeat_of"], repeat["repeat_reason"]) == (
        "slot-99", effect_id, "re-deploy after rollback",
    )  # fmt: skip
    code, out, _ = run(url, *push, "--repeat-reason", "typed again", "--json")
    assert code == 0 and json.loads(out)["effect_id"] == repeat["effect_id"]
    assert not json.loads(out)["created"]

    code, out, _ = run(url, "effect", "show", repeat["effect_id"], "--json")
    assert code == 0 and json.loads(out)["repeat_of"] == effect_id
    code, out, _ = run(url, "effect", "list", "x", "--json")
    listed = {e["effect_id"]: e for e in json.loads(out)["effects"]}
    assert set(listed) == {effect_id, repeat["effect_id"]}
    assert listed[effect_id]["repeat_of"] is None
    assert listed[repeat["effect_id"]]["repeat_reason"] == "re-deploy after rollback"
    code, out, _ = run(url, "effect", "show", repeat["effect_id"])
    assert code == 0 and "re-deploy after rollback" in out
    code, out, _ = run(url, "effect", "list", "x")
    assert f"[repeat of {effect_id}: re-deploy after rollback]" in out


def test_json_output_uses_the_vocabulary(populated: tuple[str, str]) -> None:
    url, effect_id = populated
    code, out, _ = run(url, "node", "show", "x", "--json")
    data = json.loads(out)
    assert code == 0
    assert data["node"] == "x" and data["generation"] == 1
    assert data["live_lease"]["generation"] == 1
    assert [e["effect_id"] for e in data["open_effects"]] == [effect_id]
    code, out, _ = run(url, "history", "x", "--json")
    kinds = [e["kind"] for e in json.loads(out)["events"]]
    assert kinds == ["node.registered", "lease.acquired", "effect.intended", "effect.dispatched"]


def test_installed_console_script_runs_the_tour(tmp_path: Path) -> None:
    """The ledger tour, through the real installed entry point."""
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    env.pop("ONSTATION_DB", None)
    done = subprocess.run(
        [str(ONSTATION), "tour"], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    for expected in ("AMBIGUOUS", "denied (exit 3)", "blocked (exit 4)", "respawn 3/3"):
        assert expected in done.stdout
    # The tour leaves the user's own ledger alone.
    assert not (tmp_path / "state" / "onstation" / "ledger.db").exists()
    summary = subprocess.run(
        [str(ONSTATION), "tour", "--json"], capture_output=True, text=True, env=env, timeout=120,
        check=False,
    )  # fmt: skip
    data = json.loads(summary.stdout)
    assert data["generation"] == 2 and len(data["ambiguous"]) == 1 and data["denials"] == 1


def test_default_ledger_lives_in_the_state_directory(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    env.pop("ONSTATION_DB", None)
    done = subprocess.run(
        [str(ONSTATION), "node", "register", "solo"], capture_output=True, text=True, env=env,
        timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    db_file = tmp_path / "state" / "onstation" / "ledger.db"
    assert db_file.exists()
    assert oct(db_file.stat().st_mode & 0o777) == "0o600"
    assert oct(db_file.parent.stat().st_mode & 0o777) == "0o700"
