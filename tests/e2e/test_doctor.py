"""`onstation doctor`: a fresh install is ok, a broken one names its problem and exits 1, and
an untrusted Codex install is found untrusted (issue 12). Real processes, real SQLite."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hookworld import cli, user_env

from onstation.harness.adapters import CLAUDE_CODE, CODEX
from onstation.harness.install import launcher_path


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return user_env(tmp_path)


run = cli


def doctor(env: dict[str, str], project: Path) -> tuple[int, dict[str, Any]]:
    done = run(env, "doctor", "--project", str(project), "--json")
    return done.returncode, json.loads(done.stdout)


def failures(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in report["checks"] if c["status"] == "fail"]


def installed(tmp_path: Path, env: dict[str, str], harness: str) -> Path:
    project = tmp_path / "app"
    project.mkdir()
    done = run(env, "install", harness, "--project", str(project), "--node", "app")
    assert done.returncode == 0, done.stderr
    return project


def test_a_fresh_install_is_healthy(tmp_path: Path, env: dict[str, str]) -> None:
    project = installed(tmp_path, env, "claude-code")
    code, report = doctor(env, project)
    assert code == 0, report
    assert report["status"] in ("ok", "warn") and failures(report) == []
    checks = {c["check"] for c in report["checks"]}
    assert {"install", "ledger", "window", "witness"} <= checks
    assert any(c["check"] == "ledger" and "works for app" in c["detail"]
               for c in report["checks"])  # fmt: skip
    human = run(env, "doctor", "--project", str(project))
    assert human.returncode == 0 and human.stdout.splitlines()[-1] in ("status: ok",
                                                                      "status: warn")  # fmt: skip


def test_install_and_doctor_say_the_hooks_start_the_daemon(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """The installed commands run the hook launcher, whose first call starts this user's
    daemon (docs/daemon.md): install says so, and doctor says what the next call will do."""
    project = tmp_path / "app"
    project.mkdir()
    done = run(env, "install", "claude-code", "--project", str(project), "--node", "app")
    assert done.returncode == 0, done.stderr
    assert "daemon: the first hook call starts this user's daemon" in done.stdout
    again = run(env, "install", "codex", "--project", str(project), "--node", "app", "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["daemon_autostart"] is True
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    unset = {k: v for k, v in env.items() if not k.startswith("ONSTATION_DAEMON")}
    for switch, says in [(None, "the installed hooks start one at their next call"),
                         ("on", "ONSTATION_DAEMON=on: calls use one that runs and never "
                                "start one"),
                         ("off", "switched off (ONSTATION_DAEMON=off)")]:  # fmt: skip
        given = {**unset, "XDG_RUNTIME_DIR": str(runtime)}
        if switch is not None:
            given["ONSTATION_DAEMON"] = switch
        _code, report = doctor(given, project)
        [check] = [c for c in report["checks"] if c["check"] == "daemon"]
        assert check["status"] == "ok" and says in check["detail"], check
    assert not (runtime / "onstation" / "daemon.sock").exists()  # doctor starts none


def test_the_window_comes_from_the_last_telemetry(tmp_path: Path, env: dict[str, str]) -> None:
    project = installed(tmp_path, env, "claude-code")
    local = json.loads((project / ".claude" / "settings.local.json").read_text())
    payload = {"session_id": "s1", "cwd": str(project), "transcript_path": "/nonexistent.jsonl",
               "model": {"id": "claude-opus-5[1m]", "display_name": "Opus"},
               "context_window": {"context_window_size": 1000000, "used_percentage": 13.0,
                                  "total_input_tokens": 130000,
                                  "total_output_tokens": 100}}  # fmt: skip
    done = subprocess.run(  # noqa: S602 - the status line as Claude Code runs it
        local["statusLine"]["command"], shell=True, input=json.dumps(payload),
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    _code, report = doctor(env, project)
    [window] = [c for c in report["checks"] if c["check"] == "window"]
    assert window["status"] == "ok" and "1000000" in window["detail"], window


@pytest.mark.parametrize("form", ["launcher", "console script"])
def test_a_missing_command_path_is_named_and_exits_1(
    tmp_path: Path, env: dict[str, str], form: str
) -> None:
    """The launcher an install's commands run (``python -S .../hook_launcher.py``) gone, or,
    in an earlier install's commands, the ``onstation`` console script gone."""
    project = installed(tmp_path, env, "claude-code")
    local = project / ".claude" / "settings.local.json"
    text = local.read_text()
    launcher = str(launcher_path())
    assert launcher in text
    if form == "launcher":
        missing = "/nonexistent/onstation/cli/hook_launcher.py"
        text = text.replace(launcher, missing)
    else:
        missing = "/nonexistent/bin/onstation"
        text = text.replace(f"{sys.executable} -S {launcher}", missing)
    local.write_text(text)
    code, report = doctor(env, project)
    assert code == 1
    assert report["status"] == "broken"
    [problem] = [c for c in failures(report) if missing in c["detail"]]
    assert problem["check"] == "install" and "does not exist" in problem["detail"]
    assert problem["fix"].startswith("onstation uninstall claude-code --project")


