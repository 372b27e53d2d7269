"""Bad input on the command line (issue 10): every case exits 2 with one line on stderr (or
one JSON object on stdout with --json), and leaves the ledger and the files as they were.

Each case was reproduced on the code before the fix: numbers past 64 bits, a TTL past what a
timedelta holds, bytes that are not UTF-8, JSON integers of thousands of digits and deep
nesting, ``--db :memory:`` and malformed PostgreSQL URLs exited 1 with a raw exception name;
click's usage errors printed three lines and ignored --json; read-only commands created an
empty ledger at a mistyped path; a ledger in a world-writable directory was opened; and the
advice given for an effect of an older generation named a command that was then refused.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from conftest import pg_available
from onstation.cli.main import cli
from onstation.core.canonical import loads_strict
from onstation.core.errors import BadInput

ONSTATION = str(Path(sys.executable).with_name("onstation"))
BEYOND_INT64 = str(2**63)


def run(url: str | None, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    full = list(args) if url is None or "--db" in args else [*args, "--db", url]
    result = CliRunner().invoke(cli, full, catch_exceptions=False, env=env)
    return result.exit_code, result.stdout, result.stderr


def dump(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table of a SQLite ledger, in a stable order."""
    conn = sqlite3.connect(url)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {
            t: sorted(conn.execute(f'SELECT * FROM "{t}"').fetchall(), key=repr) for t in tables
        }
    finally:
        conn.close()


def files(root: Path) -> list[tuple[str, int]]:
    """Every file below ``root`` but the ledger's own (SQLite's companions come and go)."""
    return sorted(
        (str(p.relative_to(root)), p.stat().st_size)
        for p in root.rglob("*")
        if p.is_file() and ".db" not in p.name
    )


def assert_one_line(code: int, out: str, err: str, *, as_json: bool = False) -> str:
    """Exit 2 and exactly one line of error (or one JSON object); returns the message."""
    assert code == 2, (code, out, err)
    if as_json:
        assert err == "", err
        lines = out.splitlines()
        assert len(lines) == 1, out
        data = json.loads(lines[0])
        assert data["error"] == "bad_input" and isinstance(data["message"], str), data
        return str(data["message"])
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("onstation: bad input: "), lines[0]
    return lines[0]


@pytest.fixture
def populated(tmp_path: Path) -> tuple[str, str]:
    """x holds generation 1 with a dispatched effect; y is registered without a body."""
    url = str(tmp_path / "ledger.db")
    assert run(url, "node", "register", "x")[0] == 0
    assert run(url, "lease", "acquire", "x")[0] == 0
    code, out, _ = run(url, "effect", "intend", "x", "--generation", "1", "--op", "git.push",
                       "--dest", "origin", "--json")  # fmt: skip
    assert code == 0
    effect_id = json.loads(out)["effect_id"]
    assert run(url, "effect", "dispatch", effect_id, "--generation", "1")[0] == 0
    assert run(url, "node", "register", "y")[0] == 0
    assert run(url, "task", "create", "t1")[0] == 0
    return url, effect_id


INTEND = ["effect", "intend", "x", "--generation", "1", "--op", "p", "--dest", "o", "--args"]

