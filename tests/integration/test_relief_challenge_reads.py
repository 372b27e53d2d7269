"""The challenge wait reads the successor's birth and, once answered, its lease in one read
transaction per poll (issue 14: two before), so both describe one moment."""

from __future__ import annotations

from typing import Any

import pytest
from test_relief_batched_writes import relief  # noqa: F401 - the fixture

from onstation.ledger import Ledger
from onstation.ledger.relief_records import ReliefLedger
from onstation.relief.relieve import Relief


def test_each_poll_reads_the_birth_and_its_lease_together(
    relief: tuple[Ledger, Relief],  # noqa: F811 - the fixture
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ledger, run = relief
    reads: list[tuple[str, int | None, bool]] = []  # (what, the unit's id, answered)
    real_birth, real_lease = ReliefLedger.birth, Ledger.lease

    def unit() -> int | None:
        current = ledger._unit
        return id(current) if current is not None and current.read_only else None

    def birth(self: ReliefLedger, node: str, generation: int) -> Any:
        found = real_birth(self, node, generation)
        answered = found is not None and found.answered_at is not None
        reads.append(("birth", unit(), answered))
        return found

    def lease(self: Ledger, node: str, generation: int) -> Any:
        reads.append(("lease", unit(), True))
        return real_lease(self, node, generation)

    monkeypatch.setattr(ReliefLedger, "birth", birth)
    monkeypatch.setattr(Ledger, "lease", lease)
    outcome = run.run()
    assert outcome.state == "SETTLED", outcome
    leases = [i for i, (what, _, _) in enumerate(reads) if what == "lease"]
    assert leases, reads  # the echo came: its lease was read
    for i in leases:
        what, group, _ = reads[i - 1]
        # Right after an answered birth, inside the same read transaction.
        assert (what, reads[i - 1][2]) == ("birth", True) and group is not None, reads
        assert reads[i][1] == group, reads


def test_a_poll_reads_only_after_something_was_committed(
    relief: tuple[Ledger, Relief],  # noqa: F811 - the fixture
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Between two polls of the challenge wait with nothing committed (the ledger's change
    token unchanged) the birth is not read again; after any commit it is (issue 14)."""
    ledger, run = relief
    log: list[tuple[str, object]] = []  # ("poll", token) and ("birth", None), in order
    real_birth = ReliefLedger.birth
    world_sleep = run.opts.sleep
    stalled = {"left": 3}

    def birth(self: ReliefLedger, node: str, generation: int) -> Any:
        log.append(("birth", None))
        return real_birth(self, node, generation)

    def waiting(what: str, _elapsed: float, _total: float) -> None:
        if "challenge" in what:
            log.append(("poll", ledger.change_token()))

    def sleep(seconds: float) -> None:
        if log and log[-1][0] != "sleep" and stalled["left"] and any(k == "poll" for k, _ in log):
            stalled["left"] -= 1  # the successor says nothing yet: no commit at all
            log.append(("sleep", None))
            return
        log.append(("sleep", None))
        world_sleep(seconds)

    monkeypatch.setattr(ReliefLedger, "birth", birth)
    monkeypatch.setattr(run.opts, "waiting", waiting)
    monkeypatch.setattr(run.opts, "sleep", sleep)
    outcome = run.run()
    assert outcome.state == "SETTLED", outcome
    polls = [i for i, (kind, _) in enumerate(log) if kind == "poll"]
    skipped = 0
    for n, i in enumerate(polls):
        end = polls[n + 1] if n + 1 < len(polls) else len(log)
        read = any(kind == "birth" for kind, _ in log[i:end])
        unchanged = n > 0 and log[i][1] == log[polls[n - 1]][1]
        assert read != unchanged, (n, log)
        skipped += unchanged
    assert skipped >= 2, log  # the stalled polls read nothing


def test_the_shutdown_wait_reads_replies_only_after_a_commit(
    relief: tuple[Ledger, Relief],  # noqa: F811 - the fixture
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The predecessor never answers its shutdown request and nothing else is committed
    meanwhile: the wait reads the replies once, not once per poll (issue 14)."""
    from onstation.ledger.correspondence import Correspondence

    _ledger, run = relief
    reads = {"n": 0, "polls": 0}
    real = Correspondence.messages

    def messages(self: Correspondence, recipient: str) -> Any:
        reads["n"] += 1
        return real(self, recipient)

    def waiting(what: str, _elapsed: float, _total: float) -> None:
        reads["polls"] += "shutdown" in what

    monkeypatch.setattr(Correspondence, "messages", messages)
    monkeypatch.setattr(run.opts, "waiting", waiting)
    clock = run.launcher.world.clock  # type: ignore[union-attr]  # the SimLauncher's world
    monkeypatch.setattr(run.opts, "shutdown_wait", 30)
    monkeypatch.setattr(run.opts, "sleep", clock.advance)  # time passes, nobody acts
    result = run._shut_down_predecessor(1)
    assert result.startswith("shutdown not acknowledged"), result
    assert reads["polls"] == 6 and reads["n"] == 1, reads


def test_the_notices_of_a_relief_not_launched_commit_together(
    relief: tuple[Ledger, Relief],  # noqa: F811 - the fixture
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every copy of the notice is posted in one write transaction (issue 14); a copy refused
    for its recipient's name leaves the others posted."""
    from onstation.ledger.correspondence import Correspondence

    ledger, run = relief
    writes = {"n": 0}
    real_write = type(ledger.backend).write

    def write(self: Any, **kwargs: Any) -> Any:
        writes["n"] += 1
        return real_write(self, **kwargs)

    monkeypatch.setattr(type(ledger.backend), "write", write)
    run._notify("BLOCKED", ["HALTED: a drill"], fix=["onstation unhalt"])
    assert writes["n"] == 1
    told = Correspondence(ledger)
    for recipient in ("operator", "t"):
        [notice] = told.messages(recipient)
        assert notice.kind == "relief_not_launched" and "HALTED: a drill" in notice.body
    monkeypatch.setattr(run.opts, "by", "-not-a-name")
    run._notify("BLOCKED", ["HALTED: again"], fix=[])
    assert [m.body.count("again") for m in told.messages("operator")] == [0, 1]
