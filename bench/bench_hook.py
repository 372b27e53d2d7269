"""Whole-process time of every hook event, the status line and the heartbeat.

A Claude Code hook runs as a new process at every event (after every tool call, before it,
at every prompt and stop), the status line after every assistant message, and a running
body's heartbeat (``onstation lease renew``) every few seconds. This measures each installed
command end to end (interpreter start-up, imports, the ledger, the incremental read of a
200 MB transcript) against two baselines in the same run: the interpreter's own start-up
(``python -c pass`` with the same interpreter) and a single ``tail -c 65536`` of the
transcript. Each is printed with its ratio to ``python -c pass`` and the issue 14 target
(every hook event and the status line at most 1.5x; the heartbeat and ordinary commands at
most 3x); the run never fails on a target, it says MEETS or MISSES.

Each workspace is a git repository with one commit, as a session's workspace is (its first
SessionStart records the commit its generation started from).

Each hook and status-line call runs the command ``onstation install claude-code`` wrote
(``PYTHON -S .../onstation/cli/hook_launcher.py hook claude-code EVENT``), without the shell
the host puts before it (its cost is the host's either way). A session's first calls
(SessionStart, the first PostToolUse) and its SessionEnd happen once per session: they are
timed on 15 fresh sessions each (with 7, a row's median moved by up to 0.3x between runs),
and their rows give the median, held against a ``python -c pass`` timed beside them (twice
per session) rather than against the steady calls' baseline, timed minutes later: a slow
moment of the machine then touches both alike.

Bytecode is compiled first (``compileall``), as a normal install has it; this machine sets
PYTHONDONTWRITEBYTECODE, which would otherwise make every run recompile the package.

Each row gives the median wall time and, beside it, the median CPU time (user + system) of
the calling process: on a loaded machine the wall time mostly measures the wait for a core,
the CPU time what the command itself costs (with the daemon, the caller's share only).

Every row is measured twice: on an SQLite ledger, then on a PostgreSQL one (a schema of its
own on ``ONSTATION_BENCH_PG``, default the local test database; the daemon started with
``--postgres``, as for such a ledger). Each is one ledger for every workspace timed, each
workspace with an identity and a session of its own: as a user's sessions share the default
SQLite file, and a fleet's agents one database. So a session's first call finds the ledger
that its daemon's spare opened (SQLite) or connected to (PostgreSQL) ahead, for the call
before it, as it would in use. Each call on a PostgreSQL ledger opens a server connection
of its own (a daemon's spare makes it ahead).

Run: ``./dev bench hook``. ``ONSTATION_BENCH_HOOK_MB`` sets the transcript size (default 200).
"""

from __future__ import annotations

import compileall
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import onstation
from bench._daemon import in_process, running_daemon

RUNS = 25
#: Fresh worlds on which a session's first calls (SessionStart, the first PostToolUse) are
#: timed: the median of these.
FIRSTS = 15
#: Issue 14's targets, as multiples of ``python -c pass``.
HOOK_TARGET = 1.5
COMMAND_TARGET = 3.0


def _assistant(turn: int, tokens: int) -> str:
    usage = {"input_tokens": 3, "cache_creation_input_tokens": 400,
             "cache_read_input_tokens": tokens - 403, "output_tokens": 50}  # fmt: skip
    return json.dumps({
        "type": "assistant", "isSidechain": False, "uuid": f"u{turn}", "requestId": f"r{turn}",
        "message": {"id": f"m{turn}", "role": "assistant", "model": "claude-sonnet-4-5",
                    "content": [{"type": "text", "text": "ok"}], "usage": usage},
    }) + "\n"  # fmt: skip


