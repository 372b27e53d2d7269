"""Every file the command line reads has a size limit, checked before reading (issue 10).

Before the fix these commands read their file whole: given /dev/zero they grew until the
machine ran out of memory (24 GB seen), and given a FIFO they blocked in open() forever. Now
each refuses a device, a FIFO or an oversized file at once: exit 2, one line naming the
option or file and the limit, and the ledger and the workspace unchanged.

A regression must fail fast instead of eating the machine: the /dev/zero and FIFO cases run
in a child process with its address space capped and a timeout.
"""

from __future__ import annotations

import json
import os
import resource
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from onstation.cli.main import cli
from onstation.core.errors import BadInput
from onstation.harness.files import (
    MAX_DOCUMENT_BYTES,
    MAX_KEY_BYTES,
    MAX_SMALL_JSON_BYTES,
    read_bounded,
)

ONSTATION = str(Path(sys.executable).with_name("onstation"))
MEMORY_CAP = 1 << 30  # far above what onstation needs; far below what /dev/zero would take
TIMEOUT = 30

#: No waiting: were the file read after all, the relief would end at once, not in minutes.
RELIEVE = ["relieve", "x", "--harness", "fake", "--emergency", "--brief-wait", "0",
           "--challenge-wait", "0", "--shutdown-wait", "0", "--exchange-wait", "0"]  # fmt: skip

#: (id, argv with {f} for the file, the limit, the name the error gives the input)
FILE_INPUTS: list[tuple[str, list[str], int, str]] = [
    ("capsule seal", ["capsule", "seal", "{f}"], MAX_DOCUMENT_BYTES, "capsule"),
    ("capsule verify", ["capsule", "verify", "{f}"], MAX_DOCUMENT_BYTES, "capsule"),
    ("plan validate", ["plan", "validate", "{f}"], MAX_DOCUMENT_BYTES, "plan"),
    ("resurrect", ["resurrect", "{f}"], MAX_DOCUMENT_BYTES, "incident"),
    ("capsule build --facts", ["capsule", "build", "x", "--facts", "{f}"],
     MAX_SMALL_JSON_BYTES, "--facts"),
    ("relieve --facts", [*RELIEVE, "--facts", "{f}"], MAX_SMALL_JSON_BYTES, "--facts"),
    ("relieve --capacity", [*RELIEVE, "--capacity", "{f}"], MAX_SMALL_JSON_BYTES, "--capacity"),
    ("challenge answer --echo-file",
     ["challenge", "answer", "x", "--generation", "1", "--echo-file", "{f}"],
     MAX_SMALL_JSON_BYTES, "--echo-file"),
    ("supervise --team", ["supervise", "--once", "--team", "{f}"], MAX_SMALL_JSON_BYTES, "--team"),
    ("brief write --from", ["brief", "write", "x", "--generation", "1", "--from", "{f}"],
     MAX_SMALL_JSON_BYTES, "--from"),
    ("manifest write --from",
     ["manifest", "write", "x", "--l3", "auth", "--pun", "p", "--generation", "1", "--from", "{f}"],
     MAX_SMALL_JSON_BYTES, "--from"),
    ("keys import-public", ["keys", "import-public", "{f}"], MAX_KEY_BYTES, "public key"),
]  # fmt: skip


def _limit_text(limit: int) -> str:
    return f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit >> 10} KiB"


@pytest.fixture
def team(tmp_path: Path) -> dict[str, Any]:
    """A ledger where x has a live body at generation 1, in a bound workspace."""
    url = str(tmp_path / "ledger.db")
    env = {"ONSTATION_DB": url, "ONSTATION_KEYS_DIR": str(tmp_path / "keys")}
    workspace = tmp_path / "ws"
    workspace.mkdir()
    runner = CliRunner()
    for args in (["node", "register", "x"], ["lease", "acquire", "x"],
                 ["workspace", "bind", str(workspace), "x"]):  # fmt: skip
        assert runner.invoke(cli, args, env=env).exit_code == 0
    return {"url": url, "env": env, "workspace": workspace, "root": tmp_path}


def snapshot(state: dict[str, Any]) -> tuple[Any, ...]:
    """The ledger's rows and the files under the test directory (but the ledger's own)."""
    conn = sqlite3.connect(state["url"])
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        rows = {t: sorted(conn.execute(f'SELECT * FROM "{t}"').fetchall(), key=repr)
                for t in tables}  # fmt: skip
    finally:
        conn.close()
    root: Path = state["root"]
    listing = sorted(
        (str(p.relative_to(root)), p.stat().st_size if p.is_file() else -1)
        for p in root.rglob("*")
        if ".db" not in p.name and "big" not in p.name
    )
    return rows, listing


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def run_child(state: dict[str, Any], args: list[str]) -> subprocess.CompletedProcess[str]:
    """Run onstation in a child that cannot take the machine down with it."""
    return subprocess.run(
        [ONSTATION, *args], capture_output=True, text=True, timeout=TIMEOUT, check=False,
        env={**os.environ, **state["env"]}, cwd=state["workspace"], preexec_fn=_cap_memory,
    )  # fmt: skip


