"""Whole-process time of ``onstation --help`` and the ordinary commands.

Operators and scripts run ``onstation --help``, ``node show``, ``history``, ``team status``,
``halts``, ``effect list`` and the like by hand and in loops, and a body records its notes
with ``onstation note``. This measures each end to end (interpreter start-up, imports, the
ledger) on a SQLite ledger with a little realistic content (three identities with live
bodies, an office, an episode, notes and decisions, effects, tasks, messages), against the
interpreter's own start-up (``python -c pass`` with the same interpreter) in the same run.
Each is timed twice in the same run, in its own process (the daemon off) and handed to the
per-user daemon (``onstation daemon``, bench/_daemon.py), and printed with its ratio to
``python -c pass``; the daemon's figure is held against the issue 14 target (at most 3x).
The run never fails on a target, it says MEETS or MISSES.

Bytecode is compiled first (``compileall``), as a normal install has it; this machine sets
PYTHONDONTWRITEBYTECODE, which would otherwise make every run recompile the package.

Run: ``./dev bench cli``. ``ONSTATION_BENCH_CLI_RUNS`` sets the number of runs (default 15).
"""

from __future__ import annotations

import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import onstation
from bench._daemon import in_process, running_daemon

#: Issue 14's target for ``--help`` and ordinary commands, as a multiple of ``python -c pass``.
COMMAND_TARGET = 3.0


def _time(argv: list[str], *, env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"bench: {' '.join(argv[1:])} failed: {done.stderr.strip()}")
    return elapsed


def _fill(onstation_bin: str, env: dict[str, str]) -> None:
    """A small team's ledger: what an operator looks at on an ordinary day."""
    calls: list[list[str]] = []
    for name in ("alpha", "beta", "gamma"):
        calls += [["node", "register", name, "--role", "executor"],
                  ["lease", "acquire", name, "--holder", f"bench {name}"]]  # fmt: skip
    calls.append(["actor", "add", "coord-auth", "--node", "alpha"])
    calls.append(["episode", "open", "alpha", "--objective", "ship it", "--generation", "1"])
    for i in range(12):
        calls.append(["note", "alpha", "--note", f"step {i} done", "--generation", "1"])
    calls.append(["note", "alpha", "--decision", "keep SQLite", "--why", "one host",
                  "--generation", "1"])  # fmt: skip
    for i in range(8):
        calls.append(["effect", "intend", "alpha", "--generation", "1", "--op", "git.push",
                      "--dest", "origin", "--args", f'{{"ref": "main", "n": {i}}}'])  # fmt: skip
    for i in range(4):
        calls.append(["task", "create", f"task {i}", "--owner", "alpha"])
    calls.append(["message", "send", "--from", "beta", "--to", "coord-auth", "--kind", "ACK",
                  "--body", "parser merged", "--generation", "1"])  # fmt: skip
    for argv in calls:
        subprocess.run([onstation_bin, *argv], env=env, check=True, capture_output=True)


#: What is measured: a name and the arguments after ``onstation``.
COMMANDS: list[tuple[str, list[str]]] = [
    ("onstation --help", ["--help"]),
    ("onstation --version", ["--version"]),
    ("node show alpha", ["node", "show", "alpha"]),
    ("node show alpha --json", ["node", "show", "alpha", "--json"]),
    ("node list", ["node", "list"]),
    ("history alpha --limit 20", ["history", "alpha", "--limit", "20"]),
    ("team status", ["team", "status"]),
    ("halts", ["halts"]),
    ("effect list alpha", ["effect", "list", "alpha"]),
    ("lease list alpha", ["lease", "list", "alpha"]),
    ("task list", ["task", "list"]),
    ("message list coord-auth", ["message", "list", "coord-auth"]),
    ("guard alpha (allowed)", ["guard", "alpha", "--generation", "1"]),
    ("note alpha (a write)", ["note", "alpha", "--note", "bench", "--generation", "1"]),
    ("node show --help", ["node", "show", "--help"]),
]


def main() -> None:
    runs = int(os.environ.get("ONSTATION_BENCH_CLI_RUNS", "15"))
    compileall.compile_dir(str(Path(onstation.__file__).parent), quiet=1)
    onstation_bin = str(Path(sys.executable).with_name("onstation"))
    with tempfile.TemporaryDirectory(prefix="onstation-bench-cli-") as scratch:
        env = in_process({**os.environ, "ONSTATION_DB": str(Path(scratch) / "ledger.db")})
        env.pop("ONSTATION_GENERATION", None)
        env.pop("ONSTATION_NODE", None)
        _fill(onstation_bin, env)
        timings: dict[str, list[float]] = {name: [] for name, _ in COMMANDS}
        warm: dict[str, list[float]] = {name: [] for name, _ in COMMANDS}
        python_pass: list[float] = []
        with running_daemon(onstation_bin, env) as daemon:
            cpu_before, served_before = daemon.cpu(), daemon.served()
            # Interleaved, so that a slow moment of the machine touches every row alike.
            for _ in range(runs):
                python_pass.append(_time([sys.executable, "-c", "pass"], env=env))
                for name, argv in COMMANDS:
                    timings[name].append(_time([onstation_bin, *argv], env=env))
                    warm[name].append(_time([onstation_bin, *argv], env=daemon.env))
            daemon_cpu = (daemon.cpu() - cpu_before) / (runs * len(COMMANDS))
            served = daemon.served() - served_before
    base = statistics.median(python_pass)
    print(f"one command, whole process, small team ledger (SQLite), median of {runs}: in its "
          "own process, then handed to the daemon (onstation daemon)")  # fmt: skip
    print(f"  {'python -c pass (baseline)':<26} {base * 1000:7.1f} ms  1.00x python -c pass")
    for name, values in timings.items():
        value = statistics.median(values)
        hot = statistics.median(warm[name])
        ratio, hot_ratio = value / base, hot / base
        verdict = "meets" if hot_ratio <= COMMAND_TARGET else "MISSES"
        print(
            f"  {name:<26} {value * 1000:7.1f} ms {ratio:5.2f}x  | daemon {hot * 1000:6.1f} ms"
            f" {hot_ratio:5.2f}x python -c pass ({verdict} target {COMMAND_TARGET:g}x)"
        )
    print(f"  the daemon served {served} of {runs * len(COMMANDS)} calls; its own CPU (with the "
          f"children that ran them) {daemon_cpu * 1000:.1f} ms a call on average")  # fmt: skip


if __name__ == "__main__":
    main()
