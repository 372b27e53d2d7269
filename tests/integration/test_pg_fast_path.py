"""The hook fast path on a PostgreSQL ledger (``relief.hotpath_pg``), against a real server:
it answers on the connection a daemon's spare made and warmed ahead, the warm-up leaves
nothing behind, a connection the server ended sends the call to the full path with nothing
lost, and a call racing a fence waits for the node's row and then writes nothing for the
stale body. The same answers and rows as the full path: tests/integration/
test_fast_path_differential.py, on both backends."""

from __future__ import annotations

import io
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest
from claude_turns import assistant_turn
from git_work import sh
from libpq_trace import tracing, waits

from onstation.cli.hooks import hook_main, statusline_main
from onstation.harness.adapters import HookCall
from onstation.harness.config import WorkspaceConfig
from onstation.ledger import Ledger, open_backend, pg_ahead
from onstation.ledger.bodies import HarnessLedger
from onstation.ledger.pg_backend import PostgresBackend
from onstation.relief import hotpath, hotpath_pg
from onstation.relief.hooks import HookRunner

NODE = "exec-1"


#: Connections made ahead in a test are closed and forgotten after it (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("no_connection_left_ahead")


def _admitted(pg_url: str, cwd: Path) -> None:
    """``NODE``'s first body, session ``sess-1``, admitted in ``cwd`` (configured there)."""
    (cwd / ".onstation").mkdir()
    (cwd / ".onstation" / "config.json").write_text(f'{{"node": "{NODE}", "db": "{pg_url}"}}')
    with Ledger.open(pg_url) as ledger:
        ledger.register_node(NODE)
        HookRunner(ledger, "claude-code", WorkspaceConfig(node=NODE)).handle(
            _call(cwd, "SessionStart", source="startup")
        )
        assert ledger.get_node(NODE).generation == 1


def _call(cwd: Path, event: str, **fields: Any) -> HookCall:
    """A call as Claude Code sends it, without a transcript (so a PostToolUse journals its
    outcome and reads no reading)."""
    return HookCall.from_payload("claude-code", event, {
        "session_id": "sess-1", "cwd": str(cwd), "hook_event_name": event,
        "permission_mode": "default", **fields,
    })  # fmt: skip


def _after_read(cwd: Path, n: int) -> HookCall:
    return _call(cwd, "PostToolUse", tool_name="Read", tool_input={"file_path": "README.md"},
                 tool_use_id=f"toolu_{n}", tool_response={})  # fmt: skip


def _outcomes(pg_url: str) -> list[str]:
    """The tool calls journaled, by their tool_use_id."""
    with Ledger.open(pg_url) as ledger:
        journal = HarnessLedger(ledger).tool_outcomes(NODE, generation=1)
        return [o.tool_use_id or "" for o in journal]


def _admin(pg_url: str) -> psycopg.Connection[Any]:
    base, schema = pg_url.split("?schema=")
    conn = psycopg.connect(base, autocommit=True)
    conn.execute(f'SET search_path TO "{schema}"')
    return conn


def _racing(pg_url: str, call: HookCall, waiting: str) -> tuple[list[object], threading.Thread]:
    """``try_fast(call)`` started in a thread, once it waits on a row lock in a statement
    like ``waiting`` (polled, no timing): its answer (a list it appends to) and the thread."""
    answered: list[object] = []
    racer = threading.Thread(target=lambda: answered.append(hotpath.try_fast(call, None)))
    racer.start()
    with _admin(pg_url) as watch:
        while not watch.execute(
            "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s",
            (waiting,),
        ).fetchone():
            assert racer.is_alive() and not answered
    return answered, racer


def test_a_call_answers_on_the_connection_made_and_warmed_ahead(
    pg_url: str, tmp_path: Path
) -> None:
    _admitted(pg_url, tmp_path)
    assert pg_ahead.connect_ahead(pg_url, dict(os.environ), warm=hotpath_pg.warm)
    ahead = next(iter(pg_ahead._AHEAD.values()))[0]
    pid = int(ahead._conn.info.backend_pid)
    # The warm-up read, and left nothing open: no transaction, no lock.
    assert ahead._conn.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
    with _admin(pg_url) as admin:
        locks = admin.execute("SELECT count(*) FROM pg_locks WHERE pid = %s AND locktype != "
                              "'virtualxid'", (pid,)).fetchone()  # fmt: skip
        assert locks == (0,)
    kept: list[Any] = []
    assert hotpath.try_fast(_after_read(tmp_path, 1), None, keep=kept) is None  # answered
    assert pg_ahead.took_ahead() and kept == [ahead]
    assert _outcomes(pg_url) == ["toolu_1"]
    ahead.close()


