"""Installing onstation's hooks, status line and skills into Claude Code and Codex CLI.

Install merges into the harness's settings without disturbing anything else and writes an
install record beside them (``onstation-install.json``) naming exactly what it added: the
hook handlers, the status line it replaced (kept, and wrapped), the skill files (with their
digests), and the settings file's original bytes. Uninstall removes exactly those; when the
settings then equal what they were before install, the original bytes are written back, so
an untouched file returns byte for byte.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

from onstation.core.errors import BadInput, Conflict
from onstation.harness.adapters import CLAUDE_CODE, CODEX, HOOK_HARNESSES, HarnessAdapter, find
from onstation.harness.files import MAX_DOCUMENT_BYTES, read_bounded, write_inside

RECORD = "onstation-install.json"

#: The hook events install adds, per harness (the adapters hold them).
CLAUDE_EVENTS = list(CLAUDE_CODE.hook_events)
CODEX_EVENTS = list(CODEX.hook_events)

RELIEF_SKILL = """---
name: onstation-relief
description: >
  Relief on station. Use when onstation reports hull integrity Red or Critical, or when you
  notice your context running low: write the turnover brief from evidence so a fresh body
  continues the work. Never use it to resume another agent's identity.
---

# Relief on station (onstation)

Your context window is a hull: Green under 25 %, Amber from 25 % (plan the wrap-up, start
nothing large), Red from 33 % (prepare the turnover brief now), Critical from 38 %
(emergency brief, immediate hand-over).

When told "Hull integrity Red. Prepare turnover brief.":

1. Finish the step you are in; start nothing new.
2. Record each decision that matters with its reason:
   `onstation note {node} --decision "DECISION" --why "RATIONALE"`
3. Write the brief (git, effects and telemetry are filled in from evidence; give what only
   you know, and anything you leave out is marked missing):
   `onstation brief write {node} --task "WHAT I WAS DOING" --status in_progress
    --completed "PATH — WHAT WAS DONE" --remaining "NEXT STEP" --context "GOTCHA"`
4. Stop. Your successor receives the brief; this session is then fenced and every
   effect-capable tool call from it is denied.
"""

COORD_SKILL = """---
name: onstation-coord-respawn
description: >
  Coordinator self-respawn. Use at a clean sub-task boundary when context passes 70 %
  (proactive) and always at 80 % (mandatory); never while an executor awaits an APPROACH or
  CHECKPOINT answer. At most 3 respawns per 24 h.
---

# Coordinator self-respawn (onstation)

1. Finish any open APPROACH or CHECKPOINT exchange; start no new executor.
2. Check the governor: `onstation respawn status {node}` (blocked: escalate to your spawner
   with your current state and stop).
3. Write the continuation manifest (it refuses while an exchange is open):
   `onstation manifest write {node} --l3 L3-NAME --pun PUN --l3-task "L3 TASK"
    --completed "EXEC: STATUS — SUMMARY" --in-flight "..." --not-started "..."
    --scratch "STATUS AND CHILDREN TABLES" --next "EXACT NEXT ACTION" --blocker "..."`
4. Tell your spawner (its relief counts the respawn, atomically, and starts your successor
   with the manifest): `onstation message send --from {node} --to SPAWNER --kind
   respawn_triggered --body "COORD_RESPAWN TRIGGERED; continuation manifest: PATH"`.
