"""Installing into Claude Code and Codex settings, and uninstalling back to the same bytes."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from onstation.core.errors import BadInput, Conflict
from onstation.harness.install import install, launcher_path, onstation_words, uninstall

EXISTING = """{
    "model": "opus",
    "hooks": {
        "PreToolUse": [
            {
                "matcher": "Bash",
                "hooks": [
                    {
                        "type": "command",
                        "command": "${CLAUDE_PROJECT_DIR}/.claude/hooks/block-rm.sh"
                    }
                ]
            }
        ],
        "Notification": [
            {
                "hooks": [
                    {
                        "type": "command",
                        "command": "notify-send claude"
                    }
                ]
            }
        ]
    },
    "statusLine": {
        "type": "command",
        "command": "~/.claude/statusline.sh",
        "padding": 0
    },
    "permissions": {
        "allow": [
            "Bash(npm test)"
        ]
    }
}
"""


def test_install_merges_and_uninstall_restores_the_identical_file(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.local.json"  # a project install writes it
    settings.parent.mkdir()
    settings.write_text(EXISTING)
    install("claude-code", project=str(tmp_path), user=False, node="exec-1",
            executable="/opt/onstation/bin/onstation")  # fmt: skip
    data = json.loads(settings.read_text())
    assert data["model"] == "opus" and data["permissions"] == {"allow": ["Bash(npm test)"]}
    pre = data["hooks"]["PreToolUse"]
    assert pre[0]["matcher"] == "Bash"  # the user's own hook is untouched and first
    command = pre[1]["hooks"][0]["command"]
    assert command == "/opt/onstation/bin/onstation hook claude-code PreToolUse"
    assert data["hooks"]["Notification"][0]["hooks"][0]["command"] == "notify-send claude"
    assert data["statusLine"]["command"] == (
        "/opt/onstation/bin/onstation statusline --wrap '~/.claude/statusline.sh'"
    )
    assert data["statusLine"]["padding"] == 0
    for skill in ("onstation-relief", "onstation-coord-respawn"):
        text = (tmp_path / ".claude" / "skills" / skill / "SKILL.md").read_text()
        assert "onstation" in text and "exec-1" not in text  # no node baked in
    with pytest.raises(Conflict):
        install("claude-code", project=str(tmp_path), user=False, node="exec-1")

    uninstall("claude-code", project=str(tmp_path), user=False)
    assert settings.read_text() == EXISTING
    assert not (tmp_path / ".claude" / "skills").exists()
    assert not (tmp_path / ".claude" / "onstation-install.json").exists()


def test_uninstall_keeps_what_the_user_added_since(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.local.json"
    install("claude-code", project=str(tmp_path), user=False, node="n", executable="onstation")
    data = json.loads(settings.read_text())
    data["hooks"]["Stop"].append({"hooks": [{"type": "command", "command": "say done"}]})
    data["theme"] = "dark"
    settings.write_text(json.dumps(data, indent=2) + "\n")
    skill = tmp_path / ".claude" / "skills" / "onstation-relief" / "SKILL.md"
    skill.write_text(skill.read_text() + "\nmy own notes\n")
    result = uninstall("claude-code", project=str(tmp_path), user=False)
    after = json.loads(settings.read_text())
    assert after == {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]},
                     "theme": "dark"}  # fmt: skip
    assert result["skills_kept"] == [str(skill)]  # edited by the user: kept
    assert skill.exists()


def test_install_without_settings_then_uninstall_leaves_none(tmp_path: Path) -> None:
    install("claude-code", project=str(tmp_path), user=False, node="n", executable="onstation")
    uninstall("claude-code", project=str(tmp_path), user=False)
    assert not (tmp_path / ".claude" / "settings.json").exists()
    assert not (tmp_path / ".claude" / "settings.local.json").exists()


def test_user_install_respects_claude_config_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "cfg"))
    record = install("claude-code", project=None, user=True, node=None, executable="onstation")
    assert record["settings"] == str(tmp_path / "cfg" / "settings.json")
    uninstall("claude-code", project=None, user=True)


def test_codex_install_writes_hooks_json(tmp_path: Path) -> None:
    hooks = tmp_path / ".codex" / "hooks.json"
    install("codex", project=str(tmp_path), user=False, node="n", executable="onstation")
    data = json.loads(hooks.read_text())
    assert data["hooks"]["Stop"][0]["hooks"][0]["command"] == "onstation hook codex Stop"
    assert "statusLine" not in data
    uninstall("codex", project=str(tmp_path), user=False)
    assert not hooks.exists()


def test_malformed_or_symlinked_settings_are_refused_untouched(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text("{ not json")
    with pytest.raises(BadInput, match="not valid JSON"):
        install("claude-code", project=str(tmp_path), user=False, node="n")
    assert settings.read_text() == "{ not json"
    settings.unlink()
    victim = tmp_path / "victim.json"
    victim.write_text("{}")
    os.symlink(victim, settings)
    with pytest.raises(BadInput, match="symlink"):
        install("claude-code", project=str(tmp_path), user=False, node="n")
    assert victim.read_text() == "{}"
    assert not (tmp_path / ".claude" / "onstation-install.json").exists()


def test_installed_commands_start_python_without_site_on_the_launcher(tmp_path: Path) -> None:
    """By default each command is this interpreter with ``-S`` on the hook launcher, which
    runs any command: ``--version`` needs the site module's path (it reads the installed
    distribution's metadata), so the launcher set it up before running it here."""
    install("claude-code", project=str(tmp_path), user=False, node="n")
    data = json.loads((tmp_path / ".claude" / "settings.local.json").read_text())
    command = data["hooks"]["Stop"][0]["hooks"][0]["command"]
    words = shlex.split(command)
    assert words[:2] == [sys.executable, "-S"]
    assert Path(words[2]) == launcher_path() and launcher_path().is_file()
    assert words[3:] == ["hook", "claude-code", "Stop"]
    assert onstation_words(words) == ["hook", "claude-code", "Stop"]
    assert shlex.split(data["statusLine"]["command"])[3:] == ["statusline"]
    program = shlex.join(words[:3])
    env = {**os.environ, "ONSTATION_DAEMON": "off"}
    version = subprocess.run(["/bin/sh", "-c", f"{program} --version"], capture_output=True,
                             text=True, env=env, check=True)  # fmt: skip
    assert version.stdout.startswith("onstation, version ")
    stop = subprocess.run(["/bin/sh", "-c", command], input="{}", capture_output=True,
                          text=True, env=env, check=False)  # fmt: skip
    assert stop.returncode == 0 and "no session_id" in stop.stderr


