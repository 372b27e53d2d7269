"""`onstation install` as users meet it (issue 12): the uncommitted local settings, the user's
own status line wrapped and given back, a timeout on every handler, an earlier install moved
out of the committed settings, the Claude Code plugin, and Codex's trust steps.

Real processes throughout: the installed command strings are run by a shell, as the hosts run
them, with payloads shaped as the hosts send them (harness-formats.md §1.3, §2)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hookworld import cli, user_env

from onstation.cli.hooks import HOOK_BUDGET
from onstation.harness import codex_trust
from onstation.harness.adapters import CLAUDE_CODE, CODEX
from onstation.harness.install import HOOK_TIMEOUT, command_program, statusline_in_effect

ONSTATION = str(Path(sys.executable).with_name("onstation"))
#: What an install writes before each command: this interpreter without site, on the launcher.
PROGRAM = command_program()

#: A status line payload as Claude Code sends it (statusline docs; harness-formats.md §2).
STATUS = {
    "session_id": "sess-1", "transcript_path": "/nonexistent.jsonl", "version": "2.1.240",
    "model": {"id": "claude-opus-5", "display_name": "Opus"},
    "context_window": {"total_input_tokens": 20000, "total_output_tokens": 1000,
                       "context_window_size": 200000, "used_percentage": 10.5,
                       "remaining_percentage": 89.5},
}  # fmt: skip


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return user_env(tmp_path)


run = cli


def project_dir(tmp_path: Path, shared: dict[str, Any] | None = None) -> Path:
    project = tmp_path / "app"
    (project / ".claude").mkdir(parents=True)
    if shared is not None:
        (project / ".claude" / "settings.json").write_text(json.dumps(shared, indent=2) + "\n")
    return project


def run_statusline(command: str, project: Path, env: dict[str, str]) -> list[str]:
    done = subprocess.run(  # noqa: S602 - run as Claude Code runs the status line
        command, shell=True, input=json.dumps({**STATUS, "cwd": str(project)}),
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_project_install_writes_the_local_settings_and_leaves_the_shared_ones(
    tmp_path: Path, env: dict[str, str]
) -> None:
    shared = {"permissions": {"allow": ["Bash(npm test)"]}, "model": "opus"}
    project = project_dir(tmp_path, shared)
    before = (project / ".claude" / "settings.json").read_bytes()
    done = run(env, "install", "claude-code", "--project", str(project), "--node", "app")
    assert done.returncode == 0, done.stderr
    assert (project / ".claude" / "settings.json").read_bytes() == before  # untouched
    local = json.loads((project / ".claude" / "settings.local.json").read_text())
    assert set(local["hooks"]) == set(CLAUDE_CODE.hook_events)
    command = local["hooks"]["Stop"][0]["hooks"][0]["command"]
    assert command == f"{PROGRAM} hook claude-code Stop"
    # onstation's record is its own, outside .claude/, and kept out of version control.
    assert not (project / ".claude" / "onstation-install.json").exists()
    record = json.loads((project / ".onstation" / "install-claude-code.json").read_text())
    assert record["settings"] == str(project / ".claude" / "settings.local.json")
    assert (project / ".onstation" / ".gitignore").read_text() == "install-*.json\n"

    done = run(env, "uninstall", "claude-code", "--project", str(project))
    assert done.returncode == 0, done.stderr
    assert not (project / ".claude" / "settings.local.json").exists()
    assert not (project / ".onstation" / "install-claude-code.json").exists()
    assert not (project / ".onstation" / ".gitignore").exists()
    assert (project / ".claude" / "settings.json").read_bytes() == before


def test_the_users_own_status_line_is_wrapped_and_given_back(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """Before: a project install replaced a user-level status line (e.g. ccstatusline)."""
    user_settings = Path(env["CLAUDE_CONFIG_DIR"]) / "settings.json"
    user_line = {"type": "command", "command": "echo my-ccstatusline", "padding": 0}
    user_settings.write_text(json.dumps({"statusLine": user_line}))
    project = project_dir(tmp_path)
    done = run(env, "install", "claude-code", "--project", str(project), "--node", "app")
    assert done.returncode == 0, done.stderr
    assert "wraps 'echo my-ccstatusline' (from user settings)" in done.stdout
    local = json.loads((project / ".claude" / "settings.local.json").read_text())
    line = local["statusLine"]
    assert line == {"type": "command", "padding": 0,
                    "command": f"{PROGRAM} statusline --wrap 'echo my-ccstatusline'"}  # fmt: skip
    out = run_statusline(line["command"], project, env)
    assert out[0] == "my-ccstatusline"
    assert "app gen 1" in out[1] and "10.5% of 200k" in out[1]
    assert json.loads(user_settings.read_text()) == {"statusLine": user_line}  # untouched

    assert run(env, "uninstall", "claude-code", "--project", str(project)).returncode == 0
    effect = _in_effect(project, env)
    assert effect is not None and effect[0] == "user settings" and effect[2] == user_line


def _in_effect(project: Path, env: dict[str, str]) -> tuple[str, Path, dict[str, Any]] | None:
    saved = os.environ.get("CLAUDE_CONFIG_DIR")
    os.environ["CLAUDE_CONFIG_DIR"] = env["CLAUDE_CONFIG_DIR"]
    try:
        return statusline_in_effect(str(project))
    finally:
        if saved is None:
            del os.environ["CLAUDE_CONFIG_DIR"]
        else:
            os.environ["CLAUDE_CONFIG_DIR"] = saved


def test_the_projects_status_line_wins_over_the_users(tmp_path: Path, env: dict[str, str]) -> None:
    """Claude Code's precedence: local > shared project > user; the one in effect is wrapped."""
    (Path(env["CLAUDE_CONFIG_DIR"]) / "settings.json").write_text(
        json.dumps({"statusLine": {"type": "command", "command": "echo user-line"}})
    )
    project = project_dir(tmp_path, {"statusLine": {"type": "command", "command": "echo team"}})
    local = project / ".claude" / "settings.local.json"
    original = '{\n    "statusLine": {"type": "command", "command": "echo mine"},\n    "x": 1\n}\n'
    local.write_text(original)
    assert run(env, "install", "claude-code", "--project", str(project)).returncode == 0
    command = json.loads(local.read_text())["statusLine"]["command"]
    assert command == f"{PROGRAM} statusline --wrap 'echo mine'"
    assert run_statusline(command, project, env)[0] == "mine"
    assert run(env, "uninstall", "claude-code", "--project", str(project)).returncode == 0
    assert local.read_text() == original  # byte for byte

    local.unlink()
    assert run(env, "install", "claude-code", "--project", str(project)).returncode == 0
    command = json.loads(local.read_text())["statusLine"]["command"]
    assert command == f"{PROGRAM} statusline --wrap 'echo team'"