def test_a_missing_event_is_named(tmp_path: Path, env: dict[str, str]) -> None:
    project = installed(tmp_path, env, "claude-code")
    local = project / ".claude" / "settings.local.json"
    data = json.loads(local.read_text())
    del data["hooks"]["PreToolUse"]
    local.write_text(json.dumps(data))
    code, report = doctor(env, project)
    assert code == 1
    assert any("PreToolUse" in c["detail"] for c in failures(report))


def test_not_installed_and_not_bound(tmp_path: Path, env: dict[str, str]) -> None:
    project = tmp_path / "bare"
    project.mkdir()
    assert run(env, "db", "migrate").returncode == 0
    code, report = doctor(env, project)
    assert code == 1
    details = " ".join(c["detail"] for c in failures(report))
    assert "not installed" in details and "not bound to a node" in details


def test_an_untrusted_codex_install_is_detected(tmp_path: Path, env: dict[str, str]) -> None:
    project = installed(tmp_path, env, "codex")
    code, report = doctor(env, project)
    assert code == 1
    trust = [c for c in failures(report) if c["check"] == "codex-trust"]
    assert any("not trusted yet" in c["detail"] for c in trust)
    assert any(f"{len(CODEX.hook_events)} onstation hook(s) untrusted" in c["detail"]
               for c in trust)  # fmt: skip
    assert any(c["fix"].endswith("codex, then /hooks") for c in trust)

    # The user trusts the project and reviews the hooks in /hooks: Codex writes this.
    record = json.loads((project / ".onstation" / "install-codex.json").read_text())
    lines = [f'[projects."{project}"]', 'trust_level = "trusted"', ""]
    for item in record["codex_trust"]:
        lines += [f'[hooks.state."{item["key"]}"]', f'trusted_hash = "{item["hash"]}"', ""]
    config = Path(env["CODEX_HOME"]) / "config.toml"
    config.write_text("\n".join(lines))
    code, report = doctor(env, project)
    assert [c for c in report["checks"] if c["check"] == "codex-trust"] == [
        {"check": "codex-trust", "status": "ok",
         "detail": f"{len(CODEX.hook_events)} onstation hooks trusted", "fix": None}
    ]  # fmt: skip
    assert code == 0

    # A hook changed after review is "modified" for Codex: it no longer runs as reviewed.
    hooks_file = project / ".codex" / "hooks.json"
    data = json.loads(hooks_file.read_text())
    data["hooks"]["Stop"][0]["hooks"][0]["timeout"] = 31
    hooks_file.write_text(json.dumps(data))
    _code, report = doctor(env, project)
    assert any(c["check"] == "codex-trust" and c["status"] == "warn" and "Stop" in c["detail"]
               for c in report["checks"])  # fmt: skip

    # A project marked untrusted loads no .codex/ at all.
    config.write_text(config.read_text().replace('"trusted"', '"untrusted"'))
    code, report = doctor(env, project)
    assert code == 1 and any("is untrusted" in c["detail"] for c in failures(report))


