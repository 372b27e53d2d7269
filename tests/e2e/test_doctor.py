"""`onstation doctor`: a fresh install is ok, a broken one names its problem and exits 1, and
an untrusted Codex install is found untrusted (issue 12). Real processes, real SQLite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ONSTATION = str(Path(sys.executable).with_name("onstation"))


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".codex").mkdir()
    return {
        **os.environ,
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "CODEX_HOME": str(home / ".codex"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "ONSTATION_DB": str(tmp_path / "ledger.db"),
    }


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ONSTATION, *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


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


def test_a_missing_command_path_is_named_and_exits_1(tmp_path: Path, env: dict[str, str]) -> None:
    project = installed(tmp_path, env, "claude-code")
    local = project / ".claude" / "settings.local.json"
    local.write_text(local.read_text().replace(ONSTATION, "/nonexistent/bin/onstation"))
    code, report = doctor(env, project)
    assert code == 1
    assert report["status"] == "broken"
    [problem] = [c for c in failures(report) if "/nonexistent/bin/onstation" in c["detail"]]
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
    assert any("6 onstation hook(s) untrusted" in c["detail"] for c in trust)
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
        {"check": "codex-trust", "status": "ok", "detail": "6 onstation hooks trusted",
         "fix": None}
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