def test_a_connection_the_server_ended_sends_the_call_to_the_full_path(
    pg_url: str, tmp_path: Path
) -> None:
    """Taken unchecked (the fast path's first statement is the check): the statement fails,
    the call is the full path's, and the dead connection is closed, never handed on."""
    _admitted(pg_url, tmp_path)
    assert pg_ahead.connect_ahead(pg_url, dict(os.environ), warm=hotpath_pg.warm)
    ahead = next(iter(pg_ahead._AHEAD.values()))[0]
    with _admin(pg_url) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (int(ahead._conn.info.backend_pid),))
    _sent_to_the_full_path(pg_url, tmp_path, ahead)


def _sent_to_the_full_path(pg_url: str, tmp_path: Path, ahead: PostgresBackend) -> None:
    """A PostToolUse the fast path fails on ``ahead``: nothing written, the connection
    closed and not handed on; the full path then answers it."""
    kept: list[Any] = []
    assert hotpath.try_fast(_after_read(tmp_path, 1), None, keep=kept) is hotpath.NOT_HANDLED
    assert kept == [] and ahead._conn.closed
    assert _outcomes(pg_url) == []  # nothing written; the full path answers it instead
    with Ledger.open(pg_url) as ledger:
        HookRunner(ledger, "claude-code", WorkspaceConfig(node=NODE)).handle(
            _after_read(tmp_path, 1)
        )
    assert _outcomes(pg_url) == ["toolu_1"]


def test_a_call_racing_a_fence_waits_for_the_node_and_writes_nothing(
    pg_url: str, tmp_path: Path
) -> None:
    """A transaction holding the node's row and moving its generation on (what a fence
    does) is open when the call comes: the call's transaction waits for the row, then
    finds its body stale and leaves the call to the full path, having written nothing."""
    _admitted(pg_url, tmp_path)
    assert hotpath.try_fast(_after_read(tmp_path, 1), None) is None  # answered: a live body
    with _admin(pg_url) as fence:
        fence.execute("BEGIN")
        fence.execute("UPDATE agent_node SET generation = generation + 1 WHERE name = %s",
                      (NODE,))  # fmt: skip
        answered, racer = _racing(pg_url, _after_read(tmp_path, 2),
                                  "SELECT 1 FROM agent_node%FOR UPDATE")  # fmt: skip
        fence.execute("COMMIT")
        racer.join()
    assert answered == [hotpath.NOT_HANDLED]
    assert _outcomes(pg_url) == ["toolu_1"]  # nothing for generation 1 after the fence


@pytest.mark.parametrize("scheme", ["postgresql", "postgres", "POSTGRESQL"])
def test_a_postgresql_ledger_is_the_fast_paths_in_either_spelling(
    tmp_path: Path, scheme: str
) -> None:
    url = f"{scheme}://someone@db.example:5432/onstation"
    found = hotpath.workspace_ledger(str(tmp_path), url)
    assert found is not None and found[1:] == ("postgres", url)


def _counting_connections(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every PostgreSQL backend opened from now on, by URL."""
    opened: list[str] = []
    real = PostgresBackend.__init__

    def counting(self: PostgresBackend, url: str, **kwargs: Any) -> None:
        opened.append(url)
        real(self, url, **kwargs)

    monkeypatch.setattr(PostgresBackend, "__init__", counting)
    return opened


def test_a_declined_call_hands_its_connection_to_the_full_path(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A first reading at Amber is the full path's to record (it has a message to send): the
    fast path declines it, and the full path answers on the fast path's connection instead
    of making a second one (the hook and the status line alike)."""
    _admitted(pg_url, tmp_path)
    transcript = tmp_path / "s.jsonl"
    usage = {"input_tokens": 3, "cache_read_input_tokens": 60_000, "output_tokens": 5}
    transcript.write_text(json.dumps({
        "type": "assistant", "sessionId": "sess-1", "uuid": "u1", "requestId": "r1",
        "message": {"id": "m1", "role": "assistant", "model": "claude-sonnet-4-5",
                    "usage": usage, "content": []}}) + "\n")  # fmt: skip
    opened = _counting_connections(monkeypatch)
    payload = {"session_id": "sess-1", "cwd": str(tmp_path), "hook_event_name": "PostToolUse",
               "transcript_path": str(transcript), "tool_name": "Read", "tool_input": {},
               "tool_use_id": "toolu_1", "tool_response": {}}  # fmt: skip
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(payload).encode())))
    assert hook_main(["claude-code", "PostToolUse"], whole_process=False) == 0
    assert opened == [pg_url]
    with Ledger.open(pg_url) as ledger:  # the first reading, recorded by the full path
        assert HarnessLedger(ledger).session("sess-1").telemetry_cursor is not None
    opened.clear()
    status = {
        "session_id": "sess-1",
        "cwd": str(tmp_path),
        "model": {"id": "claude-sonnet-4-5", "display_name": "Sonnet"},
        "context_window": {"context_window_size": 1_000_000, "used_percentage": 2.0},
    }
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(status).encode())))
    capsys.readouterr()
    assert statusline_main([], whole_process=False) == 0  # a new window: the full path's
    assert "exec-1 gen 1 body" in capsys.readouterr().out
    assert opened == [pg_url]