def assert_refused(code: int, out: str, err: str, field: str, limit: int, *, as_json: bool) -> None:
    assert code == 2, (code, out, err)
    if as_json:
        assert err.strip() == "", err
        [line] = out.splitlines()
        data = json.loads(line)
        assert data["error"] == "bad_input"
        message = data["message"]
    else:
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1, err
        message = lines[0]
        assert message.startswith("onstation: bad input: "), message
    assert field in message and _limit_text(limit) in message, message


@pytest.mark.parametrize("source", ["dev-zero", "fifo"])
@pytest.mark.parametrize(("argv", "limit", "field"), [c[1:] for c in FILE_INPUTS],
                         ids=[c[0] for c in FILE_INPUTS])  # fmt: skip
def test_devices_and_fifos_are_refused_before_reading(
    team: dict[str, Any], argv: list[str], limit: int, field: str, source: str
) -> None:
    if source == "fifo":
        path = team["root"] / "pipe"
        os.mkfifo(path)
    else:
        path = Path("/dev/zero")
    before = snapshot(team)
    as_json = source == "fifo"  # each case once with --json, once without
    args = [a.replace("{f}", str(path)) for a in argv] + (["--json"] if as_json else [])
    try:
        done = run_child(team, args)
    except subprocess.TimeoutExpired:
        pytest.fail(f"onstation {' '.join(args)} blocked on {path}")
    assert_refused(done.returncode, done.stdout, done.stderr, field, limit, as_json=as_json)
    assert snapshot(team) == before


@pytest.mark.parametrize(("argv", "limit", "field"), [c[1:] for c in FILE_INPUTS],
                         ids=[c[0] for c in FILE_INPUTS])  # fmt: skip
def test_a_file_over_the_limit_is_refused(
    team: dict[str, Any], argv: list[str], limit: int, field: str
) -> None:
    big = team["root"] / "big.json"
    # Valid JSON all the way: the size alone is what is refused, not the content.
    big.write_text('{"pad": "' + "x" * (limit - 10) + '"}')
    assert big.stat().st_size == limit + 1
    before = snapshot(team)
    args = [a.replace("{f}", str(big)) for a in argv]
    result = CliRunner().invoke(cli, args, env=team["env"], catch_exceptions=False)
    assert_refused(result.exit_code, result.stdout, result.stderr, field, limit, as_json=False)
    assert snapshot(team) == before


# --------------------------------------------------------------------------------------------
# the shared bounded reader


def test_read_bounded_reads_up_to_the_limit_and_not_one_byte_more(tmp_path: Path) -> None:
    exact = tmp_path / "exact"
    exact.write_bytes(b"a" * 1024)
    assert read_bounded(exact, 1024, "--x") == b"a" * 1024
    with pytest.raises(BadInput, match=r"^--x: .*exact: larger than the limit \(1023 bytes\)$"):
        read_bounded(exact, 1023, "--x")
    exact.write_bytes(b"a" * 2048)
    with pytest.raises(BadInput, match=r"larger than the limit \(1 KiB\)$"):
        read_bounded(exact, 1024, "--x")


@pytest.mark.parametrize("kind", ["missing", "directory", "symlink-to-device", "nul", "socket"])
def test_read_bounded_refuses_what_is_not_a_regular_file(tmp_path: Path, kind: str) -> None:
    path = tmp_path / kind
    if kind == "directory":
        path.mkdir()
    elif kind == "symlink-to-device":
        path.symlink_to("/dev/zero")
    elif kind == "socket":
        import socket

        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        sock.close()
    target = f"{path}\x00" if kind == "nul" else path
    with pytest.raises(BadInput) as caught:
        read_bounded(target, 1 << 20, "--facts")
    assert caught.value.message.startswith("--facts: ")
    assert "\n" not in caught.value.message


def test_a_key_is_not_read_through_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text("{}")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    with pytest.raises(BadInput):
        read_bounded(link, MAX_KEY_BYTES, "public key", follow_symlinks=False)
    assert read_bounded(link, MAX_KEY_BYTES, "--facts") == b"{}"


# --------------------------------------------------------------------------------------------
# files onstation finds for itself: the key store, the workspace configuration, install records


def test_a_fifo_in_the_key_store_is_refused_not_waited_on(team: dict[str, Any]) -> None:
    """Before the fix, ``keys list`` opened a planted FIFO and blocked in open() forever."""
    keys = Path(team["env"]["ONSTATION_KEYS_DIR"])
    keys.mkdir(mode=0o700)
    os.mkfifo(keys / ("ed25519-" + "0" * 16 + ".pub"))
    try:
        done = run_child(team, ["keys", "list"])
    except subprocess.TimeoutExpired:
        pytest.fail("keys list blocked on a FIFO in the key store")
    assert done.returncode == 2, (done.stdout, done.stderr)
    [line] = done.stderr.strip().splitlines()
    assert "key store" in line and "not a regular file" in line, line


