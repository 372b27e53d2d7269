"""The continuity verdict: the seed's decision flow as one pure function.

The flow (``shared/seeds/002``, "Continuity Decision Flow"), with its node letters::

    A observe missing or threatened body
    B was a body ever witnessed?  no -> C BIRTH_FAILED, obligation retained
                                        E explicit retry owner and reservation?
                                          no  -> O (BLOCKED: no authority to retry)
                                          yes -> G (an earlier generation's ambiguous effect
                                                 still quarantines) -> M
                                  yes -> D fence predecessor generation
    F reconcile process, claims and effects
    G any effect ambiguous?       yes -> H QUARANTINED (do not repeat the effect)
    I build and verify capsule    defect -> QUARANTINED
    J native session proof current?  yes -> K native resume; no -> L cross-family successor
    M compile fresh destination capabilities
    N capacity and capability gates pass?  no -> O HIBERNATE or BLOCKED
    -> REBODIMENT_READY / NATIVE_RESUME_ELIGIBLE (P..T happen outside: a verdict is a proof
       result, never permission to launch)

Before A, the request itself is checked: identity resurrection, credential transfer and
self-supervision are INVALID whatever the evidence; disagreeing identity sources stop at
IDENTITY_UNKNOWN (QUARANTINED). The first node that fails decides the disposition and the
flow stops there, as in the seed; ``path`` records the nodes visited so an operator can see
how far the proof got.

How O is split: a capability that cannot be granted without widening or that is required
and unrepresentable, a respawn the governor refuses, capacity evidence of the wrong
execution class or capacity that is exhausted are BLOCKED (capability, authority or
capacity unavailable); stale or unknown capacity evidence and a missing reservation are
HIBERNATE (a safe capsule exists, but no body is admissible yet).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Disposition(StrEnum):
    """The six verdicts."""

    REBODIMENT_READY = "REBODIMENT_READY"
    NATIVE_RESUME_ELIGIBLE = "NATIVE_RESUME_ELIGIBLE"
    HIBERNATE = "HIBERNATE"
    QUARANTINED = "QUARANTINED"
    BLOCKED = "BLOCKED"
    INVALID = "INVALID"


READY = frozenset({Disposition.REBODIMENT_READY, Disposition.NATIVE_RESUME_ELIGIBLE})


class Operation(StrEnum):
    """What was asked. "Resume" alone is never an operation."""

    REBODIMENT = "rebodiment"
    TAKEOVER = "takeover"
    SESSION_REACTIVATION = "session-reactivation"
    IDENTITY_RESURRECTION = "identity-resurrection"
    CREDENTIAL_TRANSFER = "credential-transfer"
    SELF_SUPERVISION = "self-supervision"


#: Requests this system refuses outright.
FORBIDDEN = frozenset(
    {Operation.IDENTITY_RESURRECTION, Operation.CREDENTIAL_TRANSFER, Operation.SELF_SUPERVISION}
)


class IncidentKind(StrEnum):
    """Step 1 of the procedure: what actually happened to the body."""

    BIRTH_FAILURE = "BIRTH_FAILURE"
    PROCESS_DEATH = "PROCESS_DEATH"
    HEARTBEAT_LOSS = "HEARTBEAT_LOSS"
    PROVIDER_STREAM_LOSS = "PROVIDER_STREAM_LOSS"
    SESSION_RECORD_LOSS = "SESSION_RECORD_LOSS"
    CONTEXT_PRESSURE = "CONTEXT_PRESSURE"
    HOST_REBOOT = "HOST_REBOOT"
    DELIBERATE_PAUSE = "DELIBERATE_PAUSE"


class ProcessState(StrEnum):
    """What the external process witnesses say about the predecessor."""

    DEAD = "dead"
    ALIVE = "alive"
    UNKNOWN = "unknown"
    NEVER_STARTED = "never-started"


class CapacityStatus(StrEnum):
    """The capacity gate's input, judged from the capacity-evidence artifact."""

    ADMISSIBLE = "ADMISSIBLE"
    STALE = "STALE"
    UNKNOWN = "UNKNOWN"
    NO_RESERVATION = "NO_RESERVATION"
    INSUFFICIENT = "INSUFFICIENT"
    CLASS_MISMATCH = "CLASS_MISMATCH"


_CAPACITY_HIBERNATES = frozenset(
    {CapacityStatus.STALE, CapacityStatus.UNKNOWN, CapacityStatus.NO_RESERVATION}
)


@dataclass(frozen=True)
class Observations:
    """Raw incident observations, as the adapters and witnesses report them."""

    body_ever_witnessed: bool
    process_state: ProcessState
    heartbeat_lost: bool = False
    provider_stream_lost: bool = False
    session_record_lost: bool = False
    context_pressure: bool = False
    host_rebooted: bool = False
    deliberate_pause: bool = False