def test_a_call_beside_the_full_paths_reading_takes_the_rows_in_the_same_order(
    pg_url: str, tmp_path: Path
) -> None:
    """The full path records a reading by updating the session's row, then its telemetry
    row, without the node's lock. The fast path updates the same two rows: in the other
    order, a call waiting for the session's row while holding the telemetry row would make a
    deadlock with it (one of the two aborted, after a second). In the same order one waits
    for the other, and both commit."""
    _admitted(pg_url, tmp_path)
    transcript = tmp_path / "s.jsonl"
    assistant_turn(transcript, 1, 20_000)
    with Ledger.open(pg_url) as ledger:  # the first reading, the full path's to record
        runner = HookRunner(ledger, "claude-code", WorkspaceConfig(node=NODE))
        runner.handle(_call(tmp_path, "UserPromptSubmit", prompt="go",
                            transcript_path=str(transcript)))  # fmt: skip
    assistant_turn(transcript, 2, 21_000)  # the same tier: the fast path's to record
    prompt = _call(tmp_path, "UserPromptSubmit", prompt="on", transcript_path=str(transcript))
    with _admin(pg_url) as reading:
        reading.execute("BEGIN")
        reading.execute("UPDATE body_session SET telemetry_cursor = telemetry_cursor "
                        "WHERE session_id = 'sess-1'")  # fmt: skip
        answered, racer = _racing(pg_url, prompt, "UPDATE %")
        reading.execute("UPDATE telemetry SET reported_at = reported_at "
                        "WHERE session_id = 'sess-1'")  # fmt: skip
        reading.execute("COMMIT")
        racer.join()
    assert answered == [None]  # answered, not aborted and left to the full path


def _traced(pg_url: str, call: HookCall) -> tuple[object, str]:
    """``try_fast(call)`` on a connection made ahead, and libpq's trace of what it sent and
    received."""
    assert pg_ahead.connect_ahead(pg_url, dict(os.environ))
    ahead = next(iter(pg_ahead._AHEAD.values()))[0]
    try:
        kept: list[Any] = []
        with tracing(ahead._conn) as traced:
            answered = hotpath.try_fast(call, None, keep=kept)
        assert kept == [ahead]
        return answered, traced[0]
    finally:
        ahead.close()


_READ = {"tool_name": "Read", "tool_input": {}, "tool_use_id": "toolu_9", "tool_response": {}}


@pytest.mark.parametrize(
    ("event", "fields", "expected"),
    [
        ("Stop", {"stop_hook_active": False}, 2),
        ("SessionEnd", {"reason": "logout"}, 2),
        ("PostToolUse", _READ, 2),
        ("UserPromptSubmit", {"prompt": "go on"}, 2),
        ("PreToolUse", {"tool_name": "Read", "tool_input": {}, "tool_use_id": "toolu_9"}, 3),
    ],
)
def test_a_call_reads_no_cursor_of_its_own_but_a_pre_tool_use(
    pg_url: str, tmp_path: Path, event: str,
    fields: dict[str, Any], expected: int,
) -> None:  # fmt: skip
    """The session's cursor is not read in a round trip of its own: a Stop and a SessionEnd
    read no telemetry, and a call that does reads it with the locked reads (then the
    transcript, the node's row locked). They wait for the server twice: the locked reads,
    then the commit. A PreToolUse waits three times: its cursor first, as its
    classification may run git and is kept outside any transaction."""
    _admitted(pg_url, tmp_path)
    answered, trace = _traced(pg_url, _call(tmp_path, event, **fields))
    assert answered is None  # answered here, quietly
    assert waits(trace) == expected
    assert ('"SELECT s.telemetry_cursor' in trace) is (event == "PreToolUse")
    if event == "SessionEnd":  # a clean end: the body's lease released, here
        with Ledger.open(pg_url) as ledger:
            assert [lease.state.value for lease in ledger.leases(NODE)] == ["RELEASED"]
    if event == "PostToolUse":
        assert _outcomes(pg_url) == ["toolu_9"]