def test_a_key_with_bad_hex_is_one_clear_error(team: dict[str, Any]) -> None:
    keys = Path(team["env"]["ONSTATION_KEYS_DIR"])
    keys.mkdir(mode=0o700)
    (keys / ("ed25519-" + "0" * 16 + ".pub")).write_text('{"publicKey": "zz"}')
    done = run_child(team, ["keys", "list"])
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "does not match its key id" in line, line


def test_an_oversized_workspace_configuration_is_refused(team: dict[str, Any]) -> None:
    """Before the fix, the configuration was read whole, whatever its size."""
    project = team["root"] / "project"
    (project / ".onstation").mkdir(parents=True)
    config = project / ".onstation" / "config.json"
    config.write_text('{"node": "x", "pad": "' + "x" * MAX_SMALL_JSON_BYTES + '"}')
    before = snapshot(team)
    result = CliRunner().invoke(
        cli, ["install", "claude-code", "--project", str(project), "--node", "newcomer"],
        env=team["env"],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "workspace configuration" in result.stderr and "1 MiB" in result.stderr
    assert snapshot(team) == before  # no node registered, no settings written
    # A hook in that workspace fails open with one line instead of reading it whole.
    payload = json.dumps({"session_id": "s1", "cwd": str(project),
                          "hook_event_name": "PostToolUse", "tool_name": "Read"})  # fmt: skip
    done = subprocess.run(
        [ONSTATION, "hook", "claude-code", "PostToolUse"], input=payload, capture_output=True,
        text=True, timeout=TIMEOUT, check=False, env={**os.environ, **team["env"]},
        cwd=project, preexec_fn=_cap_memory,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "workspace configuration" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("damage", ["not-json", "wrong-shape", "oversized-settings", "fresh"])
def test_install_and_uninstall_refuse_damaged_files(tmp_path: Path, damage: str) -> None:
    project = tmp_path / "project"
    project.mkdir()
    runner = CliRunner()
    env = {"ONSTATION_DB": str(tmp_path / "ledger.db")}
    assert runner.invoke(cli, ["install", "claude-code", "--project", str(project)],
                         env=env).exit_code == 0  # fmt: skip
    settings = project / ".claude" / "settings.local.json"  # what a project install edits
    record = project / ".onstation" / "install-claude-code.json"
    if damage == "not-json":
        record.write_text("{not json")
    elif damage == "wrong-shape":
        record.write_text('{"added_hooks": [], "skills": "all"}')
    elif damage == "fresh":  # install into a project whose own settings are oversized
        project = tmp_path / "fresh"
        settings = project / ".claude" / "settings.json"
        settings.parent.mkdir(parents=True)
    if damage in ("oversized-settings", "fresh"):
        settings.write_text('{"pad": "' + "x" * MAX_DOCUMENT_BYTES + '"}')
    files = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    ledger = (tmp_path / "ledger.db").read_bytes()
    command = "install" if damage == "fresh" else "uninstall"
    result = runner.invoke(cli, [command, "claude-code", "--project", str(project)], env=env)
    assert result.exit_code == 2, result.output
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("onstation: bad input: "), line
    assert {p: p.read_bytes() for p in project.rglob("*") if p.is_file()} == files
    assert (tmp_path / "ledger.db").read_bytes() == ledger


def test_install_writes_nothing_when_a_skill_is_in_the_way(tmp_path: Path) -> None:
    """Before the fix the first skill was written before the second one's conflict."""
    project = tmp_path / "project"
    blocker = project / ".claude" / "skills" / "onstation-coord-respawn" / "SKILL.md"
    blocker.parent.mkdir(parents=True)
    blocker.write_text("the user's own skill")
    result = CliRunner().invoke(
        cli, ["install", "claude-code", "--project", str(project)],
        env={"ONSTATION_DB": str(tmp_path / "ledger.db")},
    )  # fmt: skip
    assert result.exit_code != 0
    assert sorted(p.relative_to(project).as_posix() for p in project.rglob("*") if p.is_file()) == [
        ".claude/skills/onstation-coord-respawn/SKILL.md"
    ]
    assert not (tmp_path / "ledger.db").exists()


def test_the_fast_path_reads_the_configuration_within_the_same_limit(tmp_path: Path) -> None:
    """Before the fix the hook fast path read the workspace configuration whole."""
    from onstation.relief import hotpath

    assert hotpath.MAX_CONFIG_BYTES == MAX_SMALL_JSON_BYTES
    (tmp_path / ".onstation").mkdir()
    config = tmp_path / ".onstation" / "config.json"
    config.write_text('{"node": "x"}')
    assert hotpath.raw_config(str(tmp_path)) == {"node": "x"}
    config.write_text('{"node": "x", "pad": "' + "x" * MAX_SMALL_JSON_BYTES + '"}')
    assert hotpath.raw_config(str(tmp_path)) is None  # unreadable here: the full path says why
