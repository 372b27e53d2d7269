"""What became of a dispatched effect's tool call: evidence from the host and the destination.

A PreToolUse hook runs before the host's permission step, its deny rules and the user's
interrupt, so an effect dispatched there may never have run. Three kinds of evidence settle it
(see docs/effects.md, "What became of a dispatched call"):

- the host's transcript: Claude Code writes the call's ``tool_result``; a declined permission
  prompt writes the canned rejection text (``DECLINED_TEXTS``) as an error result, and an
  interrupt writes the same text followed by the user message ``INTERRUPT_MARKER``.
  :func:`find_call_outcome` reads it, bounded, from where the transcript stood when the call
  was dispatched.
- the destination itself: for a ``git push``, :func:`push_plan` records (at PreToolUse) what
  the remote showed for each ref before the push, and :func:`observe` asks the remote again
  (``git ls-remote``, bounded): every ref at the intended commit is the push observed; every
  ref as it was before is a push that did not happen; anything else proves nothing.
- the hook payload: a PostToolUse without ``tool_use_id`` pairs with its PreToolUse by
  session, tool name and :func:`input_digest`.

Nothing here writes to the ledger or decides a state: the hooks and the relief's reconcile
step do, with what these functions return.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

#: The canned text Claude Code writes as the ``tool_result`` of a call the user declined at
#: its permission prompt (and, followed by ``INTERRUPT_MARKER``, of a call the user
#: interrupted). Seen in public transcripts and transcript parsers (docs/hosts.md).
DECLINED_TEXTS = (
    "The user doesn't want to proceed with this tool use.",
    "The user doesn't want to take this action right now.",
)

#: The user message Claude Code writes after a tool call the user interrupted.
INTERRUPT_MARKER = "[Request interrupted by user for tool use]"

#: How much of a transcript is read, at most, after the offset of one call.
MAX_SCAN_BYTES = 4 << 20

#: Seconds a ``git ls-remote`` may take at PreToolUse (the hook answers within its budget).
BEFORE_TIMEOUT = 3.0

#: Seconds a ``git ls-remote`` may take when settling (PostToolUseFailure, reconcile).
OBSERVE_TIMEOUT = 10.0

_INPUT_SCOPE = "onstation-tool-input-v1"


def input_digest(tool_name: str | None, tool_input: Any) -> str:
    """SHA-256 of the tool name and input (canonical JSON): pairs a result with its call."""
    from onstation.core.canonical import digest

    payload = {"tool": tool_name, "input": tool_input}
    try:
        return digest(_INPUT_SCOPE, payload)
    except Exception:  # not canonical JSON (NaN, huge numbers): a stable text form instead
        import hashlib

        text = json.dumps(payload, sort_keys=True, default=str, ensure_ascii=False)
        return hashlib.sha256(f"{_INPUT_SCOPE}\0{text}".encode()).hexdigest()


def transcript_offset(path: str | None) -> int | None:
    """The transcript's size now (where a later result of this call will start), or None."""
    if not path:
        return None
    try:
        return os.stat(os.path.expanduser(path)).st_size
    except OSError:
        return None


@dataclass(frozen=True)
class CallOutcome:
    """What the transcript says of one call: ``declined`` (the rejection text alone),
    ``interrupted`` (the rejection text and the interrupt marker), ``failed`` (another error
    result) or ``completed`` (a result that is not an error)."""

    kind: str
    text: str
    offset: int

    def to_json(self) -> dict[str, Any]:
        return {"transcript": self.kind, "text": self.text, "offset": self.offset}


def _result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        ]
        return "\n".join(parts)
    return ""


def _user_texts(entry: dict[str, Any]) -> list[str]:
    message = entry.get("message")
    if entry.get("type") != "user" or not isinstance(message, dict):
        return []
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [str(b.get("text", "")) for b in content
                if isinstance(b, dict) and b.get("type") == "text"]  # fmt: skip
    return []


def _tool_result(entry: dict[str, Any], tool_use_id: str) -> dict[str, Any] | None:
    message = entry.get("message")
    if entry.get("type") != "user" or not isinstance(message, dict):
        return None
    content = message.get("content")
    if not isinstance(content, list):
        return None
    for block in content:
        if (
            isinstance(block, dict)
            and block.get("type") == "tool_result"
            and block.get("tool_use_id") == tool_use_id
        ):
            return block
    return None


def is_declined_text(text: str) -> bool:
    """Whether a tool result or error is the host's rejection of the call."""
    return text.lstrip().startswith(DECLINED_TEXTS)


