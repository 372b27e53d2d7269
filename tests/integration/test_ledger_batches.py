"""The ledger's batched writes (issue 14), on every backend: a batch of grants is what the
same grants issued one by one in a transaction are (rows, events, denials, conflicts), with
one generation guard and one statement for the rows and one for their events."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from onstation.core.errors import BadInput, Conflict, StaleGeneration
from onstation.core.types import Grant
from onstation.ledger import Ledger
from onstation.ledger.backends import Asked, Params, Row, Tx
from onstation.ledger.base import BATCH_ROWS, repeat_rows
from onstation.relief.grants import issue_successor_grants

CAPS = ["tool:Bash", "mcp:github", "tool:Read"]


class _Counting:
    """A Tx that records each statement it runs (by name when it is a named query)."""

    def __init__(self, tx: Tx, names: dict[str, str], log: list[str]) -> None:
        self._tx, self._names, self._log = tx, names, log

    def _note(self, sql: str) -> None:
        name = self._names.get(sql)
        if name is None:  # a batch: the named query whose head it has
            name = next((f"{n}*" for s, n in self._names.items()
                         if "VALUES (" in s and sql.startswith(s[: s.index("VALUES (")])),
                        sql)  # fmt: skip
        self._log.append(name)

    def one(self, sql: str, params: Params = ()) -> Row | None:
        self._note(sql)
        return self._tx.one(sql, params)

    def all(self, sql: str, params: Params = ()) -> list[Row]:
        self._note(sql)
        return self._tx.all(sql, params)

    def run(self, sql: str, params: Params = ()) -> int:
        self._note(sql)
        return self._tx.run(sql, params)

    def send(self, sql: str, params: Params = ()) -> None:
        self._note(sql)
        self._tx.send(sql, params)

    def ask(self, sql: str, params: Params = ()) -> Asked:
        self._note(sql)
        return self._tx.ask(sql, params)


def _count(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[str]]:
    """(statements run, by name; transactions opened, "write" / "read")."""
    names = {sql: name for name, sql in ledger._queries.items()}
    log: list[str] = []
    opened: list[str] = []
    backend = ledger.backend
    real_write, real_read, real_auto = backend.write, backend.read, backend.autocommit

    def wrapped(kind: str, real: Callable[..., Any]) -> Callable[..., Any]:
        @contextmanager
        def counted(**options: Any) -> Iterator[Tx]:  # write(relaxed=...) passes one
            opened.append(kind)
            with real(**options) as tx:
                yield _Counting(tx, names, log)

        return counted

    monkeypatch.setattr(backend, "write", wrapped("write", real_write))
    monkeypatch.setattr(backend, "read", wrapped("read", real_read))
    monkeypatch.setattr(backend, "autocommit", lambda: _Counting(real_auto(), names, log))
    return log, opened


def _events(ledger: Ledger, node: str) -> list[tuple[Any, ...]]:
    """The node's events as stored: kind, generation, actor and the detail's very text."""
    sql = "SELECT kind, generation, actor, detail FROM event WHERE node = ? ORDER BY seq"
    return ledger._read(lambda tx, _now: tx.all(sql, (node,)))


def _live(ledger: Ledger, *names: str) -> None:
    for name in names:
        ledger.register_node(name)
        ledger.acquire_lease(name)


def _same(grants: list[Grant], node: str) -> list[tuple[Any, ...]]:
    return [(node, g.generation, g.capability, g.state, g.issued_at, g.revoked_at)
            for g in grants]  # fmt: skip


def test_a_batch_is_the_grants_one_by_one_in_a_transaction(ledger: Ledger) -> None:
    _live(ledger, "one", "batch")
    with ledger.transaction():
        singly = [ledger.issue_grant("one", generation=1, capability=c) for c in CAPS]
    batch = ledger.issue_grants("batch", generation=1, capabilities=CAPS)
    assert _same(batch, "one") == _same(singly, "one")
    assert [g.capability for g in batch] == CAPS  # in the order given
    assert [g.grant_id for g in batch] == sorted(g.grant_id for g in batch)
    assert ledger.grants("batch") == batch
    assert ledger.live_grants("batch", 1) == frozenset(CAPS)
    one, many = _events(ledger, "one"), _events(ledger, "batch")
    assert [e[:3] for e in many] == [(k, g, a.replace("one", "batch")) for k, g, a, _ in one]
    # The detail's text, byte for byte as issue_grant writes it, names each grant's own id.
    for rows, grants in ((one, singly), (many, batch)):
        texts = [f'{{"capability": "{g.capability}", "grant_id": {g.grant_id}}}' for g in grants]
        assert [e[3] for e in rows if e[0] == "grant.issued"] == texts


def test_a_batch_runs_one_guard_and_one_statement_each_for_rows_and_events(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    _live(ledger, "body")
    log, opened = _count(ledger, monkeypatch)
    ledger.issue_grants("body", generation=1, capabilities=CAPS)
    lock = ["node_row_lock"] if ledger.backend.name == "postgres" else []
    assert opened == ["write"]
    assert log == [*lock, "node_and_lease", "grant_insert*", "event_insert*"]


def test_successor_grants_are_one_guard_and_one_write(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Failing before: a guard, a row and an event per grant, after a read of the live ones."""
    _live(ledger, "body")
    plan = {"capabilities": {"translations": [
        {"kind": "tool", "destination": "Bash"}, {"kind": "tool", "destination": "Read"},
        {"kind": "mcp", "destination": "github"}]}}  # fmt: skip
    log, opened = _count(ledger, monkeypatch)
    assert issue_successor_grants(ledger, "body", 1, plan) == sorted(CAPS)
    assert opened == ["write"]
    assert log.count("node_and_lease") == 1
    assert len([s for s in log if s.startswith("grant_insert")]) == 1
    # Retried (a launch run again): nothing new, no event, the same answer.
    before = _events(ledger, "body")
    del log[:]
    assert issue_successor_grants(ledger, "body", 1, plan) == sorted(CAPS)
    assert _events(ledger, "body") == before
    assert log.count("node_and_lease") == 1


