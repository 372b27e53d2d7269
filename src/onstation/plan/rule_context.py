"""What every semantic rule of the plan validator reads: the plan's parts, read defensively
(the schema layer reports what is malformed), and how a rule reports a violation."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any

from onstation.core.verdict import READY, Disposition
from onstation.plan.schemas import Violation


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


class _Ctx:
    """The plan's parts, read defensively (the schema reports what is malformed)."""

    def __init__(
        self,
        plan: dict[str, Any],
        trusted: Mapping[str, bytes] | None,
        capsule_digest: str | None = None,
    ) -> None:
        self.plan = plan
        self.trusted = trusted
        self.verdict = _obj(plan.get("verdict"))
        self.disposition = self.verdict.get("disposition")
        # A disposition of another type (a list, an object) is the schema's to report; the
        # rules must not fail on it (a set lookup of a list raises TypeError).
        self.ready = isinstance(self.disposition, str) and self.disposition in {
            d.value for d in READY
        }
        self.created_at = _time(plan.get("createdAt"))
        self.subject = _obj(plan.get("subject"))
        self.node = self.subject.get("node")
        self.predecessor = _obj(plan.get("predecessor"))
        self.proposal = plan.get("proposal") if isinstance(plan.get("proposal"), dict) else None
        self.destination = _obj(plan.get("destination"))
        self.capsule = _obj(plan.get("capsule"))
        self.payload = _obj(self.capsule.get("payload"))
        self.capsule_subject = _obj(self.payload.get("subject"))
        self.capacity = plan.get("capacity") if isinstance(plan.get("capacity"), dict) else None
        self.capabilities = _obj(plan.get("capabilities"))
        # False: not computed yet. A digest given is the caller's own, over this very payload
        # (see onstation.plan.capsule.seal); the rules still compare it with what is stated.
        self._capsule_digest: str | bool | None = capsule_digest or False
        self._prints: dict[int, str | None] = {}
        #: (receipt index, key id, raw public key) whose signature a check of this very
        #: capsule verified already (onstation.plan.validator.CapsuleCheck).
        self.signed: frozenset[tuple[int, str, bytes]] = frozenset()
        self.native = (
            self.destination.get("mode") == "native-resume"
            or self.disposition == Disposition.NATIVE_RESUME_ELIGIBLE.value
        )


Rule = Callable[[_Ctx], Iterator[Violation]]


def _v(pointer: str, rule: str, message: str) -> Violation:
    return Violation(pointer=pointer, rule=rule, message=message, layer="semantic")