def _make_transcript(path: Path, megabytes: int) -> None:
    filler = json.dumps({
        "type": "user", "isSidechain": False, "uuid": "f",
        "message": {"role": "user", "content": [{"type": "tool_result", "content": "x" * 900}]},
    }) + "\n"  # fmt: skip
    block = filler * 1024
    with path.open("w") as fh:
        written = 0
        while written < megabytes * 1024 * 1024:
            fh.write(block)
            written += len(block)
        fh.write(_assistant(0, 20_000))


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _time(argv: list[str], *, stdin: str = "", env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system) of one whole process."""
    cpu = _children_cpu()
    start = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"bench: {argv[0]} failed: {done.stderr.strip()}")
    return elapsed, _children_cpu() - cpu


def _median(runs: list[tuple[float, float]]) -> tuple[float, float]:
    """The median wall time and the median CPU time of some runs."""
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


class _Ledgers:
    """Migrated, empty PostgreSQL ledgers, one schema each, dropped at :meth:`drop` (the
    run uses one, shared by every world, as one database serves a fleet's agents)."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.schemas: list[str] = []

    def new(self) -> str:
        from onstation.ledger import open_backend

        schema = f"bench_hook_{uuid.uuid4().hex[:12]}"
        url = f"{self.base}{'&' if '?' in self.base else '?'}schema={schema}"
        self.schemas.append(schema)
        backend = open_backend(url, require_migrated=False)
        try:
            backend.migrate()
        finally:
            backend.close()
        return url

    def drop(self) -> None:
        import psycopg

        with psycopg.connect(self.base, autocommit=True) as conn:
            for schema in self.schemas:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


class _World:
    """One scratch workspace with the hooks installed, bound to an identity of its own in the
    backend's one ledger, with a session of its own and the shared 200 MB transcript."""

    def __init__(
        self, root: Path, onstation_bin: str, env: dict[str, str], transcript: Path, db: str,
    ) -> None:  # fmt: skip
        self.project = root / "project"
        self.project.mkdir(parents=True)
        # A git repository with one commit, as a session's workspace is: its first
        # SessionStart records the generation's base (read from the repository's files).
        who = ["-c", "user.name=bench", "-c", "user.email=bench@example.org"]
        for words in (["init", "-q"], [*who, "commit", "-q", "--allow-empty", "-m", "start"]):
            subprocess.run(["git", "-C", str(self.project), *words], check=True,
                           capture_output=True)  # fmt: skip
        self.env = {**env, "ONSTATION_DB": db}
        # Names of this world's own: every world of a backend shares its one ledger.
        self.node = f"bench-{root.name}"
        self.session = f"bench-session-{root.name}"
        subprocess.run(
            [onstation_bin, "install", "claude-code", "--project", str(self.project), "--node",
             self.node], env=self.env, check=True, capture_output=True,
        )  # fmt: skip
        self.transcript = transcript
        # The commands as installed (the host runs them through a shell, whose cost is the
        # host's either way): the program words before "hook" / "statusline".
        settings = json.loads((self.project / ".claude" / "settings.local.json").read_text())
        words = shlex.split(settings["hooks"]["Stop"][-1]["hooks"][0]["command"])
        self.program = words[: words.index("hook")]
        # The heartbeat is a launched body's (the fake agent's, a stub's), not a hook-driven
        # session's: measured on a body of its own, so that its one-hour lease never cuts
        # short the session lease the hooks keep (which would send every hook to renew it).
        self.beat = f"beat-{root.name}"
        for argv in (["node", "register", self.beat], ["lease", "acquire", self.beat,
                                                       "--holder", "bench heartbeat"]):  # fmt: skip
            subprocess.run([onstation_bin, *argv], env=self.env, check=True, capture_output=True)

    def argv(self, args: list[str]) -> list[str]:
        """A call's whole argument vector: the installed program unless it names its own
        (``{beat}``: this world's heartbeat identity)."""
        if os.path.isabs(args[0]):
            return [self.beat if a == "{beat}" else a for a in args]
        return [*self.program, *args]

    def payload(self, event: str, **extra: object) -> str:
        return json.dumps({"session_id": self.session, "cwd": str(self.project),
                           "transcript_path": str(self.transcript), "hook_event_name": event,
                           **extra})  # fmt: skip

    def status(self) -> str:
        return json.dumps({
            "session_id": self.session, "cwd": str(self.project),
            "transcript_path": str(self.transcript),
            "model": {"id": "claude-sonnet-4-5", "display_name": "Sonnet"},
            "context_window": {"context_window_size": 200000, "used_percentage": 10.0},
        })  # fmt: skip

    def stdins(self, turn: int) -> dict[str, str]:
        with self.transcript.open("a") as fh:
            fh.write(_assistant(turn, 20_000 + turn * 10))
        return {
            "hook PostToolUse (Read)": self.payload("PostToolUse", tool_name="Read",
                                                    tool_input={}, tool_use_id=f"t{turn}"),
            "hook PreToolUse (Edit)": self.payload("PreToolUse", tool_name="Edit",
                                                   tool_input={}, tool_use_id=f"p{turn}"),
            "hook PreToolUse (Bash ls)": self.payload("PreToolUse", tool_name="Bash",
                                                      tool_input={"command": "ls"},
                                                      tool_use_id=f"b{turn}"),
            "hook UserPromptSubmit": self.payload("UserPromptSubmit", prompt="go on"),
            "hook Stop": self.payload("Stop", stop_hook_active=False),
            "statusline": self.status(),
            "lease renew (heartbeat)": "",
        }  # fmt: skip


Timings = dict[str, list[tuple[float, float]]]


def main() -> None:
    megabytes = int(os.environ.get("ONSTATION_BENCH_HOOK_MB", "200"))
    compileall.compile_dir(str(Path(onstation.__file__).parent), quiet=1)
    with tempfile.TemporaryDirectory(prefix="onstation-bench-hook-") as scratch:
        transcript = Path(scratch) / "session.jsonl"
        _make_transcript(transcript, megabytes)
        _measure(Path(scratch) / "sqlite", megabytes, transcript, None)
        base = os.environ.get("ONSTATION_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")
        ledgers = _Ledgers(base)
        try:
            url = ledgers.new()  # and whether a server answers
        except Exception as exc:
            print(f"postgres: skipped: {str(exc).splitlines()[0]}")
            return
        try:
            _measure(Path(scratch) / "postgres", megabytes, transcript, url)
        finally:
            ledgers.drop()


def _measure(scratch: Path, megabytes: int, transcript: Path, postgres_url: str | None) -> None:
    """Every row, on an SQLite ledger (``postgres_url`` None) or on the PostgreSQL one: one
    ledger for every world, as a user's sessions share theirs (the default SQLite file, or
    a fleet's database), so that a session's first call finds what its daemon opened
    ahead for the call before it."""
    onstation_bin = str(Path(sys.executable).with_name("onstation"))
    # Hook and status-line calls: the arguments after the installed program (each world's
    # own, read from its settings); the heartbeat is the console script, as a body runs it.
    hook = ["hook", "claude-code"]
    calls: dict[str, list[str]] = {
        "hook PostToolUse (Read)": [*hook, "PostToolUse"],
        "hook PreToolUse (Edit)": [*hook, "PreToolUse"],
        "hook PreToolUse (Bash ls)": [*hook, "PreToolUse"],
        "hook UserPromptSubmit": [*hook, "UserPromptSubmit"],
        "hook Stop": [*hook, "Stop"],
        "statusline": ["statusline"],
        "lease renew (heartbeat)": [onstation_bin, "lease", "renew", "{beat}", "--generation", "1"],
    }
    base_env = in_process(dict(os.environ))
    postgres = postgres_url is not None
    db = str(scratch / "ledger.db") if postgres_url is None else postgres_url
    scratch.mkdir(parents=True)
    own = _World(scratch / "own", onstation_bin, base_env, transcript, db)
    with running_daemon(onstation_bin, base_env, postgres=postgres) as daemon:
        warm = _World(scratch / "warm", onstation_bin, daemon.env, transcript, db)
        worlds = (("own", own), ("daemon", warm))
        # A session's first calls happen once per world: timed on FIRSTS fresh worlds
        # each (the same transcript), so that their rows are medians too, not one sample.
        firsts = {label: [world] for label, world in worlds}
        for n in range(1, FIRSTS):
            for label, world in worlds:
                firsts[label].append(_World(
                    scratch / f"{label}-{n}", onstation_bin, world.env, transcript,
                    db))  # fmt: skip
        cpu_before, served_before = daemon.cpu(), daemon.served()
        timings: dict[str, Timings] = {w: {name: [] for name in calls} for w, _ in worlds}
        once: dict[str, Timings] = {w: {} for w, _ in worlds}
        firsts_pass: list[tuple[float, float]] = []
        for n in range(FIRSTS):
            firsts_pass.append(_time([sys.executable, "-c", "pass"], env=base_env))
            for label, _ in worlds:
                first = firsts[label][n]
                once[label].setdefault("hook SessionStart (first, admits)", []).append(
                    _time([*first.program, *hook, "SessionStart"], env=first.env,
                          stdin=first.payload("SessionStart", source="startup")))  # fmt: skip
                once[label].setdefault("hook PostToolUse (first, tail read)", []).append(
                    _time([*first.program, *hook, "PostToolUse"], env=first.env,
                          stdin=first.payload(
                        "PostToolUse", tool_name="Read", tool_input={},
                        tool_use_id="t0")))  # fmt: skip
                if n:  # the main worlds' sessions end after their steady calls, below
                    once[label].setdefault("hook SessionEnd", []).append(_time(
                        [*first.program, *hook, "SessionEnd"], env=first.env,
                        stdin=first.payload("SessionEnd", reason="other")))  # fmt: skip
            firsts_pass.append(_time([sys.executable, "-c", "pass"], env=base_env))
        python_pass: list[tuple[float, float]] = []
        tail: list[tuple[float, float]] = []
        for turn in range(1, RUNS + 1):
            python_pass.append(_time([sys.executable, "-c", "pass"], env=base_env))
            tail.append(_time(["tail", "-c", "65536", str(own.transcript)], env=base_env))
            # Interleaved: a slow moment of the machine touches both columns alike.
            stdins = {label: world.stdins(turn) for label, world in worlds}
            for name, argv in calls.items():
                for label, world in worlds:
                    timings[label][name].append(
                        _time(world.argv(argv), env=world.env, stdin=stdins[label][name])
                    )
        for label, world in worlds:
            once[label].setdefault("hook SessionEnd", []).append(_time(
                [*world.program, *hook, "SessionEnd"], env=world.env,
                stdin=world.payload("SessionEnd", reason="other")))  # fmt: skip
            once[label]["onstation --help"] = [
                _time([onstation_bin, "--help"], env=world.env) for _ in range(5)
            ]
        served = daemon.served() - served_before
        total = RUNS * len(calls) + 3 * FIRSTS
        daemon_cpu = (daemon.cpu() - cpu_before) / total
    _report("postgres" if postgres else "sqlite", megabytes, python_pass, firsts_pass, tail,
            timings, once, served, total, daemon_cpu)  # fmt: skip


#: The rows timed in the session-firsts phase, held against the baseline timed beside them.
FIRSTS_ROWS = ("hook SessionStart (first, admits)", "hook PostToolUse (first, tail read)",
               "hook SessionEnd")  # fmt: skip


def _report(
    backend: str, megabytes: int, python_pass: list[tuple[float, float]],
    firsts_pass: list[tuple[float, float]], tail: list[tuple[float, float]],
    timings: dict[str, Timings], once: dict[str, Timings], served: int, total: int,
    daemon_cpu: float,
) -> None:  # fmt: skip
    base, base_cpu = _median(python_pass)
    firsts_base, firsts_base_cpu = _median(firsts_pass)
    print(f"{backend} ledger: one call, whole process, {megabytes} MB transcript, median of "
          f"{RUNS}; each in its own process, then handed to the daemon (onstation daemon); wall "
          "time, and CPU time (user + system) of the calling process")  # fmt: skip
    print(f"  {'python -c pass (baseline)':<36} {base * 1000:7.1f} ms  1.00x  | cpu "
          f"{base_cpu * 1000:5.1f} ms")  # fmt: skip
    tail_wall = _median(tail)[0]
    print(
        f"  {'tail -c 65536 transcript':<36} {tail_wall * 1000:7.1f} ms  {tail_wall / base:4.2f}x"
    )
    names = list(timings["own"]) + list(once["own"])
    for name in names:
        if name == FIRSTS_ROWS[0]:
            print(f"  {'python -c pass (firsts baseline)':<36} {firsts_base * 1000:7.1f} ms  "
                  f"1.00x  | cpu {firsts_base_cpu * 1000:5.1f} ms (timed beside the session "
                  "firsts and SessionEnd below, their baseline)")  # fmt: skip
        baseline = firsts_base if name in FIRSTS_ROWS else base
        target = COMMAND_TARGET if name in ("lease renew (heartbeat)", "onstation --help") else (
            HOOK_TARGET)  # fmt: skip
        own = _median(timings["own"].get(name) or once["own"][name])
        warm = _median(timings["daemon"].get(name) or once["daemon"][name])
        ratio, warm_ratio = own[0] / baseline, warm[0] / baseline
        verdict = "meets" if warm_ratio <= target else "MISSES"
        print(f"  {name:<36} {own[0] * 1000:6.1f} ms {ratio:5.2f}x cpu {own[1] * 1000:5.1f} | "
              f"daemon {warm[0] * 1000:6.1f} ms {warm_ratio:5.2f}x cpu {warm[1] * 1000:4.1f} "
              f"({verdict} target {target:g}x)")  # fmt: skip
    print(f"  the daemon served {served} of its {total} calls; its own CPU (with the children "
          f"that ran them) {daemon_cpu * 1000:.1f} ms a call on average")  # fmt: skip


if __name__ == "__main__":
    main()
