"""What every part of the fake agent shares: exit codes, its errors, the log, small helpers."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn, TextIO

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_BAD_INPUT = 2
EXIT_DENIED = 3
EXIT_BLOCKED = 4
EXIT_CONFLICT = 5

PROG = "onstation fake-agent"


class AgentError(Exception):
    """Something unexpected: exit 1 with one line on stderr."""


class AgentDenied(Exception):
    """This body may not act (fenced, or never made RUNNING): exit 3."""


class AgentRefused(Exception):
    """Not a repository a stand-in may touch, or a push that would leave this machine: exit 4."""


def now() -> str:
    """The current UTC time as Claude Code writes it (milliseconds, ``Z``)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def onstation_argv() -> list[str]:
    """How to run the onstation CLI: the script beside this interpreter, else ``-m``."""
    beside = Path(sys.executable).with_name("onstation")
    if beside.exists():
        return [str(beside)]
    return [sys.executable, "-m", "onstation.cli.entry"]


def die_by_sigkill() -> NoReturn:
    """End this process as a crash does: SIGKILL, nothing flushed or cleaned up."""
    os.kill(os.getpid(), signal.SIGKILL)
    while True:  # pragma: no cover - SIGKILL cannot be caught
        time.sleep(1)


def short(value: Any) -> Any:
    """A log-sized copy: long strings cut (file contents, outputs)."""
    if isinstance(value, dict):
        return {k: short(v) for k, v in value.items()}
    if isinstance(value, str) and len(value) > 300:
        return value[:300] + "…"
    return value


class Log:
    """JSON lines of what the agent did; each line is flushed so a SIGKILL loses none.

    The file is opened at the first event, not before: a run refused before it writes
    anything must not have created a file, possibly inside the repository it refused.
    """

    def __init__(self, path: Path | None) -> None:
        self._lock = threading.Lock()
        self._fh: TextIO | None = None
        self._closed = False
        self.path = path

    def __call__(self, event: str, **fields: Any) -> None:
        if self.path is None:
            return
        line = json.dumps({"at": now(), "event": event, **fields}, default=str)
        # Under the lock: the heartbeat thread may log while the main thread closes.
        with self._lock:
            if self._closed:
                return
            if self._fh is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fh = self.path.open("a", encoding="utf-8")
            self._fh.write(line + "\n")
            self._fh.flush()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._fh is not None:
                self._fh.close()
                self._fh = None
