"""What the real-host tests share: a workspace with a body at work, capacity evidence, the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from onstation.harness.fake_agent import mark_scratch_workspace

ONSTATION = str(Path(sys.executable).with_name("onstation"))
GIT = {"GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "T",
       "GIT_COMMITTER_EMAIL": "t@e"}  # fmt: skip


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ONSTATION, *args], capture_output=True, text=True, env=env, timeout=300, check=False
    )


def workspace(tmp_path: Path) -> tuple[Path, Path]:
    """(root, app): a git workspace whose path holds a quote and a space, the ledger's folder
    above it."""
    root = tmp_path / "it's a team"
    app = root / "app"
    app.mkdir(parents=True)
    for argv in (["git", "init", "-q", "-b", "main"],
                 ["git", "commit", "-q", "--allow-empty", "-m", "init"]):  # fmt: skip
        subprocess.run(argv, cwd=app, check=True, env={**os.environ, **GIT})
    mark_scratch_workspace(app)
    return root, app


def body_at_work(env: dict[str, str], app: Path, *harnesses: str) -> None:
    """Install onstation for each harness, open an episode, and admit exec-1's first body (a
    Claude Code session's SessionStart)."""
    for harness in harnesses:
        done = run(env, "install", harness, "--project", str(app), "--node", "exec-1")
        assert done.returncode == 0, done.stderr
    assert run(env, "episode", "open", "exec-1", "--objective", "build it").returncode == 0
    payload = {"session_id": "pred", "cwd": str(app), "hook_event_name": "SessionStart",
               "source": "startup"}  # fmt: skip
    subprocess.run([ONSTATION, "hook", "claude-code", "SessionStart"], env=env, check=True,
                   input=json.dumps(payload), text=True, capture_output=True)  # fmt: skip


def capacity(root: Path, harness: str) -> Path:
    """Fresh capacity evidence for exec-1 on ``harness`` (a real provider needs it)."""
    sample = Path(__file__).parents[2] / "src/onstation/plan/examples/sample-input.json"
    evidence = json.loads(sample.read_text())["capacity"]["evidence"]
    now = datetime.now(UTC)
    stamp = "%Y-%m-%dT%H:%M:%SZ"
    evidence |= {"node": "exec-1", "harness": harness, "observedAt": now.strftime(stamp),
                 "validUntil": (now + timedelta(minutes=30)).strftime(stamp)}  # fmt: skip
    evidence["reservation"]["expiresAt"] = (now + timedelta(minutes=30)).strftime(stamp)
    path = root / "capacity.json"
    path.write_text(json.dumps(evidence))
    return path


def relieve(env: dict[str, str], root: Path, harness: str, plan_harness: str,
            wait: str) -> dict[str, object]:  # fmt: skip
    """``onstation relieve exec-1 --harness HARNESS`` as a user runs it; its JSON outcome."""
    done = subprocess.run(
        [ONSTATION, "relieve", "exec-1", "--harness", harness, "--brief-wait", "0",
         "--shutdown-wait", "0.5", "--challenge-wait", wait, "--capacity",
         str(capacity(root, plan_harness)), "--json"],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert done.stdout.strip(), done.stderr
    outcome: dict[str, object] = json.loads(done.stdout)
    return outcome