def test_an_install_from_before_postcompact_is_a_warning_with_the_upgrade(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """An earlier version's install (no PostCompact in its record) works with one signal
    fewer: a warning naming the upgrade, not a failure; a recorded event gone is a failure."""
    project = installed(tmp_path, env, "claude-code")
    record_file = project / ".onstation" / "install-claude-code.json"
    record = json.loads(record_file.read_text())
    del record["added_hooks"]["PostCompact"]
    record_file.write_text(json.dumps(record))
    local = project / ".claude" / "settings.local.json"
    data = json.loads(local.read_text())
    del data["hooks"]["PostCompact"]
    local.write_text(json.dumps(data))
    code, report = doctor(env, project)
    assert code == 0 and failures(report) == [], report
    [warn] = [c for c in report["checks"] if "PostCompact" in c["detail"]]
    assert warn["status"] == "warn" and "earlier version" in warn["detail"]
    assert warn["fix"] == f"onstation install claude-code --project {project} (upgrades it)"
    assert run(env, "install", "claude-code", "--project", str(project)).returncode == 0
    code, report = doctor(env, project)
    assert code == 0 and not [c for c in report["checks"] if "PostCompact" in c["detail"]]


# -- the Claude Code plugin ------------------------------------------------------------------


def plugin_installed(tmp_path: Path, env: dict[str, str], *, enable: bool = True) -> Path:
    """The onstation plugin written, then installed as Claude Code installs a plugin from a
    local marketplace (Claude Code docs, "Plugin loading reference": enabled in a settings
    file's enabledPlugins as PLUGIN@MARKETPLACE; the marketplace recorded in
    ~/.claude/plugins/known_marketplaces.json; the plugin copied into
    ~/.claude/plugins/cache/MARKETPLACE/PLUGIN/VERSION and recorded in installed_plugins.json
    with its installPath). Returns the copy Claude Code runs."""
    import shutil

    market = tmp_path / "plugin"
    done = run(env, "install", "claude-code", "--plugin", str(market))
    assert done.returncode == 0, done.stderr
    plugins = Path(env["CLAUDE_CONFIG_DIR"]) / "plugins"
    cache = plugins / "cache" / "onstation-local" / "onstation" / "0.1.0"
    shutil.copytree(market / "onstation", cache)
    plugins.joinpath("known_marketplaces.json").write_text(json.dumps({
        "onstation-local": {"source": {"source": "directory", "path": str(market)},
                            "installLocation": str(market)}}))  # fmt: skip
    plugins.joinpath("installed_plugins.json").write_text(json.dumps({
        "version": 2, "plugins": {"onstation@onstation-local": [
            {"scope": "user", "installPath": str(cache), "version": "0.1.0"}]}}))  # fmt: skip
    settings = Path(env["CLAUDE_CONFIG_DIR"]) / "settings.json"
    settings.write_text(json.dumps({"enabledPlugins": {"onstation@onstation-local": enable}}))
    return cache


def bound(tmp_path: Path, env: dict[str, str]) -> Path:
    project = tmp_path / "app"
    project.mkdir()
    assert run(env, "node", "register", "app").returncode == 0
    assert run(env, "workspace", "bind", str(project), "app").returncode == 0
    return project


def test_a_plugin_install_passes_the_install_check(tmp_path: Path, env: dict[str, str]) -> None:
    """Before: a workspace whose hooks come from the plugin was reported "not installed"."""
    cache = plugin_installed(tmp_path, env)
    project = bound(tmp_path, env)
    code, report = doctor(env, project)
    assert code == 0 and failures(report) == [], report
    [ok] = [c for c in report["checks"] if c["check"] == "install" and c["status"] == "ok"]
    assert f"{len(CLAUDE_CODE.hook_events)} hook events from the plugin at {cache}" in ok["detail"]
    assert "onstation@onstation-local, enabled in user settings" in ok["detail"]
    # A plugin declares no status line: a warning, as docs/hooks.md says.
    assert any(c["status"] == "warn" and "status line" in c["detail"] for c in report["checks"])

    # The local project settings turn it off: the highest layer naming it decides.
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.local.json").write_text(
        json.dumps({"enabledPlugins": {"onstation@onstation-local": False}})
    )
    code, report = doctor(env, project)
    assert code == 1 and any("not installed" in c["detail"] for c in failures(report))


