"""onstation as a Claude Code plugin: hooks declared by the plugin, no settings file edited.

``onstation install claude-code --plugin DIR`` writes a local marketplace holding one plugin
(Claude Code docs, "Plugins reference" / "Plugin manifest reference" and "Create a
marketplace"):

```
DIR/.claude-plugin/marketplace.json          name, owner, plugins: [{name, source}]
DIR/onstation/.claude-plugin/plugin.json     the manifest: name, version, description
DIR/onstation/hooks/hooks.json               {"description", "hooks": {EVENT: [...]}}
DIR/onstation/bin/onstation                  exec's the onstation that wrote the plugin
DIR/onstation/skills/*/SKILL.md              the relief and coordinator skills
```

Each hook runs ``"${CLAUDE_PLUGIN_ROOT}/bin/onstation" hook claude-code EVENT``: Claude Code
sets ``CLAUDE_PLUGIN_ROOT`` to the plugin's folder for plugin hooks, so the plugin works
wherever it is copied, and moving onstation needs only its one-line launcher rewritten (by
writing the plugin again). Add it with ``claude --plugin-dir DIR/onstation`` (one session)
or ``/plugin marketplace add DIR`` then ``/plugin install onstation@onstation-local``.

A plugin declares no status line and binds no workspace: ``onstation workspace bind DIR
NODE`` names the identity, and ``install claude-code --project`` remains the way to get the
status line (the window it declares is what hooks read).
"""

from __future__ import annotations

import json
import os
import shlex
import stat
from pathlib import Path
from typing import Any

from onstation.core.errors import BadInput, Conflict
from onstation.harness.adapters import CLAUDE_CODE
from onstation.harness.files import write_inside

#: The marketplace's name (``/plugin install onstation@MARKETPLACE``).
MARKETPLACE = "onstation-local"
#: The plugin's name: its skills are ``/onstation:onstation-relief`` and so on.
PLUGIN = "onstation"
#: The launcher inside the plugin that every hook command runs.
LAUNCHER = "bin/onstation"


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("onstation")
    except Exception:
        return "0.0.0"


def plugin_files(program: str) -> dict[str, str]:
    """The plugin's files (path relative to DIR -> text); ``program``: the shell words its
    launcher execs (``install.command_program``)."""
    from onstation.harness.install import HOOK_TIMEOUT, SKILLS

    hooks: dict[str, Any] = {}
    for event in CLAUDE_CODE.hook_events:
        group: dict[str, Any] = {"hooks": [{
            "type": "command",
            "command": f'"${{CLAUDE_PLUGIN_ROOT}}/{LAUNCHER}" hook claude-code {event}',
            "timeout": HOOK_TIMEOUT,
        }]}  # fmt: skip
        if event in ("PreToolUse", "PostToolUse"):
            group = {"matcher": "*", **group}
        hooks[event] = [group]
    description = (
        "onstation: relief on station. Records context fill, journals effect-capable tool "
        "calls, fences relieved bodies and hands work to a successor."
    )
    marketplace = {
        "name": MARKETPLACE,
        "owner": {"name": "onstation"},
        "plugins": [{"name": PLUGIN, "source": f"./{PLUGIN}", "description": description}],
    }
    manifest = {"name": PLUGIN, "version": _version(), "description": description}
    launcher = f'#!/bin/sh\nexec {program} "$@"\n'
    files = {
        ".claude-plugin/marketplace.json": json.dumps(marketplace, indent=2) + "\n",
        f"{PLUGIN}/.claude-plugin/plugin.json": json.dumps(manifest, indent=2) + "\n",
        f"{PLUGIN}/hooks/hooks.json": json.dumps(
            {"description": "onstation's hooks (docs/hooks.md)", "hooks": hooks}, indent=2
        ) + "\n",
        f"{PLUGIN}/{LAUNCHER}": launcher,
    }  # fmt: skip
    for name, text in SKILLS:
        files[f"{PLUGIN}/skills/{name}/SKILL.md"] = text
    return files


def write_plugin(directory: str, *, executable: str | None = None) -> dict[str, Any]:
    """Write the plugin marketplace into ``directory`` (absent or empty); what was written."""
    from onstation.harness.install import command_program, onstation_command

    target = Path(directory)
    if target.is_symlink():
        raise BadInput(f"--plugin: {target} is a symlink")
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise Conflict(f"--plugin: {target} exists and is not an empty directory")
    exe = executable or onstation_command()
    files = plugin_files(command_program(executable))
    target.mkdir(parents=True, exist_ok=True)
    for relative, text in files.items():
        write_inside(target, relative.split("/"), text)
    launcher = target / PLUGIN / LAUNCHER
    os.chmod(launcher, launcher.stat().st_mode | stat.S_IXUSR)  # the owner runs it
    root = os.path.abspath(target)
    return {
        "plugin": os.path.join(root, PLUGIN),
        "marketplace": root,
        "files": sorted(files),
        "executable": exe,
        "next_steps": [
            f"one session: claude --plugin-dir {shlex.quote(os.path.join(root, PLUGIN))}",
            f"installed: in claude, /plugin marketplace add {shlex.quote(root)} then "
            f"/plugin install {PLUGIN}@{MARKETPLACE}",
            "bind the workspace to its identity: onstation workspace bind DIR NODE",
        ],
    }
