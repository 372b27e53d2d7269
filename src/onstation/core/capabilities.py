"""Capability translation between harnesses: classify, attenuate, never widen.

Every skill, tool, MCP server, hook, permission and model setting a node needs is a
:class:`Requirement` carrying the *grants* it confers, written in one abstract vocabulary
shared by every harness (``fs.read``, ``fs.write.workspace``, ``exec:git-diff``, ``net``,
``mcp:github`` ...). A :class:`TranslationTable` says what each source capability becomes on
the destination and which grants the destination setting actually confers. Comparing the
two grant sets in the same vocabulary is what makes "never wider" checkable:

- destination grants equal the source's: EXACT (same name) or EQUIVALENT (another name);
- a strict subset: NARROWED (or EMULATED when the table says the destination imitates it);
- anything the source did not grant: a widening, which is BLOCKED whatever the table claims;
- no destination: OMITTED, BLOCKED or UNKNOWN (no table entry at all is UNKNOWN).

A translation blocks the proposal when it widens, or when a required capability is
OMITTED, BLOCKED or UNKNOWN. Grants are always issued fresh for the new generation; a
translation never carries a credential (a table entry asking to transfer one is refused).

Pure: no I/O. Tables are loaded by :mod:`onstation.plan.tables` and passed in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Classification(StrEnum):
    """How a source capability survives on the destination."""

    EXACT = "EXACT"
    EQUIVALENT = "EQUIVALENT"
    NARROWED = "NARROWED"
    EMULATED = "EMULATED"
    OMITTED = "OMITTED"
    BLOCKED = "BLOCKED"
    UNKNOWN = "UNKNOWN"


class CapabilityKind(StrEnum):
    """The kinds of harness capability the seed names."""

    SKILL = "skill"
    TOOL = "tool"
    MCP = "mcp"
    HOOK = "hook"
    PERMISSION = "permission"
    MODEL = "model"


#: Classifications under which the destination holds nothing of the capability.
ABSENT = frozenset({Classification.OMITTED, Classification.BLOCKED, Classification.UNKNOWN})


@dataclass(frozen=True)
class Requirement:
    """One capability of the source body, with the grants it confers."""

    kind: CapabilityKind
    name: str
    required: bool
    grants: frozenset[str]


@dataclass(frozen=True)
class TableEntry:
    """What one source capability becomes on the destination harness.

    ``grants`` maps each source grant to the destination grants it turns into (None: the
    same grants; key ``*``: any grant not named; a grant mapped to nothing is dropped, which
    narrows); ``adds`` are grants the destination setting confers regardless, which is
    how a table records that the closest destination setting is broader.
    """

    kind: CapabilityKind
    source: str
    destination: str | None
    classification: Classification
    grants: Mapping[str, tuple[str, ...]] | None = None
    adds: frozenset[str] = frozenset()
    note: str = ""
    transfers_credential: bool = False


@dataclass(frozen=True)
class TranslationTable:
    """A source harness -> destination harness table.

    An entry whose source ends in ``*`` matches every name with that prefix (``*`` alone
    matches any name of the kind); an exact entry wins, then the longest prefix.
    """

    source_harness: str
    destination_harness: str
    entries: Mapping[tuple[CapabilityKind, str], TableEntry]

    def lookup(self, kind: CapabilityKind, name: str) -> TableEntry | None:
        """The entry for ``name``: exact, else the longest matching wildcard, else None."""
        exact = self.entries.get((kind, name))
        if exact is not None:
            return exact
        best: TableEntry | None = None
        for (entry_kind, source), entry in self.entries.items():
            if entry_kind is not kind or not source.endswith("*"):
                continue
            if name.startswith(source[:-1]) and (best is None or len(source) > len(best.source)):
                best = entry
        return best


@dataclass(frozen=True)
class Translation:
    """The outcome for one requirement."""

    kind: CapabilityKind
    name: str
    required: bool
    classification: Classification
    destination: str | None
    source_grants: frozenset[str]
    destination_grants: frozenset[str]
    reason: str
    blocking: bool
    forbidden: bool = False

    def to_json(self) -> dict[str, Any]:
        """The plan's ``capabilities.translations[]`` item."""
        return {
            "kind": self.kind.value,
            "name": self.name,
            "required": self.required,
            "classification": self.classification.value,
            "destination": self.destination,
            "sourceGrants": sorted(self.source_grants),
            "destinationGrants": sorted(self.destination_grants),
            "reason": self.reason,
        }


