"""Capability translation tables shipped as package data (``plan/tables/SRC__DST.json``).

Each table maps a source harness's capabilities to the destination's, entry by entry
(``*`` matches any name of that kind). The decisions themselves are made by the pure
:mod:`onstation.core.capabilities`.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from onstation.core.capabilities import (
    CapabilityKind,
    Classification,
    Requirement,
    TableEntry,
    TranslationTable,
)
from onstation.core.errors import BadInput
from onstation.plan.resources import names, read_json

TABLE_FORMAT = "onstation.capability-table/v1"
_HARNESS = re.compile(r"^[a-z][a-z0-9-]{0,63}$")


def available() -> list[tuple[str, str]]:
    """(source, destination) pairs with a shipped table."""
    return list(_shipped_pairs())


@functools.cache
def _shipped_pairs() -> tuple[tuple[str, str], ...]:
    # Listed once per process: the tables are immutable package data (as load_table reads).
    pairs = []
    for name in names("tables", ".json"):
        src, _, dst = name[: -len(".json")].partition("__")
        pairs.append((src, dst))
    return tuple(pairs)


def _entry(raw: Any, where: str) -> TableEntry:
    if not isinstance(raw, dict):
        raise BadInput(f"{where}: entry must be an object")
    unknown = set(raw) - {"kind", "source", "destination", "classification", "grants", "adds",
                          "note", "transfersCredential"}  # fmt: skip
    if unknown:
        raise BadInput(f"{where}: unknown fields {sorted(unknown)}")
    grants = raw.get("grants")
    if grants is not None and not (
        isinstance(grants, dict)
        and all(isinstance(v, list) and all(isinstance(g, str) for g in v) for v in grants.values())
    ):
        raise BadInput(f"{where}: grants must map a grant to a list of grants")
    dest = raw.get("destination")
    if dest is not None and not isinstance(dest, str):
        raise BadInput(f"{where}: destination must be a string or null")
    try:
        return TableEntry(
            kind=CapabilityKind(raw["kind"]),
            source=str(raw["source"]),
            destination=dest,
            classification=Classification(raw["classification"]),
            grants=None if grants is None else {k: tuple(v) for k, v in grants.items()},
            adds=frozenset(raw.get("adds", [])),
            note=str(raw.get("note", "")),
            transfers_credential=bool(raw.get("transfersCredential", False)),
        )
    except (KeyError, ValueError) as exc:
        raise BadInput(f"{where}: {exc}") from exc


def table_from_json(doc: Any, where: str = "table") -> TranslationTable:
    """Build a table from its JSON form (checked)."""
    if not isinstance(doc, dict) or doc.get("table") != TABLE_FORMAT:
        raise BadInput(f"{where}: not a {TABLE_FORMAT} document")
    entries: dict[tuple[CapabilityKind, str], TableEntry] = {}
    for index, raw in enumerate(doc.get("entries", [])):
        entry = _entry(raw, f"{where}: entries/{index}")
        key = (entry.kind, entry.source)
        if key in entries:
            raise BadInput(f"{where}: entries/{index}: duplicate entry for {key[0].value} {key[1]}")
        entries[key] = entry
    return TranslationTable(str(doc["source"]), str(doc["destination"]), entries)


@functools.cache
def load_table(source: str, destination: str) -> TranslationTable:
    """The shipped table for a harness pair (``BadInput`` naming the pairs that exist)."""
    for harness in (source, destination):
        if not _HARNESS.match(harness):
            raise BadInput(f"harness: {harness!r} is not a harness name")
    if (source, destination) not in available():
        pairs = ", ".join(f"{s}->{d}" for s, d in available())
        raise BadInput(f"no capability table {source}->{destination} (shipped: {pairs})")
    name = f"{source}__{destination}.json"
    return table_from_json(read_json("tables", name), f"tables/{name}")


def table_name(source: str, destination: str) -> str:
    """The table's name as recorded in a plan."""
    return f"{source}->{destination}"


def requirements_from_payload(items: list[dict[str, Any]]) -> list[Requirement]:
    """Capsule ``capabilityRequirements`` as core requirements."""
    return [
        Requirement(
            kind=CapabilityKind(item["kind"]),
            name=item["name"],
            required=bool(item["required"]),
            grants=frozenset(item["grants"]),
        )
        for item in items
    ]