def _reading(pg_url: str) -> tuple[Any, ...] | None:
    """The session's stored reading: its percent and tier, and whether a cursor is kept."""
    with _admin(pg_url) as admin:
        return admin.execute(
            "SELECT t.percent, t.tier, s.telemetry_cursor IS NOT NULL FROM body_session s "
            "LEFT JOIN telemetry t ON t.session_id = s.session_id WHERE s.session_id = 'sess-1'"
        ).fetchone()


def test_a_reading_is_taken_from_the_cursor_read_with_the_locked_reads(
    pg_url: str, tmp_path: Path
) -> None:
    """The transcript is read from the cursor the locked reads gave, in the same two waits:
    an epoch's first reading (quiet, Green) is recorded durably (its tier mark: no
    ``synchronous_commit`` off), a next one relaxed, each from where the last stopped."""
    _admitted(pg_url, tmp_path)
    transcript = tmp_path / "s.jsonl"
    assistant_turn(transcript, 1, 20_000)
    call = _call(tmp_path, "PostToolUse", transcript_path=str(transcript), **_READ)
    answered, trace = _traced(pg_url, call)
    assert answered is None and waits(trace) == 2
    assert "synchronous_commit" not in trace  # the first reading's commit waits for the disk
    assert _reading(pg_url) == (10.0, "green", True)
    assistant_turn(transcript, 2, 30_000)
    again = _call(tmp_path, "UserPromptSubmit", prompt="on", transcript_path=str(transcript))
    answered, trace = _traced(pg_url, again)
    assert answered is None and waits(trace) == 2
    assert "synchronous_commit" in trace  # a next reading's is relaxed
    assert _reading(pg_url) == (15.0, "green", True)


def test_a_reading_the_full_path_records_leaves_nothing_open(pg_url: str, tmp_path: Path) -> None:
    """A first reading at Amber is the full path's (it has a message to send): the
    transaction the locked reads began is rolled back before the call is handed on, with
    nothing written, the connection idle and the node's row free."""
    _admitted(pg_url, tmp_path)
    transcript = tmp_path / "s.jsonl"
    assistant_turn(transcript, 1, 60_000)
    call = _call(tmp_path, "PostToolUse", transcript_path=str(transcript), **_READ)
    kept: list[Any] = []
    assert hotpath.try_fast(call, None, keep=kept) is hotpath.NOT_HANDLED
    [backend] = kept
    try:
        assert backend._conn.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert _reading(pg_url) == (None, None, False) and _outcomes(pg_url) == []
        _fenced_at_once(pg_url)
    finally:
        backend.close()


def _fenced_at_once(pg_url: str) -> None:
    """The node's row is free: a fence's lock on it is granted without waiting (a lock
    that is not is an error here at once, not a wait)."""
    with _admin(pg_url) as fence:
        fence.execute("BEGIN")
        fence.execute("SELECT 1 FROM agent_node WHERE name = %s FOR UPDATE NOWAIT", (NODE,))
        fence.execute("ROLLBACK")


