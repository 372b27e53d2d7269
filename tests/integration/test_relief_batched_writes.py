"""A relief's adjacent records commit together (issue 14): the fence with the relief's FENCED
and the fenced body's expired messages; the successor's birth, base, lease, session, grants
and LAUNCHING before anything launches. A failure inside either leaves none of its records,
and the relief ends ABORTED with nothing held. Driven by the simulator's world (a simulated
body and launcher) over a real ledger and a real git repository."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from onstation.harness.adapters import FAKE
from onstation.ledger import Ledger
from onstation.ledger.bodies import HarnessLedger
from onstation.ledger.relief_records import ReliefLedger
from onstation.relief.relieve import Relief, ReliefOptions
from onstation.sim.run import _git_repo
from onstation.sim.world import BODY_TTL, FaultRates, SimLauncher, World

NODE = "agent-1"
#: What the launch step records, in one transaction.
LAUNCH_RECORDS = ("birth.provisional", "generation.base", "lease.handed_over", "session.admitted",
                  "grant.issued", "relief.launching")  # fmt: skip


@pytest.fixture
def relief(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Ledger, Relief]]:
    monkeypatch.setenv("ONSTATION_KEYS_DIR", str(tmp_path / "keys"))
    world = World(1, FaultRates.zero())
    ledger = Ledger.open(str(tmp_path / "ledger.db"), clock=world.clock)
    world.body_ledger = ledger
    _git_repo(tmp_path / "repo", [NODE])
    workspace = str(tmp_path / "repo" / NODE)
    ledger.register_node(NODE, role="executor", by="t")
    ledger.open_episode(NODE, "the work", by="t")
    HarnessLedger(ledger).bind_workspace(workspace, NODE, harness=FAKE.session_harness, by="t")
    ledger.acquire_lease(NODE, holder="first body", ttl=BODY_TTL, by="t")
    world.start_body(NODE, 1, challenge=None)
    options = ReliefOptions(launcher=SimLauncher(world), by="t", emergency=True, brief_wait=0,
                            challenge_wait=60, shutdown_wait=5, poll=5, workspace=workspace,
                            sleep=world.sleep, monotonic=world.clock.monotonic,
                            witnesses=world.witnesses)  # fmt: skip
    try:
        yield ledger, Relief(ledger, NODE, options)
    finally:
        ledger.close()


def _kinds(ledger: Ledger) -> list[str]:
    return [e.kind for e in ledger.history(NODE)]


def test_a_failed_fence_record_leaves_the_body_unfenced(
    relief: tuple[Ledger, Relief], monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger, run = relief
    real = ReliefLedger.update_relief

    def failing(self: ReliefLedger, relief_id: int, **kwargs: Any) -> Any:
        if kwargs.get("state") == "FENCED":
            raise RuntimeError("disk full")
        return real(self, relief_id, **kwargs)

    monkeypatch.setattr(ReliefLedger, "update_relief", failing)
    with pytest.raises(RuntimeError, match="disk full"):
        run.run()
    assert ledger.get_node(NODE).generation == 1  # the fence went with its record
    live = ledger.live_lease(NODE)
    assert live is not None and live.generation == 1
    assert "node.fenced" not in _kinds(ledger)
    [record] = ReliefLedger(ledger).reliefs(NODE)
    assert record.state == "ABORTED" and record.to_generation is None


def test_a_failed_launch_record_leaves_no_birth_and_releases_the_hold(
    relief: tuple[Ledger, Relief], monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger, run = relief
    from onstation.relief import grants

    def failing(*_args: Any) -> list[str]:
        raise RuntimeError("disk full")

    monkeypatch.setattr(grants, "issue_successor_grants", failing)
    with pytest.raises(RuntimeError, match="disk full"):
        run.run()
    kinds = _kinds(ledger)
    # Nothing of the launch is on record: no birth, no base, no handed-over lease or session.
    assert ReliefLedger(ledger).birth(NODE, 2) is None
    assert not set(kinds) & set(LAUNCH_RECORDS), kinds
    # The generation the fence held for the successor is fenced in turn, never reused.
    assert ledger.get_node(NODE).generation == 3 and ledger.live_lease(NODE) is None
    [record] = ReliefLedger(ledger).reliefs(NODE)
    assert record.state == "ABORTED"


def test_a_relief_that_launches_records_each_step_in_order(relief: tuple[Ledger, Relief]) -> None:
    ledger, run = relief
    outcome = run.run()
    assert outcome.state == "SETTLED", outcome
    kinds = _kinds(ledger)
    fenced = kinds.index("node.fenced")
    assert kinds[fenced : fenced + 3] == ["node.fenced", "lease.acquired", "relief.fenced"]
    # The launch's records, in the order each step wrote them, then the answer.
    start = kinds.index("birth.provisional")
    launch = [k for k in kinds[start:] if k != "grant.issued"][: len(LAUNCH_RECORDS) - 1]
    assert launch == [k for k in LAUNCH_RECORDS if k != "grant.issued"], kinds
    assert "grant.issued" in kinds[start : kinds.index("relief.launching")]
    birth = ReliefLedger(ledger).birth(NODE, 2)
    assert birth is not None and birth.answered_at is not None
