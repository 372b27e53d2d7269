"""A node's open exchanges (APPROACH or CHECKPOINT messages without a reply), on every
backend: a reply closes its exchange in the transaction that writes it (the message records
``answered_at``), and the open ones are read through a partial index of the unanswered ones,
not by reading every exchange the node was ever sent (schema version 17, issue 14). A ledger
older than that gets the answers already on record filled in by the migration."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from old_schema import migrate_below

from onstation.ledger import Ledger
from onstation.ledger.bodies import HarnessLedger


def _answered_at(ledger: Ledger, message_id: int) -> object:
    row = ledger._read(lambda tx, _now: tx.one(
        "SELECT answered_at FROM message WHERE message_id = ?", (message_id,)))  # fmt: skip
    assert row is not None
    return row[0]


def test_a_reply_closes_its_exchange_and_only_the_first_reply_dates_it(
    ledger: Ledger, make_ledger: Callable[..., Ledger]
) -> None:
    ledger.register_node("exec-1")
    ledger.register_node("exec-2")
    records = HarnessLedger(ledger)
    approach = records.post_message(sender="exec-2", recipient="exec-1", kind="APPROACH",
                                    body="may I take the auth module?")  # fmt: skip
    checkpoint = records.post_message(sender="lead", recipient="exec-1", kind="CHECKPOINT",
                                      body="where are you?")  # fmt: skip
    records.post_message(sender="lead", recipient="exec-1", kind="NOTE", body="fyi")
    assert [m.message_id for m in records.open_exchanges("exec-1")] == [
        approach.message_id, checkpoint.message_id]  # fmt: skip
    assert _answered_at(ledger, approach.message_id) is None
    first = records.post_message(sender="exec-1", recipient="exec-2", kind="ACK",
                                 body="approved", reply_to=approach.message_id)  # fmt: skip
    answered = _answered_at(ledger, approach.message_id)
    assert answered is not None and answered == _answered_at(ledger, approach.message_id)
    assert [m.message_id for m in records.open_exchanges("exec-1")] == [checkpoint.message_id]
    # Seen alike by another connection; a second reply leaves the first one's time.
    other = HarnessLedger(make_ledger())
    assert [m.message_id for m in other.open_exchanges("exec-1")] == [checkpoint.message_id]
    other.post_message(sender="exec-1", recipient="exec-2", kind="ACK", body="still yes",
                       reply_to=approach.message_id)  # fmt: skip
    assert _answered_at(ledger, approach.message_id) == answered
    assert first.reply_to == approach.message_id
    records.post_message(sender="exec-1", recipient="lead", kind="STATUS", body="on it",
                         reply_to=checkpoint.message_id)  # fmt: skip
    assert records.open_exchanges("exec-1") == []


def test_an_older_ledger_gets_the_answers_on_record_filled_in(tmp_path: Path) -> None:
    """A ledger at schema version 16, with one exchange answered and one not: after the
    migration the answered one is not open (its answered_at is its reply's time), the other
    is, and a reply to it closes it."""
    db = tmp_path / "old.db"
    conn = sqlite3.connect(db)
    migrate_below(conn, 17)
    for name in ("exec-1", "exec-2"):
        conn.execute("INSERT INTO agent_node (name, role, spawner, generation, state, "
                     "created_at) VALUES (?, 'executor', 'lead', 1, 'ACTIVE', 0)",
                     (name,))  # fmt: skip
    insert = ("INSERT INTO message (message_id, sender, recipient, kind, body, reply_to, "
              "created_at) VALUES (?, ?, ?, ?, 'b', ?, ?)")  # fmt: skip
    conn.execute(insert, (1, "exec-2", "exec-1", "APPROACH", None, 10))
    conn.execute(insert, (2, "lead", "exec-1", "CHECKPOINT", None, 20))
    conn.execute(insert, (3, "exec-1", "exec-2", "ACK", 1, 30))
    conn.execute(insert, (4, "exec-1", "exec-2", "ACK", 1, 40))
    conn.commit()
    conn.close()
    with Ledger.open(str(db)) as ledger:
        records = HarnessLedger(ledger)
        assert [m.message_id for m in records.open_exchanges("exec-1")] == [2]
        assert _answered_at(ledger, 1) == 30 and _answered_at(ledger, 2) is None
        records.post_message(sender="exec-1", recipient="lead", kind="STATUS", body="on it",
                             reply_to=2)  # fmt: skip
        assert records.open_exchanges("exec-1") == []


def test_postgres_keeps_one_plan_for_the_open_exchanges(pg_url: str) -> None:
    """On PostgreSQL the prepared question is planned once, not on every call, whatever the
    statistics say of its recipient. 5,000 answered approaches over 100 nodes, every reply to
    one team lead (which the statistics then call frequent): with the recipient's value in
    sight the planner's estimate for it differed from its generic plan's, and it made a plan
    of its own for every call (0.17 ms of planning for 0.02 ms of reading, from about 100k
    history rows in bench_ledger_history); it must settle on the generic plan."""
    with Ledger.open(pg_url) as ledger:
        conn = ledger.backend._conn  # type: ignore[attr-defined]
        with conn.transaction():
            conn.execute(
                "INSERT INTO message (sender, recipient, kind, body, created_at, answered_at) "
                "SELECT 'coord', 'n' || (i % 100), 'APPROACH', 'may I?', 0, 1 "
                "FROM generate_series(0, 4999) AS s(i)"
            )
            conn.execute(
                "INSERT INTO message (sender, recipient, kind, body, reply_to, created_at) "
                "SELECT recipient, sender, 'REPLY', 'yes', message_id, 1 FROM message"
            )
        conn.execute("ANALYZE message")
        ledger.register_node("n0")
        records = HarnessLedger(ledger)
        open_one = records.post_message(sender="coord", recipient="n0", kind="APPROACH",
                                        body="still there?")  # fmt: skip
        for _ in range(12):  # past psycopg's threshold (5) and the server's five custom plans
            assert [m.message_id for m in records.open_exchanges("n0")] == [open_one.message_id]
        plans = conn.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
            "WHERE statement LIKE '%answered_at IS NULL%'"
        ).fetchall()
        assert len(plans) == 1
        generic, custom = plans[0]
        assert generic > 0, f"planned anew on every call: {custom} custom plans, no generic one"
