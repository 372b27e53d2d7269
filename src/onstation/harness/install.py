"""Installing onstation's hooks, status line and skills into Claude Code and Codex CLI.

Install merges into the harness's settings without disturbing anything else and keeps an
install record naming exactly what it added: the hook handlers, the status line it replaced
or wrapped, the skill files (with their digests), and the settings file's original bytes.
Uninstall removes exactly those; when the settings then equal what they were before install,
the original bytes are written back, so an untouched file returns byte for byte.

Where things go (docs/hooks.md, "Install"):

- A Claude Code project install writes ``.claude/settings.local.json``, the project settings
  Claude Code documents as not committed (harness-formats.md §1.1), never the shared
  ``.claude/settings.json``; a Codex project install writes ``.codex/hooks.json``.
- The install record is onstation's own: ``WORKSPACE/.onstation/install-HARNESS.json`` for a
  project (with a ``.gitignore`` beside it, since the record holds machine paths and the
  local settings' original bytes), ``$XDG_STATE_HOME/onstation/installs/`` for a user
  install. Records of earlier versions (``.claude/onstation-install.json``) are found, and
  installing again migrates them: what they added to ``.claude/settings.json`` is removed
  first.
- The status line in effect (Claude Code's precedence: local, then shared project, then
  user settings) is wrapped, ``onstation statusline --wrap 'COMMAND'``, and uninstall
  restores it.
- Every handler carries a ``timeout`` (:data:`HOOK_TIMEOUT` seconds), well above the hook's
  own budget (``ONSTATION_HOOK_BUDGET``, 10 s), so the hook always answers first.
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

#: The install record of earlier versions, beside the settings file (found and migrated).
RECORD = "onstation-install.json"
#: onstation's own folder in a workspace (``.onstation/config.json`` lives there too).
RECORD_DIR = ".onstation"
#: Seconds each installed handler may run before the host cancels it (both hosts accept
#: ``timeout`` in seconds). The hook answers within its own budget (10 s by default).
HOOK_TIMEOUT = 30
#: The install record's format version (3: skills without machine-specific text).
RECORD_VERSION = 3
#: What install writes beside a project's record: the records stay out of version control.
GITIGNORE = "install-*.json\n"

#: The hook events install adds, per harness (the adapters hold them).
CLAUDE_EVENTS = list(CLAUDE_CODE.hook_events)
CODEX_EVENTS = list(CODEX.hook_events)

#: The skills install writes. ``.claude/skills/`` is a folder teams commit, so the text holds
#: nothing of this machine or workspace: no node name, no path, no tier percentages (they are
#: the workspace's configuration). It points at what onstation's own notices say at run time
#: (relief/hook_texts.py: the session-start notice names the node and generation, a tier
#: notice the fill and the command that writes the brief), and it states facts, as every
#: injected text does (docs/hooks.md, "Texts for the model are statements of fact").
RELIEF_SKILL = """---
name: onstation-relief
description: >
  Relief on station with onstation: what its hull integrity notices mean, and how the
  turnover brief it requests at Red or Critical is written, so that a fresh body continues
  the work under the same identity. It never resumes another agent's identity.
---

# Relief on station (onstation)

onstation reads this session's context fill from the host's telemetry and reports it as hull
integrity, in tiers: Green; Amber (the wrap-up is near, large new work is better left to the
successor); Red (a turnover brief is requested); Critical (an emergency relief is requested and
new work is not started). Where each tier begins is this workspace's configuration; every
tier notice states the fill it was reached at.

The node this session works for, and its generation, are the ones named in onstation's
session-start notice ("this session is the body of NODE, generation G"). The Red and Critical
notices name them again, with the exact command that writes the brief.

When a brief is requested, the relief goes in this order:

1. The step in progress is finished; nothing new is started.
2. Each decision that matters is recorded with its reason:
   `onstation note NODE --decision "DECISION" --why "RATIONALE"`.
3. The brief is written with the command the notice gives
   (`onstation brief write NODE --generation G --task ... --remaining ...`). Git state,
   effects and telemetry are filled in from evidence; the brief carries what only this
   session knows, and a field left out is marked missing.
4. The turn ends there. The successor receives the brief; this generation is then fenced and
   every effect-capable tool call from it is denied.