def test_a_plugin_dir_loaded_for_a_session_is_checked(tmp_path: Path, env: dict[str, str]) -> None:
    """`claude --plugin-dir DIR` leaves nothing on disk: doctor is told the folder."""
    market = tmp_path / "plugin"
    assert run(env, "install", "claude-code", "--plugin", str(market)).returncode == 0
    project = bound(tmp_path, env)
    done = run(env, "doctor", "--project", str(project), "--plugin-dir",
               str(market / "onstation"), "--json")  # fmt: skip
    report = json.loads(done.stdout)
    assert done.returncode == 0 and failures(report) == [], report
    assert any(c["status"] == "ok" and f"plugin at {market / 'onstation'}" in c["detail"]
               for c in report["checks"])  # fmt: skip


def test_a_broken_plugin_fails_with_what_to_fix(tmp_path: Path, env: dict[str, str]) -> None:
    cache = plugin_installed(tmp_path, env)
    project = bound(tmp_path, env)
    hooks_file = cache / "hooks" / "hooks.json"
    good = hooks_file.read_text()

    hooks_file.write_text(good[:-20])  # truncated
    code, report = doctor(env, project)
    assert code == 1
    [problem] = failures(report)
    assert problem["check"] == "install" and "not valid JSON" in problem["detail"]
    assert str(hooks_file) in problem["detail"]
    assert problem["fix"].startswith("onstation install claude-code --plugin")

    # A hook command whose program is gone (CLAUDE_PLUGIN_ROOT read as the plugin's folder).
    hooks_file.write_text(good)
    (cache / "bin" / "onstation").unlink()
    code, report = doctor(env, project)
    assert code == 1
    assert any(f"{cache}/bin/onstation does not exist" in c["detail"] for c in failures(report))

    # The launcher is there but what it runs moved away.
    (cache / "bin" / "onstation").write_text('#!/bin/sh\nexec /nonexistent/onstation "$@"\n')
    (cache / "bin" / "onstation").chmod(0o755)
    code, report = doctor(env, project)
    assert code == 1
    [problem] = failures(report)
    assert "runs /nonexistent/onstation, which does not exist" in problem["detail"]
    # As an install writes it: the interpreter without site on the hook launcher, gone.
    gone = "/nonexistent/onstation/cli/hook_launcher.py"
    (cache / "bin" / "onstation").write_text(f'#!/bin/sh\nexec {sys.executable} -S {gone} "$@"\n')
    code, report = doctor(env, project)
    assert code == 1
    [problem] = failures(report)
    assert f"runs {gone}, which does not exist" in problem["detail"]

    # Enabled, but Claude Code holds no copy of it.
    (Path(env["CLAUDE_CONFIG_DIR"]) / "plugins" / "installed_plugins.json").unlink()
    (Path(env["CLAUDE_CONFIG_DIR"]) / "plugins" / "known_marketplaces.json").unlink()
    code, report = doctor(env, project)
    assert code == 1
    [problem] = failures(report)
    assert "no copy of it on this machine" in problem["detail"]
    assert "/plugin install onstation@onstation-local" in problem["fix"]