def test_a_capability_granted_before_refuses_the_whole_batch(ledger: Ledger) -> None:
    _live(ledger, "body")
    first = ledger.issue_grant("body", generation=1, capability="tool:Read")
    before = _events(ledger, "body")
    with pytest.raises(Conflict, match="'tool:Read' was already granted to generation 1"):
        ledger.issue_grants("body", generation=1, capabilities=CAPS)
    assert ledger.grants("body") == [first]  # nothing of the batch kept
    assert _events(ledger, "body") == before
    with pytest.raises(Conflict, match="'tool:Bash' was already granted"):
        ledger.issue_grants("body", generation=1, capabilities=["tool:Bash", "tool:Bash"])
    assert ledger.grants("body") == [first]


def test_skip_granted_passes_over_what_the_generation_holds(ledger: Ledger) -> None:
    _live(ledger, "body")
    first = ledger.issue_grant("body", generation=1, capability="tool:Read")
    got = ledger.issue_grants("body", generation=1, capabilities=[*CAPS, "tool:Bash"],
                              skip_granted=True)  # fmt: skip
    assert [g.capability for g in got] == ["tool:Bash", "mcp:github"]
    assert ledger.grants("body") == [first, *got]
    kinds = [e[0] for e in _events(ledger, "body")]
    assert kinds.count("grant.issued") == 3  # one each, the held one's only once
    assert ledger.issue_grants("body", generation=1, capabilities=CAPS, skip_granted=True) == []


def test_a_stale_generation_gets_one_durable_denial_and_no_grant(ledger: Ledger) -> None:
    _live(ledger, "body")
    ledger.fence("body", expect_generation=1, reason="relief")
    with pytest.raises(StaleGeneration) as stale:
        ledger.issue_grants("body", generation=1, capabilities=CAPS, skip_granted=True)
    assert (stale.value.details["presented_generation"],
            stale.value.details["current_generation"]) == (1, 2)  # fmt: skip
    denials = ledger.denials("body")
    assert [(d.presented_generation, d.action) for d in denials] == [(1, "grant tool:Bash")]
    assert ledger.grants("body") == []

    # Inside a unit of work the unit is rolled back and the receipt still kept.
    def unit() -> None:
        with ledger.transaction():
            ledger.register_node("not-kept")
            ledger.issue_grants("body", generation=1, capabilities=CAPS)

    with pytest.raises(StaleGeneration):
        unit()
    assert len(ledger.denials("body")) == 2
    assert "not-kept" not in {n.node for n in ledger.list_nodes()}


