"""The hook fast path against the full path: the same payload sequences, the same ledger.

The fast path (:mod:`onstation.relief.hotpath`) answers the common call with the ledger's
driver and its named queries (:mod:`onstation.ledger.fastpath`; on PostgreSQL pipelined by
:mod:`onstation.relief.hotpath_pg`); everything else goes to the full path. Each sequence
below runs twice from identical starting points, once as installed and once with
``ONSTATION_HOOK_FAST_PATH=off``, and the two ledgers must hold the same rows (times, ids and
transcript cursors aside), and the hooks must answer the same: on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ONSTATION = str(Path(sys.executable).with_name("onstation"))

#: Runs one hook call (or the status line) as ``onstation hook`` (``onstation statusline``)
#: does, the whole process (its fast exit included), counting the calls the fast path answered.
DRIVER = """
import sys
import onstation.relief.fast_status as fast_status
import onstation.relief.hotpath as hotpath
def counting(real):
    def counted(*args, **kwargs):
        answer = real(*args, **kwargs)
        if answer is not hotpath.NOT_HANDLED:
            with open(sys.argv[1], "a") as fh:
                fh.write("fast\\n")
        return answer
    return counted
hotpath.try_fast = counting(hotpath.try_fast)
fast_status.try_status = counting(fast_status.try_status)
import os
if os.environ.get("ONSTATION_TEST_AHEAD"):
    # As a daemon's spare would: the ledger connected to and warmed (its fast path's
    # statements prepared) ahead of the call, which then takes that connection.
    from onstation.ledger import pg_ahead
    from onstation.relief import hotpath_pg
    assert pg_ahead.connect_ahead(os.environ["ONSTATION_DB"], os.environ, warm=hotpath_pg.warm)
from onstation.cli.hooks import hook_main, statusline_main
if sys.argv[2] == "statusline":
    sys.exit(statusline_main(sys.argv[3:], whole_process=True))
sys.exit(hook_main(sys.argv[2:], whole_process=True))
"""

#: Columns that hold times, row ids, cursors or process witnesses (a pid, an observation
#: time): they differ between any two runs.
VOLATILE = {"at", "host_witness", "created_at", "acquired_at", "renewed_at", "expires_at",
            "ended_at",
            "reported_at", "started_at", "admitted_at", "updated_at", "bound_at",
            "delivered_at", "relief_requested_at", "stop_blocked_at", "last_seen_at",
            "telemetry_cursor", "holder", "detail", "body", "seq", "lease_id",
            "message_id", "denial_id", "run_id", "changed_at"}  # fmt: skip


def _ledger_rows(db: str | Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table of the ledger ``db`` (an SQLite file or a PostgreSQL URL with
    its schema), its volatile columns left out."""
    db = str(db)
    if db.startswith("postgresql://"):
        import psycopg

        base, schema = re.fullmatch(r"(.*)[?&]schema=(\w+)", db).groups()  # type: ignore[union-attr]
        pg = psycopg.connect(base, autocommit=True)
        pg.execute(f'SET search_path TO "{schema}"')
        conn: Any = pg
        tables = [r[0] for r in pg.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
            "AND table_type = 'BASE TABLE' AND table_name != 'schema_version'", (schema,)
        )]  # fmt: skip
    else:
        conn = sqlite3.connect(db)
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name != 'schema_version'"
        )]  # fmt: skip
    try:
        out: dict[str, list[tuple[Any, ...]]] = {}
        for table in tables:
            cursor = conn.execute(f'SELECT * FROM "{table}"')
            names = [d[0] for d in cursor.description]
            keep = [i for i, n in enumerate(names) if n not in VOLATILE]
            out[table] = sorted((tuple(row[i] for i in keep) for row in cursor), key=repr)
        return out
    finally:
        conn.close()