def find_call_outcome(
    path: str | None, offset: int | None, tool_use_id: str | None,
    *, max_bytes: int = MAX_SCAN_BYTES,
) -> CallOutcome | None:  # fmt: skip
    """The transcript's result of the call ``tool_use_id``, read from ``offset`` (at most
    ``max_bytes``), or None when it is not (yet) there or cannot be read."""
    if not path or not tool_use_id:
        return None
    needle = tool_use_id.encode("utf-8")
    start = max(0, offset or 0)
    try:
        with open(os.path.expanduser(path), "rb") as fh:
            if start > 0:
                fh.seek(start - 1)
                if fh.read(1) != b"\n":  # the offset fell inside a line: skip its rest
                    fh.readline()
            base = fh.tell()
            data = fh.read(max_bytes)
    except OSError:
        return None
    lines = data.split(b"\n")
    if len(data) == max_bytes:
        lines = lines[:-1]  # the last line may be cut by the bound
    found: CallOutcome | None = None
    position = base
    for line in lines:
        here = position
        position += len(line) + 1
        if found is not None:
            if found.kind == "declined" and INTERRUPT_MARKER.encode() in line:
                entry = _parse(line)
                if entry is not None and any(INTERRUPT_MARKER in t for t in _user_texts(entry)):
                    return CallOutcome("interrupted", found.text, found.offset)
            continue
        if needle not in line:
            continue
        entry = _parse(line)
        block = None if entry is None else _tool_result(entry, tool_use_id)
        if block is None:
            continue
        text = _result_text(block)
        if block.get("is_error") is True:
            kind = "declined" if is_declined_text(text) else "failed"
        else:
            kind = "completed"
        found = CallOutcome(kind, text[:400], here)
    return found


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        entry = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return entry if isinstance(entry, dict) else None


# ---------------------------------------------------------------------------------------
# asking the destination: git push


def _git_env() -> dict[str, str]:
    # The agent's own environment (its credentials, its GIT_SSH_COMMAND), never a prompt.
    env = dict(os.environ)
    env.update({"GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"})
    return env


def ls_remote(
    directory: str, remote: str, refs: list[str], timeout: float
) -> dict[str, str | None] | None:
    """What ``remote`` shows for each of ``refs`` (None: the ref is absent), asked with
    ``git ls-remote`` from ``directory``; None when the remote could not be asked."""
    return ask_remote(directory, remote, refs, timeout)[0]


def ask_remote(
    directory: str, remote: str, refs: list[str], timeout: float
) -> tuple[dict[str, str | None] | None, str | None]:
    """:func:`ls_remote`, with why the remote could not be asked (one line) when it could
    not: ``(refs, None)`` or ``(None, why)``."""
    import subprocess

    from onstation.harness.evidence import run_captured

    if timeout <= 0:
        return None, "no time was left to ask the remote"
    if not refs:
        return None, "no ref to ask about"
    if remote.startswith("-"):
        return None, f"the remote {remote!r} looks like an option: not asked"
    if not os.path.isdir(directory):
        return None, f"the repository {directory} no longer exists: git ls-remote not run"
    argv = ["git", "-C", directory, "ls-remote", remote, *refs]
    try:
        code, out, err = run_captured(argv, timeout=timeout, env=_git_env())
    except subprocess.TimeoutExpired:
        return None, f"git ls-remote {remote} did not answer within {timeout:g} s"
    except OSError as exc:
        return None, f"git ls-remote could not be run: {exc.strerror or exc}"
    if code != 0:
        lines = [x.strip() for x in err.splitlines() if x.strip()]
        # git's "fatal: ..." line says why; the last line is the usual fallback.
        said = next((x for x in lines if x.startswith("fatal:")), lines[-1] if lines else "")
        detail = f": {said[:300]}" if said else ""
        return None, f"git ls-remote {remote} exited with {code}{detail}"
    seen: dict[str, str] = {}
    for line in out.splitlines():
        sha, _, name = line.partition("\t")
        if name:
            seen[name.strip()] = sha.strip()
    return {ref: seen.get(ref) for ref in refs}, None


def remote_destination(directory: str, remote: str, timeout: float) -> str | None:
    """Where ``remote`` pushes now, as the effect's destination is written (the push URL in
    URL form, normalized as the ledger does); None when it cannot be told. An observation
    made long after the push asks the remote by name: this says whether the name still
    points where the push went."""
    import subprocess

    from onstation.harness.effects.context import _destination
    from onstation.harness.effects.git import _url_form
    from onstation.harness.evidence import run_captured

    if timeout <= 0 or remote.startswith("-") or not os.path.isdir(directory):
        return None
    argv = ["git", "-C", directory, "remote", "get-url", "--push", remote]
    try:
        code, out, _err = run_captured(argv, timeout=timeout, env=_git_env())
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = out.strip().splitlines()
    url = lines[0] if code == 0 and lines else remote  # not a configured name: a URL or path
    return _destination(_url_form(url, directory))


