"""A session start's round trips on PostgreSQL (issue 14), and what each saving must keep,
on both backends:

- the fence a next generation's admission makes and the lease it takes are sent together
  (``LeaseRecords._fence_and_acquire_in``): a fence that lost still raises and leaves
  nothing, not even the lease the admission's statement wrote beside it;
- a new session's row is taken as written, not waited for: it is what a fresh read says;
- the base a session start offers is recorded with its event in one statement sent without
  waiting (``GenerationBases.offer_base``): the first base wins, one event each;
- whether a message waits is asked with the admission (``Correspondence.look_for_messages``)
  and read by the take: a waiting message is delivered, none means no take, and a message
  written after the look makes the take ask again.

The round trips are counted in libpq's own trace of the connection: each time the client
sends after the server last spoke, it had waited for the server's answer.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from libpq_trace import tracing, waits

from onstation.core.errors import Conflict
from onstation.harness.adapters import HookCall
from onstation.harness.config import load_config
from onstation.ledger import Ledger
from onstation.ledger.bodies import HarnessLedger
from onstation.relief.hooks import HookRunner

NODE = "body"
HEAD = "0" * 39 + "3"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A workspace bound to ``NODE``, its git HEAD written by hand (no git runs)."""
    work = tmp_path / "ws"
    (work / ".onstation").mkdir(parents=True)
    (work / ".onstation" / "config.json").write_text(json.dumps({"node": NODE}))
    (work / ".git" / "refs" / "heads").mkdir(parents=True)
    (work / ".git" / "config").write_text("[core]\n\trepositoryformatversion = 0\n")
    (work / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (work / ".git" / "refs" / "heads" / "main").write_text(HEAD + "\n")
    return work


def hook(ledger: Ledger, workspace: Path, session: str, event: str, **fields: Any) -> Any:
    payload = {"session_id": session, "cwd": str(workspace), "hook_event_name": event, **fields}
    runner = HookRunner(ledger, "claude-code", load_config(str(workspace)))
    return runner.handle(HookCall.from_payload("claude-code", event, payload))


def start(ledger: Ledger, workspace: Path, session: str) -> str:
    """A session start's answer: the context it gives the body."""
    answer = hook(ledger, workspace, session, "SessionStart", source="startup")
    return json.dumps(answer.output)


def test_a_next_generations_session_start_waits_for_the_server_three_times(
    pg_url: str, workspace: Path
) -> None:
    """The admission's reads with the node's lock and the workspace's binding, the fence with
    the lease, then the rest with the commit: three waits (there were nine: the binding
    looked up on its own, the fence and the lease apart, the session's row, the base's
    answer, the look for messages after the commit)."""
    with Ledger.open(pg_url) as ledger:
        ledger.register_node(NODE)
        start(ledger, workspace, "first")
        hook(ledger, workspace, "first", "SessionEnd", reason="other")
        with tracing(ledger.backend._conn) as traced:  # type: ignore[attr-defined]
            told = start(ledger, workspace, "second")
        trace = traced[0]
        assert ledger.get_node(NODE).generation == 2
        assert "generation 2" in told
    # Nothing before the transaction: the workspace's binding is looked up inside it.
    assert trace.index('"BEGIN"') < trace.index("FROM workspace_binding")
    assert "onstation_fence(" in trace and "generation_base" in trace
    assert waits(trace) == 3


def test_a_workspace_bound_to_another_node_is_judged_for_that_node(
    ledger_url: str, workspace: Path
) -> None:
    """The binding is looked up with the admission's first reads, on the configured node:
    a binding to another node abandons that admission before anything is judged or written
    for the configured node, and the session is judged for the bound node, as when the
    binding was looked up first."""
    with Ledger.open(ledger_url) as ledger:
        ledger.register_node(NODE)
        ledger.register_node("other")
        records = HarnessLedger(ledger)
        records.bind_workspace(str(workspace), "other", harness="claude-code", by="test")
        before = [e.seq for e in ledger.history(NODE)]
        told = start(ledger, workspace, "s-1")
        session = records.session("s-1")
        assert session is not None and session.node == "other" and session.state == "ADMITTED"
        assert session.workspace == os.path.realpath(workspace)
        assert "other" in told
        lease = ledger.live_lease("other")
        assert lease is not None and lease.lease_id == session.lease_id
        assert ledger.live_lease(NODE) is None
        assert [e.seq for e in ledger.history(NODE)] == before  # nothing for NODE
        assert records.base_of("other", 1) == HEAD
        # Its next call is the bound node's body's too.
        hook(ledger, workspace, "s-1", "UserPromptSubmit", prompt="go")
        assert records.session("s-1") == session


def test_a_session_below_a_bound_workspace_records_the_bound_workspace(
    ledger_url: str, workspace: Path
) -> None:
    """A session started in a directory below the workspace bound to the configured node is
    that node's body, with the bound workspace recorded and its base read from there."""
    below = workspace / "src" / "deep"
    below.mkdir(parents=True)
    with Ledger.open(ledger_url) as ledger:
        ledger.register_node(NODE)
        records = HarnessLedger(ledger)
        records.bind_workspace(str(workspace), NODE, harness="claude-code", by="test")
        start(ledger, below, "s-1")
        session = records.session("s-1")
        assert session is not None and session.node == NODE and session.state == "ADMITTED"
        assert session.workspace == os.path.realpath(workspace)
        assert records.base_of(NODE, 1) == HEAD


def test_a_lost_fence_leaves_no_lease_though_the_lease_was_asked_beside_it(
    ledger: Ledger,
) -> None:
    """The lease is asked for the generation after the expected one, before the fence's
    answer is read: where another fence made that generation already, the admission's
    statement finds it free and writes a lease, and the lost fence's Conflict must roll it
    back with everything else."""
    ledger.register_node(NODE)
    ledger.fence(NODE, expect_generation=1)  # generation 2 now, with no lease
    with pytest.raises(Conflict, match="fence of 'body' lost"):
        ledger.fence_and_hold(NODE, expect_generation=1, holder="late", ttl=ledger_ttl())
    assert ledger.get_node(NODE).generation == 2
    assert ledger.live_lease(NODE) is None
    assert [lease.generation for lease in ledger.leases(NODE)] == []
    # The fence that holds takes its lease, for the generation it made.
    fenced, lease = ledger.fence_and_hold(NODE, expect_generation=2, holder="on", ttl=ledger_ttl())
    assert (fenced.generation, lease.generation, lease.holder) == (3, 3, "on")
    live = ledger.live_lease(NODE)
    assert live is not None and live.lease_id == lease.lease_id


def ledger_ttl() -> Any:
    from datetime import timedelta

    return timedelta(minutes=10)


def test_a_new_sessions_row_is_what_a_fresh_read_says(ledger_url: str, workspace: Path) -> None:
    with Ledger.open(ledger_url) as ledger:
        ledger.register_node(NODE)
        records = HarnessLedger(ledger)
        admitted = records.admit_session(
            "s-1", harness="claude-code", node=NODE, workspace=str(workspace),
            launcher={"by": "test"},
        )  # fmt: skip
        assert admitted.admitted and admitted.session.launcher is not None
        assert admitted.session == records.session("s-1")


def test_the_base_offered_by_a_session_start_is_recorded_once_with_one_event(
    ledger_url: str, workspace: Path
) -> None:
    with Ledger.open(ledger_url) as ledger:
        ledger.register_node(NODE)
        records = HarnessLedger(ledger)
        start(ledger, workspace, "s-1")
        assert records.base_of(NODE, 1) == HEAD
        # Offered again for the same generation (a /clear's new session id): the first wins.
        records.offer_base(NODE, 1, "f" * 40, source="session-start")
        assert records.base_of(NODE, 1) == HEAD
        events = [e for e in ledger.history(NODE) if e.kind == "generation.base"]
        assert [(e.generation, e.actor, e.detail) for e in events] == [
            (1, "session-start", {"commit": HEAD})
        ]
        # A node that does not exist gets no base, and nothing is raised.
        records.offer_base("nobody", 1, HEAD, source="session-start")
        assert records.base_of("nobody", 1) is None


def test_a_message_waiting_at_a_session_start_is_delivered_and_none_means_no_take(
    ledger_url: str, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Ledger.open(ledger_url) as ledger:
        ledger.register_node(NODE)
        records = HarnessLedger(ledger)
        takes: list[str] = []
        real_write = ledger._write

        def counting(body: Any, **options: Any) -> Any:
            takes.append(getattr(body, "__qualname__", ""))
            return real_write(body, **options)

        monkeypatch.setattr(ledger, "_write", counting)
        start(ledger, workspace, "s-1")
        assert takes and not [t for t in takes if "take_messages" in t]
        hook(ledger, workspace, "s-1", "SessionEnd", reason="other")
        records.post_message(sender="lead", recipient=NODE, kind="task", body="do the thing")
        takes.clear()
        told = start(ledger, workspace, "s-2")
        assert "do the thing" in told
        assert [t for t in takes if "take_messages" in t]
        assert [m.delivered_at is not None for m in records.messages(NODE)] == [True]


def test_a_look_is_not_used_after_a_message_written_since_nor_for_other_messages(
    ledger_url: str,
) -> None:
    with Ledger.open(ledger_url) as ledger:
        ledger.register_node(NODE)
        records = HarnessLedger(ledger)
        look = records.look_for_messages(NODE, generation=1)
        records.post_message(sender="lead", recipient=NODE, kind="task", body="after the look")
        taken = records.take_messages(NODE, delivered_to="test", generation=1, look=look)
        assert [m.body for m in taken] == ["after the look"]
        # Another object's message, sent after the look, waits for the next take (as one
        # sent just after a take does), and a look for other messages is not used.
        look = records.look_for_messages(NODE, generation=1)
        HarnessLedger(ledger).post_message(sender="lead", recipient=NODE, kind="task", body="b")
        assert records.take_messages(NODE, delivered_to="test", generation=1, look=look) == []
        other = records.look_for_messages(NODE, generation=1, fenced=True)
        taken = records.take_messages(NODE, delivered_to="test", generation=1, look=other)
        assert [m.body for m in taken] == ["b"]
