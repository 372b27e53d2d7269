"""Installing into Claude Code and Codex settings, and uninstalling back to the same bytes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from onstation.core.errors import BadInput, Conflict
from onstation.harness.install import install, uninstall

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