def _event_details(db: str) -> list[tuple[Any, ...]]:
    """The kind, actor and detail of every ``hull.tier`` and ``lease.released`` event (the
    events the fast path writes itself), in the order they were written."""
    sql = ("SELECT kind, actor, detail FROM event WHERE kind IN ('hull.tier', 'lease.released') "
           "ORDER BY seq")  # fmt: skip
    if db.startswith("postgresql://"):
        import psycopg

        base, schema = re.fullmatch(r"(.*)[?&]schema=(\w+)", db).groups()  # type: ignore[union-attr]
        with psycopg.connect(base, autocommit=True) as pg:
            pg.execute(f'SET search_path TO "{schema}"')
            return [tuple(r) for r in pg.execute(sql)]
    conn = sqlite3.connect(db)
    try:
        return [tuple(r) for r in conn.execute(sql)]
    finally:
        conn.close()


@contextlib.contextmanager
def _two_ledgers(ledger_url: str, tmp_path: Path) -> Iterator[dict[bool, str | None]]:
    """A ledger for the fast world and one for the full world, on ``ledger_url``'s backend
    (None: each world's own SQLite file): ``ledger_url`` itself and a second fresh schema."""
    if not ledger_url.startswith("postgresql://"):
        yield {True: None, False: None}
        return
    from onstation.testing import scratch_postgres_url

    base = re.sub(r"[?&]schema=\w+$", "", ledger_url)
    with scratch_postgres_url(base) as second:
        yield {True: ledger_url, False: second}


class World:
    """A workspace bound to one identity, a transcript, and the installed hook commands."""

    def __init__(self, root: Path, fast: bool, db: str | None = None, ahead: bool = False) -> None:
        self.root = root
        root.mkdir()
        self.project = root / "app"
        self.project.mkdir()
        self.db = db or str(root / "ledger.db")
        self.env = {**os.environ, "ONSTATION_DB": self.db,
                    "XDG_STATE_HOME": str(root / "state"),
                    "ONSTATION_HOOK_FAST_PATH": "on" if fast else "off",
                    **({"ONSTATION_TEST_AHEAD": "1"} if ahead else {})}  # fmt: skip
        done = subprocess.run(
            [ONSTATION, "install", "claude-code", "--project", str(self.project), "--node",
             "exec-1"], capture_output=True, text=True, env=self.env, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        self.transcript = root / "s1.jsonl"
        self.transcript.touch()
        self.turn = 0
        self.counted = root / "fast-answers"

    def message(self, body: str) -> None:
        """An operator's message to the identity, waiting for its body's next hook."""
        done = subprocess.run(
            [ONSTATION, "message", "send", "--from", "operator", "--to", "exec-1", "--kind",
             "note", "--body", body], capture_output=True, text=True, env=self.env, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr

    def fast_answers(self) -> int:
        return len(self.counted.read_text().split()) if self.counted.exists() else 0

    def assistant_turn(self, context_tokens: int) -> None:
        self.turn += 1
        usage = {"input_tokens": 3, "cache_creation_input_tokens": 500,
                 "cache_read_input_tokens": context_tokens - 503, "output_tokens": 80}  # fmt: skip
        line = {"type": "assistant", "isSidechain": False, "sessionId": "s1",
                "uuid": f"u{self.turn}", "requestId": f"req_{self.turn}",
                "message": {"id": f"msg_{self.turn}", "role": "assistant",
                            "model": "claude-sonnet-4-5-20250929", "stop_reason": "tool_use",
                            "content": [{"type": "text", "text": "working"}],
                            "usage": usage}}  # fmt: skip
        with self.transcript.open("a") as fh:
            fh.write(json.dumps(line) + "\n")

    def compact_boundary(self, post_tokens: int | None) -> None:
        """The transcript's compaction marker (harness-formats.md §3.2), postTokens if given."""
        meta: dict[str, Any] = {"trigger": "auto", "preTokens": 150_000}
        if post_tokens is not None:
            meta["postTokens"] = post_tokens
        line = {"type": "system", "subtype": "compact_boundary", "parentUuid": None,
                "isSidechain": False, "sessionId": "s1", "uuid": f"cb{self.turn}",
                "content": "Conversation compacted", "level": "info",
                "compactMetadata": meta}  # fmt: skip
        with self.transcript.open("a") as fh:
            fh.write(json.dumps(line) + "\n")

    def fire(self, event: str, **fields: Any) -> tuple[Any, int]:
        if event == "statusline":
            return self.status_line(**fields)
        payload = {"session_id": "s1", "transcript_path": str(self.transcript),
                   "cwd": str(self.project), "hook_event_name": event,
                   "permission_mode": "default", **fields}  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-c", DRIVER, str(self.counted), "claude-code", event],
            input=json.dumps(payload),
            capture_output=True, text=True, env=self.env, cwd=self.project, timeout=60,
            check=False,
        )  # fmt: skip
        out = json.loads(done.stdout) if done.stdout.strip() else None
        return out, done.returncode

    def status_line(self, **window: Any) -> tuple[Any, int]:
        """The status line's one line (the project's path taken out), and its exit code."""
        payload = {"session_id": "s1", "transcript_path": str(self.transcript),
                   "cwd": str(self.project), "version": "2.1.140",
                   "model": {"id": "claude-sonnet-4-5", "display_name": "Sonnet 4.5"},
                   "context_window": window}  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-c", DRIVER, str(self.counted), "statusline"],
            input=json.dumps(payload), capture_output=True, text=True, env=self.env,
            cwd=self.project, timeout=60, check=False,
        )  # fmt: skip
        return done.stdout.replace(str(self.root), "ROOT"), done.returncode


