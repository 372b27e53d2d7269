"""A relief's capsule from evidence alone (issue 13): a Claude Code body played through the
installed hooks (payloads as the host sends them) runs tests, reads, edits and talks; a
relief without ``--facts`` then carries its tool pairs, its test runs with their status, its
transcript tail, its capabilities and its host, all from what the hooks and the transcript
recorded; and the successor it launches holds fresh grants from the translation."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from hookworld import NODE, ONSTATION, Claude, cli, installed_world
from test_relief import STUB

from onstation.ledger import Ledger

SECRET = "ghp_" + "Z1x2C3v4" * 5


def post_bash(claude: Claude, command: str, tool_use_id: str) -> None:
    """A Bash call that ran and exited 0: PreToolUse, then PostToolUse as Claude Code sends it."""
    claude.bash(command, tool_use_id)
    _, err, code = claude.fire("PostToolUse", tool_name="Bash", tool_use_id=tool_use_id,
                               tool_input={"command": command, "description": "run"},
                               tool_response={"stdout": "ok\n", "stderr": "",
                                              "interrupted": False, "isImage": False})  # fmt: skip
    assert code == 0, err


def failed_bash(claude: Claude, command: str, tool_use_id: str, status: int) -> None:
    claude.bash(command, tool_use_id)
    _, err, code = claude.fire(
        "PostToolUseFailure", tool_name="Bash", tool_use_id=tool_use_id,
        tool_input={"command": command, "description": "run"},
        error=f"Command exited with non-zero status code {status}", is_interrupt=False,
    )  # fmt: skip
    assert code == 0, err


def test_the_capsule_carries_what_the_body_did(tmp_path: Path) -> None:
    world = installed_world(tmp_path, ONSTATION_KEYS_DIR=str(tmp_path / "keys"))
    env, project = world["env"], world["project"]
    assert cli(env, "episode", "open", NODE, "--objective", "ship the login").returncode == 0
    claude = Claude(project, env, "sess-1")
    claude.fire("SessionStart", source="startup", transcript_path=str(claude.transcript))
    claude.append({"type": "user", "isSidechain": False, "sessionId": "sess-1",
                   "message": {"role": "user",
                               "content": "make the login tests pass"}})  # fmt: skip
    claude.assistant_turn(30_000)
    post_bash(claude, "cd app && pytest -q tests/test_login.py", "toolu_01")
    failed_bash(claude, "pytest -q tests/test_cookie.py", "toolu_02", 1)
    post_bash(claude, f"curl -H 'Authorization: Bearer {SECRET}' https://api.example", "toolu_03")
    _, err, code = claude.fire("PostToolUse", tool_name="Read", tool_use_id="toolu_04",
                               tool_input={"file_path": str(project / "README.md")},
                               tool_response={"type": "text"})  # fmt: skip
    assert code == 0, err
    said = [{"type": "text", "text": "cookie test still red"}]
    claude.append({"type": "assistant", "isSidechain": False, "sessionId": "sess-1",
                   "message": {"role": "assistant", "model": "claude-sonnet-4-5",
                               "content": said}})  # fmt: skip
    claude.assistant_turn(31_000)
    claude.fire("PostToolUse", tool_name="Read", tool_use_id="toolu_05",
                tool_input={"file_path": str(project / "README.md")},
                tool_response={"type": "text"}, transcript_path=str(claude.transcript))  # fmt: skip

    done = cli(env, "relieve", NODE, "--harness", "command", "--execution-class", "fake",
               "--command", f"{sys.executable} {STUB} ok {ONSTATION}",
               "--brief-wait", "0", "--challenge-wait", "30", "--shutdown-wait", "0.5",
               "--json")  # fmt: skip
    outcome = json.loads(done.stdout)
    assert outcome["state"] == "SETTLED", done.stdout + done.stderr
    report = Path(outcome["report_path"]).read_text()
    digest = report.split("- capsule: ", 1)[1].split(" ", 1)[0]
    shown = cli(env, "capsule", "show", digest, "--json")
    assert shown.returncode == 0, shown.stderr
    payload: dict[str, Any] = json.loads(shown.stdout)["payload"]

    pairs = {p["callId"]: p for p in payload["toolPairs"]}
    assert pairs["toolu_01"]["result"]["outcome"] == "succeeded"
    assert pairs["toolu_02"]["result"] == pairs["toolu_02"]["result"] | {
        "outcome": "failed", "exitCode": 1}  # fmt: skip
    assert SECRET not in json.dumps(payload)  # the curl's bearer token was redacted
    tests = {t["name"]: t["status"] for t in payload["tests"]}
    assert any("test_login" in n and s == "passed" for n, s in tests.items()), tests
    assert any("test_cookie" in n and s == "failed" for n, s in tests.items()), tests
    assert {t["artifact"] for t in payload["tests"]} == {"hook-journal"}
    tail = [e["text"] for e in payload["transcript"]["tail"]]
    assert "make the login tests pass" in tail and "cookie test still red" in tail
    assert payload["transcript"]["trust"] == "untrusted-evidence"
    required = {r["name"] for r in payload["capabilityRequirements"] if r["required"]}
    assert required == {"Bash", "Read"}
    assert not [o for o in payload["omissions"] if o["part"] in ("tests", "toolPairs",
                                                                 "transcript")]  # fmt: skip
    plan_digest = report.split("- plan: ", 1)[1].split(" ", 1)[0]
    plan = json.loads(cli(env, "plan", "show", plan_digest, "--json").stdout)
    assert plan["capabilities"]["sourceHarness"] == "claude-code"
    with Ledger.open(world["db"]) as ledger:
        assert {"tool:Bash", "tool:Read"} <= ledger.live_grants(NODE, 2)
