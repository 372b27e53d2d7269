"""The tool-call journal: what the hooks keep of each call, and the capsule parts made of it.

Every tool call of an admitted, unfenced body is journaled when the host reports its end:
PostToolUse (succeeded; failed or interrupted when the response says so), PostToolUseFailure
(failed, interrupted, or denied when the error is the host's rejection text) and
PermissionDenied (denied). The call is kept as a short summary (the command, the file, the
pattern), its secrets redacted. A relief turns a generation's journal into the capsule's
``toolPairs``, ``tests`` and the ``artifacts`` entry they cite (:func:`journal_parts`).

What the hosts send (docs/hosts.md): Claude Code's Bash response is ``{stdout, stderr,
interrupted, isImage}`` and carries no exit code, because a command that exits non-zero
fires PostToolUseFailure ("Command exited with non-zero status code N") instead; so a Bash
PostToolUse of Claude Code is exit 0, unless it ran in the background. Codex sends its shell
commands as ``Bash`` with the output as a plain string and no exit code (and PostToolUse only
for a call that succeeded): their exit status is unknown.

Recording never makes a hook fail: a refusal (a fenced generation) becomes a note.
"""

from __future__ import annotations

from onstation.core.lazyre import MULTILINE, LazyPattern

TYPE_CHECKING = False  # typing costs import time on the hook hot path
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from onstation.harness.adapters import HookCall
    from onstation.ledger.bodies import BodySession, HarnessLedger
    from onstation.ledger.tool_outcomes import ToolOutcome

#: Bounds of what is journaled (the ledger refuses more: ledger/tool_outcomes.py).
MAX_SUMMARY = 500
MAX_DETAIL = 400
_MAX_ID = 256
#: How much of a tool's input is read for its summary (secrets are redacted in this much).
_READ_CHARS = 4000
#: The capsule's artifact id for the journal, and its digest's scope.
ARTIFACT_ID = "hook-journal"
DIGEST_SCOPE = "onstation-tool-journal-v1"

#: Tools that run a shell command, by host: Claude Code's Bash; Codex's (it names them Bash
#: in hook payloads; older builds used their own names).
SHELL_TOOLS = frozenset({"Bash", "shell", "exec_command", "local_shell", "shell_command",
                         "container.exec"})  # fmt: skip
