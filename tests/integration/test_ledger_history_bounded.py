"""The history read in bounded pieces, on every backend: ``history(node, limit=N)`` is the
tail of the full history and reads only those N rows; ``events_of`` follows one node from a
sequence number. The team lead polls these on every loop, so they must not read the past."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from onstation.core.errors import BadInput
from onstation.core.types import Event
from onstation.ledger import Ledger
from onstation.ledger.backends import Asked, Params, Row, Tx

NODES = ("h-0", "h-1", "h-2")
KINDS = ("node.fenced", "lease.acquired", "node.registered", "halt.raised", "no.such.kind")

# The ledger fixture lives for the whole test, so examples add to one growing history: every
# property below holds whatever came before.
_examples = settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# A step adds history: for a node, a fence and perhaps an admission; for None, a global halt
# raised and lifted (events of no node).
_steps = st.lists(st.tuples(st.sampled_from([*NODES, None]), st.booleans()), max_size=25)


def _register(ledger: Ledger) -> None:
    for name in NODES:
        if name not in {n.node for n in ledger.list_nodes()}:
            ledger.register_node(name)


def _apply(ledger: Ledger, steps: list[tuple[str | None, bool]]) -> None:
    for node, admit in steps:
        if node is None:
            ledger.halt(by="test", why="a global event")
            ledger.unhalt(by="test")
            continue
        fenced = ledger.fence(node, expect_generation=ledger.get_node(node).generation)
        if admit:
            ledger.acquire_lease(node, expect_generation=fenced.generation)


@given(steps=_steps, limits=st.lists(st.integers(min_value=1, max_value=80), min_size=1))
@_examples
def test_history_with_a_limit_is_the_tail_of_the_full_history(
    ledger: Ledger, steps: list[tuple[str | None, bool]], limits: list[int]
) -> None:
    _register(ledger)
    _apply(ledger, steps)
    for node in [None, *NODES]:
        full = ledger.history(node)
        assert [e.seq for e in full] == sorted(e.seq for e in full)
        if node is not None:
            assert {e.node for e in full} == {node}
        for limit in limits:
            tail = ledger.history(node, limit=limit)
            assert tail == full[-limit:]
            assert len(tail) == min(limit, len(full))


def test_the_tail_follows_the_history_as_it_grows(ledger: Ledger) -> None:
    ledger.register_node("h-0")
    ledger.register_node("h-1")
    for generation in range(1, 4):
        ledger.fence("h-0", expect_generation=generation)
    [last] = ledger.history("h-0", limit=1)
    assert last.kind == "node.fenced" and last.generation == 4
    assert [e.kind for e in ledger.history(limit=2)] == ["node.fenced", "node.fenced"]
    ledger.acquire_lease("h-1")
    assert [e.node for e in ledger.history(limit=2)] == ["h-0", "h-1"]
    assert ledger.history("h-1", limit=5) == ledger.history("h-1")
    assert [e.kind for e in ledger.history("h-1", limit=5)] == ["node.registered",
                                                                 "lease.acquired"]  # fmt: skip


@pytest.mark.parametrize("node", [None, "h-0"])
@pytest.mark.parametrize("limit", [0, -1])
def test_a_limit_below_one_is_refused(ledger: Ledger, node: str | None, limit: int) -> None:
    ledger.register_node("h-0")
    with pytest.raises(BadInput, match="--limit: must be at least 1"):
        ledger.history(node, limit=limit)
    with pytest.raises(BadInput, match="--limit: must be at least 1"):
        ledger.events_of("h-0", limit=limit)


@pytest.mark.parametrize("limit", [None, 1, 50])
def test_the_history_of_an_unknown_node_is_refused(ledger: Ledger, limit: int | None) -> None:
    with pytest.raises(BadInput, match="no such node"):
        ledger.history("nobody", limit=limit)
    with pytest.raises(BadInput, match="no such node"):
        ledger.events_of("nobody")


class _CountingTx:
    """A transaction that records how many rows each multi-row read returned."""

    def __init__(self, tx: Tx, fetched: list[int]) -> None:
        self._tx = tx
        self._fetched = fetched

    def one(self, sql: str, params: Params = ()) -> Row | None:
        return self._tx.one(sql, params)

    def all(self, sql: str, params: Params = ()) -> list[Row]:
        rows = self._tx.all(sql, params)
        self._fetched.append(len(rows))
        return rows

    def run(self, sql: str, params: Params = ()) -> int:
        return self._tx.run(sql, params)

    def send(self, sql: str, params: Params = ()) -> None:
        self._tx.send(sql, params)

    def ask(self, sql: str, params: Params = ()) -> Asked:
        return self._tx.ask(sql, params)


def _count_reads(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    fetched: list[int] = []
    # Both ways a read runs: in a read transaction, or as one statement on its own.
    for name in ("_read", "_read_single"):
        read = getattr(ledger, name)

        def counting(body: Callable[[Tx, int], Any], read: Any = read) -> Any:
            return read(lambda tx, now: body(_CountingTx(tx, fetched), now))

        monkeypatch.setattr(ledger, name, counting)
    return fetched


def test_a_limited_history_reads_only_the_rows_it_returns(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger.register_node("h-0")
    ledger.register_node("h-1")
    for generation in range(1, 21):
        ledger.fence("h-0", expect_generation=generation)
        ledger.fence("h-1", expect_generation=generation)
    fetched = _count_reads(ledger, monkeypatch)
    assert len(ledger.history("h-0", limit=3)) == 3
    assert len(ledger.history(limit=4)) == 4
    assert len(ledger.events_of("h-0", after=0, limit=2)) == 2
    assert fetched == [3, 4, 2]
    fetched.clear()
    assert len(ledger.history("h-0")) == 21  # without a limit: every event, as before
    assert fetched == [21]


@given(
    steps=_steps,
    node=st.sampled_from(NODES),
    back=st.integers(min_value=0, max_value=60),
    kind=st.sampled_from([None, *KINDS]),
    limit=st.integers(min_value=1, max_value=60),
)
@_examples
def test_events_of_is_the_node_history_after_a_sequence_number(
    ledger: Ledger,
    steps: list[tuple[str | None, bool]],
    node: str,
    back: int,
    kind: str | None,
    limit: int,
) -> None:
    _register(ledger)
    _apply(ledger, steps)
    full = ledger.history(node)
    # A sequence number from just past the newest event back into (or before) the history.
    after = max(0, full[-1].seq + 2 - back)
    expected = [e for e in full if e.seq > after and (kind is None or e.kind == kind)][:limit]
    assert ledger.events_of(node, after=after, kind=kind, limit=limit) == expected


def test_events_of_follows_a_node_page_by_page(ledger: Ledger) -> None:
    ledger.register_node("h-0")
    ledger.register_node("h-1")
    for generation in range(1, 8):
        ledger.fence("h-0", expect_generation=generation)
        ledger.fence("h-1", expect_generation=generation)
    seen: list[Event] = []
    cursor = 0
    while page := ledger.events_of("h-0", after=cursor, limit=3):
        assert len(page) <= 3
        seen += page
        cursor = page[-1].seq
    assert seen == ledger.history("h-0")
    fences = ledger.events_of("h-0", kind="node.fenced", after=seen[3].seq)
    assert [e.generation for e in fences] == [5, 6, 7, 8]
    with pytest.raises(BadInput, match="--after: must be at least 0"):
        ledger.events_of("h-0", after=-1)


def test_open_effects_are_the_unsettled_ones_and_read_only_those(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger.register_node("h-0")
    generation = ledger.acquire_lease("h-0", holder="body").generation
    settled = []
    for n in range(12):
        effect, _ = ledger.intend_effect("h-0", generation=generation, operation="git.push",
                                         destination=f"file:///r{n}",
                                         arguments={"n": n})  # fmt: skip
        ledger.dispatch_effect(effect.effect_id, generation=generation)
        ledger.observe_effect(effect.effect_id, generation=generation, result={"ok": True})
        settled.append(ledger.commit_effect(effect.effect_id, generation=generation))
    still, _ = ledger.intend_effect("h-0", generation=generation, operation="git.push",
                                    destination="file:///open", arguments={})  # fmt: skip
    sent, _ = ledger.intend_effect("h-0", generation=generation, operation="git.push",
                                   destination="file:///sent", arguments={})  # fmt: skip
    ledger.dispatch_effect(sent.effect_id, generation=generation)
    fetched = _count_reads(ledger, monkeypatch)
    opened = ledger.open_effects("h-0")
    assert [(e.effect_id, e.state.value) for e in opened] == [
        (still.effect_id, "INTENDED"), (sent.effect_id, "DISPATCHED")]  # fmt: skip
    assert fetched == [2]  # the twelve settled effects were not read
    expected = [e for e in ledger.effects("h-0") if e.state.value in
                ("INTENDED", "DISPATCHED", "OBSERVED", "AMBIGUOUS")]  # fmt: skip
    assert opened == expected
