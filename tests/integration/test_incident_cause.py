"""Why a body is relieved, from evidence (relief/incident_cause.py; issue 13): its host process
gone is a crash, its lease expired a hang, its hull at Red or Critical context pressure, and
anything else an operator's decision; a stated class is used and the observed one kept."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from onstation.harness import witness
from onstation.harness.adapters import HookCall
from onstation.harness.config import WorkspaceConfig
from onstation.harness.witness import WitnessCheck
from onstation.ledger import Ledger
from onstation.ledger.bodies import HarnessLedger
from onstation.relief.hooks import HookRunner
from onstation.relief.incident_cause import observed_cause, stated_cause
from onstation.testing import FakeClock

NODE = "exec-1"


def witnesses(state: str) -> SimpleNamespace:
    """Process observation as the relief is given it, with every check answering ``state``."""
    reason = {"GONE": "pid 4242 exited", "MATCH": "running", "UNKNOWN": "another host"}[state]
    return SimpleNamespace(ProcessWitness=witness.ProcessWitness,
                           check=lambda _w: WitnessCheck(state, reason))  # fmt: skip


def admitted(ledger: Ledger, cwd: Path) -> HarnessLedger:
    """A body of NODE admitted by its SessionStart, with its host process recorded."""
    ledger.register_node(NODE)
    runner = HookRunner(ledger, "claude-code", WorkspaceConfig(node=NODE))
    runner.handle(HookCall.from_payload("claude-code", "SessionStart", {
        "session_id": "sess-1", "cwd": str(cwd), "hook_event_name": "SessionStart",
        "transcript_path": str(cwd / "none.jsonl"), "source": "startup",
    }))  # fmt: skip
    return HarnessLedger(ledger)


def fill(records: HarnessLedger, tier: str, percent: float) -> None:
    session = records.session("sess-1")
    assert session is not None
    records.record_fill(session, percent=percent, used_tokens=int(percent * 2000),
                        window_tokens=200_000, source="test", model="claude-sonnet-4-5",
                        tier=tier)  # fmt: skip


def test_each_cause_is_read_from_its_evidence(ledger: Ledger, clock: FakeClock,
                                              tmp_path: Path) -> None:  # fmt: skip
    records = admitted(ledger, tmp_path)
    fill(records, "green", 12.0)
    alive = observed_cause(ledger, NODE, witnesses("MATCH"))
    assert (alive.incident, alive.process_state) == ("operator", "alive")
    fill(records, "red", 34.0)
    pressure = observed_cause(ledger, NODE, witnesses("MATCH"))
    assert (pressure.incident, pressure.process_state) == ("context-pressure", "alive")
    assert "Red at 34.0 %" in pressure.why
    crash = observed_cause(ledger, NODE, witnesses("GONE"))
    assert (crash.incident, crash.process_state) == ("crash", "dead")
    assert "pid 4242 exited" in crash.why
    # A host that cannot be checked from here proves nothing: not a crash.
    assert observed_cause(ledger, NODE, witnesses("UNKNOWN")).incident == "context-pressure"
    clock.advance(days=30)  # far past any lease: nobody renewed it
    hang = observed_cause(ledger, NODE, witnesses("UNKNOWN"))
    assert (hang.incident, hang.process_state) == ("hang", "unknown")
    assert "expired" in hang.why


def test_no_body_and_a_stated_class(ledger: Ledger, tmp_path: Path) -> None:
    other = "exec-2"
    ledger.register_node(other)
    nobody = observed_cause(ledger, other, witnesses("MATCH"))
    assert (nobody.incident, nobody.witnessed) == ("operator", False)
    admitted(ledger, tmp_path)
    observed = observed_cause(ledger, NODE, witnesses("GONE"))
    assert observed.incident == "crash"
    stated = stated_cause("context-pressure", observed)
    assert stated.incident == "context-pressure"
    assert "stated by the operator" in stated.why and "crash" in stated.why
    assert stated.process_state == "dead"  # a dead process stays dead, whatever is stated
    assert stated_cause("crash", observed) is observed