def classify_incident(obs: Observations) -> IncidentKind:
    """Name the incident. Heartbeat loss is not proof of death; a provider error is not proof
    that an effect failed: the most specific *proven* kind wins, in this order."""
    if not obs.body_ever_witnessed or obs.process_state is ProcessState.NEVER_STARTED:
        return IncidentKind.BIRTH_FAILURE
    if obs.deliberate_pause:
        return IncidentKind.DELIBERATE_PAUSE
    if obs.host_rebooted:
        return IncidentKind.HOST_REBOOT
    if obs.process_state is ProcessState.DEAD:
        return IncidentKind.PROCESS_DEATH
    if obs.heartbeat_lost:
        return IncidentKind.HEARTBEAT_LOSS
    if obs.session_record_lost:
        return IncidentKind.SESSION_RECORD_LOSS
    if obs.provider_stream_lost:
        return IncidentKind.PROVIDER_STREAM_LOSS
    if obs.context_pressure:
        return IncidentKind.CONTEXT_PRESSURE
    if obs.process_state is ProcessState.UNKNOWN:
        return IncidentKind.HEARTBEAT_LOSS
    # A live, witnessed body with nothing lost is only threatened (the relief path).
    return IncidentKind.CONTEXT_PRESSURE


@dataclass(frozen=True)
class Reason:
    """One cause of the disposition: a stable code and a sentence for the operator."""

    code: str
    detail: str

    def to_json(self) -> dict[str, str]:
        """``{"code", "detail"}``."""
        return {"code": self.code, "detail": self.detail}


@dataclass(frozen=True)
class VerdictInputs:
    """Everything the flow needs, already judged by the layers that own each fact."""

    operation: Operation
    incident: IncidentKind
    body_ever_witnessed: bool
    process_state: ProcessState
    identity_conflicts: tuple[str, ...] = ()
    forbidden_requests: tuple[str, ...] = ()
    retry_owner: str | None = None
    retry_reservation: str | None = None
    predecessor_fenced: bool = False
    effects_revoked: bool = False
    ambiguous_effects: tuple[str, ...] = ()
    capsule_defects: tuple[str, ...] = ()
    native_proof_gaps: tuple[str, ...] = ("no native session proof",)
    capability_blocks: tuple[str, ...] = ()
    capacity: CapacityStatus = CapacityStatus.UNKNOWN
    capacity_detail: str = ""
    respawn_allowed: bool = True
    respawn_detail: str = ""


@dataclass(frozen=True)
class Verdict:
    """The disposition, why, which flow nodes were visited, and which mode was proposed."""

    disposition: Disposition
    reasons: tuple[Reason, ...]
    path: tuple[str, ...]
    mode: str = "none"
    birth_failed: bool = False
    notes: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        """The plan's ``verdict`` object."""
        return {
            "disposition": self.disposition.value,
            "reasons": [r.to_json() for r in self.reasons],
            "path": list(self.path),
        }


def decide(inp: VerdictInputs) -> Verdict:
    """Run the decision flow; the first failing node decides."""
    path: list[str] = []

    def stop(disposition: Disposition, *reasons: Reason, mode: str = "none") -> Verdict:
        return Verdict(disposition, tuple(reasons), tuple(path), mode, birth_failed)

    birth_failed = False
    if inp.operation in FORBIDDEN:
        return stop(
            Disposition.INVALID,
            Reason(
                f"FORBIDDEN_{inp.operation.name}",
                f"{inp.operation.value} is a forbidden operation for this system",
            ),
        )
    if inp.forbidden_requests:
        return stop(
            Disposition.INVALID,
            *(Reason("FORBIDDEN_CREDENTIAL_TRANSFER", d) for d in inp.forbidden_requests),
        )
    if inp.identity_conflicts:
        return stop(
            Disposition.QUARANTINED,
            *(Reason("IDENTITY_UNKNOWN", d) for d in inp.identity_conflicts),
        )
    path.append("A")
    path.append("B")
    if not inp.body_ever_witnessed or inp.incident is IncidentKind.BIRTH_FAILURE:
        birth_failed = True
        path += ["C", "E"]
        if inp.retry_owner is None or inp.retry_reservation is None:
            path.append("O")
            return stop(
                Disposition.BLOCKED,
                Reason(
                    "BIRTH_FAILED_NO_RETRY_OWNER",
                    "no body was ever witnessed; the obligation is retained and no explicit "
                    "retry owner holds a reservation, so nothing may retry",
                ),
            )
        if inp.ambiguous_effects:
            # An effect an earlier generation left AMBIGUOUS is unresolved: a retried birth (a
            # relief after a QUARANTINED one, whose held generation never had a body) must not
            # launch past it either.
            path += ["G", "H"]
            return stop(Disposition.QUARANTINED, *_ambiguous_reasons(inp))
        return _gates(inp, path, native=False, birth_failed=True)
    if inp.incident is IncidentKind.DELIBERATE_PAUSE:
        path.append("O")
        return stop(
            Disposition.HIBERNATE,
            Reason("DELIBERATE_PAUSE", "the body was paused on purpose; no successor is proposed"),
        )
    path.append("D")
    if not inp.predecessor_fenced:
        return stop(
            Disposition.QUARANTINED,
            Reason(
                "PREDECESSOR_NOT_FENCED",
                "the predecessor generation is not fenced; two effect-capable generations "
                "could exist",
            ),
        )
    path.append("F")
    if inp.process_state is ProcessState.UNKNOWN and not inp.effects_revoked:
        return stop(
            Disposition.QUARANTINED,
            Reason(
                "PROCESS_UNKNOWN",
                "heartbeat missing but the process is unknown: revoke its effects before "
                "assuming death",
            ),
        )
    path.append("G")
    if inp.ambiguous_effects:
        path.append("H")
        return stop(Disposition.QUARANTINED, *_ambiguous_reasons(inp))
    path.append("I")
    if inp.capsule_defects:
        return stop(
            Disposition.QUARANTINED, *(Reason("CAPSULE_DEFECT", d) for d in inp.capsule_defects)
        )
    path.append("J")
    native = not inp.native_proof_gaps
    path.append("K" if native else "L")
    return _gates(inp, path, native=native, birth_failed=False)