@pytest.mark.parametrize("harness", ["claude-code", "codex"])
def test_every_handler_has_a_timeout_above_the_hook_budget(
    tmp_path: Path, env: dict[str, str], harness: str
) -> None:
    project = project_dir(tmp_path)
    assert run(env, "install", harness, "--project", str(project)).returncode == 0
    name = ".claude/settings.local.json" if harness == "claude-code" else ".codex/hooks.json"
    hooks = json.loads((project / name).read_text())["hooks"]
    handlers = [h for groups in hooks.values() for g in groups for h in g["hooks"]]
    assert len(handlers) == len((CLAUDE_CODE if harness == "claude-code" else CODEX).hook_events)
    for handler in handlers:
        assert handler["timeout"] == HOOK_TIMEOUT
    # The hook answers within its own budget; the host's cancel comes well after.
    assert HOOK_BUDGET * 2 <= HOOK_TIMEOUT


def test_an_earlier_install_in_the_shared_settings_is_moved(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """An install by an earlier version (hooks in .claude/settings.json, its record in
    .claude/onstation-install.json) is taken out of the committed file by installing again."""
    project = project_dir(tmp_path)
    original = b'{\n  "model": "opus"\n}\n'
    group = {"hooks": [{"type": "command", "command": f"{ONSTATION} hook claude-code Stop"}]}
    line = {"type": "command", "command": f"{ONSTATION} statusline"}
    shared = project / ".claude" / "settings.json"
    shared.write_text(json.dumps({"model": "opus", "hooks": {"Stop": [group]},
                                  "statusLine": line}, indent=2))  # fmt: skip
    legacy = project / ".claude" / "onstation-install.json"
    legacy.write_text(json.dumps({
        "harness": "claude-code", "settings": str(shared), "indent": 2,
        "original": base64.b64encode(original).decode(), "added_hooks": {"Stop": group},
        "statusline_before": None, "statusline_added": line, "skills": [], "node": "app",
    }))  # fmt: skip
    done = run(env, "doctor", "--project", str(project), "--json")
    checks = json.loads(done.stdout)["checks"]
    assert any("earlier version" in c["detail"] for c in checks if c["status"] == "warn")

    done = run(env, "install", "claude-code", "--project", str(project), "--node", "app")
    assert done.returncode == 0, done.stderr
    assert "moved the earlier install out of" in done.stdout
    assert shared.read_bytes() == original
    assert not legacy.exists()
    local = json.loads((project / ".claude" / "settings.local.json").read_text())
    assert set(local["hooks"]) == set(CLAUDE_CODE.hook_events)
    assert local["statusLine"]["command"] == f"{PROGRAM} statusline"  # not wrapping itself


def test_plugin_directory_is_a_valid_marketplace_whose_hooks_run(
    tmp_path: Path, env: dict[str, str]
) -> None:
    target = tmp_path / "plugin"
    done = run(env, "install", "claude-code", "--plugin", str(target), "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    marketplace = json.loads((target / ".claude-plugin" / "marketplace.json").read_text())
    assert marketplace["name"] == "onstation-local"
    assert marketplace["owner"]["name"]
    [entry] = marketplace["plugins"]
    assert entry["name"] == "onstation" and entry["source"] == "./onstation"
    root = target / "onstation"
    manifest = json.loads((root / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["name"] == "onstation" and manifest["version"] and manifest["description"]
    hooks = json.loads((root / "hooks" / "hooks.json").read_text())["hooks"]
    assert set(hooks) == set(CLAUDE_CODE.hook_events)
    for event, groups in hooks.items():
        handler = groups[0]["hooks"][0]
        assert handler["command"] == (
            f'"${{CLAUDE_PLUGIN_ROOT}}/bin/onstation" hook claude-code {event}'
        )
        assert handler["timeout"] == HOOK_TIMEOUT
    assert (root / "skills" / "onstation-relief" / "SKILL.md").is_file()
    assert (root / "bin" / "onstation").stat().st_mode & stat.S_IXUSR
    assert f'exec {PROGRAM} "$@"' in (root / "bin" / "onstation").read_text()
    assert any("--plugin-dir" in step for step in result["next_steps"])
    assert any("/plugin marketplace add" in step for step in result["next_steps"])

    # Run one hook as Claude Code runs a plugin hook: a shell, CLAUDE_PLUGIN_ROOT set.
    project = project_dir(tmp_path)
    assert run(env, "node", "register", "app").returncode == 0
    assert run(env, "workspace", "bind", str(project), "app").returncode == 0
    payload = {"session_id": "s-plugin", "transcript_path": str(tmp_path / "t.jsonl"),
               "cwd": str(project), "hook_event_name": "SessionStart", "source": "startup",
               "model": "claude-sonnet-5"}  # fmt: skip
    ran = subprocess.run(  # noqa: S602 - the command string as the host runs it
        hooks["SessionStart"][0]["hooks"][0]["command"], shell=True, input=json.dumps(payload),
        capture_output=True, text=True, env={**env, "CLAUDE_PLUGIN_ROOT": str(root)},
        cwd=project, timeout=60, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert "failed open" not in ran.stderr
    history = run(env, "history", "app", "--json")
    assert "s-plugin" in history.stdout

    again = run(env, "install", "claude-code", "--plugin", str(target))
    assert again.returncode == 5  # not written over


def test_codex_install_says_what_to_do_once_and_records_the_hashes(
    tmp_path: Path, env: dict[str, str]
) -> None:
    project = project_dir(tmp_path)
    done = run(env, "install", "codex", "--project", str(project), "--node", "cx", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    steps = result["next_steps"]
    assert any(f'[projects."{project}"] trust_level = "trusted"' in s for s in steps)
    assert any(s.endswith("codex, then /hooks") for s in steps)
    hooks_file = project / ".codex" / "hooks.json"
    hooks = json.loads(hooks_file.read_text())["hooks"]
    expected = {e["event"]: e for e in result["codex_trust"]}
    assert set(expected) == set(CODEX.hook_events)
    stop = hooks["Stop"][0]
    assert expected["Stop"]["key"] == f"{hooks_file}:stop:0:0"
    assert expected["Stop"]["hash"] == codex_trust.hook_hash(
        "Stop", None, stop["hooks"][0]["command"], HOOK_TIMEOUT
    )
    # Nothing is written into Codex's own configuration: trust is the user's to give.
    assert not (Path(env["CODEX_HOME"]) / "config.toml").exists()


def test_codex_hook_hash_follows_codexs_normalized_identity() -> None:
    """codex-rs/hooks/src/engine/discovery.rs command_hook_hash: the matcher counts only for
    events that take one, the timeout defaults to 600, keys are sorted, no spaces."""
    import hashlib

    identity = ('{"event_name":"pre_tool_use","hooks":[{"async":false,"command":"x hook",'
                '"timeout":30,"type":"command"}],"matcher":"*"}')  # fmt: skip
    assert codex_trust.hook_hash("PreToolUse", "*", "x hook", 30) == (
        "sha256:" + hashlib.sha256(identity.encode()).hexdigest()
    )
    assert codex_trust.hook_hash("Stop", "*", "x", None) == codex_trust.hook_hash(
        "Stop", None, "x", 600
    )
    assert codex_trust.hook_hash("Stop", None, "x", 30) != codex_trust.hook_hash(
        "Stop", None, "x", 31
    )


# -- PostCompact: installed for both hosts, and upgraded into an earlier install ------------

#: What a compaction hook is sent. Claude Code: hooks reference, "PostCompact" (trigger,
#: compact_summary). Codex: openai/codex codex-rs/hooks/schema/generated/
#: post-compact.command.input.schema.json (every field required, no others allowed).
POST_COMPACT = {
    "claude-code": {"hook_event_name": "PostCompact", "trigger": "auto",
                    "compact_summary": "Summary of the conversation so far."},
    "codex": {"hook_event_name": "PostCompact", "trigger": "auto", "model": "gpt-5.3-codex",
              "turn_id": "turn-2"},
}  # fmt: skip


def _fire(command: str, payload: dict[str, Any], env: dict[str, str], project: Path) -> str:
    done = subprocess.run(  # noqa: S602 - the command string as the host runs it
        command, shell=True, input=json.dumps(payload), capture_output=True, text=True,
        env=env, cwd=project, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "failed open" not in done.stderr, done.stderr
    return done.stdout


def _rollout(path: Path) -> None:
    """A Codex rollout with one token count (test_statusline_and_codex.py)."""
    line = {"timestamp": "2026-05-14T10:00:00.000Z", "type": "event_msg",
            "payload": {"type": "token_count",
                        "info": {"model_context_window": 258400,
                                 "last_token_usage": {"input_tokens": 20000,
                                                      "cached_input_tokens": 0,
                                                      "output_tokens": 300,
                                                      "reasoning_output_tokens": 0,
                                                      "total_tokens": 20300}}}}  # fmt: skip
    path.write_text(json.dumps(line) + "\n")


@pytest.mark.parametrize("harness", ["claude-code", "codex"])
def test_the_installed_postcompact_hook_starts_a_context_epoch(
    tmp_path: Path, env: dict[str, str], harness: str
) -> None:
    """Before: install registered no PostCompact, so the host never called the handler."""
    project = project_dir(tmp_path)
    done = run(env, "install", harness, "--project", str(project), "--node", "app", "--json")
    assert done.returncode == 0, done.stderr
    assert "PostCompact" in json.loads(done.stdout)["hooks"]
    name = ".claude/settings.local.json" if harness == "claude-code" else ".codex/hooks.json"
    settings = json.loads((project / name).read_text())
    [group] = settings["hooks"]["PostCompact"]
    assert "matcher" not in group  # PostCompact takes none on either host
    command = group["hooks"][0]["command"]
    assert command == f"{PROGRAM} hook {harness} PostCompact"

    transcript = tmp_path / "rollout.jsonl"
    common = {"session_id": "s-compact", "cwd": str(project), "transcript_path": str(transcript)}
    start = settings["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    _fire(start, {**common, "hook_event_name": "SessionStart", "source": "startup",
                  "model": "gpt-5.3-codex"}, env, project)  # fmt: skip
    if harness == "codex":  # a usage in the current epoch: the rollout, read on a prompt
        _rollout(transcript)
        prompt = settings["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"]
        _fire(prompt, {**common, "hook_event_name": "UserPromptSubmit", "prompt": "go",
                       "model": "gpt-5.3-codex", "turn_id": "turn-1"}, env, project)  # fmt: skip
    else:  # the status line's usage
        status = {**STATUS, "session_id": "s-compact", "cwd": str(project)}
        subprocess.run(  # noqa: S602 - the status line as Claude Code runs it
            settings["statusLine"]["command"], shell=True, input=json.dumps(status),
            capture_output=True, text=True, env=env, timeout=60, check=True,
        )  # fmt: skip
    _fire(command, {**common, **POST_COMPACT[harness]}, env, project)
    events = json.loads(run(env, "history", "app", "--json").stdout)["events"]
    compacted = [e for e in events if e["kind"] == "hull.compacted"]
    assert len(compacted) == 1, events
    assert f"{harness} PostCompact" in json.dumps(compacted[0])


def _make_older(project: Path, harness: str, node: str) -> Path:
    """Turn this install into one an earlier version made: record version 2, no PostCompact,
    and (Claude Code) skills that had the node's name and tier percentages baked in."""
    record_file = project / ".onstation" / f"install-{harness}.json"
    record = json.loads(record_file.read_text())
    settings = Path(record["settings"])
    data = json.loads(settings.read_text())
    del data["hooks"]["PostCompact"]
    settings.write_text(json.dumps(data, indent=2) + "\n")
    del record["added_hooks"]["PostCompact"]
    record["version"] = 2
    for skill in record["skills"]:
        old = f"Red from 33 %: `onstation brief write {node} --task ...`\n"
        Path(skill["path"]).write_text(old)
        skill["sha256"] = hashlib.sha256(old.encode()).hexdigest()
    record_file.write_text(json.dumps(record, indent=2) + "\n")
    return settings


def _onstation_handlers(settings: Path, harness: str) -> dict[str, int]:
    hooks = json.loads(settings.read_text())["hooks"]
    return {event: sum(f" hook {harness} " in h["command"] for g in groups for h in g["hooks"])
            for event, groups in hooks.items()}  # fmt: skip


@pytest.mark.parametrize("harness", ["claude-code", "codex"])
def test_installing_over_an_earlier_install_upgrades_it(
    tmp_path: Path, env: dict[str, str], harness: str
) -> None:
    """Before: an earlier install (no PostCompact, skills naming the node) made install refuse
    ("already installed; uninstall first"), and its skills read as foreign files."""
    project = project_dir(tmp_path)
    name = ".claude/settings.local.json" if harness == "claude-code" else ".codex/hooks.json"
    (project / name).parent.mkdir(exist_ok=True)
    original = b'{\n    "model": "opus"\n}\n'
    (project / name).write_bytes(original)
    assert run(env, "install", harness, "--project", str(project), "--node", "app").returncode == 0
    settings = _make_older(project, harness, "app")
    host = CLAUDE_CODE if harness == "claude-code" else CODEX

    done = run(env, "install", harness, "--project", str(project), "--node", "app")
    assert done.returncode == 0, done.stderr
    assert "upgraded the earlier install" in done.stdout
    assert _onstation_handlers(settings, harness) == dict.fromkeys(host.hook_events, 1)
    record = json.loads((project / ".onstation" / f"install-{harness}.json").read_text())
    assert set(record["added_hooks"]) == set(host.hook_events)
    assert record["gitignore"] == str(project / ".onstation" / ".gitignore")
    for skill in record["skills"]:
        text = Path(skill["path"]).read_text()
        assert "app" not in text.split() and "33 %" not in text
    # The same install again is a no-op refused, as before.
    assert run(env, "install", harness, "--project", str(project)).returncode == 5

    assert run(env, "uninstall", harness, "--project", str(project)).returncode == 0
    assert settings.read_bytes() == original  # the bytes from before the first install
    assert not (project / ".claude" / "skills").exists()
    assert not (project / ".onstation" / ".gitignore").exists()


#: Imperative markers a prompt-injection defence flags (test_hook_answers_real.py).
IMPERATIVE = re.compile(r"\bSTOP\b|\bMUST\b|(?i:\byou must\b|\bdo not\b|\bimmediately\b)")


def test_a_project_install_writes_only_local_settings_and_portable_skills(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """.claude/ is committed by teams: what install puts there besides the uncommitted local
    settings (the skills) holds nothing of this machine, this workspace or this node."""
    project = project_dir(tmp_path)
    node = "exec-login-7"
    done = run(env, "install", "claude-code", "--project", str(project), "--node", node)
    assert done.returncode == 0, done.stderr
    written = sorted(str(p.relative_to(project / ".claude"))
                     for p in (project / ".claude").rglob("*") if p.is_file())  # fmt: skip
    assert written == ["settings.local.json", "skills/onstation-coord-respawn/SKILL.md",
                       "skills/onstation-relief/SKILL.md"]  # fmt: skip
    plugin = tmp_path / "plugin"
    assert run(env, "install", "claude-code", "--plugin", str(plugin)).returncode == 0
    for name in ("onstation-relief", "onstation-coord-respawn"):
        text = (project / ".claude" / "skills" / name / "SKILL.md").read_text()
        for machine in (node, str(project), str(tmp_path), ONSTATION, os.path.dirname(ONSTATION)):
            assert machine not in text, (name, machine)
        assert not re.search(r"\d+ ?%", text), name  # tier percentages are configuration
        assert "session-start notice" in text  # where the node and generation are named
        assert not IMPERATIVE.search(text), IMPERATIVE.search(text)
        # The plugin carries the same text.
        assert (plugin / "onstation" / "skills" / name / "SKILL.md").read_text() == text
    assert IMPERATIVE.search("write the brief immediately")  # the scan can fail