def push_plan(
    operation: str, arguments: Any, evidence: dict[str, Any], timeout: float
) -> dict[str, Any] | None:
    """How to ask whether a ``git push`` happened, with the remote's refs as they are now
    (before the push); None for any other effect or a push whose remote is unknown."""
    if operation != "git.push" or not isinstance(arguments, dict):
        return None
    directory = evidence.get("directory")
    remote = evidence.get("remote")
    if not isinstance(directory, str) or not isinstance(remote, str) or "<redacted>" in remote:
        return None
    updates = arguments.get("refs") if "refs" in arguments else [arguments]
    if not isinstance(updates, list):
        return None
    refs: dict[str, dict[str, Any]] = {}
    for update in updates:
        if not isinstance(update, dict) or not isinstance(update.get("ref"), str):
            return None
        delete = update.get("delete") is True
        commit = update.get("commit")
        if not delete and not isinstance(commit, str):
            return None  # the commit pushed is unknown: nothing to compare with
        refs[update["ref"]] = {"intended": None if delete else commit}
    if not refs:
        return None
    before = ls_remote(directory, remote, sorted(refs), timeout)
    for ref, entry in refs.items():
        entry["before"] = None if before is None else before.get(ref)
    return {
        "kind": "git.push",
        "directory": directory,
        "remote": remote,
        "refs": refs,
        "before_known": before is not None,
        # Other refs may change too (deleted by --prune or --mirror): an unchanged ref list
        # then proves nothing about them.
        "other_refs": bool(arguments.get("prune") or arguments.get("mirror")),
    }


def observe(plan: Any, timeout: float = OBSERVE_TIMEOUT) -> tuple[str, dict[str, Any]] | None:
    """Ask the destination what became of the effect: ``("observed", evidence)`` when every
    ref shows what was pushed, ``("not-executed", evidence)`` when every ref shows what it
    showed before (and that was not what was pushed), ``("uncertain", evidence)`` when some
    refs moved to what was pushed and others did not; None when the destination could not be
    asked or shows something else (:func:`ask` says why)."""
    outcome, evidence = ask(plan, timeout)
    return None if outcome is None else (outcome, evidence)


def ask(plan: Any, timeout: float = OBSERVE_TIMEOUT) -> tuple[str | None, dict[str, Any]]:
    """:func:`observe`, with the evidence also when there is no conclusion: then the outcome
    is None and ``evidence["why"]`` says, in one line, why the destination proves nothing
    (it could not be asked, a ref moved elsewhere, the refs before are unknown)."""
    if not isinstance(plan, dict) or plan.get("kind") != "git.push":
        return None, {"why": "no record of how to ask the destination"}
    refs = plan.get("refs")
    directory, remote = plan.get("directory"), plan.get("remote")
    if not isinstance(refs, dict) or not isinstance(directory, str) or not isinstance(remote, str):
        return None, {"why": "the record of how to ask the destination is incomplete"}
    evidence: dict[str, Any] = {"asked": "git ls-remote", "remote": remote}
    now, why = ask_remote(directory, remote, sorted(refs), timeout)
    if now is None:
        return None, evidence | {"why": why or "the remote could not be asked"}
    shown = {
        ref: {"before": entry.get("before"), "intended": entry.get("intended"), "now": now[ref]}
        for ref, entry in refs.items()
    }
    evidence["refs"] = shown
    done = [r for r, e in shown.items() if e["now"] == e["intended"]]
    if len(done) == len(shown):
        return "observed", evidence
    if plan.get("before_known") is not True:
        why = "the remote's refs before the push are unknown (it could not be asked then)"
    elif plan.get("other_refs"):
        why = "a --prune or --mirror push may have changed refs that were not recorded"
    elif all(e["now"] == e["before"] for e in shown.values()):
        return "not-executed", evidence
    elif done and all(e["now"] in (e["before"], e["intended"]) for e in shown.values()):
        return "uncertain", evidence
    else:
        moved = sorted(r for r, e in shown.items() if e["now"] not in (e["before"], e["intended"]))
        why = (f"{', '.join(moved)} moved to a commit that is neither the one before nor the "
               "one pushed")  # fmt: skip
    return None, evidence | {"why": why}


__all__ = [
    "BEFORE_TIMEOUT",
    "DECLINED_TEXTS",
    "INTERRUPT_MARKER",
    "OBSERVE_TIMEOUT",
    "CallOutcome",
    "ask",
    "ask_remote",
    "find_call_outcome",
    "input_digest",
    "is_declined_text",
    "ls_remote",
    "observe",
    "push_plan",
    "remote_destination",
    "transcript_offset",
]
