"""The capsule parts a relief takes from the body and from its agent's statements
(relief/handover_parts.py) and the grants that follow the generation (relief/grants.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from onstation.relief.grants import mcp_server, successor_grants
from onstation.relief.handover_parts import (
    HOST_TOOLS,
    brief_claims,
    capability_requirements,
    configured_mcp_servers,
)


def by_name(requirements: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f"{r['kind']}:{r['name']}": r for r in requirements}


def test_a_first_body_carries_its_hosts_tools_and_requires_what_it_used() -> None:
    found = by_name(capability_requirements(
        source_harness="claude-code", used=["Bash", "Edit", "mcp__github__create_issue"],
        granted=[], configured_mcp=["linear"],
    ))  # fmt: skip
    assert {n for n in found if n.startswith("tool:")} == {f"tool:{t}" for t in HOST_TOOLS[
        "claude-code"]}  # fmt: skip
    assert found["tool:Bash"]["required"] and found["tool:Edit"]["required"]
    assert not found["tool:Read"]["required"]
    assert found["tool:Bash"]["grants"] == ["tool:shell"]
    assert found["mcp:github"] == {"kind": "mcp", "name": "github", "required": True,
                                   "grants": ["mcp:github"]}  # fmt: skip
    assert found["mcp:linear"]["required"] is False


def test_a_launched_body_carries_what_it_was_granted_not_its_hosts_whole_set() -> None:
    found = by_name(capability_requirements(
        source_harness="claude-code", used=["Bash"], granted=["tool:Bash", "tool:Read"],
        configured_mcp=[],
    ))  # fmt: skip
    assert set(found) == {"tool:Bash", "tool:Read"}
    assert found["tool:Bash"]["required"] and not found["tool:Read"]["required"]


def test_a_codex_body_has_codexs_tools() -> None:
    found = by_name(capability_requirements(source_harness="codex", used=["shell"], granted=[],
                                            configured_mcp=[]))  # fmt: skip
    assert "tool:apply_patch" in found and "tool:Bash" not in found
    assert found["tool:shell"]["grants"] == ["tool:shell"] and found["tool:shell"]["required"]


@given(st.lists(st.text(min_size=1, max_size=40), max_size=20))
def test_every_used_tool_is_required_and_names_stay_unique(used: list[str]) -> None:
    requirements = capability_requirements(source_harness="claude-code", used=used, granted=[],
                                           configured_mcp=[])  # fmt: skip
    keys = [f"{r['kind']}:{r['name']}" for r in requirements]
    assert len(keys) == len(set(keys))
    required = {r["name"] for r in requirements if r["required"]}
    for tool in used:
        assert (mcp_server(tool) or tool) in required


def test_configured_mcp_servers_are_read_from_each_hosts_project_file(tmp_path: Path) -> None:
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"github": {}, "db": {}}}))
    (tmp_path / ".codex").mkdir()
    (tmp_path / ".codex" / "config.toml").write_text('[mcp_servers.docs]\ncommand = "x"\n')
    assert configured_mcp_servers(str(tmp_path), "claude-code") == ["db", "github"]
    assert configured_mcp_servers(str(tmp_path), "codex") == ["docs"]
    (tmp_path / ".mcp.json").write_text("{not json")
    assert configured_mcp_servers(str(tmp_path), "claude-code") == []
    assert configured_mcp_servers(str(tmp_path / "nowhere"), "claude-code") == []


BRIEF: dict[str, Any] = {
    "kind": "turnover-brief",
    "generation": 3,
    "completed_work": [{"path": "src/app.py", "what": "parser done"},
                       {"path": "src/ghost.py", "what": "also done"}],
    "decisions": [{"decision": "Use SQLite", "rationale": "no server"},
                  {"decision": "Drop the cache", "rationale": None}],
    "remaining_work": ["write the migration", "celebrate"],
    "important_context": ["the CI is flaky on Tuesdays"],
    "markdown": "## Turnover Brief",
}  # fmt: skip


def test_brief_statements_are_claims_cited_by_what_supports_them() -> None:
    parts = brief_claims(
        BRIEF, path="/w/.bridge/turnovers/b.md", changed_files=["src/app.py"],
        recorded_decisions=["use  sqlite"], open_tasks=["Write the migration"],
    )  # fmt: skip
    facts = {f["statement"]: f for f in parts["facts"]}
    assert set(facts) == {
        "completed: src/app.py — parser done", "decided: Use SQLite (no server)",
        "remains: write the migration",
    }  # fmt: skip
    assert {f["trust"] for f in parts["facts"]} == {"agent-stated"}
    assert facts["completed: src/app.py — parser done"]["artifact"] == "git-diff"
    assert facts["decided: Use SQLite (no server)"]["artifact"] == "ledger-notes"
    unsupported = {c["claim"] for c in parts["unsupportedClaims"]}
    assert unsupported == {
        "completed: src/ghost.py — also done", "decided: Drop the cache", "remains: celebrate",
        "context: the CI is flaky on Tuesdays",
    }  # fmt: skip
    assert all("generation 3" in c["source"] for c in parts["unsupportedClaims"])
    assert [d["artifact"] for d in parts["decisions"]] == ["ledger-notes", None]
    assert [p["text"] for p in parts["planFrontier"]] == ["write the migration", "celebrate"]
    ids = {a["id"] for a in parts["artifacts"]}
    assert {"turnover-brief", "ledger-notes", "ledger-tasks"} <= ids
    cited = {f["artifact"] for f in parts["facts"]} - {"git-diff"}
    assert cited <= ids  # every citation names an artifact the parts carry (git-diff: git's)


def test_brief_claims_fit_the_capsule_schema() -> None:
    parts = brief_claims(BRIEF, path="b.md", changed_files=[], recorded_decisions=[],
                         open_tasks=[])  # fmt: skip
    for part in ("planFrontier", "decisions", "facts", "unsupportedClaims", "artifacts"):
        schema = {"$ref": f"urn:onstation:schema:resurrection-capsule:v1#/$defs/payload/"
                          f"properties/{part}"}  # fmt: skip
        assert not schema_violations_of(schema, parts[part]), part
    assert len(parts["unsupportedClaims"]) == 7 and not parts["facts"]


def schema_violations_of(schema: dict[str, Any], value: Any) -> list[Any]:
    from jsonschema import Draft202012Validator

    from onstation.plan.schemas import _registry

    return list(Draft202012Validator(schema, registry=_registry()).iter_errors(value))


def test_successor_grants_are_the_translated_tools_and_servers() -> None:
    plan = {"capabilities": {"translations": [
        {"kind": "tool", "name": "Bash", "destination": "shell"},
        {"kind": "tool", "name": "Read", "destination": "shell (cat, sed -n)"},
        {"kind": "tool", "name": "WebFetch", "destination": None},
        {"kind": "mcp", "name": "github", "destination": "github"},
        {"kind": "hook", "name": "Stop", "destination": "Stop"},
    ]}}  # fmt: skip
    assert successor_grants(plan) == ["mcp:github", "tool:shell"]
    assert successor_grants({}) == []


def test_mcp_server_names() -> None:
    assert mcp_server("mcp__github__create_issue") == "github"
    assert mcp_server("mcp__") is None and mcp_server("Bash") is None


def test_a_codex_bodys_hook_name_for_its_shell_is_its_tables_name() -> None:
    found = by_name(capability_requirements(source_harness="codex", used=["Bash"], granted=[],
                                            configured_mcp=[]))  # fmt: skip
    assert "tool:Bash" not in found and found["tool:shell"]["required"]


def test_a_generation_with_grants_may_call_only_what_they_name() -> None:
    from onstation.relief.grants import tool_granted

    assert tool_granted(frozenset(), "AnythingAtAll")  # never issued grants: not restricted
    held = frozenset({"tool:Bash", "tool:Read", "mcp:github"})
    assert tool_granted(held, "Bash") and tool_granted(held, "mcp__github__create_issue")
    assert not tool_granted(held, "Write") and not tool_granted(held, "mcp__linear__x")
    assert not tool_granted(held, None)
    # Codex names its shell tool Bash in hooks; a Codex successor holds tool:shell.
    assert tool_granted(frozenset({"tool:shell"}), "Bash")


def test_the_work_since_the_base_is_carried_as_artifacts() -> None:
    from onstation.relief.handover_parts import work_artifacts

    found = work_artifacts([("a" * 40, "add login"), ("b" * 40, "add cookie")], 5,
                           ["new.py", "new.py", "docs/x.md"])  # fmt: skip
    refs = [a["ref"] for a in found]
    assert refs == [f"commit {'a' * 12} add login", f"commit {'b' * 12} add cookie",
                    "and 3 older commit(s) since the base", "untracked docs/x.md",
                    "untracked new.py"]  # fmt: skip
    assert len({a["id"] for a in found}) == len(found)
    schema = {"$ref": "urn:onstation:schema:resurrection-capsule:v1#/$defs/payload/properties/"
                      "artifacts"}  # fmt: skip
    assert not schema_violations_of(schema, found)
    assert work_artifacts([], None, []) == []
