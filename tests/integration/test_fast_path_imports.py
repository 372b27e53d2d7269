"""What a hook call in its own process imports, as installed (issue 14).

Every hook call is a new process, so each module its fast path imports is paid at every
tool call. These run the installed command itself (``PYTHON -S .../hook_launcher.py hook
claude-code EVENT``, no daemon) under ``-X importtime`` and list the standard modules that
cost the most start-up time which it must not load, so that a later change cannot bring one
back unnoticed. Which modules are loaded, not how long they take: nothing here is timed.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

ONSTATION = str(Path(sys.executable).with_name("onstation"))


class _World:
    """A workspace bound to one identity, its ledger, a transcript, the installed hooks."""

    def __init__(self, root: Path) -> None:
        self.project = root / "app"
        self.project.mkdir(parents=True)
        self.env = {**os.environ, "ONSTATION_DB": str(root / "ledger.db"),
                    "XDG_STATE_HOME": str(root / "state"), "ONSTATION_DAEMON": "off"}  # fmt: skip
        self.env.pop("ONSTATION_HOOK_FAST_PATH", None)
        subprocess.run(
            [ONSTATION, "install", "claude-code", "--project", str(self.project), "--node",
             "exec-1"], capture_output=True, text=True, env=self.env, check=True,
        )  # fmt: skip
        settings = json.loads((self.project / ".claude" / "settings.local.json").read_text())
        words = shlex.split(settings["hooks"]["Stop"][-1]["hooks"][0]["command"])
        self.program = words[: words.index("hook")]
        self.transcript = root / "s1.jsonl"
        self.turn = 0

    def assistant_turn(self, tokens: int) -> None:
        self.turn += 1
        usage = {"input_tokens": 3, "cache_creation_input_tokens": 500,
                 "cache_read_input_tokens": tokens - 503, "output_tokens": 80}  # fmt: skip
        line = {"type": "assistant", "isSidechain": False, "sessionId": "s1",
                "uuid": f"u{self.turn}", "requestId": f"req_{self.turn}",
                "message": {"id": f"msg_{self.turn}", "role": "assistant",
                            "model": "claude-sonnet-4-5-20250929", "stop_reason": "tool_use",
                            "content": [{"type": "text", "text": "working"}],
                            "usage": usage}}  # fmt: skip
        with self.transcript.open("a") as fh:
            fh.write(json.dumps(line) + "\n")

    def fire(self, event: str, *, importtime: bool = False, **fields: Any) -> set[str]:
        """Run the installed hook command; the modules it imported (with ``importtime``)."""
        payload = {"session_id": "s1", "transcript_path": str(self.transcript),
                   "cwd": str(self.project), "hook_event_name": event, **fields}  # fmt: skip
        python, *rest = self.program
        argv = [python, *(["-X", "importtime"] if importtime else []), *rest, "hook",
                "claude-code", event]  # fmt: skip
        done = subprocess.run(argv, input=json.dumps(payload), capture_output=True, text=True,
                              env=self.env, cwd=self.project, timeout=60, check=True)  # fmt: skip
        return {
            line.rsplit("|", 1)[1].strip()
            for line in done.stderr.splitlines()
            if line.startswith("import time:") and "|" in line
        }


#: Modules the hooks below must not import in their own process: ``re`` (and ``enum``,
#: which ``re`` imports), ``typing``, ``dataclasses`` and ``json`` each cost a hook process
#: milliseconds; so do ``site`` (set up only when the full path needs an installed
#: distribution, cli/entry.py), ``functools`` (which ``_sqlite3`` loads for one name) and
#: ``collections`` (which ``collections.abc`` runs).
HEAVY = ("re", "enum", "typing", "dataclasses", "json", "inspect", "datetime", "threading",
         "site", "functools", "collections", "types")  # fmt: skip


def _fired(world: _World, event: str, **fields: Any) -> set[str]:
    world.assistant_turn(20_000 + 10 * world.turn)
    return world.fire(event, importtime=True, **fields)


def test_a_quiet_read_and_an_inert_bash_call_import_none_of_the_costly_modules(
    tmp_path: Path,
) -> None:
    world = _World(tmp_path / "w")
    world.fire("SessionStart", source="startup")
    world.assistant_turn(20_000)
    read = {"tool_name": "Read", "tool_input": {"file_path": "README.md"}}
    world.fire("PostToolUse", tool_use_id="t0", tool_response={}, **read)  # the first reading
    bash = _fired(world, "PreToolUse", tool_name="Bash", tool_input={"command": "ls -la"},
                  tool_use_id="b1")  # fmt: skip
    assert "onstation.harness.effects.classify" in bash  # the command was classified here
    assert bash.isdisjoint(HEAVY), sorted(bash.intersection(HEAVY))
    post = _fired(world, "PostToolUse", tool_use_id="t1", tool_response={}, **read)
    assert "onstation.relief.tool_journal" in post  # journaled on the fast path
    # The fast path takes a reading's tier by name (core.hull.tier_value), not the enum.
    assert post.isdisjoint(HEAVY), sorted(post.intersection(HEAVY))
    prompt = _fired(world, "UserPromptSubmit", prompt="go on")
    assert prompt.isdisjoint(HEAVY), sorted(prompt.intersection(HEAVY))
    stop = _fired(world, "Stop", stop_hook_active=False)
    assert "onstation.relief.hotpath" in stop
    assert stop.isdisjoint(HEAVY), sorted(stop.intersection(HEAVY))
    # The status line (its compaction warning included) takes tiers by name too.
    python, *rest = world.program
    window = {"context_window_size": 200000, "used_percentage": 10.0}
    status = {"session_id": "s1", "cwd": str(world.project),
              "transcript_path": str(world.transcript), "context_window": window,
              "model": {"id": "claude-sonnet-4-5", "display_name": "Sonnet"}}  # fmt: skip
    for _ in range(2):  # the first declares the window: the full path records it
        done = subprocess.run([python, "-X", "importtime", *rest, "statusline"],
                              input=json.dumps(status), capture_output=True, text=True,
                              env=world.env, cwd=world.project, timeout=60, check=True)  # fmt: skip
    line = {row.rsplit("|", 1)[1].strip() for row in done.stderr.splitlines()
            if row.startswith("import time:") and "|" in row}  # fmt: skip
    assert "onstation.relief.fast_status" in line and "onstation.relief.hooks" not in line
    assert line.isdisjoint(HEAVY), sorted(line.intersection(HEAVY))
    # A summary that names a secret is still redacted: the rules (and re) are loaded then.
    secret = {"tool_name": "Read", "tool_input": {"file_path": "/run/secrets/api_token"}}
    assert "onstation.core.redact" in _fired(
        world, "PostToolUse", tool_use_id="t2", tool_response={}, **secret
    )
