"""The lead's watch of hull tiers (relief/team.py, issue 14): the same answer as reading the
whole history on every poll, from only the events since the last poll."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from onstation.harness.adapters import HookCall
from onstation.harness.config import WorkspaceConfig
from onstation.ledger import Ledger
from onstation.ledger.bodies import HarnessLedger
from onstation.relief.hooks import HookRunner
from onstation.relief.team import _due, _TierWatch

NODE = "exec-1"


def fill(records: HarnessLedger, tier: str, *, supervised: bool = True) -> None:
    session = records.session("sess-1")
    assert session is not None
    records.record_fill(session, percent=40.0, used_tokens=80_000, window_tokens=200_000,
                        source="test", model=None, tier=tier, supervised=supervised)  # fmt: skip


def test_the_watch_finds_a_supervised_red_from_the_new_events_only(
    ledger: Ledger, tmp_path: Path
) -> None:
    ledger.register_node(NODE)
    HookRunner(ledger, "claude-code", WorkspaceConfig(node=NODE)).handle(HookCall.from_payload(
        "claude-code", "SessionStart", {"session_id": "sess-1", "cwd": str(tmp_path),
                                        "hook_event_name": "SessionStart", "source": "startup"},
    ))  # fmt: skip
    records = HarnessLedger(ledger)
    read: list[int] = []
    real = ledger.events_of

    def counted(node: str, **kwargs: Any) -> Any:
        page = real(node, **kwargs)
        read.extend(e.seq for e in page)
        return page

    ledger.events_of = counted  # type: ignore[method-assign]
    watch = _TierWatch()
    handled: set[tuple[str, int]] = set()
    assert _due(ledger, NODE, handled, watch) is None
    fill(records, "amber")
    assert _due(ledger, NODE, handled, watch) is None
    fill(records, "red")
    assert _due(ledger, NODE, handled, watch) == ("hull integrity red", False)
    assert _due(ledger, NODE, handled, watch) == ("hull integrity red", False)
    assert len(read) == len(set(read))  # no event was read twice
    handled.add((NODE, 1))
    assert _due(ledger, NODE, handled, watch) is None
    ledger.fence(NODE, expect_generation=1, by="lead", reason="relief")
    assert _due(ledger, NODE, set(), watch) is None  # generation 2 has no alarm of its own
