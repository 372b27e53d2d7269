"""The daemon's warm-up of the hook paths: one made-up session's hook calls, run once in the
daemon before it forks its first spare, on a scratch ledger and workspace of its own.

Python 3.11 specializes a function's bytecode as it runs it (PEP 659, the adaptive
interpreter), and until now the daemon had only imported the hook paths: every forked child
ran them cold, specializing (and so writing to, and so copying) the same code objects anew
on every call. Run once here, before the first fork, the specialized code and what the first
run fills in (compiled patterns, the process reader) are shared by every child. Measured on a
forked child's full-path SessionStart: 4.9 ms of CPU cold, 4.1 ms after the warm-up
(docs/decisions.md, "The daemon runs a session's hooks once before it forks").

What runs: SessionStart, UserPromptSubmit, PreToolUse (a Read and an inert Bash), PostToolUse,
Stop and SessionEnd of one session, then the start and end of the identity's next session
(admitted at the next generation), through the same entry as a served call
(:func:`onstation.cli.hooks._run`), on an SQLite ledger in a private temporary directory that
is removed afterwards, in a workspace configured for it there, with a git HEAD written by
hand (no git runs) and a transcript of one assistant turn. Nothing is written outside that
directory; what is read beside it is what every hook call reads (``/proc`` for the host
process's witness, the host's settings for its compaction point). No connection stays open,
no PostgreSQL server is asked, and a warm-up that fails is given up quietly: the daemon
serves as before, cold. What the calls run is noted for each spare to compile ahead
(:func:`onstation.ledger.fastpath.compile_ahead`).
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

#: The made-up identity and session: names no real ledger sees (the ledger is a scratch one).
NODE = "daemon-warm-up"
SESSION = "daemon-warm-up-session"
#: A commit id for the hand-written HEAD (never resolved: only read as text).
_HEAD = "0" * 39 + "1"


def warm_hooks() -> bool:
    """Run the warm-up session; whether it ran to the end (False: it was given up)."""
    scratch = tempfile.mkdtemp(prefix="onstation-warm-up-")
    try:
        with contextlib.suppress(Exception):
            _session(Path(scratch))
            return True
        return False
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _session(root: Path) -> None:
    from onstation.ledger import Ledger

    db = str(root / "ledger.db")
    project = root / "project"
    (project / ".onstation").mkdir(parents=True)
    (project / ".onstation" / "config.json").write_text(json.dumps({"node": NODE, "db": db}))
    git = project / ".git"
    (git / "refs" / "heads").mkdir(parents=True)
    (git / "config").write_text("[core]\n\trepositoryformatversion = 0\n")
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    (git / "refs" / "heads" / "main").write_text(_HEAD + "\n")
    transcript = project / "session.jsonl"
    transcript.write_text(_assistant_turn(20_000))
    with Ledger.open(db) as ledger:
        ledger.register_node(NODE)
    base = {"session_id": SESSION, "cwd": str(project), "transcript_path": str(transcript)}
    read = {"tool_name": "Read", "tool_input": {"file_path": "README.md"}}
    listing = {"tool_name": "Bash", "tool_input": {"command": "ls"}}
    calls: list[tuple[str, dict[str, Any]]] = [
        ("SessionStart", {"source": "startup"}),
        ("UserPromptSubmit", {"prompt": "go on"}),
        ("PreToolUse", {**read, "tool_use_id": "warm-1"}),
        ("PostToolUse", {**read, "tool_use_id": "warm-1", "tool_response": {}}),
        ("PreToolUse", {**listing, "tool_use_id": "warm-2"}),
        ("PostToolUse", {**listing, "tool_use_id": "warm-2", "tool_response": {}}),
        ("Stop", {"stop_hook_active": False}),
        ("SessionEnd", {"reason": "other"}),
    ]
    # Then the next session of the same identity: most session starts are not an
    # identity's first, and its admission takes the next generation.
    again = {**base, "session_id": SESSION + "-2"}
    later = [("SessionStart", {"source": "startup"}), ("SessionEnd", {"reason": "other"})]
    from onstation.ledger import fastpath

    # What the calls run is noted: each spare compiles it ahead on the ledger it opens
    # ahead, so that its call finds its statements compiled (fastpath.compile_ahead).
    with fastpath.noting():
        for event, fields in calls:
            _call(event, {**base, "hook_event_name": event, **fields}, db)
        for event, fields in later:
            _call(event, {**again, "hook_event_name": event, **fields}, db)


def _call(event: str, payload: dict[str, Any], db: str) -> None:
    """One hook call as a served one runs it, its standard input the payload; every
    connection it leaves open is closed."""
    from onstation.cli.hooks import _run

    given = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(json.dumps(payload).encode()))
    kept: list[Any] = []
    try:
        _run("claude-code", event, db, time.monotonic() + 10, {}, kept)
    finally:
        sys.stdin = given
        for held in kept:
            with contextlib.suppress(Exception):
                held.close()


def _assistant_turn(tokens: int) -> str:
    """One assistant message of Claude Code's transcript with its usage (10 % of 200k)."""
    usage = {"input_tokens": 3, "cache_creation_input_tokens": 400,
             "cache_read_input_tokens": tokens - 403, "output_tokens": 50}  # fmt: skip
    return json.dumps({
        "type": "assistant", "isSidechain": False, "uuid": "warm-up", "requestId": "warm-up",
        "message": {"id": "warm-up", "role": "assistant", "model": "claude-sonnet-4-5",
                    "content": [{"type": "text", "text": "ok"}], "usage": usage},
    }) + "\n"  # fmt: skip


__all__ = ["warm_hooks"]
