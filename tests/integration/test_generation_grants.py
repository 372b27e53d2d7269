"""Grants that follow the generation (issue 13): a generation a relief issued grants acts
within them, on both hook paths and both backends; a body never issued grants is not
restricted by them; a fence revokes them, at a cost that does not grow with history."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from onstation.harness.adapters import HookCall
from onstation.harness.config import WorkspaceConfig
from onstation.ledger import Ledger
from onstation.relief import hotpath
from onstation.relief.grants import issue_successor_grants
from onstation.relief.hooks import HookRunner

NODE = "exec-1"
PLAN = {"capabilities": {"translations": [
    {"kind": "tool", "name": "Bash", "destination": "Bash"},
    {"kind": "tool", "name": "Read", "destination": "Read"},
    {"kind": "tool", "name": "WebFetch", "destination": None},
    {"kind": "mcp", "name": "github", "destination": "github"},
]}}  # fmt: skip


def pre_tool_use(cwd: Path, tool: str, tool_input: dict[str, Any]) -> HookCall:
    """A PreToolUse as Claude Code sends it."""
    return HookCall.from_payload("claude-code", "PreToolUse", {
        "session_id": "sess-1", "cwd": str(cwd), "hook_event_name": "PreToolUse",
        "transcript_path": str(cwd / "none.jsonl"), "permission_mode": "default",
        "tool_name": tool, "tool_input": tool_input, "tool_use_id": f"toolu_{tool}",
    })  # fmt: skip


def start(ledger: Ledger, cwd: Path) -> HookRunner:
    ledger.register_node(NODE)
    runner = HookRunner(ledger, "claude-code", WorkspaceConfig(node=NODE))
    runner.handle(HookCall.from_payload("claude-code", "SessionStart", {
        "session_id": "sess-1", "cwd": str(cwd), "hook_event_name": "SessionStart",
        "transcript_path": str(cwd / "none.jsonl"), "source": "startup",
    }))  # fmt: skip
    assert ledger.get_node(NODE).generation == 1
    return runner


def decision(answer: Any) -> tuple[str | None, str]:
    out = (answer.output or {}).get("hookSpecificOutput", {})
    return out.get("permissionDecision"), str(out.get("permissionDecisionReason") or "")


def test_a_generation_with_grants_is_refused_what_they_do_not_name(
    ledger: Ledger, tmp_path: Path
) -> None:
    runner = start(ledger, tmp_path)
    assert (
        decision(runner.handle(pre_tool_use(tmp_path, "WebFetch", {"url": "https://x"})))[0] is None
    )  # fmt: skip  (no grants issued: not restricted by them)
    issued = issue_successor_grants(ledger, NODE, 1, PLAN)
    assert issued == ["mcp:github", "tool:Bash", "tool:Read"]
    assert issue_successor_grants(ledger, NODE, 1, PLAN) == issued  # issued once
    assert ledger.live_grants(NODE, 1) == frozenset(issued)
    verdict, reason = decision(runner.handle(pre_tool_use(tmp_path, "WebFetch",
                                                          {"url": "https://x"})))  # fmt: skip
    assert verdict == "deny"
    assert "tool WebFetch is outside the grants of exec-1 generation 1" in reason
    assert "tool:Bash" in reason
    denial = ledger.denials(NODE)[-1]
    assert (denial.reason, denial.presented_generation) == ("outside its grants", 1)
    assert "PreToolUse WebFetch" in denial.action
    for tool, tool_input in (("Read", {"file_path": "x"}), ("Bash", {"command": "ls"}),
                             ("mcp__github__get_issue", {"number": 1})):  # fmt: skip
        assert decision(runner.handle(pre_tool_use(tmp_path, tool, tool_input)))[0] is None
    verdict, reason = decision(runner.handle(pre_tool_use(tmp_path, "mcp__linear__list", {})))
    assert verdict == "deny" and "MCP server linear" in reason


def test_a_fence_revokes_the_grants_and_they_are_read_through_their_own_index(
    ledger: Ledger, tmp_path: Path
) -> None:
    start(ledger, tmp_path)
    issue_successor_grants(ledger, NODE, 1, PLAN)
    ledger.fence(NODE, expect_generation=1, by="test", reason="relief")
    assert ledger.live_grants(NODE, 1) == frozenset()
    assert {g.state for g in ledger.grants(NODE)} == {"REVOKED"}
    # The revocation uses the partial index of LIVE grants, so its cost is that of the live
    # grants, not of every grant the node ever received (the hooks' read of one
    # generation's grants has the (node, generation) prefix of the table's key already).
    revoke = ledger._q("fence_revoke_grants")
    if ledger.backend.name == "sqlite":
        plan = ledger._read(lambda tx, _now: tx.all(f"EXPLAIN QUERY PLAN {revoke}",
                                                    (0, NODE, 1)))  # fmt: skip
    else:

        def explain(tx: Any, _now: int) -> list[Any]:
            tx.run("SET LOCAL enable_seqscan = off")  # the table is tiny here
            return tx.all(f"EXPLAIN {revoke}", (0, NODE, 1))

        plan = ledger._write(explain)
    assert "capability_grant_live" in json.dumps([list(r) for r in plan]), plan


def test_the_fast_path_leaves_a_call_outside_the_grants_to_the_full_path(
    ledger_url: str, tmp_path: Path
) -> None:
    with Ledger.open(ledger_url) as ledger:  # the real clock: the fast path reads it
        start(ledger, tmp_path)
        (tmp_path / ".onstation").mkdir()
        (tmp_path / ".onstation" / "config.json").write_text(json.dumps({"node": NODE}))
        call = pre_tool_use(tmp_path, "Read", {"file_path": "x"})
        assert hotpath.try_fast(call, ledger_url) is None  # no grants: answered there
        issue_successor_grants(ledger, NODE, 1, PLAN)
        assert hotpath.try_fast(call, ledger_url) is None  # granted: answered there
        outside = pre_tool_use(tmp_path, "WebFetch", {"url": "https://x"})
        assert hotpath.try_fast(outside, ledger_url) is hotpath.NOT_HANDLED
