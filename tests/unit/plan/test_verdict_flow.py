"""The verdict engine follows the seed's decision flow, first failing node deciding."""

from __future__ import annotations

import dataclasses

import pytest

from onstation.core.verdict import (
    CapacityStatus,
    Disposition,
    IncidentKind,
    Observations,
    Operation,
    ProcessState,
    VerdictInputs,
    classify_incident,
    decide,
)

READY_INPUTS = VerdictInputs(
    operation=Operation.REBODIMENT,
    incident=IncidentKind.PROCESS_DEATH,
    body_ever_witnessed=True,
    process_state=ProcessState.DEAD,
    predecessor_fenced=True,
    effects_revoked=True,
    capacity=CapacityStatus.ADMISSIBLE,
)


def _with(**changes: object) -> VerdictInputs:
    return dataclasses.replace(READY_INPUTS, **changes)  # type: ignore[arg-type]


def test_all_gates_pass_gives_rebodiment_ready_by_successor_prompt() -> None:
    verdict = decide(READY_INPUTS)
    assert verdict.disposition is Disposition.REBODIMENT_READY
    assert verdict.mode == "successor-prompt"
    assert verdict.path == ("A", "B", "D", "F", "G", "I", "J", "L", "M", "N")


def test_current_native_proof_gives_native_resume_eligible() -> None:
    verdict = decide(_with(native_proof_gaps=()))
    assert verdict.disposition is Disposition.NATIVE_RESUME_ELIGIBLE
    assert verdict.mode == "native-resume"
    assert "K" in verdict.path


@pytest.mark.parametrize(
    "operation",
    [Operation.IDENTITY_RESURRECTION, Operation.CREDENTIAL_TRANSFER, Operation.SELF_SUPERVISION],
)
def test_forbidden_operations_are_invalid_whatever_the_evidence(operation: Operation) -> None:
    verdict = decide(_with(operation=operation))
    assert verdict.disposition is Disposition.INVALID
    assert verdict.path == ()


def test_a_credential_transfer_hidden_in_a_translation_is_invalid() -> None:
    verdict = decide(_with(forbidden_requests=("mcp github: would transfer a credential",)))
    assert verdict.disposition is Disposition.INVALID


@pytest.mark.parametrize(
    ("changes", "disposition", "code"),
    [
        (
            {"identity_conflicts": ("ledger says executor-8",)},
            Disposition.QUARANTINED,
            "IDENTITY_UNKNOWN",
        ),
        ({"predecessor_fenced": False}, Disposition.QUARANTINED, "PREDECESSOR_NOT_FENCED"),
        (
            {"process_state": ProcessState.UNKNOWN, "effects_revoked": False},
            Disposition.QUARANTINED,
            "PROCESS_UNKNOWN",
        ),
        ({"ambiguous_effects": ("git.push",)}, Disposition.QUARANTINED, "AMBIGUOUS_EFFECT"),
        ({"capsule_defects": ("split tool pair",)}, Disposition.QUARANTINED, "CAPSULE_DEFECT"),
        ({"capability_blocks": ("skill x UNKNOWN",)}, Disposition.BLOCKED, "CAPABILITY_BLOCKED"),
        ({"respawn_allowed": False}, Disposition.BLOCKED, "RESPAWN_REFUSED"),
        (
            {"capacity": CapacityStatus.CLASS_MISMATCH},
            Disposition.BLOCKED,
            "CAPACITY_CLASS_MISMATCH",
        ),
        ({"capacity": CapacityStatus.INSUFFICIENT}, Disposition.BLOCKED, "CAPACITY_INSUFFICIENT"),
        ({"capacity": CapacityStatus.STALE}, Disposition.HIBERNATE, "CAPACITY_STALE"),
        ({"capacity": CapacityStatus.UNKNOWN}, Disposition.HIBERNATE, "CAPACITY_UNKNOWN"),
        (
            {"capacity": CapacityStatus.NO_RESERVATION},
            Disposition.HIBERNATE,
            "CAPACITY_NO_RESERVATION",
        ),
        ({"incident": IncidentKind.DELIBERATE_PAUSE}, Disposition.HIBERNATE, "DELIBERATE_PAUSE"),
    ],
)
def test_each_failing_node_decides(
    changes: dict[str, object], disposition: Disposition, code: str
) -> None:
    verdict = decide(_with(**changes))
    assert verdict.disposition is disposition
    assert {r.code for r in verdict.reasons} == {code}


