"""The capsule's parts a relief takes from the body and from what its agent stated.

- **Capabilities** from what the body was granted and used: its host's tools (the grants a
  launched body was issued, else the host's own tool set), the tools its hook journal shows
  it used (required), and its MCP servers (used, granted, or configured in the workspace).
  Nothing is hard-coded per relief; the host decides the names (docs/hosts.md).
- **Claims**: what the agent wrote in its brief (completed work, decisions, remaining work,
  context) is a claim. A statement some artifact supports (a changed file, a decision recorded
  in the ledger when it was made, an open task) is carried among the facts with the trust
  class ``agent-stated``, citing that artifact (context naming a changed file is supported by
  the diff) (it never covers a required fact, and the
  successor's prompt shows it as the agent's statement); one that no artifact supports is
  listed under ``unsupportedClaims``. Nothing an agent wrote is presented as fact.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from onstation.core.canonical import digest
from onstation.relief.grants import mcp_server

#: The tools each host gives a body by default (the names its permission rules and hook
#: matchers use): Claude Code's tools reference; Codex's built-in tools (docs/hosts.md).
HOST_TOOLS: dict[str, tuple[str, ...]] = {
    "claude-code": ("Bash", "Read", "Edit", "Write", "Glob", "Grep", "NotebookEdit",
                    "TodoWrite", "WebFetch", "WebSearch", "Agent"),
    "codex": ("shell", "apply_patch", "update_plan", "web_search", "view_image"),
}  # fmt: skip
HOST_TOOLS["codex-cli"] = HOST_TOOLS["codex"]
#: Codex's hooks name its shell tool ``Bash`` (codex-rs core/tests/suite/hooks.rs); its
#: translation tables and tool set call it ``shell``.
CODEX_HOOK_NAMES: dict[str, str] = {"Bash": "shell"}
#: The abstract grant each tool confers (the translation tables' vocabulary).
TOOL_GRANTS: dict[str, str] = {
    "Bash": "tool:shell", "shell": "tool:shell", "exec_command": "tool:shell",
    "local_shell": "tool:shell", "Read": "tool:read", "view_image": "tool:read",
    "Edit": "tool:edit", "MultiEdit": "tool:edit", "Write": "tool:edit",
    "apply_patch": "tool:edit", "NotebookEdit": "tool:notebook", "Glob": "tool:search",
    "Grep": "tool:search", "TodoWrite": "tool:plan", "update_plan": "tool:plan",
    "WebFetch": "net:fetch", "WebSearch": "net:search", "web_search": "net:search",
    "Agent": "tool:subagent",
}  # fmt: skip
#: Who stated a brief's claims, as the capsule's unsupported claims name their source.
_BRIEF_SOURCE = "the agent's turnover brief (generation {generation})"


def capability_requirements(
    *,
    source_harness: str,
    used: Iterable[str],
    granted: Iterable[str],
    configured_mcp: Iterable[str],
) -> list[dict[str, Any]]:
    """The body's capability requirements: used tools and servers are required; the rest it
    held (its grants, else its host's tool set; configured MCP servers) are carried, not
    required."""
    granted = frozenset(granted)
    held_tools = {g.split(":", 1)[1] for g in granted if g.startswith("tool:")}
    held_mcp = {g.split(":", 1)[1] for g in granted if g.startswith("mcp:")}
    if not granted:
        held_tools = set(HOST_TOOLS.get(source_harness, ()))
    used_tools: set[str] = set()
    used_mcp: set[str] = set()
    codex = source_harness in ("codex", "codex-cli")
    for hook_name in used:
        tool = CODEX_HOOK_NAMES.get(hook_name, hook_name) if codex else hook_name
        server = mcp_server(tool)
        (used_mcp.add(server) if server is not None else used_tools.add(tool))
    tools = sorted(held_tools | used_tools)
    servers = sorted(held_mcp | used_mcp | set(configured_mcp))
    requirements = [
        {"kind": "tool", "name": name, "required": name in used_tools,
         "grants": [TOOL_GRANTS.get(name, f"tool:{name.lower()}")]}
        for name in tools
    ]  # fmt: skip
    requirements += [
        {"kind": "mcp", "name": name, "required": name in used_mcp, "grants": [f"mcp:{name}"]}
        for name in servers
    ]
    return requirements


def configured_mcp_servers(workspace: str, source_harness: str) -> list[str]:
    """The MCP servers the workspace configures for its host: Claude Code's project
    ``.mcp.json`` (``mcpServers``), Codex's project ``.codex/config.toml``
    (``[mcp_servers.NAME]``). Unreadable files configure nothing."""
    root = Path(workspace)
    try:
        if source_harness in ("codex", "codex-cli"):
            data: Any = tomllib.loads((root / ".codex" / "config.toml").read_text())
            servers = data.get("mcp_servers")
        else:
            data = json.loads((root / ".mcp.json").read_text())
            servers = data.get("mcpServers") if isinstance(data, dict) else None
    except (OSError, ValueError, UnicodeDecodeError):
        return []
    if not isinstance(servers, dict):
        return []
    return sorted(str(name)[:128] for name in servers if str(name).strip())


def brief_claims(
    content: dict[str, Any],
    *,
    path: str,
    changed_files: Iterable[str],
    recorded_decisions: Iterable[str],
    open_tasks: Iterable[str],
) -> dict[str, Any]:
    """The brief's statements as capsule parts: ``planFrontier``, ``decisions``, ``facts``
    (each ``agent-stated``, citing what supports it), ``unsupportedClaims`` and the
    artifacts cited. ``recorded_decisions`` are the decision notes the ledger holds;
    ``open_tasks`` the titles of the open tasks."""
    generation = content.get("generation")
    source = _BRIEF_SOURCE.format(generation=generation)
    brief_id = "turnover-brief"
    body = {k: v for k, v in content.items() if k != "markdown"}
    artifacts: list[dict[str, Any]] = [
        {"id": brief_id, "kind": "file", "ref": f"turnover brief {path}",
         "digest": digest("onstation-turnover-brief-v1", body)},
    ]  # fmt: skip
    changed = set(changed_files)
    decided = {_norm(d) for d in recorded_decisions}
    tasks = [_norm(t) for t in open_tasks]
    facts: list[dict[str, Any]] = []
    unsupported: list[dict[str, str]] = []
    cited: set[str] = set()

    def claim(kind: str, index: int, statement: str, support: str | None) -> None:
        if support is None:
            unsupported.append({"claim": statement[:4000], "source": source[:256]})
            return
        cited.add(support)
        facts.append({"id": f"claim-{kind}-{index}", "type": f"agent.{kind}",
                      "statement": statement[:4000], "artifact": support,
                      "trust": "agent-stated"})  # fmt: skip

    for i, item in enumerate(content.get("completed_work") or [], 1):
        where, what = str(item.get("path") or ""), item.get("what")
        statement = f"completed: {where}" + (f" — {what}" if what else "")
        claim("completed-work", i, statement, "git-diff" if where in changed else None)
    decisions = []
    for i, item in enumerate(content.get("decisions") or [], 1):
        text = str(item.get("decision") or "")
        support = "ledger-notes" if _norm(text) in decided else None
        rationale = str(item.get("rationale") or "")[:500] or None
        decisions.append({"id": f"decision-{i}", "decision": text[:500] or "(empty)",
                          "rationale": rationale or "(none given)",
                          "artifact": support})  # fmt: skip
        claim("decision", i, f"decided: {text}" + (f" ({rationale})" if rationale else ""),
              support)  # fmt: skip
    frontier = []
    for i, item in enumerate(content.get("remaining_work") or [], 1):
        text = str(item)
        task = "ledger-tasks" if any(t and (t in _norm(text) or _norm(text) in t)
                                     for t in tasks) else None  # fmt: skip
        frontier.append({"id": f"remaining-{i}", "text": text[:500] or "(empty)",
                         "state": "open", "artifact": task})  # fmt: skip
        claim("plan-frontier", i, f"remains: {text}", task)
    for i, text in enumerate(content.get("important_context") or [], 1):
        # Context that names a file the body's work changed is about that work.
        named = any(path and path in str(text) for path in changed)
        claim("context", i, f"context: {text}", "git-diff" if named else None)
    if facts or unsupported:
        artifacts[0]["ref"] += f" (generation {generation}, written by the agent)"
    for support, ref in (("ledger-notes", "decision notes recorded in the ledger"),
                         ("ledger-tasks", "open tasks recorded in the ledger")):  # fmt: skip
        if support in cited:
            artifacts.append({"id": support, "kind": "ledger", "ref": ref, "digest": None})
    return {
        "planFrontier": frontier,
        "decisions": decisions,
        "facts": facts,
        "unsupportedClaims": unsupported,
        "artifacts": artifacts,
    }


#: The most untracked files the capsule names (the diff's files name the rest of the work).
MAX_UNTRACKED = 100


def work_artifacts(
    commits: Iterable[tuple[str, str]], total: int | None, untracked: Iterable[str]
) -> list[dict[str, Any]]:
    """The body's work beyond the diff's digest, as artifacts: each commit since its base
    (id and subject, newest first; how many more when the log was cut) and each new file not
    yet added to git (the patch does not hold them)."""
    listed = list(commits)
    out: list[dict[str, Any]] = [
        {"id": f"git-commit-{i}", "kind": "git", "ref": f"commit {sha[:12]} {subject}"[:4096],
         "digest": None}
        for i, (sha, subject) in enumerate(listed, 1)
    ]  # fmt: skip
    if total is not None and total > len(listed):
        more = total - len(listed)
        out.append({"id": "git-commits-more", "kind": "git", "digest": None,
                    "ref": f"and {more} older commit(s) since the base"})  # fmt: skip
    files = sorted(set(untracked))
    out += [
        {"id": f"untracked-{i}", "kind": "file", "ref": f"untracked {path}"[:4096],
         "digest": None}
        for i, path in enumerate(files[:MAX_UNTRACKED], 1)
    ]  # fmt: skip
    return out


#: A ledger task's status as a plan frontier item's state.
_TASK_STATE = {"pending": "open", "in_progress": "in-progress", "blocked": "blocked"}


def ledger_parts(
    parts: dict[str, Any], *, decisions: Iterable[tuple[str, str | None]],
    tasks: Iterable[tuple[int, str, str]],
) -> dict[str, Any]:  # fmt: skip
    """``parts`` with the ledger's own records added: each decision note (text, rationale)
    not already among the brief's decisions, and each open task (id, title, status) not
    already in the plan frontier, citing the ledger. What the ledger recorded reaches the
    successor whether or not the agent wrote a brief (an emergency relief has none)."""
    out = dict(parts)
    known = {_norm(d["decision"]) for d in out.get("decisions", [])}
    added_decisions = [
        {"id": f"ledger-decision-{i}", "decision": text[:500] or "(empty)",
         "rationale": (rationale or "")[:500] or "(none given)", "artifact": "ledger-notes"}
        for i, (text, rationale) in enumerate(decisions, 1) if _norm(text) not in known
    ]  # fmt: skip
    frontier_texts = [_norm(p["text"]) for p in out.get("planFrontier", [])]
    added_tasks = [
        {"id": f"task-{task_id}", "text": title[:500] or "(empty)",
         "state": _TASK_STATE.get(status, "open"), "artifact": "ledger-tasks"}
        for task_id, title, status in tasks
        if status != "completed" and _norm(title) not in frontier_texts
    ]  # fmt: skip
    if added_decisions:
        out["decisions"] = [*out.get("decisions", []), *added_decisions]
    if added_tasks:
        out["planFrontier"] = [*out.get("planFrontier", []), *added_tasks]
    artifacts = list(out.get("artifacts", []))
    have = {a["id"] for a in artifacts}
    for used, support, ref in ((added_decisions, "ledger-notes", "decision notes recorded in "
                                "the ledger"), (added_tasks, "ledger-tasks", "open tasks "
                                "recorded in the ledger")):  # fmt: skip
        if used and support not in have:
            artifacts.append({"id": support, "kind": "ledger", "ref": ref, "digest": None})
    out["artifacts"] = artifacts
    return out


def _norm(text: str) -> str:
    return " ".join(str(text).lower().split())


__all__ = [
    "HOST_TOOLS",
    "TOOL_GRANTS",
    "brief_claims",
    "capability_requirements",
    "configured_mcp_servers",
    "ledger_parts",
    "work_artifacts",
]