def test_a_batch_checks_every_capability_before_writing(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    _live(ledger, "body")
    log, opened = _count(ledger, monkeypatch)
    for bad in (["tool:Bash", ""], ["tool:Bash", "  "], ["tool:Bash", "x" * 257],
                ["tool:Bash", "a\x00b"]):  # fmt: skip
        with pytest.raises(BadInput):
            ledger.issue_grants("body", generation=1, capabilities=bad)
    with pytest.raises(BadInput):
        ledger.issue_grants("../x", generation=1, capabilities=CAPS)
    assert ledger.issue_grants("body", generation=1, capabilities=[]) == []
    assert (log, opened) == ([], [])
    with pytest.raises(BadInput, match="generation"):
        ledger.issue_grants("body", generation=0, capabilities=CAPS)
    with pytest.raises(BadInput, match="no such node"):
        ledger.issue_grants("nobody", generation=1, capabilities=CAPS)
    assert ledger.grants("body") == []


def test_a_batch_longer_than_one_statement_keeps_its_order(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    _live(ledger, "body")
    caps = [f"tool:T{i:04d}" for i in range(2 * BATCH_ROWS + 7)][::-1]
    log, _ = _count(ledger, monkeypatch)
    got = ledger.issue_grants("body", generation=1, capabilities=caps)
    assert [g.capability for g in got] == caps
    assert [g.grant_id for g in got] == sorted(g.grant_id for g in got)
    assert log.count("grant_insert*") == log.count("event_insert*") == 3
    events = [e for e in ledger.history("body") if e.kind == "grant.issued"]
    assert [(e.detail["capability"], e.detail["grant_id"]) for e in events] == [
        (g.capability, g.grant_id) for g in got]  # fmt: skip


def test_repeat_rows_writes_the_values_row_again_and_nothing_else() -> None:
    sql = "INSERT INTO t (a, b) VALUES (?, lower(?)) ON CONFLICT (a) DO NOTHING RETURNING a"
    assert repeat_rows(sql, 1) == sql
    assert repeat_rows(sql, 3) == (
        "INSERT INTO t (a, b) VALUES (?, lower(?)), (?, lower(?)), (?, lower(?)) "
        "ON CONFLICT (a) DO NOTHING RETURNING a"
    )


def test_a_read_of_one_statement_opens_no_read_transaction(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Failing before: each of these was BEGIN, the statement, ROLLBACK (on PostgreSQL three
    round trips). Each gives the same answer, and a node that does not exist is still
    refused (asked only when the answer is empty)."""
    from onstation.ledger.correspondence import Correspondence
    from onstation.ledger.generation_bases import GenerationBases
    from onstation.ledger.relief_records import ReliefLedger

    _live(ledger, "body")
    ledger.fence("body", expect_generation=1)
    docs, relief = Correspondence(ledger), ReliefLedger(ledger)
    bases = GenerationBases(ledger)
    log, opened = _count(ledger, monkeypatch)
    reads: list[Callable[[], object]] = [
        lambda: ledger.history("body"),
        lambda: ledger.history("body", limit=2),
        lambda: ledger.events_of("body", after=0),
        lambda: ledger.dispatched_calls("body"),
        lambda: ledger.dispatched_calls("body", generation=1),
        lambda: ledger.open_effects("body"),
        ledger.halts,
        lambda: docs.messages("body"),
        lambda: docs.open_exchanges("body"),
        lambda: docs.notes("body"),
        lambda: docs.latest_document("body", "brief"),
        lambda: docs.late_documents("body"),
        lambda: bases.base_of("body", 1),
        lambda: relief.birth("body", 1),
        relief.tasks,
        lambda: relief.reliefs("body"),
    ]
    for read in reads:
        read()
    assert opened == []
    assert "node_get" not in log
    for read in (lambda: ledger.history("nobody"), lambda: ledger.dispatched_calls("nobody"),
                 lambda: ledger.events_of("nobody", after=0)):  # fmt: skip
        with pytest.raises(BadInput, match="no such node"):
            read()


def test_dispatched_calls_of_fenced_generations_follow_the_current_generation(
    ledger: Ledger,
) -> None:
    _live(ledger, "body")
    effect, _ = ledger.intend_effect("body", generation=1, operation="git.push",
                                     destination="file:///r", arguments={})  # fmt: skip
    ledger.dispatch_effect(effect.effect_id, generation=1)
    assert ledger.dispatched_calls("body") == []  # generation 1 is the current one
    assert [c.effect_id for c in ledger.dispatched_calls("body", generation=1)] == [
        effect.effect_id]  # fmt: skip
    ledger.fence("body", expect_generation=1)
    assert [c.effect_id for c in ledger.dispatched_calls("body")] == [effect.effect_id]
    assert ledger.dispatched_calls("body", generation=2) == []


def test_an_object_is_stored_in_one_statement_once_and_only_for_a_node(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Failing before: a node read, a digest read and the insert (three statements)."""
    from onstation.ledger.correspondence import Correspondence

    ledger.register_node("body")
    objects = Correspondence(ledger)
    plan = {"b": [1, 2.5, None, True], "a": {"é": "x"}}
    digest = "ab" * 32
    log, _ = _count(ledger, monkeypatch)
    assert objects.store_object("plan", "body", digest, plan) is True
    assert log == ["stored_object_insert"]
    assert objects.store_object("plan", "body", digest, {"other": 1}) is False  # kept once
    assert objects.stored_object("plan", digest).body == plan
    with pytest.raises(BadInput, match="no such node"):
        objects.store_object("plan", "nobody", digest, plan)  # even for a digest on record
    with pytest.raises(BadInput, match="no such node"):
        objects.store_object("plan", "nobody", "cd" * 32, plan)
    assert [e.kind for e in ledger.history("body")] == ["node.registered"]


def test_an_object_given_its_canonical_bytes_is_stored_as_them_once_they_are_its(
    ledger: Ledger,
) -> None:
    from onstation.core.canonical import canonical_bytes
    from onstation.ledger.correspondence import Correspondence

    ledger.register_node("body")
    objects = Correspondence(ledger)
    capsule = {"payload": {"z": 1, "a": [1.0, "ü"]}, "digest": "ef" * 32}
    exact = canonical_bytes(capsule)
    assert objects.store_object("capsule", "body", "ef" * 32, capsule, canonical=exact)
    assert objects.stored_object("capsule", "ef" * 32).body == capsule
    stored = ledger._read(lambda tx, _now: tx.one(
        "SELECT body FROM stored_object WHERE digest = ?", ("ef" * 32,)))  # fmt: skip
    assert stored is not None and stored[0] == exact.decode("utf-8")
    for wrong in (canonical_bytes({**capsule, "digest": "00" * 32}), b"\xff\xfe", b"{not json",
                  canonical_bytes(capsule["payload"])):  # fmt: skip
        with pytest.raises(BadInput, match="not the object's"):
            objects.store_object("capsule", "body", "12" * 32, capsule, canonical=wrong)
    with pytest.raises(BadInput, match="no capsule"):
        objects.stored_object("capsule", "12" * 32)


def test_a_relief_step_without_detail_is_one_update_and_keeps_the_detail(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Failing before: the relief was read (and its detail re-encoded) for every step."""
    from onstation.ledger.relief_records import ReliefLedger

    ledger.register_node("body")
    reliefs = ReliefLedger(ledger)
    rid = reliefs.open_relief("body", cause="test", by="t").relief_id
    first = reliefs.update_relief(rid, state="FENCED", to_generation=2,
                                  detail={"b": {"x": None}, "a": [1, "é"]})  # fmt: skip
    log, _ = _count(ledger, monkeypatch)
    step = reliefs.update_relief(rid, state="LAUNCHING", verdict="REBODIMENT_READY")
    assert log == ["relief_update_keeping_detail", "event_insert"]
    assert step.detail == first.detail == {"a": [1, "é"], "b": {"x": None}}
    assert (step.state, step.verdict, step.to_generation) == ("LAUNCHING", "REBODIMENT_READY", 2)
    done = reliefs.update_relief(rid, state="SETTLED", finished=True, report_path="r.md")
    assert done.finished_at is not None and done.report_path == "r.md"
    assert done.verdict == "REBODIMENT_READY"
    merged = reliefs.update_relief(rid, state="SETTLED", detail={"b": 1, "c": None})
    assert merged.detail == {"a": [1, "é"], "b": 1, "c": None}  # shallow, None kept
    assert reliefs.reliefs("body") == [merged]
    events = [e for e in ledger.history("body") if e.kind.startswith("relief.")]
    assert [(e.kind, e.generation, e.detail) for e in events[-3:]] == [
        ("relief.launching", 1, {"relief_id": rid, "verdict": "REBODIMENT_READY"}),
        ("relief.settled", 1, {"relief_id": rid, "verdict": None}),
        ("relief.settled", 1, {"relief_id": rid, "verdict": None}),
    ]
    with pytest.raises(BadInput, match="no such relief"):
        reliefs.update_relief(rid + 99, state="X")