BAD_INPUTS: list[list[str]] = [
    # Numbers past what the ledger's 64-bit columns (or a timedelta) hold.
    ["lease", "fence", "x", "--expect-generation", BEYOND_INT64],
    ["lease", "acquire", "y", "--expect-generation", BEYOND_INT64],
    ["guard", "x", "--generation", BEYOND_INT64],
    ["effect", "dispatch", "EFFECT", "--generation", BEYOND_INT64],
    ["effect", "commit", "EFFECT", "--generation", "9" * 40],
    ["effect", "fail", "EFFECT", "--generation", BEYOND_INT64],
    ["grant", "issue", "x", "--generation", BEYOND_INT64, "--capability", "tool:Bash"],
    ["lease", "renew", "x", "--generation", BEYOND_INT64],
    ["lease", "renew", "x", "--generation", "1", "--ttl", "99999999999999999999"],
    ["lease", "acquire", "y", "--ttl", "99999999999999999999"],
    ["lease", "acquire", "y", "--ttl", str(2**62)],
    ["task", "update", "99999999999999999999", "--status", "done"],
    ["message", "send", "--from", "ops", "--to", "x", "--kind", "note", "--reply-to",
     BEYOND_INT64],
    ["brief", "write", "x", "--generation", BEYOND_INT64, "--task", "t"],
    ["supervise", "--once", "--poll", "nan"],
    ["supervise", "--once", "--brief-wait", "nan"],
    # Free text holding bytes that are not UTF-8 (Python passes them as lone surrogates).
    ["note", "x", "--decision", "\udcff\udcfe", "--why", "w", "--generation", "1"],
    ["note", "x", "--note=caf\udce9", "--generation", "1"],
    ["lease", "fence", "x", "--expect-generation", "1", "--reason", "bad \udcff"],
    ["episode", "open", "x", "--objective", "\udce9t\udce9", "--generation", "1"],
    ["halt", "--why", "\udcff"],
    ["guard", "x", "--generation", "1", "--action", "push \udcff"],
    ["message", "send", "--from", "ops", "--to", "x", "--kind", "note", "--body", "\udcff"],
    ["node", "register", "n\udcff"],
    # JSON that made the strict loader raise (int() digit limit) or recurse too deep.
    [*INTEND, "1" * 5000],
    [*INTEND, '{"n": ' + "9" * 4301 + "}"],
    [*INTEND, "-" + "9" * 4400],
    [*INTEND, "[" * 100_000 + "]" * 100_000],
    [*INTEND, '{"a": ' * 5000 + "1" + "}" * 5000],
    [*INTEND, '"\\udcff"'],
    [*INTEND, '{"\\ud800": 1}'],
    ["effect", "observe", "EFFECT", "--generation", "1", "--result", "[" * 50_000],
    # Ledger URLs that are not a durable file or a parseable PostgreSQL URL.
    ["node", "register", "z", "--db", ":memory:"],
    ["node", "list", "--db", "sqlite::memory:"],
    ["node", "register", "z", "--db", "postgresql://[::1"],
    ["node", "list", "--db", "postgresql://localhost:99999/x"],
    ["db", "migrate", "--db", "postgres://[::1/x"],
]  # fmt: skip


@pytest.mark.parametrize("args", BAD_INPUTS, ids=lambda a: " ".join(a)[:50])
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_bad_input_exits_2_with_one_line_and_changes_nothing(
    populated: tuple[str, str], tmp_path: Path, args: list[str], as_json: bool
) -> None:
    url, effect_id = populated
    args = [effect_id if a == "EFFECT" else a for a in args]
    before, listing = dump(url), files(tmp_path)
    code, out, err = run(url, *args, *(["--json"] if as_json else []))
    message = assert_one_line(code, out, err, as_json=as_json)
    assert not re.search(r"\w+(Error|Exception)\b|recursion", message), message
    assert dump(url) == before
    assert files(tmp_path) == listing