def _status(percent: float | None, size: int = 200_000) -> dict[str, Any]:
    if percent is None:  # right after /compact: no current usage
        return {"context_window_size": size, "current_usage": None}
    return {"context_window_size": size, "used_percentage": percent}


def _read(i: int) -> dict[str, Any]:
    return {"tool_name": "Read", "tool_use_id": f"t{i}",
            "tool_input": {"file_path": "README.md"}}  # fmt: skip


#: Each step: ("turn", tokens) appends an assistant turn; ("boundary", postTokens) appends a
#: compaction boundary; (event, fields) fires a hook.
SEQUENCES: dict[str, list[tuple[str, Any]]] = {
    "quiet reads at green": [
        ("SessionStart", {"source": "startup"}), ("turn", 20_000),
        ("PreToolUse", _read(1)), ("PostToolUse", {**_read(1), "tool_response": {}}),
        ("turn", 24_000), ("UserPromptSubmit", {"prompt": "go on"}),
        ("PreToolUse", _read(2)), ("PostToolUse", {**_read(2), "tool_response": {}}),
        ("Stop", {"stop_hook_active": False}), ("UserPromptSubmit", {"prompt": "more"}),
        ("Stop", {"stop_hook_active": False}),
    ],
    "fill rising through the tiers": [
        ("SessionStart", {"source": "startup"}), ("turn", 30_000),
        ("PostToolUse", {**_read(1), "tool_response": {}}), ("turn", 55_000),
        ("PostToolUse", {**_read(2), "tool_response": {}}), ("turn", 56_000),
        ("PostToolUse", {**_read(3), "tool_response": {}}), ("turn", 70_000),
        ("UserPromptSubmit", {"prompt": "continue"}), ("turn", 71_000),
        ("PostToolUse", {**_read(4), "tool_response": {}}), ("turn", 80_000),
        ("PostToolUse", {**_read(5), "tool_response": {}}),
    ],
    "an inert Bash and a git status": [
        ("SessionStart", {"source": "startup"}), ("turn", 10_000),
        ("PreToolUse", {"tool_name": "Bash", "tool_use_id": "b1",
                        "tool_input": {"command": "ls -la"}}),
        ("PostToolUse", {"tool_name": "Bash", "tool_use_id": "b1",
                         "tool_input": {"command": "ls -la"}, "tool_response": {}}),
        ("PreToolUse", {"tool_name": "Bash", "tool_use_id": "b2",
                        "tool_input": {"command": "git status"}}),
        ("turn", 12_000),
        ("PostToolUse", {"tool_name": "Bash", "tool_use_id": "b2",
                         "tool_input": {"command": "git status"}, "tool_response": {}}),
    ],
    "a compaction, then a climb back to Red": [
        ("SessionStart", {"source": "startup"}), ("turn", 30_000),
        ("PostToolUse", {**_read(1), "tool_response": {}}), ("turn", 70_000),
        ("PostToolUse", {**_read(2), "tool_response": {}}), ("turn", 71_000),
        ("PostToolUse", {**_read(3), "tool_response": {}}),
        ("PreCompact", {"trigger": "auto", "custom_instructions": None}),
        ("boundary", 20_000),
        ("PostToolUse", {**_read(4), "tool_response": {}}),
        ("PostToolUse", {**_read(5), "tool_response": {}}), ("turn", 30_000),
        ("PostToolUse", {**_read(6), "tool_response": {}}), ("turn", 31_000),
        ("PostToolUse", {**_read(7), "tool_response": {}}), ("boundary", None),
        ("UserPromptSubmit", {"prompt": "go on"}), ("turn", 70_000),
        ("PostToolUse", {**_read(8), "tool_response": {}}), ("turn", 72_000),
        ("PostToolUse", {**_read(9), "tool_response": {}}),
    ],
    "status lines through the tiers": [
        ("SessionStart", {"source": "startup"}), ("turn", 20_000),
        ("statusline", _status(10.0)), ("statusline", _status(11.5)),
        ("PostToolUse", {**_read(1), "tool_response": {}}), ("statusline", _status(12.0)),
        ("statusline", _status(12.0, size=1_000_000)), ("statusline", _status(2.5, 1_000_000)),
        ("statusline", {"used_percentage": 3.0}), ("statusline", _status(None, 1_000_000)),
        ("statusline", _status(4.0, 1_000_000)), ("statusline", _status(27.0, 1_000_000)),
        ("statusline", _status(28.0, 1_000_000)), ("UserPromptSubmit", {"prompt": "go on"}),
        ("statusline", _status(34.0, 1_000_000)), ("statusline", _status(35.5, 1_000_000)),
        ("statusline", _status(135.0, 1_000_000)), ("statusline", _status(36.0, 1_000_000)),
        ("Stop", {"stop_hook_active": False}), ("statusline", _status(36.5, 1_000_000)),
        ("SessionEnd", {"reason": "other"}), ("statusline", _status(37.0, 1_000_000)),
    ],
    # A /clear or /resume is not an end (the lease stays); a clean end releases the lease,
    # also with a message waiting (a SessionEnd delivers none); a second end, a prompt and a
    # start after it find no live lease.
    "session ends": [
        ("SessionStart", {"source": "startup"}), ("turn", 20_000),
        ("PostToolUse", {**_read(1), "tool_response": {}}),
        ("SessionEnd", {"reason": "clear"}), ("SessionEnd", {"reason": "resume"}),
        ("UserPromptSubmit", {"prompt": "go on"}), ("message", "wrap up"),
        ("SessionEnd", {"reason": "prompt_input_exit"}), ("SessionEnd", {"reason": "other"}),
        ("UserPromptSubmit", {"prompt": "still here?"}), ("SessionStart", {"source": "startup"}),
        ("Stop", {"stop_hook_active": False}), ("SessionEnd", {}),
    ],
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(SEQUENCES))
def test_fast_and_full_paths_leave_the_same_ledger(
    tmp_path: Path, name: str, ledger_url: str
) -> None:
    with _two_ledgers(ledger_url, tmp_path) as dbs:
        _same_ledger(tmp_path, name, dbs)