`onstation` is the program that runs this project's hooks. Where it is not on PATH, the hook
commands in the Claude Code settings (or the plugin's `bin/onstation`) give its full path.
"""

COORD_SKILL = """---
name: onstation-coord-respawn
description: >
  Coordinator self-respawn with onstation: how a coordinator hands its state to a fresh
  instance of itself through a continuation manifest, at a clean sub-task boundary, when
  onstation's hull integrity notices report its context filling up.
---

# Coordinator self-respawn (onstation)

A coordinator's tiers come from the workspace's configuration (the coordinator policy); its
hull integrity notices state the fill reached. A respawn happens at a clean sub-task boundary,
never while an executor awaits an APPROACH or CHECKPOINT answer. The node and generation are
the ones named in onstation's session-start notice.

The respawn goes in this order:

1. Any open APPROACH or CHECKPOINT exchange is finished; no new executor is started.
2. The governor's answer comes from `onstation respawn status NODE --kind coordinator`. A
   blocked respawn goes to the spawner as an escalation, with the current state, and the
   coordinator goes no further.
3. The continuation manifest is written with
   `onstation manifest write NODE --generation G --l3 L3-NAME --pun PUN --l3-task "L3 TASK"
   --completed "EXEC: STATUS — SUMMARY" --in-flight "..." --not-started "..."
   --scratch "STATUS AND CHILDREN TABLES" --next "EXACT NEXT ACTION" --blocker "..."`.
   It is refused while an exchange is open, and past the respawn cap. Writing it tells the
   spawner (COORD_RESPAWN TRIGGERED); the spawner's relief counts the respawn and starts the
   successor with the manifest.
4. The turn ends there.

`onstation` is the program that runs this project's hooks. Where it is not on PATH, the hook
commands in the Claude Code settings (or the plugin's `bin/onstation`) give its full path.
"""

#: The skills by name (folder under ``skills/``), for a settings install and the plugin.
SKILLS: tuple[tuple[str, str], ...] = (
    ("onstation-relief", RELIEF_SKILL),
    ("onstation-coord-respawn", COORD_SKILL),
)


def onstation_command() -> str:
    """The absolute path of the running ``onstation`` executable (hooks need no PATH)."""
    found = shutil.which("onstation")
    beside = Path(sys.executable).with_name("onstation")
    if beside.exists():
        return str(beside)
    if found:
        return os.path.realpath(found)
    return "onstation"


#: The script an installed command runs with ``python -S`` (cli/hook_launcher.py).
HOOK_LAUNCHER = "hook_launcher.py"


def launcher_path() -> Path:
    """Where this install's hook launcher is (it is not imported: importing it runs it)."""
    # Not resolved: the daemon compares the client's package directory, as imported, with
    # its own (a symlinked path resolved here would look like another install to it).
    return Path(__file__).parent.parent / "cli" / HOOK_LAUNCHER


def command_program(executable: str | None = None) -> str:
    """The shell words that start onstation in an installed hook or status-line command.

    By default the running interpreter without its ``site`` module on the hook launcher
    (``PYTHON -S .../onstation/cli/hook_launcher.py``: docs/hooks.md says why); an explicit
    ``executable`` (or an install whose interpreter or launcher cannot be found) gets that
    program itself, as before."""
    if executable is None:
        launcher = launcher_path()
        python = sys.executable
        if python and os.path.isabs(python) and launcher.is_file():
            return shlex.join([python, "-S", str(launcher)])
        executable = onstation_command()
    return shlex.quote(executable)


def onstation_words(words: list[str]) -> list[str] | None:
    """The arguments after the program of a command that runs onstation (its console script,
    or the interpreter with ``-S`` on the hook launcher), or None for any other command."""
    if words and os.path.basename(words[0]) == "onstation":
        return words[1:]
    if len(words) >= 3 and words[1] == "-S" and os.path.basename(words[2]) == HOOK_LAUNCHER:
        return words[3:]
    return None


def hook_command(program: str, harness: str, event: str) -> str:
    """The command string a host runs for ``event``; ``program`` as
    :func:`command_program` gives it (shell words, already quoted)."""
    return f"{program} hook {harness} {event}"


def _handler(harness: str, event: str, program: str) -> dict[str, Any]:
    return {
        "type": "command",
        "command": hook_command(program, harness, event),
        "timeout": HOOK_TIMEOUT,
    }


def _load_json(path: Path, *, follow: bool = False) -> tuple[dict[str, Any], bytes | None]:
    """A settings file as data, and its bytes (None when absent). A symlink is refused
    unless ``follow`` (a file onstation only reads)."""
    if path.is_symlink() and not follow:
        raise BadInput(f"{path} is a symlink; refusing to edit it")
    if not path.exists():
        return {}, None
    raw = read_bounded(path, MAX_DOCUMENT_BYTES, "settings", follow_symlinks=follow)
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


def _user_base(host: HarnessAdapter) -> Path:
    assert host.settings_dir is not None
    home = os.environ.get(host.settings_env) if host.settings_env else None
    return Path(home or Path.home() / host.settings_dir)


def settings_target(harness: str, *, project: str | None, user: bool) -> tuple[Path, Path]:
    """(base directory, settings file relative to it) for an install."""
    if (project is None) == (not user):
        raise BadInput("give exactly one of --project DIR or --user")
    host = _hooked(harness)
    assert host.settings_dir is not None and host.settings_file is not None
    if user:
        return _user_base(host), Path(host.settings_file)
    assert host.project_settings_file is not None
    return Path(os.path.abspath(project or ".")), Path(
        host.settings_dir
    ) / host.project_settings_file


def state_dir() -> Path:
    """``$XDG_STATE_HOME/onstation`` (``~/.local/state/onstation``), the ledger's folder."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local",
                                                            "state")  # fmt: skip
    return Path(base) / "onstation"


def record_location(harness: str, *, project: str | None, settings: Path) -> Path:
    """Where the install record of this install lives (see the module docstring)."""
    if project is not None:
        return Path(project) / RECORD_DIR / f"install-{harness}.json"
    digest = hashlib.sha256(os.path.abspath(settings).encode()).hexdigest()[:12]
    return state_dir() / "installs" / f"{harness}-{digest}.json"


def _legacy_settings(harness: str, *, project: str | None, user: bool) -> Path:
    """The settings file earlier versions wrote (its record lies beside it)."""
    host = _hooked(harness)
    assert host.settings_dir is not None and host.settings_file is not None
    if user:
        return _user_base(host) / host.settings_file
    return Path(project or ".") / host.settings_dir / host.settings_file


# -- Claude Code's settings layers: which status line is in effect ------------------------


def managed_settings_path() -> Path:
    """Claude Code's file-based managed settings on this platform (settings docs)."""
    if sys.platform == "darwin":
        return Path("/Library/Application Support/ClaudeCode/managed-settings.json")
    if sys.platform.startswith("win"):
        return Path(r"C:\Program Files\ClaudeCode\managed-settings.json")
    return Path("/etc/claude-code/managed-settings.json")


def claude_layers(project: str | None) -> list[tuple[str, Path]]:
    """Claude Code's settings files, highest precedence first: managed, local project,
    shared project, user (Claude Code settings docs, "Settings precedence"; command-line
    arguments sit between managed and local and are not files)."""
    layers = [("managed settings", managed_settings_path())]
    if project is not None:
        folder = Path(os.path.abspath(project)) / ".claude"
        layers += [("local project settings", folder / "settings.local.json"),
                   ("shared project settings", folder / "settings.json")]  # fmt: skip
    layers.append(("user settings", _user_base(CLAUDE_CODE) / "settings.json"))
    return layers


def _read_layer(path: Path, given: dict[Path, dict[str, Any]]) -> dict[str, Any]:
    if path in given:
        return given[path]
    try:
        return _load_json(path, follow=True)[0]
    except BadInput:
        return {}  # a file Claude Code itself would reject sets nothing


def statusline_in_effect(
    project: str | None, given: dict[Path, dict[str, Any]] | None = None
) -> tuple[str, Path, dict[str, Any]] | None:
    """(layer name, file, ``statusLine``) of the status line Claude Code would run, or None.

    ``given`` supplies the content of files about to be written (by path)."""
    given = given or {}
    for name, path in claude_layers(project):
        line = _read_layer(path, given).get("statusLine")
        if isinstance(line, dict):
            return name, path, line
    return None


def _inner_command(command: str) -> str | None:
    """What an onstation status line wraps (None: nothing), or ``command`` itself."""
    try:
        words = shlex.split(command)
    except ValueError:
        return command
    args = onstation_words(words)
    if args and args[0] == "statusline":
        return args[2] if len(args) >= 3 and args[1] == "--wrap" else None
    return command


def _onstation_handlers(data: dict[str, Any], harness: str) -> list[str]:
    """Commands in ``data['hooks']`` that run ``onstation hook HARNESS``."""
    found: list[str] = []
    hooks = data.get("hooks")
    for groups in hooks.values() if isinstance(hooks, dict) else ():
        for group in groups if isinstance(groups, list) else ():
            for handler in group.get("hooks", []) if isinstance(group, dict) else ():
                command = handler.get("command") if isinstance(handler, dict) else None
                if isinstance(command, str) and f" hook {harness} " in f"{command} ":
                    found.append(command)
    return found


# -- removing what a record added ----------------------------------------------------------


class _Removal:
    """What uninstalling one record changes, computed without writing."""

    def __init__(self, record: dict[str, Any], data: dict[str, Any]) -> None:
        self.settings = Path(record["settings"])
        self.data = data
        self.text: str | None = None  # the settings file's new text; None: delete it
        self.removed = 0
        self.skills: list[Path] = []  # skill files to delete
        self.kept: list[str] = []

    def apply(self) -> None:
        if self.text is not None:
            _write(self.settings.parent, Path(self.settings.name), self.text)
        elif self.settings.exists():
            self.settings.unlink()
        for path in self.skills:
            path.unlink()
            try:
                path.parent.rmdir()
                path.parent.parent.rmdir()  # the skills folder, if now empty
            except OSError:
                pass


def _plan_removal(record: dict[str, Any], data: dict[str, Any] | None = None) -> _Removal:
    """What removing ``record``'s additions changes; ``data``: the settings as already
    changed by another removal (None: read the file)."""
    settings_path = Path(record["settings"])
    if data is None:
        data = _load_json(settings_path)[0]
    plan = _Removal(record, data)
    hooks = data.get("hooks")
    if isinstance(hooks, dict):
        for event, group in record.get("added_hooks", {}).items():
            groups = hooks.get(event)
            if isinstance(groups, list) and group in groups:
                groups.remove(group)
                plan.removed += 1
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
    indent = int(record.get("indent", 2))
    if original is not None:
        original_bytes = base64.b64decode(original)
        before = json.loads(original_bytes.decode("utf-8")) if original_bytes.strip() else {}
        plan.text = original_bytes.decode("utf-8") if before == data else _dump(data, indent)
    elif data:
        plan.text = _dump(data, indent)
    for skill in record.get("skills", []):
        path = Path(skill["path"])
        if path.is_file() and not path.is_symlink():
            try:
                content = read_bounded(path, MAX_DOCUMENT_BYTES, "skill", follow_symlinks=False)
            except BadInput:
                content = b""  # not what install wrote (too large, swapped): keep it
            if content and hashlib.sha256(content).hexdigest() == skill["sha256"]:
                plan.skills.append(path)
            else:
                plan.kept.append(str(path))
    return plan


def _outdated(record: dict[str, Any], host: HarnessAdapter) -> bool:
    """Whether this version would install other than ``record`` shows: another record
    version, other hook events, or skills whose text has changed since."""
    if record.get("version") != RECORD_VERSION:
        return True
    if set(record.get("added_hooks", {})) != set(host.hook_events):
        return True
    wanted = {hashlib.sha256(text.encode()).hexdigest() for _, text in SKILLS}
    return host.installs_skills and {s["sha256"] for s in record.get("skills", [])} != wanted


def _load_record(path: Path) -> dict[str, Any]:
    """The install record, checked for the shape uninstall relies on."""
    raw = read_bounded(path, MAX_DOCUMENT_BYTES, "install record", follow_symlinks=False)
    try:
        record = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError, ValueError) as exc:
        raise BadInput(f"{path}: not valid JSON ({exc}); remove onstation by hand") from exc
    if (
        not isinstance(record, dict)
        or not isinstance(record.get("settings"), str)
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


def find_record(harness: str, *, project: str | None, user: bool) -> Path | None:
    """The record of this install (the current location, else an earlier version's)."""
    base, relative = settings_target(harness, project=project, user=user)
    current = record_location(harness, project=project, settings=base / relative)
    if current.is_file():
        return current
    legacy = _legacy_settings(harness, project=project, user=user).parent / RECORD
    return legacy if legacy.is_file() else None


def load_install(harness: str, *, project: str | None, user: bool) -> dict[str, Any] | None:
    """The install record of ``harness`` for this project (or the user), or None."""
    path = find_record(harness, project=project, user=user)
    return None if path is None else {**_load_record(path), "record": str(path)}


# -- install --------------------------------------------------------------------------------


class _Install:
    """Everything an install writes, computed and checked before the first write."""

    def __init__(self) -> None:
        self.base = Path(".")
        self.relative = Path(".")
        self.data: dict[str, Any] = {}
        self.skill_files: list[tuple[Path, str]] = []
        self.record: dict[str, Any] = {}
        self.record_path = Path(".")
        #: Earlier installs removed first: (record file, removal, whether it is this
        #: version's record location, overwritten rather than deleted).
        self.earlier: list[tuple[Path, _Removal, bool]] = []
        self.gitignore: Path | None = None


def _prepare(
    harness: str,
    *,
    project: str | None,
    user: bool,
    node: str | None,
    executable: str | None,
    wrap_statusline: bool,
) -> _Install:
    """Everything install will write, computed and checked without writing anything."""
    host = _hooked(harness)
    plan = _Install()
    plan.base, plan.relative = settings_target(harness, project=project, user=user)
    if project is not None and not plan.base.is_dir():
        raise BadInput(f"--project: {plan.base} is not a directory")
    settings_path = plan.base / plan.relative
    plan.record_path = record_location(harness, project=project, settings=settings_path)
    given: dict[Path, dict[str, Any]] = {}
    earlier_skills: set[str] = set()
    warnings: list[str] = []
    old: dict[str, Any] = {}
    earlier_gitignore: str | None = None
    legacy_record = _legacy_settings(harness, project=project, user=user).parent / RECORD
    # An earlier version's install (its record beside the shared settings) and an install
    # this version would write differently (fewer events, other skills): what they added is
    # removed before this one is made, so installing again upgrades.
    for record_file, current in ((legacy_record, False), (plan.record_path, True)):
        if not record_file.is_file():
            continue
        previous = _load_record(record_file)
        if current and not _outdated(previous, host):
            raise Conflict(f"onstation is already installed here ({record_file}); "
                           "uninstall first")  # fmt: skip
        removal = _plan_removal(previous, given.get(Path(previous["settings"])))
        if removal.kept:
            raise Conflict(f"{removal.kept[0]} (from an earlier install) was edited; move it "
                           "first")  # fmt: skip
        plan.earlier.append((record_file, removal, current))
        given[removal.settings] = removal.data
        earlier_skills.update(str(p) for p in removal.skills)
        if removal.settings == settings_path and not old:
            old = previous  # the first install into this file holds its original bytes
        if isinstance(previous.get("gitignore"), str):
            earlier_gitignore = previous["gitignore"]
        warnings.append(f"upgraded the earlier install in {removal.settings}" if current
                        else f"moved the earlier install out of {removal.settings}")  # fmt: skip
    if host is CLAUDE_CODE and project is not None:
        # The shared project settings are read, never written: a damaged or symlinked file
        # is refused as before (Claude Code would not read it either).
        shared = _legacy_settings(harness, project=project, user=False)
        if shared not in given:
            given[shared] = _load_json(shared)[0]
    if settings_path in given:
        # The settings' bytes from before any onstation install, so that uninstall gives
        # them back.
        data = given[settings_path]
        raw = base64.b64decode(old["original"]) if old.get("original") is not None else None
    else:
        data, raw = _load_json(settings_path)
    indent = _indent_of(raw)
    exe = executable or onstation_command()
    program = command_program(executable)
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise BadInput(f"{settings_path}: 'hooks' must be an object")
    already = _onstation_handlers(data, harness)
    if already:
        warnings.append(f"{settings_path} already runs {already[0]!r}; it would run twice")
    added: dict[str, dict[str, Any]] = {}
    for event in host.hook_events:
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise BadInput(f"{settings_path}: hooks.{event} must be a list")
        group: dict[str, Any] = {"hooks": [_handler(harness, event, program)]}
        if event in ("PreToolUse", "PostToolUse"):
            group = {"matcher": "*", **group}
        groups.append(group)
        added[event] = group
    statusline_before: Any = None
    statusline_added: Any = None
    wrapped: dict[str, str] | None = None
    if host.installs_statusline:
        statusline_before = data.get("statusLine")
        if host is CLAUDE_CODE:
            for other in (p for _, p in claude_layers(project) if p != settings_path):
                if other.exists() or other in given:
                    found = _onstation_handlers(_read_layer(other, given), harness)
                    if found:
                        warnings.append(f"{other} already runs {found[0]!r}; it would run "
                                        "twice")  # fmt: skip
        given_now = {**given, settings_path: {k: v for k, v in data.items()
                                              if k != "statusLine"}}  # fmt: skip
        if isinstance(statusline_before, dict):
            given_now[settings_path]["statusLine"] = statusline_before
        effect = statusline_in_effect(project, given_now) if host is CLAUDE_CODE else None
        if effect is not None and effect[0] == "managed settings":
            warnings.append(f"managed settings ({effect[1]}) set the status line; Claude Code "
                            "shows that one, not onstation's")  # fmt: skip
            effect = None
        command = f"{program} statusline"
        line = effect[2] if effect is not None else statusline_before
        inner = (_inner_command(line["command"]) if isinstance(line, dict)
                 and isinstance(line.get("command"), str) else None)  # fmt: skip
        if wrap_statusline and inner is not None:
            command += f" --wrap {shlex.quote(inner)}"
            wrapped = {"from": effect[0] if effect else "settings", "command": inner}
        statusline_added = {"type": "command", "command": command}
        if isinstance(line, dict) and "padding" in line:
            statusline_added["padding"] = line["padding"]
        data["statusLine"] = statusline_added
    if host.installs_skills:
        for name, text in SKILLS:
            target = settings_path.parent / "skills" / name / "SKILL.md"
            # Every target is checked before any is written: a conflict leaves nothing behind.
            if target.exists() and str(target) not in earlier_skills:
                raise Conflict(f"{target} exists and is not onstation's; move it first")
            plan.skill_files.append((target, text))
    ignore = Path(project or ".") / RECORD_DIR / ".gitignore"
    if project is not None and not ignore.exists():
        plan.gitignore = ignore
    elif project is not None and "install-*.json" not in ignore.read_text(errors="replace"):
        warnings.append(f"{ignore} does not ignore install-*.json: keep the record uncommitted")
    # The .gitignore an earlier install wrote stays onstation's to remove on uninstall.
    gitignore = plan.gitignore if plan.gitignore is not None else (
        ignore if project is not None and earlier_gitignore == str(ignore) else None)  # fmt: skip
    plan.data = data
    plan.record = {
        "version": RECORD_VERSION,
        "harness": harness,
        "settings": str(settings_path),
        "original": None if raw is None else base64.b64encode(raw).decode("ascii"),
        "indent": indent,
        "added_hooks": added,
        "statusline_before": statusline_before,
        "statusline_added": statusline_added,
        "statusline_wrapped": wrapped,
        "skills": [
            {"path": str(target), "sha256": hashlib.sha256(text.encode()).hexdigest()}
            for target, text in plan.skill_files
        ],
        "node": node,
        "executable": exe,
        "gitignore": None if gitignore is None else str(gitignore),
        "warnings": warnings,
    }
    if host is CODEX:
        from onstation.harness import codex_trust

        expected = codex_trust.expected_trust(settings_path, {e: hooks[e] for e in added},
                                              f" hook {harness} ")  # fmt: skip
        config, _problem = codex_trust.read_config()
        trusted_project = None if project is None else codex_trust.project_trusted(config, project)
        plan.record["codex_trust"] = expected
        plan.record["next_steps"] = codex_trust.what_to_do(project, trusted_project)
    return plan


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
    plan = _prepare(
        harness, project=project, user=user, node=node, executable=executable,
        wrap_statusline=wrap_statusline,
    )  # fmt: skip
    for record_file, removal, current in plan.earlier:
        removal.apply()
        if not current:
            record_file.unlink()
    settings_dir = (plan.base / plan.relative).parent
    for target, text in plan.skill_files:
        _write(settings_dir, target.relative_to(settings_dir), text)
    _write(plan.base, plan.relative, _dump(plan.data, int(plan.record["indent"])))
    if plan.gitignore is not None:
        _write(plan.gitignore.parent, Path(plan.gitignore.name), GITIGNORE)
    _write(plan.record_path.parent, Path(plan.record_path.name),
           json.dumps(plan.record, indent=2) + "\n")  # fmt: skip
    return {**plan.record, "record": str(plan.record_path)}


def uninstall(harness: str, *, project: str | None, user: bool) -> dict[str, Any]:
    """Remove exactly what install added; return what was removed."""
    record_path = find_record(harness, project=project, user=user)
    if record_path is None:
        base, relative = settings_target(harness, project=project, user=user)
        where = record_location(harness, project=project, settings=base / relative)
        raise BadInput(f"onstation is not installed here (no {where})")
    record = _load_record(record_path)
    removal = _plan_removal(record)
    removal.apply()
    gitignore = record.get("gitignore")
    if (
        isinstance(gitignore, str)
        and Path(gitignore).is_file()
        and Path(gitignore).read_text(encoding="utf-8", errors="replace") == GITIGNORE
    ):
        Path(gitignore).unlink()
    record_path.unlink()
    return {"settings": str(removal.settings), "hooks_removed": removal.removed,
            "skills_kept": removal.kept, "record": str(record_path)}  # fmt: skip