def test_undecodable_argv_bytes_through_the_real_entry_point(populated: tuple[str, str]) -> None:
    url, _ = populated
    before = dump(url)
    done = subprocess.run(
        [ONSTATION.encode(), b"note", b"x", b"--decision", b"\xff\xfe ok", b"--why", b"w",
         b"--generation", b"1", b"--db", url.encode()],
        capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    err = done.stderr.decode("utf-8")
    assert_one_line(done.returncode, done.stdout.decode(), err)
    assert "--decision" in err and "UTF-8" in err
    assert dump(url) == before


# --------------------------------------------------------------------------------------------
# click's usage errors follow the same rules


USAGE_ERRORS: list[list[str]] = [
    ["lease", "fence", "x", "--expect-generation", "abc"],  # a bad option value
    ["lease", "fence", "x"],  # a missing option
    ["node", "list", "--bogus"],  # an unknown option
    ["no-such-command"],  # no such command
    ["lease", "no-such-subcommand"],
    ["effect", "list", "x", "--state", "BOGUS"],  # not one of the choices
    ["node", "show"],  # a missing argument
    ["node", "show", "x", "extra"],  # an extra argument
    ["lease", "acquire", "x", "--ttl"],  # an option without its value
    ["simulate", "--seeds", "abc"],
]


@pytest.mark.parametrize("args", USAGE_ERRORS, ids=" ".join)
def test_usage_errors_are_one_json_object_with_json(
    populated: tuple[str, str], args: list[str]
) -> None:
    url, _ = populated
    before = dump(url)
    code, out, err = run(url, *args, "--json")
    assert_one_line(code, out, err, as_json=True)
    assert dump(url) == before


@pytest.mark.parametrize("args", USAGE_ERRORS, ids=" ".join)
def test_usage_errors_are_one_line_without_json(
    populated: tuple[str, str], args: list[str]
) -> None:
    url, _ = populated
    code, out, err = run(url, *args)
    line = assert_one_line(code, out, err)
    assert "Usage:" not in err and out == ""
    assert "--help" in line  # where to look next


def test_json_anywhere_in_argv_and_the_real_entry_point(populated: tuple[str, str]) -> None:
    url, _ = populated
    code, out, err = run(url, "--json", "node", "show", "x")
    assert_one_line(code, out, err, as_json=True)
    done = subprocess.run(
        [ONSTATION, "lease", "fence", "x", "--expect-generation", "abc", "--json", "--db", url],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    message = assert_one_line(done.returncode, done.stdout, done.stderr, as_json=True)
    assert "--expect-generation" in message and "abc" in message


def test_help_is_still_help() -> None:
    code, out, _ = run(None, "lease", "fence", "--help")
    assert code == 0 and "Usage:" in out and "--expect-generation" in out


# --------------------------------------------------------------------------------------------
# read-only commands never create a ledger


READ_ONLY: list[list[str]] = [
    ["team", "status"], ["node", "list"], ["node", "show", "x"], ["db", "status"],
    ["history", "x"], ["lease", "list", "x"], ["effect", "list", "x"],
    ["effect", "show", "eff-000000000000000000000000"], ["denials", "x"], ["halts"],
    ["message", "list", "x"], ["task", "list"], ["report", "x"], ["brief", "show", "x"],
    ["actor", "list"], ["episode", "list", "x"], ["grant", "list", "x"],
    ["respawn", "status", "x"], ["workspace", "show", "."], ["capsule", "build", "x"],
]  # fmt: skip


@pytest.mark.parametrize("args", READ_ONLY, ids=" ".join)
def test_read_only_commands_refuse_a_missing_ledger_and_create_nothing(
    tmp_path: Path, args: list[str]
) -> None:
    typo = tmp_path / "typo" / "deeper" / "ledger.db"
    code, out, err = run(str(typo), *args)
    line = assert_one_line(code, out, err)
    assert str(typo) in line
    assert not (tmp_path / "typo").exists()
    code, out, err = run(str(typo), *args, "--json")
    assert str(typo) in assert_one_line(code, out, err, as_json=True)
    assert list(tmp_path.iterdir()) == []


def test_the_default_ledger_is_not_created_by_a_read_either(tmp_path: Path) -> None:
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "ONSTATION_DB": None}
    result = CliRunner().invoke(cli, ["node", "list"], env=env)
    assert "ledger.db" in assert_one_line(result.exit_code, result.stdout, result.stderr)
    assert not (tmp_path / "state").exists()


def test_write_commands_and_db_migrate_still_create_the_ledger(tmp_path: Path) -> None:
    first = tmp_path / "new" / "a" / "ledger.db"
    assert run(str(first), "node", "register", "x")[0] == 0
    assert first.is_file()
    second = tmp_path / "other" / "ledger.db"
    assert run(str(second), "db", "migrate")[0] == 0
    assert run(str(second), "node", "list")[0] == 0


def test_read_only_commands_refuse_a_missing_postgres_schema() -> None:
    if pg_available() is not None:
        pytest.skip(str(pg_available()))
    import psycopg

    base = os.environ.get("ONSTATION_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
    schema = f"t_typo_{os.getpid()}"
    url = f"{base}{'&' if '?' in base else '?'}schema={schema}"
    for args in (["node", "list"], ["db", "status"], ["history", "x"]):
        code, out, err = run(url, *args)
        assert schema in assert_one_line(code, out, err)
    with psycopg.connect(base) as conn:
        found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
        assert found.fetchone() is None


# --------------------------------------------------------------------------------------------
# a ledger where others may write is refused


@pytest.mark.parametrize("mode", [0o777, 0o1777], ids=["world-writable", "sticky"])
def test_a_ledger_in_a_world_writable_directory_is_refused(tmp_path: Path, mode: int) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    url = str(shared / "ledger.db")
    assert run(url, "node", "register", "x")[0] == 0
    before = dump(url)
    shared.chmod(mode)
    try:
        for args in (["node", "list"], ["node", "register", "y"], ["db", "status"]):
            code, out, err = run(url, *args)
            assert str(shared) in assert_one_line(code, out, err)
            code, out, err = run(url, *args, "--json")
            assert_one_line(code, out, err, as_json=True)
        fresh = shared / "fresh.db"
        code, out, err = run(str(fresh), "node", "register", "x")
        assert_one_line(code, out, err)
        assert not fresh.exists()
    finally:
        shared.chmod(0o700)
    assert dump(url) == before


def test_a_ledger_below_a_world_writable_non_sticky_directory_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    (shared / "mine").mkdir(parents=True, mode=0o700)
    shared.chmod(0o777)
    try:
        code, out, err = run(str(shared / "mine" / "ledger.db"), "node", "register", "x")
        assert str(shared) in assert_one_line(code, out, err)
        code, out, err = run(str(shared / "new" / "ledger.db"), "node", "register", "x")
        assert_one_line(code, out, err)
        assert sorted(p.name for p in shared.iterdir()) == ["mine"]
        assert list((shared / "mine").iterdir()) == []
    finally:
        shared.chmod(0o700)


# --------------------------------------------------------------------------------------------
# advice in errors works when followed


def _advised(err: str, outcome: str = "observed") -> list[str]:
    """The command an error message advises, with its placeholders filled in."""
    found = re.search(r"`onstation ([^`]+)`", err)
    assert found, err
    words = found.group(1).split()
    filled = {"observed|compensated": outcome, "NAME": "ops", "TEXT": "seen on the remote"}
    return [filled.get(w, w) for w in words]


def test_the_advice_for_an_effect_of_an_older_generation_works(tmp_path: Path) -> None:
    url = str(tmp_path / "ledger.db")
    assert run(url, "node", "register", "x")[0] == 0
    assert run(url, "lease", "acquire", "x")[0] == 0
    code, out, _ = run(url, "effect", "intend", "x", "--generation", "1", "--op", "git.push",
                       "--dest", "origin", "--json")  # fmt: skip
    pushed = json.loads(out)["effect_id"]
    assert run(url, "effect", "dispatch", pushed, "--generation", "1")[0] == 0
    code, out, _ = run(url, "effect", "intend", "x", "--generation", "1", "--op", "git.tag",
                       "--dest", "origin", "--json")  # fmt: skip
    tagged = json.loads(out)["effect_id"]
    assert run(url, "lease", "fence", "x", "--expect-generation", "1")[0] == 0
    assert run(url, "lease", "acquire", "x")[0] == 0

    # Unsettled under the fenced generation: the advice is to reconcile ...
    code, _, err = run(url, "effect", "dispatch", tagged, "--generation", "2")
    assert code == 5 and _advised(err) == ["effect", "reconcile", "x"]
    code, _, err = run(url, "effect", "commit", pushed, "--generation", "2")
    assert code == 5
    assert run(url, *_advised(err))[0] == 0
    # ... which makes it AMBIGUOUS. The advice was "intend it again", which was refused; now
    # it is the operator's resolve, complete with the --by and --why it requires.
    code, _, err = run(url, "effect", "commit", pushed, "--generation", "2")
    assert code == 5 and "intend it again" not in err
    code, out, _ = run(url, *_advised(err), "--json")
    assert code == 0 and json.loads(out)["state"] == "COMMITTED"
    code, _, err = run(url, "effect", "commit", pushed, "--generation", "2")
    assert code == 5 and "already COMMITTED" in err and "`" not in err

    # Undone by a compensating action: intending it again under the live generation works.
    code, _, err = run(url, "effect", "dispatch", tagged, "--generation", "2")
    assert code == 5
    assert run(url, *_advised(err, "compensated"))[0] == 0
    code, _, err = run(url, "effect", "dispatch", tagged, "--generation", "2")
    assert code == 5
    advised = _advised(err)
    assert advised == ["effect", "intend", "x", "--generation", "2"]
    code, out, _ = run(url, *advised, "--op", "git.tag", "--dest", "origin", "--json")
    assert code == 0 and json.loads(out)["effect_id"] == tagged
    assert run(url, "effect", "dispatch", tagged, "--generation", "2")[0] == 0


def test_the_advice_when_a_repeat_meets_an_ambiguous_effect_works(tmp_path: Path) -> None:
    url = str(tmp_path / "ledger.db")
    assert run(url, "node", "register", "x")[0] == 0
    assert run(url, "lease", "acquire", "x")[0] == 0
    push = ["effect", "intend", "x", "--op", "git.push", "--dest", "origin"]
    code, out, _ = run(url, *push, "--generation", "1", "--json")
    effect_id = json.loads(out)["effect_id"]
    assert run(url, "effect", "dispatch", effect_id, "--generation", "1")[0] == 0
    assert run(url, "lease", "fence", "x", "--expect-generation", "1")[0] == 0
    assert run(url, "effect", "reconcile", "x")[0] == 0
    assert run(url, "lease", "acquire", "x")[0] == 0
    repeat = [*push, "--generation", "2", "--slot", "s2", "--repeat-reason", "again"]
    code, _, err = run(url, *repeat)
    assert code == 5 and "AMBIGUOUS" in err
    assert run(url, *_advised(err))[0] == 0
    assert run(url, *repeat)[0] == 0


# --------------------------------------------------------------------------------------------
# the strict JSON loader itself


@pytest.mark.parametrize(
    "text",
    ["9" * 4301, "[" * 100_000, '{"a":' * 3000, "-" + "1" * 17, '["\\udfff"]', '{"\\ud800":0}'],
    ids=["digits", "deep-array", "deep-object", "long-int", "surrogate", "surrogate-key"],
)
def test_loads_strict_refuses_with_bad_input_only(text: str) -> None:
    with pytest.raises(BadInput) as caught:
        loads_strict(text, "--args")
    assert caught.value.message.startswith("--args: ")
    assert "recursion" not in caught.value.message


def test_loads_strict_still_reads_what_it_read() -> None:
    assert loads_strict('["[[[[", "\\"]]]", {"a": [[[1]]]}]') == ["[[[[", '"]]]', {"a": [[[1]]]}]
    nested = "[" * 64 + "1" + "]" * 64
    assert loads_strict(nested) is not None
    assert loads_strict(str(2**53 - 1)) == 2**53 - 1
    assert loads_strict('"caf\\u00e9 \\ud83d\\ude00"') == "café 😀"