@pytest.mark.parametrize("name", sorted(SEQUENCES))
def test_the_fast_path_on_prepared_statements_leaves_the_same_ledger(
    tmp_path: Path, name: str, pg_url: str
) -> None:
    """On PostgreSQL, each fast call on a connection made and warmed ahead, as a daemon's
    spare makes it: its statements EXECUTEd, prepared by name with their parameters' types
    the server's to infer (``relief.hotpath_pg.warm``), leave the rows the full path does.
    So does each session start there, its admission EXECUTEd on its own prepared
    statements, against the full path's on a connection of its own."""
    with _two_ledgers(pg_url, tmp_path) as dbs:
        _same_ledger(tmp_path, name, dbs, ahead=True)


def _same_ledger(
    tmp_path: Path, name: str, dbs: dict[bool, str | None], ahead: bool = False
) -> None:
    answers: dict[bool, list[tuple[Any, int]]] = {}
    ledgers: dict[bool, dict[str, list[tuple[Any, ...]]]] = {}
    for fast in (True, False):
        world = World(tmp_path / ("fast" if fast else "full"), fast, dbs[fast], ahead and fast)
        seen: list[tuple[Any, int]] = []
        for step, fields in SEQUENCES[name]:
            if step == "turn":
                world.assistant_turn(fields)
            elif step == "boundary":
                world.compact_boundary(fields)
            elif step == "message":
                world.message(fields)
            else:
                seen.append(world.fire(step, **fields))
        answers[fast] = seen
        ledgers[fast] = _ledger_rows(world.db)
        # An event's detail is left out above (most hold times or ids); a tier's and a
        # release's are compared: the fast path writes those itself.
        ledgers[fast]["event details"] = _event_details(world.db)
        # The comparison means something only if the fast path answered some of the calls.
        assert (world.fast_answers() > 0) is fast, world.fast_answers()
    assert answers[True] == answers[False]

    # Paths differ by directory; compare what the rows say, with each world's root removed.
    def strip(rows: dict[str, list[tuple[Any, ...]]], root: Path) -> str:
        return json.dumps(rows, sort_keys=True, default=str).replace(str(root), "ROOT")

    assert strip(ledgers[True], tmp_path / "fast") == strip(ledgers[False], tmp_path / "full")