def test_the_first_failing_node_wins() -> None:
    verdict = decide(
        _with(ambiguous_effects=("push",), capsule_defects=("x",), capability_blocks=("y",))
    )
    assert verdict.disposition is Disposition.QUARANTINED
    assert {r.code for r in verdict.reasons} == {"AMBIGUOUS_EFFECT"}


def test_capability_block_outranks_hibernation() -> None:
    verdict = decide(_with(capability_blocks=("x",), capacity=CapacityStatus.STALE))
    assert verdict.disposition is Disposition.BLOCKED


def test_birth_failure_without_retry_owner_is_blocked_and_keeps_the_obligation() -> None:
    verdict = decide(
        _with(
            body_ever_witnessed=False, incident=IncidentKind.BIRTH_FAILURE, predecessor_fenced=False
        )
    )
    assert verdict.disposition is Disposition.BLOCKED
    assert verdict.birth_failed
    assert verdict.path == ("A", "B", "C", "E", "O")


def test_birth_failure_with_retry_owner_skips_fence_and_goes_to_the_gates() -> None:
    verdict = decide(
        _with(
            body_ever_witnessed=False,
            incident=IncidentKind.BIRTH_FAILURE,
            predecessor_fenced=False,
            retry_owner="team-lead",
            retry_reservation="res-1",
            native_proof_gaps=(),
        )
    )
    assert verdict.disposition is Disposition.REBODIMENT_READY  # never native: no session
    assert verdict.path == ("A", "B", "C", "E", "M", "N")


def test_a_retried_birth_is_quarantined_while_an_earlier_effect_is_ambiguous() -> None:
    """A relief after a QUARANTINED one: its held generation never had a body (a birth
    failure), but the push the earlier generation left AMBIGUOUS is still unresolved."""
    verdict = decide(
        _with(
            body_ever_witnessed=False,
            incident=IncidentKind.BIRTH_FAILURE,
            predecessor_fenced=False,
            retry_owner="team-lead",
            retry_reservation="res-1",
            ambiguous_effects=("eff-1",),
        )
    )
    assert verdict.disposition is Disposition.QUARANTINED
    assert verdict.path == ("A", "B", "C", "E", "G", "H")
    assert [r.code for r in verdict.reasons] == ["AMBIGUOUS_EFFECT"]


@pytest.mark.parametrize(
    ("obs", "kind"),
    [
        (Observations(False, ProcessState.NEVER_STARTED), IncidentKind.BIRTH_FAILURE),
        (Observations(True, ProcessState.DEAD, heartbeat_lost=True), IncidentKind.PROCESS_DEATH),
        (
            Observations(True, ProcessState.UNKNOWN, heartbeat_lost=True),
            IncidentKind.HEARTBEAT_LOSS,
        ),
        (
            Observations(True, ProcessState.ALIVE, provider_stream_lost=True),
            IncidentKind.PROVIDER_STREAM_LOSS,
        ),
        (
            Observations(True, ProcessState.ALIVE, session_record_lost=True),
            IncidentKind.SESSION_RECORD_LOSS,
        ),
        (
            Observations(True, ProcessState.ALIVE, context_pressure=True),
            IncidentKind.CONTEXT_PRESSURE,
        ),
        (Observations(True, ProcessState.UNKNOWN, host_rebooted=True), IncidentKind.HOST_REBOOT),
        (
            Observations(True, ProcessState.ALIVE, deliberate_pause=True),
            IncidentKind.DELIBERATE_PAUSE,
        ),
    ],
)
def test_incident_classification(obs: Observations, kind: IncidentKind) -> None:
    assert classify_incident(obs) is kind


def test_heartbeat_loss_is_not_proof_of_death() -> None:
    kind = classify_incident(Observations(True, ProcessState.UNKNOWN, heartbeat_lost=True))
    verdict = decide(
        _with(incident=kind, process_state=ProcessState.UNKNOWN, effects_revoked=False)
    )
    assert verdict.disposition is Disposition.QUARANTINED