@dataclass(frozen=True)
class TranslationResult:
    """Every requirement translated, and what blocks the proposal."""

    source_harness: str
    destination_harness: str
    items: tuple[Translation, ...]
    blocking: tuple[str, ...] = field(default=())
    forbidden: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        """True when nothing blocks and nothing forbidden was asked."""
        return not self.blocking and not self.forbidden


def widening(source: Iterable[str], destination: Iterable[str]) -> frozenset[str]:
    """Grants the destination confers that the source did not: non-empty means wider."""
    return frozenset(destination) - frozenset(source)


def classify(
    declared: Classification,
    *,
    source_name: str,
    destination_name: str | None,
    source_grants: Iterable[str],
    destination_grants: Iterable[str],
) -> Classification:
    """The classification the grant sets support, given what the table (or plan) declared.

    The declared class is trusted only where grants cannot tell (absent capabilities, and
    emulation, which is a statement about mechanism); everything else is computed.
    """
    src = frozenset(source_grants)
    dst = frozenset(destination_grants)
    if destination_name is None or declared in ABSENT:
        return declared if declared in ABSENT else Classification.OMITTED
    if dst - src:
        return Classification.BLOCKED
    if declared is Classification.EMULATED:
        return Classification.EMULATED
    if dst == src:
        if destination_name == source_name and declared is Classification.EXACT:
            return Classification.EXACT
        return Classification.EQUIVALENT
    return Classification.NARROWED


def is_blocking(classification: Classification, *, required: bool, widens: bool) -> bool:
    """Any widening blocks; an absent capability blocks when the node requires it."""
    return widens or (required and classification in ABSENT)


def destination_grants(entry: TableEntry, source_grants: frozenset[str]) -> frozenset[str]:
    """Map source grants through an entry (dropped grants narrow, ``adds`` may widen)."""
    if entry.destination is None or entry.classification in ABSENT:
        return frozenset()
    if entry.grants is None:
        mapped: set[str] = set(source_grants)
    else:
        mapped = set()
        for grant in source_grants:
            mapped.update(entry.grants.get(grant, entry.grants.get("*", ())))
    return frozenset(mapped) | entry.adds


def translate_one(requirement: Requirement, table: TranslationTable) -> Translation:
    """Translate one requirement through ``table``."""
    entry = table.lookup(requirement.kind, requirement.name)
    src = requirement.grants
    if entry is None:
        return Translation(
            kind=requirement.kind,
            name=requirement.name,
            required=requirement.required,
            classification=Classification.UNKNOWN,
            destination=None,
            source_grants=src,
            destination_grants=frozenset(),
            reason=f"no entry in the {table.source_harness} -> {table.destination_harness} table",
            blocking=requirement.required,
        )
    if entry.transfers_credential:
        return Translation(
            kind=requirement.kind,
            name=requirement.name,
            required=requirement.required,
            classification=Classification.BLOCKED,
            destination=None,
            source_grants=src,
            destination_grants=frozenset(),
            reason="the entry would transfer a credential; grants are issued fresh, never copied",
            blocking=True,
            forbidden=True,
        )
    dest_name = entry.destination
    if dest_name == "*":
        dest_name = requirement.name
    dst = destination_grants(entry, src)
    extra = widening(src, dst)
    computed = classify(
        entry.classification,
        source_name=requirement.name,
        destination_name=dest_name,
        source_grants=src,
        destination_grants=dst,
    )
    if extra:
        reason = f"destination would widen the grant: +{', +'.join(sorted(extra))}"
    elif computed is Classification.NARROWED:
        reason = f"destination drops: {', '.join(sorted(src - dst))}"
    else:
        reason = entry.note or computed.value.lower()
    return Translation(
        kind=requirement.kind,
        name=requirement.name,
        required=requirement.required,
        classification=computed,
        # A widening keeps what the destination would have been, so the record shows it.
        destination=dest_name if extra or computed not in ABSENT else None,
        source_grants=src,
        destination_grants=dst if extra or computed not in ABSENT else frozenset(),
        reason=reason,
        blocking=is_blocking(computed, required=requirement.required, widens=bool(extra)),
    )


def translate(requirements: Sequence[Requirement], table: TranslationTable) -> TranslationResult:
    """Translate every requirement; collect what blocks and what is forbidden."""
    items = tuple(translate_one(r, table) for r in requirements)
    blocking = tuple(
        f"{t.kind.value} {t.name}: {t.classification.value} ({t.reason})"
        for t in items
        if t.blocking and not t.forbidden
    )
    forbidden = tuple(f"{t.kind.value} {t.name}: {t.reason}" for t in items if t.forbidden)
    return TranslationResult(
        source_harness=table.source_harness,
        destination_harness=table.destination_harness,
        items=items,
        blocking=blocking,
        forbidden=forbidden,
    )