5. Stop.
"""


def onstation_command() -> str:
    """The absolute path of the running ``onstation`` executable (hooks need no PATH)."""
    found = shutil.which("onstation")
    beside = Path(sys.executable).with_name("onstation")
    if beside.exists():
        return str(beside)
    if found:
        return os.path.realpath(found)
    return "onstation"


def _handler(harness: str, event: str, executable: str) -> dict[str, Any]:
    return {
        "type": "command",
        "command": f"{shlex.quote(executable)} hook {harness} {event}",
    }


def _load_json(path: Path) -> tuple[dict[str, Any], bytes | None]:
    if path.is_symlink():
        raise BadInput(f"{path} is a symlink; refusing to edit it")
    if not path.exists():
        return {}, None
    raw = read_bounded(path, MAX_DOCUMENT_BYTES, "settings", follow_symlinks=False)
    try:
        data = json.loads(raw.decode("utf-8")) if raw.strip() else {}
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError, ValueError) as exc:
        raise BadInput(f"{path}: not valid JSON ({exc}); fix it before installing") from exc
    if not isinstance(data, dict):
        raise BadInput(f"{path}: must hold a JSON object")
    return data, raw


def _indent_of(raw: bytes | None) -> int:
    if raw:
        for line in raw.decode("utf-8", "replace").splitlines()[1:]:
            stripped = line.lstrip(" ")
            if stripped and len(line) != len(stripped):
                return len(line) - len(stripped)
    return 2


def _dump(data: dict[str, Any], indent: int) -> str:
    return json.dumps(data, indent=indent, ensure_ascii=False) + "\n"


def _write(base: Path, relative: Path, text: str) -> None:
    base.mkdir(parents=True, exist_ok=True)
    write_inside(base, list(relative.parts), text)


def _hooked(harness: str) -> HarnessAdapter:
    """The adapter of a harness onstation installs hooks into; BadInput for any other."""
    found = find(harness, aliases=False)
    if found is None or not found.has_hooks:
        raise BadInput(f"unknown harness {harness!r}; use {' or '.join(HOOK_HARNESSES)}")
    return found


def settings_target(harness: str, *, project: str | None, user: bool) -> tuple[Path, Path]:
    """(base directory, settings file relative to it) for an install."""
    if (project is None) == (not user):
        raise BadInput("give exactly one of --project DIR or --user")
    host = _hooked(harness)
    assert host.settings_dir is not None and host.settings_file is not None
    if user:
        home = os.environ.get(host.settings_env) if host.settings_env else None
        base = Path(home or Path.home() / host.settings_dir)
        return base, Path(host.settings_file)
    return Path(project or "."), Path(host.settings_dir) / host.settings_file


def _prepare(
    harness: str,
    *,
    project: str | None,
    user: bool,
    node: str | None,
    executable: str | None,
    wrap_statusline: bool,
) -> tuple[Path, Path, dict[str, Any], list[tuple[Path, str]], dict[str, Any]]:
    """Everything install will write, computed and checked without writing anything."""
    host = _hooked(harness)
    base, relative = settings_target(harness, project=project, user=user)
    if project is not None and not base.is_dir():
        raise BadInput(f"--project: {base} is not a directory")
    settings_path = base / relative
    record_path = settings_path.parent / RECORD
    if record_path.exists():
        raise Conflict(f"onstation is already installed here ({record_path}); uninstall first")
    data, raw = _load_json(settings_path)
    indent = _indent_of(raw)
    exe = executable or onstation_command()
    events = host.hook_events
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise BadInput(f"{settings_path}: 'hooks' must be an object")
    added: dict[str, dict[str, Any]] = {}
    for event in events:
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise BadInput(f"{settings_path}: hooks.{event} must be a list")
        group: dict[str, Any] = {"hooks": [_handler(harness, event, exe)]}
        if event in ("PreToolUse", "PostToolUse"):
            group = {"matcher": "*", **group}
        groups.append(group)
        added[event] = group
    statusline_before: Any = None
    statusline_added: Any = None
    if host.installs_statusline:
        statusline_before = data.get("statusLine")
        command = f"{shlex.quote(exe)} statusline"
        if (
            wrap_statusline
            and isinstance(statusline_before, dict)
            and isinstance(statusline_before.get("command"), str)
        ):
            command += f" --wrap {shlex.quote(statusline_before['command'])}"
        statusline_added = {"type": "command", "command": command}
        if isinstance(statusline_before, dict) and "padding" in statusline_before:
            statusline_added["padding"] = statusline_before["padding"]
        data["statusLine"] = statusline_added
    skill_files: list[tuple[Path, str]] = []
    if host.installs_skills:
        for name, template in (("onstation-relief", RELIEF_SKILL),
                               ("onstation-coord-respawn", COORD_SKILL)):  # fmt: skip
            target = settings_path.parent / "skills" / name / "SKILL.md"
            # Every target is checked before any is written: a conflict leaves nothing behind.
            if target.exists():
                raise Conflict(f"{target} exists and is not onstation's; move it first")
            skill_files.append((target, template.replace("{node}", node or "NODE")))
    record = {
        "harness": harness,
        "settings": str(settings_path),
        "original": None if raw is None else base64.b64encode(raw).decode("ascii"),
        "indent": indent,
        "added_hooks": added,
        "statusline_before": statusline_before,
        "statusline_added": statusline_added,
        "skills": [
            {"path": str(target), "sha256": hashlib.sha256(text.encode()).hexdigest()}
            for target, text in skill_files
        ],
        "node": node,
    }
    return base, relative, data, skill_files, record


def check_install(harness: str, *, project: str | None, user: bool) -> None:
    """Raise what :func:`install` would raise, writing nothing (run it before other writes)."""
    _prepare(harness, project=project, user=user, node=None, executable=None,
             wrap_statusline=True)  # fmt: skip


def install(
    harness: str,
    *,
    project: str | None,
    user: bool,
    node: str | None,
    executable: str | None = None,
    wrap_statusline: bool = True,
) -> dict[str, Any]:
    """Merge onstation into the harness settings; return the install record."""
    base, relative, data, skill_files, record = _prepare(
        harness, project=project, user=user, node=node, executable=executable,
        wrap_statusline=wrap_statusline,
    )  # fmt: skip
    settings_dir = (base / relative).parent
    for target, text in skill_files:
        _write(settings_dir, target.relative_to(settings_dir), text)
    _write(base, relative, _dump(data, int(record["indent"])))
    _write(settings_dir, Path(RECORD), json.dumps(record, indent=2) + "\n")
    return record


def _load_record(path: Path) -> dict[str, Any]:
    """The install record, checked for the shape uninstall relies on."""
    raw = read_bounded(path, MAX_DOCUMENT_BYTES, "install record", follow_symlinks=False)
    try:
        record = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError, ValueError) as exc:
        raise BadInput(f"{path}: not valid JSON ({exc}); remove onstation by hand") from exc
    if (
        not isinstance(record, dict)
        or not isinstance(record.get("added_hooks", {}), dict)
        or not isinstance(record.get("skills", []), list)
        or not isinstance(record.get("original"), str | None)
        or not all(
            isinstance(s, dict)
            and isinstance(s.get("path"), str)
            and isinstance(s.get("sha256"), str)
            for s in record.get("skills", [])
        )
    ):
        raise BadInput(f"{path}: not an onstation install record; remove onstation by hand")
    return record


def uninstall(harness: str, *, project: str | None, user: bool) -> dict[str, Any]:
    """Remove exactly what install added; return what was removed."""
    base, relative = settings_target(harness, project=project, user=user)
    settings_path = base / relative
    record_path = settings_path.parent / RECORD
    if not record_path.is_file():
        raise BadInput(f"onstation is not installed here (no {record_path})")
    record = _load_record(record_path)
    data, _raw = _load_json(settings_path)
    hooks = data.get("hooks")
    removed = 0
    if isinstance(hooks, dict):
        for event, group in record.get("added_hooks", {}).items():
            groups = hooks.get(event)
            if isinstance(groups, list) and group in groups:
                groups.remove(group)
                removed += 1
                if not groups:
                    del hooks[event]
        if not hooks:
            del data["hooks"]
    if (
        record.get("statusline_added") is not None
        and data.get("statusLine") == record["statusline_added"]
    ):
        if record.get("statusline_before") is None:
            data.pop("statusLine", None)
        else:
            data["statusLine"] = record["statusline_before"]
    original = record.get("original")
    if original is not None:
        original_bytes = base64.b64decode(original)
        before = json.loads(original_bytes.decode("utf-8")) if original_bytes.strip() else {}
        text = (
            original_bytes.decode("utf-8")
            if before == data
            else _dump(data, int(record.get("indent", 2)))
        )
        _write(base, relative, text)
    elif data:
        _write(base, relative, _dump(data, int(record.get("indent", 2))))
    elif settings_path.exists():
        settings_path.unlink()
    kept: list[str] = []
    for skill in record.get("skills", []):
        path = Path(skill["path"])
        if path.is_file() and not path.is_symlink():
            try:
                content = read_bounded(path, MAX_DOCUMENT_BYTES, "skill", follow_symlinks=False)
            except BadInput:
                content = b""  # not what install wrote (too large, swapped): keep it
            if content and hashlib.sha256(content).hexdigest() == skill["sha256"]:
                path.unlink()
                try:
                    path.parent.rmdir()
                    path.parent.parent.rmdir()  # the skills folder, if now empty
                except OSError:
                    pass
            else:
                kept.append(str(path))
    record_path.unlink()
    return {"settings": str(settings_path), "hooks_removed": removed, "skills_kept": kept}