def test_a_failed_transcript_read_with_the_row_locked_leaves_nothing_open(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The transcript is read with the node's row locked: an error there ends the
    transaction (the row free for a fence at once), writes nothing, and the connection is
    closed rather than handed on."""
    _admitted(pg_url, tmp_path)
    transcript = tmp_path / "s.jsonl"
    assistant_turn(transcript, 1, 20_000)

    def failing(*_args: Any) -> Any:
        raise OSError("the transcript went away")

    monkeypatch.setattr(hotpath, "_read_transcript", failing)
    call = _call(tmp_path, "PostToolUse", transcript_path=str(transcript), **_READ)
    kept: list[Any] = []
    with pytest.raises(OSError, match="went away"):
        hotpath.try_fast(call, None, keep=kept)
    assert kept == []
    _fenced_at_once(pg_url)
    assert _reading(pg_url) == (None, None, False) and _outcomes(pg_url) == []


@pytest.mark.parametrize("event", ["Stop", "SessionEnd"])
def test_a_session_the_ledger_does_not_know_is_answered_as_before(
    pg_url: str, tmp_path: Path, event: str
) -> None:
    """Without the cursor's read, the locked reads tell that the session is unknown: in an
    unmanaged workspace nothing is said or written; in a configured one the full path
    answers (it admits the session). Nothing is left open or locked either way."""
    (tmp_path / "managed").mkdir()
    _admitted(pg_url, tmp_path / "managed")  # NODE's workspace, with NODE's own session
    unmanaged = tmp_path / "elsewhere"
    unmanaged.mkdir()
    fields = {"stop_hook_active": False} if event == "Stop" else {"reason": "other"}
    call = HookCall.from_payload("claude-code", event, {
        "session_id": "sess-unknown", "cwd": str(unmanaged), "hook_event_name": event,
        **fields})  # fmt: skip
    kept: list[Any] = []
    assert hotpath.try_fast(call, pg_url, keep=kept) is None
    managed = HookCall.from_payload("claude-code", event, {
        "session_id": "sess-unknown", "cwd": str(tmp_path / "managed"),
        "hook_event_name": event, **fields})  # fmt: skip
    assert hotpath.try_fast(managed, None, keep=kept) is hotpath.NOT_HANDLED
    for backend in kept:
        assert backend._conn.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
        backend.close()
    with Ledger.open(pg_url) as ledger:
        assert HarnessLedger(ledger).session("sess-unknown") is None
        assert ledger.get_node(NODE).generation == 1


def _start_payload(cwd: Path, session: str) -> dict[str, Any]:
    return {"session_id": session, "cwd": str(cwd), "hook_event_name": "SessionStart",
            "source": "startup"}  # fmt: skip


def _hook_main(monkeypatch: pytest.MonkeyPatch, payload: dict[str, Any]) -> int:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(payload).encode())))
    return hook_main(["claude-code", str(payload["hook_event_name"])], whole_process=False)


def test_the_full_path_takes_a_connection_ahead_without_a_round_trip_to_check_it(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """A session start (the full path's) takes the connection a daemon made ahead without
    asking the server first whether it answers: its first statements are the transaction's."""
    _admitted(pg_url, tmp_path)
    assert pg_ahead.connect_ahead(pg_url, dict(os.environ))
    ahead = next(iter(pg_ahead._AHEAD.values()))[0]
    with tracing(ahead._conn) as traced:
        assert _hook_main(monkeypatch, _start_payload(tmp_path, "sess-2")) == 0
    assert pg_ahead.took_ahead()
    assert '"" "SELECT 1" 0' not in traced[0]  # the check's statement, never sent
    assert traced[0].startswith('F\t13\tParse\t "" "BEGIN" 0')
    assert "exec-1" in capsys.readouterr().out
    ahead.close()


def test_a_connection_ahead_the_server_ended_runs_the_call_again_on_a_new_one(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """Taken unchecked and found dead by the call's first statement, before anything was
    committed on it: the call runs again on a new connection and is answered as if the
    connection had never been made ahead (a session's next start admitted, its context
    given), the dead connection closed."""
    _admitted(pg_url, tmp_path)
    with Ledger.open(pg_url) as ledger:  # the first session ended: the next one is admitted
        HookRunner(ledger, "claude-code", WorkspaceConfig(node=NODE)).handle(
            _call(tmp_path, "SessionEnd", reason="other")
        )
    assert pg_ahead.connect_ahead(pg_url, dict(os.environ))
    ahead = next(iter(pg_ahead._AHEAD.values()))[0]
    with _admin(pg_url) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (int(ahead._conn.info.backend_pid),))
    opened = _counting_connections(monkeypatch)
    assert _hook_main(monkeypatch, _start_payload(tmp_path, "sess-2")) == 0
    out = capsys.readouterr()
    assert "generation 2" in out.out and "failed open" not in out.err.lower()
    assert opened == [pg_url] and ahead._conn.closed
    with Ledger.open(pg_url) as ledger:
        session = HarnessLedger(ledger).session("sess-2")
        assert session is not None and session.state == "ADMITTED" and session.generation == 2


def test_a_connection_that_dies_after_a_commit_is_not_run_again(pg_url: str) -> None:
    """Once a COMMIT was sent, what was done may have been committed: the work is not run
    again (``dead_before_commit`` is false), as it was not before."""
    assert pg_ahead.connect_ahead(pg_url, dict(os.environ))
    backend = open_backend(pg_url, check_ahead=False)
    assert isinstance(backend, PostgresBackend) and backend.unchecked
    ledger = Ledger(backend)
    ledger.register_node("after-commit")
    with _admin(pg_url) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (int(backend._conn.info.backend_pid),))
    with pytest.raises(psycopg.OperationalError):
        ledger.register_node("after-commit-2")
    assert backend.commit_sent and not backend.dead_before_commit()
    backend.close()
    checked = open_backend(pg_url)
    assert isinstance(checked, PostgresBackend) and not checked.unchecked
    checked.close()


#: Every statement the warm-up prepares, by name: the fast path's and an admission's.
ALL_PREPARED = {
    *hotpath_pg.PREPARED.values(),
    *(name for name, _ in hotpath_pg.ADMISSION_READS.values()),
    *hotpath_pg.ADMISSION_WRITES.values(),
}


def _plans(backend: PostgresBackend) -> dict[str, tuple[int, int]]:
    """(generic plans, custom plans) of each statement prepared on ``backend``'s session (a
    session's own: asked on its connection)."""
    rows = backend._conn.execute(
        "SELECT name, generic_plans, custom_plans FROM pg_prepared_statements"
    ).fetchall()
    return {str(name): (int(generic), int(custom)) for name, generic, custom in rows}


def test_a_connection_made_ahead_has_the_fast_paths_statements_prepared_with_kept_plans(
    pg_url: str, tmp_path: Path
) -> None:
    """The warm-up prepares the fast path's statements by name and runs each read past the
    plans made for their parameters; a call then EXECUTEs them: its reads on the plans the
    server keeps (nothing parsed or planned for the call), its writes prepared too."""
    _admitted(pg_url, tmp_path)
    assert pg_ahead.connect_ahead(pg_url, dict(os.environ), warm=hotpath_pg.warm)
    ahead = next(iter(pg_ahead._AHEAD.values()))[0]
    assert set(ahead.prepared.values()) == ALL_PREPARED
    before = _plans(ahead)
    assert set(before) == ALL_PREPARED  # nothing else (psycopg's own)
    reads = [*hotpath_pg.PREPARED_READS.values(),
             *(name for name, _ in hotpath_pg.ADMISSION_READS.values())]  # fmt: skip
    for name in reads:
        generic, custom = before[name]
        assert generic >= 1 and custom == hotpath_pg.CUSTOM_PLANS, name
    kept: list[Any] = []
    assert hotpath.try_fast(_after_read(tmp_path, 1), None, keep=kept) is None  # answered
    assert kept == [ahead] and _outcomes(pg_url) == ["toolu_1"]
    after = _plans(ahead)
    for name in ("onstation_fast_lock_node", "onstation_fast_gather", "onstation_fast_bindings"):
        assert after[name] == (before[name][0] + 1, before[name][1]), name  # the kept plan
    used = sum(after[n][0] + after[n][1] for n in hotpath_pg.PREPARED_WRITES.values())
    assert used == sum(before[n][0] + before[n][1] for n in hotpath_pg.PREPARED_WRITES.values()) + 1
    ahead.close()


def test_prepared_statements_answer_as_the_statements_sent_as_they_are(
    pg_url: str, tmp_path: Path
) -> None:
    """A session id with a quote, a backslash and a dollar sign, written into the EXECUTE as
    a literal psycopg quotes, reads the same rows from the prepared statements as from the
    statements sent with bound parameters; an id that matches nothing reads nothing."""
    session = "sess-it's \\x$1\"'"
    (tmp_path / ".onstation").mkdir()
    (tmp_path / ".onstation" / "config.json").write_text(f'{{"node": "{NODE}", "db": "{pg_url}"}}')
    with Ledger.open(pg_url) as ledger:
        ledger.register_node(NODE)
        HarnessLedger(ledger).bind_workspace(str(tmp_path), NODE, harness="claude-code",
                                             by="test")  # fmt: skip
        HookRunner(ledger, "claude-code", WorkspaceConfig(node=NODE)).handle(
            HookCall.from_payload(
                "claude-code",
                "SessionStart",
                {
                    "session_id": session,
                    "cwd": str(tmp_path),
                    "hook_event_name": "SessionStart",
                    "source": "startup",
                },
            )
        )
    plain = hotpath_pg.PgStore(PostgresBackend(pg_url))
    warmed = PostgresBackend(pg_url)
    hotpath_pg.warm(warmed)
    prepared = hotpath_pg.PgStore(warmed)
    assert warmed.prepared and not plain.backend.prepared
    for store in (plain, prepared):
        assert store.cursor_row("sess-none") is None
    assert prepared.cursor_row(session) == plain.cursor_row(session) is not None
    assert prepared.workspace_node(str(tmp_path)) == plain.workspace_node(str(tmp_path)) == NODE
    rows = []
    for store in (plain, prepared):
        rows.append(store.gather(session, str(tmp_path), "PostToolUse", "toolu_x"))
        store.rollback()
        rows.append(store.gather_status(session, str(tmp_path)))
        store.rollback()
    assert rows[:2] == rows[2:] and rows[0] is not None and rows[1][0] is not None
    for store in (plain, prepared):
        store.backend.close()


def test_prepared_statements_the_session_lost_send_the_call_to_the_full_path(
    pg_url: str, tmp_path: Path
) -> None:
    """Statements deallocated since the warm-up (``DEALLOCATE ALL`` on the session): the
    call's first EXECUTE fails, nothing is written, the connection is closed and not handed
    on, and the full path answers the call."""
    _admitted(pg_url, tmp_path)
    assert pg_ahead.connect_ahead(pg_url, dict(os.environ), warm=hotpath_pg.warm)
    ahead = next(iter(pg_ahead._AHEAD.values()))[0]
    ahead._conn.execute("DEALLOCATE ALL")
    _sent_to_the_full_path(pg_url, tmp_path, ahead)


def test_a_session_that_keeps_no_prepared_statement_leaves_the_statements_as_they_are(
    pg_url: str, tmp_path: Path
) -> None:
    """As behind a proxy that pools transactions: every PREPARE goes to another server
    session (here a second real connection), so the warm-up's check finds none on this one.
    The connection is still warmed and held, prepares nothing, and its call sends the
    statements as they are."""
    _admitted(pg_url, tmp_path)
    base, schema = pg_url.split("?schema=")
    other = psycopg.connect(base, autocommit=True)
    other.execute(f'SET search_path TO "{schema}"')

    def warm_behind_a_proxy(backend: PostgresBackend) -> None:
        execute = backend._conn.execute

        def routed(query: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(query, bytes) and query.startswith(b"PREPARE "):
                return other.execute(query, *args, **kwargs)
            return execute(query, *args, **kwargs)

        backend._conn.execute = routed  # type: ignore[method-assign]
        try:
            hotpath_pg.warm(backend)
        finally:
            del backend._conn.execute

    assert pg_ahead.connect_ahead(pg_url, dict(os.environ), warm=warm_behind_a_proxy)
    ahead = next(iter(pg_ahead._AHEAD.values()))[0]
    assert ahead.prepared == {} and _plans(ahead) == {}
    assert ahead._conn.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
    kept: list[Any] = []
    assert hotpath.try_fast(_after_read(tmp_path, 1), None, keep=kept) is None
    assert kept == [ahead] and _outcomes(pg_url) == ["toolu_1"]
    ahead.close()
    other.close()


def test_a_statement_the_server_will_not_prepare_leaves_the_statements_as_they_are(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One statement among them the server refuses to prepare (a parameter whose type it
    cannot infer): the warm-up still succeeds, the connection names none prepared and is
    left idle, and its call is answered with the statements as they are."""
    _admitted(pg_url, tmp_path)
    monkeypatch.setitem(hotpath_pg.PREPARED, "SELECT %s IS NULL", "onstation_fast_untyped")
    assert pg_ahead.connect_ahead(pg_url, dict(os.environ), warm=hotpath_pg.warm)
    ahead = next(iter(pg_ahead._AHEAD.values()))[0]
    assert ahead.prepared == {}
    assert ahead._conn.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
    kept: list[Any] = []
    assert hotpath.try_fast(_after_read(tmp_path, 1), None, keep=kept) is None
    assert kept == [ahead] and _outcomes(pg_url) == ["toolu_1"]
    ahead.close()


def _bound(pg_url: str, cwd: Path) -> None:
    """``NODE`` registered with its workspace ``cwd`` bound and configured: no body yet, so
    the next session start is admitted as its first."""
    (cwd / ".onstation").mkdir()
    (cwd / ".onstation" / "config.json").write_text(f'{{"node": "{NODE}", "db": "{pg_url}"}}')
    with Ledger.open(pg_url) as ledger:
        ledger.register_node(NODE)
        HarnessLedger(ledger).bind_workspace(str(cwd), NODE, harness="claude-code", by="test")


def _parsed(trace: str) -> list[str]:
    """The statements a libpq trace shows sent to be parsed, in order."""
    return [line.split('"')[3] for line in trace.splitlines() if "\tParse\t" in line]


def test_a_session_start_on_a_connection_made_ahead_executes_the_statements_prepared(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """A new session's admission (the full path's, on the connection a daemon's spare made
    and warmed) sends the server no statement of its own to parse and plan: each is an
    EXECUTE of a statement the warm-up prepared, its reads on the plans the server keeps.
    The session is admitted as on any connection, and psycopg prepared nothing itself."""
    _bound(pg_url, tmp_path)
    (tmp_path / "t.jsonl").write_text("")
    # A repository with one commit: the admission records the generation's base too.
    sh(tmp_path, "init", "-q")
    sh(tmp_path, "commit", "-q", "--allow-empty", "-m", "start")
    head = sh(tmp_path, "rev-parse", "HEAD")
    assert pg_ahead.connect_ahead(pg_url, dict(os.environ), warm=hotpath_pg.warm)
    ahead = next(iter(pg_ahead._AHEAD.values()))[0]
    assert ahead._conn.prepare_threshold is None
    monkeypatch.setattr(ahead, "close", lambda: None)  # kept open, to be asked below
    before = _plans(ahead)
    payload = {**_start_payload(tmp_path, "sess-1"), "transcript_path": str(tmp_path / "t.jsonl")}
    with tracing(ahead._conn) as traced:
        assert _hook_main(monkeypatch, payload) == 0
    assert pg_ahead.took_ahead()
    assert "body of exec-1, generation 1" in capsys.readouterr().out
    sent = _parsed(traced[0])
    assert sent[0] == "BEGIN" and sent[-1] == "COMMIT", sent
    assert all(s.startswith("EXECUTE ") for s in sent[1:-1]), sent
    after = _plans(ahead)
    assert set(after) == set(before)  # none of psycopg's own
    for name, _ in hotpath_pg.ADMISSION_READS.values():  # each read once, on its kept plan
        assert after[name] == (before[name][0] + 1, before[name][1]), name
    ran = [
        "onstation_admit_judge",
        "onstation_admit_insert_session",
        "onstation_admit_host",
        "onstation_admit_transcript",
        "onstation_admit_base",
        "onstation_fast_bindings",
        "onstation_fast_event",
    ]
    for name in ran:
        assert sum(after[name]) == sum(before[name]) + 1, name
    with Ledger.open(pg_url) as ledger:
        session = HarnessLedger(ledger).session("sess-1")
        assert (session.node, session.generation, session.state) == (NODE, 1, "ADMITTED")
        assert session.transcript_path == str(tmp_path / "t.jsonl")
        assert "session.admitted" in [e.kind for e in ledger.history(NODE)]
        assert HarnessLedger(ledger).base_of(NODE, 1) == head
    PostgresBackend.close(ahead)


def test_an_admission_whose_statements_the_session_lost_runs_again_as_they_are(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """Statements deallocated since the warm-up: the admission's first EXECUTE fails, its
    transaction is rolled back, the connection forgets its statements and the admission runs
    again with them sent as they are. The session is admitted once, with one record of it."""
    _bound(pg_url, tmp_path)
    assert pg_ahead.connect_ahead(pg_url, dict(os.environ), warm=hotpath_pg.warm)
    ahead = next(iter(pg_ahead._AHEAD.values()))[0]
    ahead._conn.execute("DEALLOCATE ALL")
    with tracing(ahead._conn) as traced:
        assert _hook_main(monkeypatch, _start_payload(tmp_path, "sess-1")) == 0
    assert "body of exec-1, generation 1" in capsys.readouterr().out
    sent = _parsed(traced[0])
    again = sent.index("BEGIN", 1)  # the second try's transaction
    assert sent[1].startswith("EXECUTE ") and "ROLLBACK" in traced[0], sent  # the first's
    assert not any(s.startswith("EXECUTE ") for s in sent[again:]), sent
    assert sent[-1] == "COMMIT", sent
    assert ahead.prepared == {}
    with Ledger.open(pg_url) as ledger:
        kinds = [e.kind for e in ledger.history(NODE)]
        assert kinds.count("session.admitted") == 1 and kinds.count("lease.acquired") == 1
        assert HarnessLedger(ledger).session("sess-1").generation == 1
    ahead.close()


def test_an_admission_on_prepared_statements_writes_what_it_is_given_exactly(
    pg_url: str, tmp_path: Path
) -> None:
    """Values written into the EXECUTEs as literals psycopg quotes (a session id with a
    quote, a backslash and a dollar sign; a workspace path with the same; the host witness's
    JSON) are stored exactly as sent with bound parameters."""
    session = "sess-it's \\x$1\"'"
    cwd = tmp_path / 'it\'s \\ $1 "x"'
    cwd.mkdir()
    _bound(pg_url, cwd)
    witness = {"pid": 7, "exe": '/opt/it\'s \\ "claude"', "note": "$1 -- ; \n"}
    backend = PostgresBackend(pg_url)
    hotpath_pg.warm(backend)
    assert backend.prepared
    with Ledger(backend) as ledger:
        admission = HarnessLedger(ledger).admit_session(
            session, harness="claude-code", node=NODE, workspace=str(cwd),
            host=lambda: witness, source="startup",
        )  # fmt: skip
        assert admission.admitted and backend.prepared  # on the prepared statements
    with _admin(pg_url) as admin:
        row = admin.execute(
            "SELECT s.session_id, s.workspace, h.host_witness FROM body_session s "
            "JOIN body_host h ON h.session_id = s.session_id"
        ).fetchone()
    assert row is not None and row[:2] == (session, str(cwd))
    assert json.loads(row[2]) == witness