def test_a_configuration_the_full_path_refuses_is_not_answered_fast(tmp_path: Path) -> None:
    """A workspace configuration with an unknown key: the full path fails open and says why
    (hook and status line alike); the fast path used to answer such a call quietly."""
    seen: dict[bool, list[tuple[Any, int]]] = {}
    for fast in (True, False):
        world = World(tmp_path / ("fast" if fast else "full"), fast)
        seen[fast] = [world.fire("SessionStart", source="startup")]
        world.assistant_turn(20_000)
        seen[fast] += [world.fire("statusline", **_status(10.0)),
                       world.fire("statusline", **_status(10.5))]  # fmt: skip
        config = world.project / ".onstation" / "config.json"
        config.write_text(json.dumps({**json.loads(config.read_text()), "colour": "blue"}))
        seen[fast] += [world.fire("Stop", stop_hook_active=False),
                       world.fire("statusline", **_status(11.0)),
                       world.fire("PostToolUse", **_read(1), tool_response={})]  # fmt: skip
        # The calls before the damage were the fast path's to answer; none after it.
        assert world.fast_answers() == (1 if fast else 0)
    said = {fast: json.dumps(seen[fast]).replace(str(tmp_path / ("fast" if fast else "full")),
                                                 "ROOT") for fast in seen}  # fmt: skip
    assert said[True] == said[False]
    assert "unknown key" in json.dumps(seen[True][3])


def test_the_fast_path_knows_every_configuration_key() -> None:
    from onstation.harness import config
    from onstation.relief import hotpath

    assert set(hotpath.CONFIG_KEYS) == config._KEYS
    assert hotpath.HOOK_FAIL_MODES == config.HOOK_FAIL_MODES


