"""A daemon of the benchmark's own (``onstation daemon start`` on a scratch socket).

The benchmarks time each command twice in the same run: in its own process, as without a
daemon (``ONSTATION_DAEMON=off``, so a daemon the user runs stays out of it), and handed to
this daemon. The daemon's CPU time (its own and that of the children it reaped, which run
the calls) is read from ``/proc`` so that a row can show what the call cost in all,
not only in the client process.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator


class BenchDaemon:
    """The running daemon: the environment that reaches it, and its CPU time so far."""

    def __init__(self, env: dict[str, str], pid: int) -> None:
        self.env = env
        self.pid = pid
        self._tick = os.sysconf("SC_CLK_TCK")

    def cpu(self) -> float:
        """Seconds of CPU: the daemon's and its reaped children's (utime, stime, cutime,
        cstime of /proc/PID/stat)."""
        with open(f"/proc/{self.pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        return sum(int(f) for f in fields[11:15]) / self._tick

    def served(self) -> int:
        done = subprocess.run(["onstation", "daemon", "status", "--json"], env=self.env,
                              capture_output=True, text=True, check=False)  # fmt: skip
        return int(json.loads(done.stdout).get("served", 0)) if done.stdout else 0


def in_process(env: dict[str, str]) -> dict[str, str]:
    """``env`` with the daemon switched off."""
    return {**env, "ONSTATION_DAEMON": "off"}


@contextlib.contextmanager
def running_daemon(
    onstation_bin: str, env: dict[str, str], *, postgres: bool = False
) -> Iterator[BenchDaemon]:
    """Start a daemon on a scratch socket (a short path: ``sun_path`` is 107 bytes); with
    ``postgres``, one that loads psycopg ahead (``--postgres``), as for a PostgreSQL ledger."""
    directory = tempfile.mkdtemp(prefix="osb-")
    os.chmod(directory, 0o700)
    served_env = {k: v for k, v in env.items() if k != "ONSTATION_DAEMON"}
    served_env["ONSTATION_DAEMON_SOCKET"] = os.path.join(directory, "d.sock")
    served_env["PATH"] = os.path.dirname(onstation_bin) + os.pathsep + env.get("PATH", "")
    argv = [onstation_bin, "daemon", "start", "--json", *(["--postgres"] if postgres else [])]
    started = subprocess.run(argv, env=served_env,
                             capture_output=True, text=True, check=False)  # fmt: skip
    if started.returncode != 0:
        raise SystemExit(f"bench: onstation daemon start failed: {started.stderr.strip()}")
    try:
        yield BenchDaemon(served_env, int(json.loads(started.stdout)["pid"]))
    finally:
        subprocess.run([onstation_bin, "daemon", "stop"], env=served_env, capture_output=True,
                       check=False)  # fmt: skip
        shutil.rmtree(directory, ignore_errors=True)