def test_onstation_words_know_both_forms_and_nothing_else() -> None:
    assert onstation_words(["/x/bin/onstation", "statusline"]) == ["statusline"]
    assert onstation_words(["/x/python", "-S", "/y/onstation/cli/hook_launcher.py", "hook"]) == [
        "hook"
    ]
    assert onstation_words(["/x/python", "/y/onstation/cli/hook_launcher.py", "hook"]) is None
    assert onstation_words(["notify-send", "claude"]) is None
    assert onstation_words([]) is None


def test_the_launcher_never_lets_a_module_beside_the_package_shadow_the_standard_library(
    tmp_path: Path,
) -> None:
    """The directory that holds the package (site-packages, for a normal install) goes after
    the standard library on the search path, as site puts it: a distribution's top-level
    ``_json.py`` there must not replace the standard library's ``_json`` (an extension
    module, found on the path; ``site`` and ``os`` are frozen in, so cannot be shadowed)."""
    import onstation

    lib = tmp_path / "lib"
    shutil.copytree(Path(onstation.__file__).parent, lib / "onstation",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    (lib / "_json.py").write_text("raise SystemExit(99)\n")
    launcher = lib / "onstation" / "cli" / "hook_launcher.py"
    env = {**os.environ, "ONSTATION_DAEMON": "off", "PYTHONDONTWRITEBYTECODE": "1"}
    argv = [sys.executable, "-S", str(launcher), "hook", "claude-code", "Stop"]
    done = subprocess.run(argv, input="{}", capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert "no session_id" in done.stderr
