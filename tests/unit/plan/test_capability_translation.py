"""Capability translation: classification from grants, never wider, shipped tables."""

from __future__ import annotations

import pytest

from onstation.core.capabilities import (
    CapabilityKind,
    Classification,
    Requirement,
    TableEntry,
    TranslationTable,
    classify,
    translate,
    translate_one,
)
from onstation.core.errors import BadInput
from onstation.plan.tables import available, load_table, table_from_json


def req(kind: str, name: str, grants: set[str], required: bool = True) -> Requirement:
    return Requirement(CapabilityKind(kind), name, required, frozenset(grants))


def test_shipped_tables_cover_the_required_pairs() -> None:
    pairs = set(available())
    assert {
        ("claude-code", "claude-code"),
        ("claude-code", "codex-cli"),
        ("codex-cli", "claude-code"),
    } <= pairs
    for source, destination in pairs:
        assert load_table(source, destination).entries


def test_same_harness_is_exact() -> None:
    result = translate(
        [req("tool", "Bash", {"tool:shell"}), req("mcp", "github", {"mcp:github"})],
        load_table("claude-code", "claude-code"),
    )
    assert [t.classification for t in result.items] == [Classification.EXACT] * 2
    assert result.ok


@pytest.mark.parametrize(
    ("requirement", "classification", "blocking"),
    [
        (req("tool", "Bash", {"tool:shell"}), Classification.EQUIVALENT, False),
        (req("tool", "Read", {"tool:read"}), Classification.EMULATED, False),
        (req("tool", "WebFetch", {"tool:web-fetch"}), Classification.OMITTED, True),
        (
            req("tool", "WebFetch", {"tool:web-fetch"}, required=False),
            Classification.OMITTED,
            False,
        ),
        (req("skill", "release-notes", {"skill:release-notes"}), Classification.UNKNOWN, True),
        (
            req("skill", "release-notes", {"skill:release-notes"}, required=False),
            Classification.UNKNOWN,
            False,
        ),
        (
            req("hook", "Notification", {"hook:notification"}, required=False),
            Classification.NARROWED,
            False,
        ),
        (
            req("permission", "mode:acceptEdits", {"fs.read", "fs.write.workspace"}),
            Classification.EQUIVALENT,
            False,
        ),
        # No per-command allow rule on Codex: the closest setting widens, so it blocks even
        # though the node does not require it.
        (
            req("permission", "allow:Bash(git diff *)", {"exec:git-diff"}, required=False),
            Classification.BLOCKED,
            True,
        ),
        (
            req("model", "claude-sonnet", {"model:claude-sonnet"}, required=False),
            Classification.OMITTED,
            False,
        ),
    ],
)
def test_claude_code_to_codex(
    requirement: Requirement, classification: Classification, blocking: bool
) -> None:
    got = translate_one(requirement, load_table("claude-code", "codex-cli"))
    assert got.classification is classification
    assert got.blocking is blocking
    if not got.destination_grants - got.source_grants:
        assert got.destination_grants <= got.source_grants


def test_codex_to_claude_narrows_unattended_sandboxed_commands() -> None:
    got = translate_one(
        req(
            "permission",
            "sandbox=workspace-write,approval_policy=on-request",
            {"fs.read", "fs.write.workspace", "exec.sandboxed"},
        ),
        load_table("codex-cli", "claude-code"),
    )
    assert got.classification is Classification.NARROWED
    assert got.destination_grants == {"fs.read", "fs.write.workspace"}
    assert not got.blocking


def test_a_table_claiming_equivalence_cannot_widen() -> None:
    table = TranslationTable(
        "a",
        "b",
        {
            (CapabilityKind.TOOL, "t"): TableEntry(
                CapabilityKind.TOOL, "t", "t2", Classification.EQUIVALENT, adds=frozenset({"net"})
            )
        },
    )
    got = translate_one(req("tool", "t", {"tool:t"}, required=False), table)
    assert got.classification is Classification.BLOCKED
    assert got.blocking


def test_credential_transfer_entries_are_forbidden() -> None:
    table = TranslationTable(
        "a",
        "b",
        {
            (CapabilityKind.MCP, "*"): TableEntry(
                CapabilityKind.MCP, "*", "*", Classification.EXACT, transfers_credential=True
            )
        },
    )
    result = translate([req("mcp", "github", {"mcp:github"})], table)
    assert result.forbidden and not result.ok


@pytest.mark.parametrize(
    ("declared", "src", "dst", "dest_name", "expected"),
    [
        (Classification.EXACT, {"a"}, {"a"}, "x", Classification.EXACT),
        (Classification.EXACT, {"a"}, {"a"}, "y", Classification.EQUIVALENT),
        (Classification.EXACT, {"a", "b"}, {"a"}, "x", Classification.NARROWED),
        (Classification.EQUIVALENT, {"a"}, {"a", "b"}, "y", Classification.BLOCKED),
        (Classification.EMULATED, {"a"}, {"a"}, "y", Classification.EMULATED),
        (Classification.EQUIVALENT, {"a"}, set(), None, Classification.OMITTED),
        (Classification.UNKNOWN, {"a"}, set(), None, Classification.UNKNOWN),
    ],
)
def test_classify_from_grants(
    declared: Classification,
    src: set[str],
    dst: set[str],
    dest_name: str | None,
    expected: Classification,
) -> None:
    assert (
        classify(
            declared,
            source_name="x",
            destination_name=dest_name,
            source_grants=src,
            destination_grants=dst,
        )
        is expected
    )


def test_malformed_tables_are_refused() -> None:
    with pytest.raises(BadInput):
        table_from_json({"table": "other"})
    with pytest.raises(BadInput, match="duplicate"):
        table_from_json(
            {
                "table": "onstation.capability-table/v1",
                "source": "a",
                "destination": "b",
                "entries": [
                    {"kind": "tool", "source": "t", "destination": "t", "classification": "EXACT"}
                ]
                * 2,
            }
        )
    with pytest.raises(BadInput, match="no capability table"):
        load_table("claude-code", "gemini-cli")