def test_a_fast_stop_and_pretooluse_import_neither_json_re_nor_threading(tmp_path: Path) -> None:
    """What the fast path is for: a quiet Stop, an inert PreToolUse or a prompt (which reads
    the transcript's model id) loads none of the modules that cost the most start-up time
    (json pulls in re and enum; sqlite3 datetime)."""
    world = World(tmp_path / "w", fast=True)
    world.fire("SessionStart", source="startup")
    world.assistant_turn(20_000)
    world.fire("PostToolUse", **_read(1), tool_response={})  # the first reading: full path
    probe = (
        "import sys\n"
        "from onstation.cli.hooks import hook_main\n"
        "code = hook_main(sys.argv[1:], whole_process=False)\n"
        "heavy = ('json', 're', 'enum', 'threading', 'sqlite3', 'datetime', 'typing')\n"
        "sys.stderr.write('LOADED ' + ' '.join(m for m in heavy if m in sys.modules) + '\\n')\n"
    )
    # A prompt reads the transcript and takes its tier by name (core.hull.tier_value), so
    # it loads no enum either.
    calls = (("Stop", {"stop_hook_active": False}, ""), ("PreToolUse", _read(2), ""),
             ("UserPromptSubmit", {"prompt": "go on"}, ""))  # fmt: skip
    for event, fields, allowed in calls:
        payload = {"session_id": "s1", "transcript_path": str(world.transcript),
                   "cwd": str(world.project), "hook_event_name": event, **fields}  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-c", probe, "claude-code", event], input=json.dumps(payload),
            capture_output=True, text=True, env=world.env, cwd=world.project, check=True,
        )  # fmt: skip
        loaded = [line for line in done.stderr.splitlines() if line.startswith("LOADED")]
        assert loaded == [f"LOADED {allowed}"], (event, done.stderr)


def test_a_workspace_no_longer_bound_gets_the_full_paths_answer(
    tmp_path: Path, ledger_url: str
) -> None:
    """The workspace's binding is removed and its configuration names no node: the full path
    takes the workspace as unmanaged (no answer, nothing written); the fast path used to go
    on answering, and writing, for the session it had admitted there."""
    with _two_ledgers(ledger_url, tmp_path) as dbs:
        _unbound(tmp_path, dbs)


def _unbound(tmp_path: Path, dbs: dict[bool, str | None]) -> None:
    from onstation.ledger import Ledger
    from onstation.ledger.bodies import HarnessLedger

    answers: dict[bool, list[tuple[Any, int]]] = {}
    ledgers: dict[bool, str] = {}
    for fast in (True, False):
        world = World(tmp_path / ("fast" if fast else "full"), fast, dbs[fast])
        seen = [world.fire("SessionStart", source="startup")]
        world.assistant_turn(20_000)
        seen.append(world.fire("PostToolUse", **_read(1), tool_response={}))
        answered_before = world.fast_answers()  # a first reading may be the fast path's
        with Ledger.open(world.db) as ledger:
            assert HarnessLedger(ledger).unbind_workspace(str(world.project), by="test")
        config = world.project / ".onstation" / "config.json"
        kept = {k: v for k, v in json.loads(config.read_text()).items() if k != "node"}
        config.write_text(json.dumps(kept))
        world.assistant_turn(21_000)
        seen += [world.fire("PostToolUse", **_read(2), tool_response={}),
                 world.fire("UserPromptSubmit", prompt="go on"),
                 world.fire("Stop", stop_hook_active=False)]  # fmt: skip
        answers[fast] = seen
        ledgers[fast] = json.dumps(_ledger_rows(world.db), sort_keys=True, default=str).replace(
            str(world.root), "ROOT"
        )
        assert world.fast_answers() == answered_before  # none once unbound
    assert answers[True] == answers[False]
    assert ledgers[True] == ledgers[False]