_FILE_TOOLS = frozenset({"Edit", "Write", "Read", "MultiEdit", "NotebookEdit", "NotebookRead"})
_SEARCH_TOOLS = frozenset({"Glob", "Grep"})
# Compiled at first use: a PostToolUse journals most calls without either (nor ``re``).
_PATCH_FILE = LazyPattern(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", MULTILINE)
#: The capsule schema's ``name`` ($defs.name): what a call id must look like there.
_NAME = LazyPattern(r"[A-Za-z0-9_][A-Za-z0-9._:@+=-]{0,127}")


def _clean(text: str, limit: int) -> str:
    """``text`` with its secrets redacted, no control characters but tab and newline, cut to
    ``limit`` characters."""
    from onstation.core.secret_shapes import suspect, without_invisible

    text = "".join(ch if ch.isprintable() or ch in "\t\n" else " " for ch in text[:_READ_CHARS])
    text = without_invisible(text)
    if not suspect(text):  # most calls: the redaction rules are not even imported
        return text[:limit]
    from onstation.core.redact import redact

    return redact(text).text[:limit]


def _command(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        import shlex

        return shlex.join(value)
    return None


def call_summary(tool: str, tool_input: Any) -> str:
    """A short summary of a call (before redaction): the command of a shell tool, the file of a
    file tool, the pattern of a search, the server and tool of an MCP call, the files an
    apply_patch touches; else the input's keys."""
    given = tool_input if isinstance(tool_input, dict) else {}
    if tool in SHELL_TOOLS:
        command = _command(given.get("command", given.get("cmd")))
        if command is not None:
            return command
    if tool in _FILE_TOOLS:
        path = given.get("file_path", given.get("notebook_path"))
        if isinstance(path, str):
            return path
    if tool in _SEARCH_TOOLS and isinstance(given.get("pattern"), str):
        where = given.get("path")
        return str(given["pattern"]) + (f" in {where}" if isinstance(where, str) and where else "")
    if tool.startswith("mcp__"):
        server, _, name = tool[len("mcp__") :].partition("__")
        return f"mcp {server}/{name}" if name else f"mcp {server}"
    if tool == "apply_patch":
        patch = next((v for v in given.values() if isinstance(v, str)), "")
        files = _PATCH_FILE.findall(patch[:200_000])
        return (
            "apply_patch " + ", ".join(dict.fromkeys(f.strip() for f in files)) if files else tool
        )
    return "input: " + ", ".join(sorted(str(k) for k in given)) if given else "no input"


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def outcome_of(call: HookCall) -> tuple[str, int | None, str | None]:
    """(outcome, exit code, detail) of the call a PostToolUse, PostToolUseFailure or
    PermissionDenied event reports."""
    raw = call.raw
    if call.event == "PermissionDenied":
        reason = raw.get("reason")
        return "denied", None, reason if isinstance(reason, str) else None
    if call.event == "PostToolUseFailure":
        from onstation.core.testruns import failure_exit_code
        from onstation.harness.effects.outcomes import is_declined_text

        error = raw["error"] if isinstance(raw.get("error"), str) else ""
        if raw.get("is_interrupt") is True:
            return "interrupted", None, error or None
        if is_declined_text(error):
            return "denied", None, error
        return "failed", failure_exit_code(error), error or None
    response = call.tool_response
    if not isinstance(response, dict):
        return "succeeded", None, None  # Codex: the output as a string, no exit status
    if response.get("interrupted") is True:
        return "interrupted", None, None
    code = next((_int(response.get(k)) for k in ("exit_code", "exitCode", "returncode")
                 if _int(response.get(k)) is not None), None)  # fmt: skip
    stderr = response.get("stderr")
    detail = stderr[-MAX_DETAIL:] if isinstance(stderr, str) and stderr else None
    if (
        (code is not None and code != 0)
        or response.get("success") is False
        or (response.get("is_error") is True or response.get("isError") is True)
    ):
        return "failed", code, detail
    if code is None and _claude_bash_exit_zero(call, response):
        code = 0
    return "succeeded", code, None


def _claude_bash_exit_zero(call: HookCall, response: dict[str, Any]) -> bool:
    """A Claude Code Bash PostToolUse: the command exited 0 (non-zero fires
    PostToolUseFailure), unless it was started in the background (no exit yet)."""
    if call.harness == "codex" or call.tool_name != "Bash":
        return False
    background = (call.tool_input or {}).get("run_in_background") is True
    return not background and not response.get("backgroundTaskId")


def journal_row(call: HookCall) -> tuple[str | None, str, str, str, int | None, str | None]:
    """What is journaled of the call ``call`` reports: (tool_use_id, tool, call summary,
    outcome, exit code, detail), bounded and redacted (the hook fast path inserts it too)."""
    tool = call.tool_name or "unknown"
    outcome, exit_code, detail = outcome_of(call)
    tool_use_id = call.tool_use_id
    if tool_use_id is not None and (
        not tool_use_id or len(tool_use_id) > _MAX_ID or not tool_use_id.isprintable()
    ):
        tool_use_id = None
    return (tool_use_id, "".join(ch if ch.isprintable() else "?" for ch in tool)[:_MAX_ID],
            _clean(call_summary(tool, call.tool_input), MAX_SUMMARY), outcome, exit_code,
            None if detail is None else _clean(detail, MAX_DETAIL))  # fmt: skip


def record(records: HarnessLedger, session: BodySession, call: HookCall) -> list[str]:
    """Journal the outcome of the call ``call`` reports, for the admitted body ``session``;
    the notes for the hook's answer (a refusal is a note, never an exception)."""
    from onstation.core.errors import OnstationError

    tool_use_id, tool, summary, outcome, exit_code, detail = journal_row(call)
    try:
        records.record_tool_outcome(
            session.node, generation=session.generation, session_id=session.session_id,
            tool_use_id=tool_use_id, tool=tool, call_summary=summary, outcome=outcome,
            exit_code=exit_code, detail=detail,
        )  # fmt: skip
    except OnstationError as exc:
        return [f"tool outcome not journaled: {exc.message}"]
    return []


def parts_of(rows: Sequence[ToolOutcome], node: str, generation: int) -> dict[str, Any]:
    """The capsule's ``toolPairs``, ``tests`` and the ``artifacts`` entry they cite, from a
    generation's journal (its rows in call order); {} when the journal is empty, so that the
    capsule records the omission."""
    if not rows:
        return {}
    from onstation.core.canonical import digest
    from onstation.core.testruns import test_run, test_status

    pairs: list[dict[str, Any]] = []
    tests: list[dict[str, Any]] = []
    used: set[str] = set()
    for row in rows:
        call_id = row.tool_use_id
        if call_id is None or not _NAME.fullmatch(call_id) or ".." in call_id or call_id in used:
            call_id = f"call-{row.id}"
        used.add(call_id)
        result: dict[str, Any] = {"outcome": row.outcome, "exitCode": row.exit_code}
        if row.detail:
            result["detail"] = row.detail
        pairs.append({"callId": call_id, "tool": row.tool[:512] or "unknown",
                      "call": {"summary": row.call_summary}, "result": result})  # fmt: skip
        run = test_run(row.call_summary) if row.tool in SHELL_TOOLS else None
        if run is not None:
            code = row.exit_code if run.exit_is_run else None
            tests.append({"name": run.name, "status": test_status(row.outcome, code),
                          "artifact": ARTIFACT_ID})  # fmt: skip
    data = [row.to_json() for row in rows]
    artifact = {"id": ARTIFACT_ID, "kind": "ledger",
                "ref": f"tool calls of {node} generation {generation}",
                "digest": digest(DIGEST_SCOPE, data)}  # fmt: skip
    return {"toolPairs": pairs, "tests": tests, "artifacts": [artifact]}


def journal_parts(
    records: HarnessLedger, node: str, generation: int, limit: int = 200
) -> dict[str, Any]:
    """The capsule's ``toolPairs``, ``tests`` and journal artifact for ``generation`` of
    ``node``, from the newest ``limit`` calls journaled for it (:func:`parts_of`); {} when
    none was journaled."""
    return parts_of(records.tool_outcomes(node, generation=generation, limit=limit), node,
                    generation)  # fmt: skip


__all__ = [
    "ARTIFACT_ID",
    "DIGEST_SCOPE",
    "SHELL_TOOLS",
    "call_summary",
    "journal_parts",
    "journal_row",
    "outcome_of",
    "parts_of",
    "record",
]