def _gates(inp: VerdictInputs, path: list[str], *, native: bool, birth_failed: bool) -> Verdict:
    path += ["M", "N"]
    mode = "native-resume" if native else "successor-prompt"
    blocked: list[Reason] = [Reason("CAPABILITY_BLOCKED", b) for b in inp.capability_blocks]
    if not inp.respawn_allowed:
        blocked.append(Reason("RESPAWN_REFUSED", inp.respawn_detail or "the governor refused"))
    hibernate: list[Reason] = []
    detail = inp.capacity_detail or inp.capacity.value.lower().replace("_", " ")
    if inp.capacity in _CAPACITY_HIBERNATES:
        hibernate.append(Reason(f"CAPACITY_{inp.capacity.value}", detail))
    elif inp.capacity is not CapacityStatus.ADMISSIBLE:
        blocked.append(Reason(f"CAPACITY_{inp.capacity.value}", detail))
    if blocked:
        path.append("O")
        return Verdict(Disposition.BLOCKED, tuple(blocked), tuple(path), "none", birth_failed)
    if hibernate:
        path.append("O")
        return Verdict(Disposition.HIBERNATE, tuple(hibernate), tuple(path), "none", birth_failed)
    if native:
        return Verdict(
            Disposition.NATIVE_RESUME_ELIGIBLE,
            (Reason("NATIVE_PROOF_CURRENT", "all gates pass and the native session proof is "
                    "current; same-family native resume proposed"),),
            tuple(path), mode, birth_failed,
        )  # fmt: skip
    reason = (
        "birth retry: capability and capacity gates pass under the named retry owner"
        if birth_failed
        else "predecessor fenced, effects reconciled, capsule verified, translation "
        "non-widening and capacity reserved; cross-family successor prompt proposed"
    )
    return Verdict(
        Disposition.REBODIMENT_READY,
        (Reason("READY", reason),),
        tuple(path),
        mode,
        birth_failed,
    )


@dataclass(frozen=True)
class Activation:
    """Whether a request starts this procedure, and what it answers if not."""

    activates: bool
    disposition: Disposition | None
    why: str


def activation(operation: Operation | None, incident: IncidentKind | None) -> Activation:
    """Which requests start the continuity procedure.

    Rebodiment and the body-loss side of takeover start it. Forbidden operations are
    answered INVALID without running anything. Session reactivation reopens a record and
    restores no claims: a different procedure. A request with no body incident is not ours.
    """
    if operation is None:
        return Activation(False, None, "not a continuity request")
    if operation in FORBIDDEN:
        return Activation(False, Disposition.INVALID, f"{operation.value} is forbidden")
    if operation is Operation.SESSION_REACTIVATION:
        return Activation(False, None, "session reactivation restores no claims and no body")
    if incident is None:
        return Activation(False, None, "no missing or threatened body was observed")
    return Activation(True, None, f"{operation.value} after {incident.value}")


def _ambiguous_reasons(inp: VerdictInputs) -> tuple[Reason, ...]:
    return tuple(
        Reason("AMBIGUOUS_EFFECT", f"{e}: dispatched without an authoritative result; "
               "observe it or compensate it, never repeat it")
        for e in inp.ambiguous_effects
    )  # fmt: skip
