"""Codex CLI's hook trust and project trust, read (never written) from its ``config.toml``.

Codex runs a non-managed command hook only when the user has reviewed it: the review
records, in the user's ``$CODEX_HOME/config.toml``, ``[hooks.state."KEY"] trusted_hash =
"sha256:..."``, and a hook whose current hash differs is "modified" and does not run
(``openai/codex`` ``codex-rs/hooks/src/engine/discovery.rs``, ``hook_trust_status``; only
user-controlled layers may hold that state, ``codex-rs/hooks/src/config_rules.rs``). A
project's ``.codex/`` layer (and so its ``hooks.json``) is loaded only for a trusted project,
``[projects."PATH"] trust_level = "trusted"`` in the same file (Codex docs, "Config basics",
and the hooks page: "Non-managed command hooks must be reviewed and trusted before they run").

onstation never writes that file: trusting a hook is the user's consent, given in Codex's
``/hooks`` review. It computes the hash Codex would record, so that ``onstation doctor`` can
tell a reviewed hook from one that is not, and prints what the user must do once.

The hash (``command_hook_hash`` in discovery.rs; ``version_for_toml`` in
``codex-rs/config/src/fingerprint.rs``): the normalized identity ``{event_name: LABEL,
matcher?: M, hooks: [{type: "command", command, timeout, async}]}`` (absent options
omitted, ``timeout`` defaulting to 600 and at least 1, the matcher dropped for events that
take none), as JSON with keys sorted and no spaces, SHA-256, written ``sha256:HEX``. The
key is ``SOURCE:LABEL:GROUP:HANDLER``, SOURCE being the absolute path of the hooks file.
Checked against codex-cli 0.171.0 (docs/hosts.md, "Checked against the real programs").
Codex versions whose handler identity carries more fields (a ``visibilityHint`` in some) hash
differently: a mismatch is therefore reported as "review again", not as tampering.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

#: Codex's snake_case labels of its hook events (``hook_event_key_label``).
EVENT_LABELS: dict[str, str] = {
    "PreToolUse": "pre_tool_use",
    "PermissionRequest": "permission_request",
    "PostToolUse": "post_tool_use",
    "PreCompact": "pre_compact",
    "PostCompact": "post_compact",
    "SessionStart": "session_start",
    "UserPromptSubmit": "user_prompt_submit",
    "Stop": "stop",
}
#: Events whose matcher Codex keeps (``matcher_pattern_for_event``); others drop it.
_MATCHER_EVENTS = frozenset({"PreToolUse", "PermissionRequest", "PostToolUse", "SessionStart"})
#: Codex's default command hook timeout, in seconds.
DEFAULT_TIMEOUT = 600


def codex_home() -> Path:
    """``$CODEX_HOME``, else ``~/.codex``."""
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")


def hook_key(source: str | os.PathLike[str], event: str, group: int, handler: int) -> str:
    """The key of one handler in ``[hooks.state]``."""
    return f"{os.fspath(source)}:{EVENT_LABELS[event]}:{group}:{handler}"


def hook_hash(event: str, matcher: str | None, command: str, timeout: int | None) -> str:
    """The ``trusted_hash`` Codex records when the user trusts this command handler."""
    handler: dict[str, Any] = {
        "type": "command",
        "command": command,
        "timeout": max(timeout if timeout is not None else DEFAULT_TIMEOUT, 1),
        "async": False,
    }
    identity: dict[str, Any] = {"event_name": EVENT_LABELS[event], "hooks": [handler]}
    if event in _MATCHER_EVENTS and matcher is not None:
        identity["matcher"] = matcher
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def expected_trust(
    hooks_file: Path, hooks: dict[str, Any], command_of: str
) -> list[dict[str, Any]]:
    """For each handler in ``hooks`` (the ``hooks`` object of a hooks.json) whose command
    contains ``command_of``: its key and the hash Codex would record when trusted."""
    found: list[dict[str, Any]] = []
    source = os.path.abspath(hooks_file)
    for event, groups in hooks.items():
        if event not in EVENT_LABELS or not isinstance(groups, list):
            continue
        for g, group in enumerate(groups):
            if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
                continue
            for h, handler in enumerate(group["hooks"]):
                command = handler.get("command") if isinstance(handler, dict) else None
                if not isinstance(command, str) or command_of not in command:
                    continue
                timeout = handler.get("timeout")
                matcher = group.get("matcher")
                found.append({
                    "event": event,
                    "key": hook_key(source, event, g, h),
                    "hash": hook_hash(event, matcher if isinstance(matcher, str) else None,
                                      command, timeout if isinstance(timeout, int) else None),
                })  # fmt: skip
    return found


def read_config(home: Path | None = None) -> tuple[dict[str, Any], str | None]:
    """The user's Codex ``config.toml`` as data ({} when absent) and a problem, if any."""
    import tomllib

    path = (home or codex_home()) / "config.toml"
    if not path.is_file():
        return {}, None
    try:
        return tomllib.loads(path.read_text(encoding="utf-8")), None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return {}, f"{path}: not readable TOML ({exc})"


def project_trusted(config: dict[str, Any], project: str | os.PathLike[str]) -> bool | None:
    """True/False when ``config.toml`` says the project (or a folder above it) is trusted or
    untrusted; None when it says nothing (Codex then asks, and loads no ``.codex/`` until
    the user trusts the folder)."""
    projects = config.get("projects")
    if not isinstance(projects, dict):
        return None
    here = Path(os.path.abspath(project))
    real = Path(os.path.realpath(project))
    for candidate in (here, *here.parents, real, *real.parents):
        entry = projects.get(str(candidate))
        if isinstance(entry, dict) and isinstance(entry.get("trust_level"), str):
            return bool(entry["trust_level"] == "trusted")
    return None


def hook_states(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``[hooks.state]``: key -> {"trusted_hash"?, "enabled"?}."""
    hooks = config.get("hooks")
    state = hooks.get("state") if isinstance(hooks, dict) else None
    if not isinstance(state, dict):
        return {}
    return {k.strip(): v for k, v in state.items() if isinstance(v, dict) and k.strip()}


def trust_status(expected: dict[str, Any], states: dict[str, dict[str, Any]]) -> str:
    """``trusted``, ``modified`` (a different hash was reviewed), ``untrusted`` or
    ``disabled``, as Codex would judge the handler ``expected`` describes."""
    state = states.get(expected["key"], {})
    if state.get("enabled") is False:
        return "disabled"
    trusted = state.get("trusted_hash")
    if not isinstance(trusted, str):
        return "untrusted"
    return "trusted" if trusted == expected["hash"] else "modified"


def what_to_do(project: str | None, trusted_project: bool | None) -> list[str]:
    """The steps the user takes once so that Codex runs the installed hooks."""
    steps: list[str] = []
    config = codex_home() / "config.toml"
    if project is not None and trusted_project is not True:
        steps.append(
            f"trust the project: answer yes when codex asks to trust {os.path.abspath(project)}"
            f", or add to {config}: [projects.{json.dumps(os.path.abspath(project))}] "
            'trust_level = "trusted"'
        )
    where = f"cd {os.path.abspath(project)} && " if project is not None else ""
    steps.append(f"review and trust the onstation hooks once: {where}codex, then /hooks")
    return steps
