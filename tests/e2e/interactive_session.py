"""A stand-in for an interactive Claude Code session started by a person: it runs the hooks
as Claude Code would (it is their parent process, as Claude Code is), reads the successor
prompt from SessionStart, runs the challenge command it is told to run through a shell (as
the Bash tool does), and keeps calling hooks for a while.

Usage: interactive_session.py ONSTATION WORKSPACE SESSION_ID SECONDS
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time


def hook(onstation: str, event: str, payload: dict[str, object]) -> dict[str, object] | None:
    done = subprocess.run([onstation, "hook", "claude-code", event], input=json.dumps(payload),
                          capture_output=True, text=True, check=False)  # fmt: skip
    return json.loads(done.stdout) if done.stdout.strip() else None


def main() -> None:
    onstation, workspace, session_id, seconds = sys.argv[1:5]
    base = {"session_id": session_id, "cwd": workspace, "transcript_path": "/nonexistent"}
    start = hook(onstation, "SessionStart", {**base, "hook_event_name": "SessionStart",
                                              "source": "startup"})  # fmt: skip
    context = str((start or {}).get("hookSpecificOutput", {}).get("additionalContext", ""))
    print("context:", context[:200].replace("\n", " "), flush=True)
    # The prompt names the command to run exactly (an absolute onstation, shell-quoted).
    match = re.search(r"^  (\S.* challenge answer .*)$", context, re.M)
    if match is None:
        print("no challenge in the prompt", flush=True)
        return
    command = match.group(1)
    tool = {"tool_name": "Bash", "tool_input": {"command": command}, "tool_use_id": "t1"}
    hook(onstation, "PreToolUse", {**base, "hook_event_name": "PreToolUse", **tool})
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, check=False)
    print("answer:", done.returncode, done.stdout.strip()[:200], done.stderr.strip()[:200],
          flush=True)  # fmt: skip
    deadline = time.monotonic() + float(seconds)
    while time.monotonic() < deadline:
        hook(onstation, "PostToolUse", {**base, "hook_event_name": "PostToolUse", **tool,
                                         "tool_response": {"stdout": ""}})  # fmt: skip
        time.sleep(0.3)


if __name__ == "__main__":
    main()
