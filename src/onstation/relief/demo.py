"""The main job, shown on a scratch team: ``onstation demo``.

Three fake agents (the shipped ``onstation fake-agent``, real processes that call the real
hooks) work on clones of one scratch git repository: a coordinator ``coord-auth`` and two
executors ``exec-login`` and ``exec-cookie``. The team lead loop (``supervise``) watches the
ledger. ``exec-login`` fills its context to Red; the lead relieves it (brief, fence,
reconcile, capsule, verdict, successor launched and challenged, predecessor shut down,
settlement). ``coord-auth`` reaches its own 70 % threshold and respawns itself (manifest,
``respawn_triggered`` to its spawner, the lead starts its successor). ``exec-cookie`` finishes
in one body. At the end every step is committed exactly once and every push journaled once.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from onstation.harness.adapters import FAKE

_ADDRESS = "demo@onstation.invalid"
GIT_ENV = {"GIT_AUTHOR_NAME": "demo", "GIT_AUTHOR_EMAIL": _ADDRESS,
           "GIT_COMMITTER_NAME": "demo", "GIT_COMMITTER_EMAIL": _ADDRESS}  # fmt: skip


@dataclass(frozen=True)
class Member:
    """One agent of the scratch team and how its fake body behaves."""

    node: str
    role: str
    branch: str
    steps: int
    start_tokens: int
    tokens_per_step: int
    tiers: str
    supervised: bool
    coordinator: str | None = None
    #: The cause of the relief this member must go through (None: it finishes in one body).
    relief: str | None = None
    #: Its first body's think time per step (None: ``STEP_SECONDS``); successors think none.
    think: float | None = None

    @property
    def first_think(self) -> float:
        return STEP_SECONDS if self.think is None else self.think

    def agent_args(self, scratch: Path, *, successor: bool = False) -> list[str]:
        # A successor starts from its brief, not from its predecessor's full context.
        start = SUCCESSOR_START_TOKENS if successor else self.start_tokens
        think = SUCCESSOR_STEP_SECONDS if successor else self.first_think
        args = ["--steps", str(self.steps), "--start-tokens", str(start),
                "--tokens-per-step", str(self.tokens_per_step), "--push-every", "3",
                "--heartbeat", str(HEARTBEAT_SECONDS), "--step-seconds", str(think),
                "--log", str(scratch / f"{self.node}.agent.jsonl")]  # fmt: skip
        if self.coordinator:
            args += ["--coordinator", self.coordinator]
        return args


#: A first body's think time per step (unless its member says otherwise), spread over the
#: step's API calls: it spaces the team out so that the coordinator's respawn is settled
#: before ``exec-login`` reaches Red, and leaves the lead time, between the call that reaches
#: Red and the step's last call, to ask for the brief (the hand-over then comes after that
#: very step, whatever the hooks cost).
STEP_SECONDS = 0.8
#: A successor thinks without pause: no relief is due after it starts, so waiting would
#: only lengthen the run.
SUCCESSOR_STEP_SECONDS = 0.0
#: A beat every 10 s renews a 30 s lease (three beats), and a working body's hooks renew
#: its lease on every call that finds it short anyway. A beat every 0.5 s cost a process
#: start each (about 70 per run) and proved nothing more.
HEARTBEAT_SECONDS = 10.0
#: How long the lead waits for a predecessor to acknowledge its shutdown request. A fake
#: agent never acknowledges (it has handed over and exited by then), so the wait only
#: delays the lead; the request itself is still sent and the report still says so.
SHUTDOWN_WAIT = 0.2
SUCCESSOR_START_TOKENS = 18_000
#: Every process of one demo run carries this in its environment (children inherit it, the
#: successors the relief launches too), so at exit whatever still carries it is the demo's.
RUN_VAR = "ONSTATION_DEMO_RUN"
#: The daemon's switch (``cli.daemon_client.SWITCH_ENV``; the relief layer does not import
#: the interfaces above it).
SWITCH_ENV = "ONSTATION_DAEMON"
#: The lead's look at the ledger (and the demo's at its bodies): SQLite tells nobody of a new
#: row, so this is how soon a Red tier or a finished team is seen. A look costs a few ms.
POLL = 0.1
PROGRESS_SAMPLE = 1.0  # seconds between two looks at the team's progress
TERM_GRACE = 5.0  # seconds a process gets to exit after SIGTERM, before SIGKILL
STOP_ROUNDS = 5  # sweeps for leftovers: each finds what the previous round's victims started

TEAM = [
    # 60 % at start: Red (the coordinator's 70 %) at step 2 of 5. Its hook asks it to hand
    # over at once, so it needs no think time: its respawn is then settled, and the lead
    # free again, well before exec-login reaches Red.
    Member("coord-auth", "coordinator", "coord", 5, 120_000, 10_000, "coordinator", False,
           coordinator="auth:bosun", relief="coordinator self-respawn", think=0.0),
    # Red (33 %) at step 6 of 14, Critical (38 %) only at step 9: the lead has time to ask
    # for a brief while it is at Red, even on a busy machine.
    Member("exec-login", "executor", "login", 14, 50_000, 3_000, "relief", True,
           relief="hull integrity"),
    # Stays Green.
    Member("exec-cookie", "executor", "cookie", 5, 15_000, 5_000, "relief", True),
]  # fmt: skip


def _git(cwd: Path, *args: str) -> str:
    from onstation.harness.evidence import git

    return git(cwd, *args, check=True, env=GIT_ENV)  # a fixed identity for the scratch commits


def _onstation() -> str:
    beside = Path(sys.executable).with_name("onstation")
    return str(beside) if beside.exists() else "onstation"


def run_demo(*, keep: bool, say: Any, stall: float = 120.0) -> dict[str, Any]:
    """Run the scratch team to completion; returns the summary (and prints as it goes).

    There is no overall time budget, which a slow machine would blow while the team is still
    working: the demo waits as long as the team makes progress (steps, transcripts and logs
    growing, ledger events), and gives up only after ``stall`` seconds without any. Every
    process it started, and every process those started (the successors too), is stopped
    through its witness before it returns, on failure, Ctrl-C and SIGTERM as well.
    """
    from onstation.harness.config import write_config
    from onstation.harness.fake_agent import mark_scratch_workspace
    from onstation.harness.install import install
    from onstation.ledger import Ledger
    from onstation.ledger.bodies import HarnessLedger
    from onstation.relief.team import supervise, team_rows

    scratch = Path(tempfile.mkdtemp(prefix="onstation-demo-"))
    db = str(scratch / "ledger.db")
    saved = {k: os.environ.get(k) for k in ("ONSTATION_DB", "ONSTATION_KEYS_DIR", RUN_VAR,
                                            SWITCH_ENV)}  # fmt: skip
    # The demo's hooks use a daemon the user runs but start none: one started by them would
    # outlive the run (it stops after 30 idle minutes), and the run leaves nothing behind.
    if not os.environ.get(SWITCH_ENV):
        os.environ[SWITCH_ENV] = "on"
    os.environ["ONSTATION_DB"] = db
    os.environ["ONSTATION_KEYS_DIR"] = str(scratch / "keys")
    bodies = Bodies(f"{os.getpid()}-{uuid.uuid4().hex}")
    os.environ[RUN_VAR] = bodies.run_id  # inherited by every process of this run
    signals = _Signals()
    try:
        origin = scratch / "origin.git"
        _git(scratch, "init", "-q", "--bare", "-b", "main", str(origin))
        # Each push would start a `git gc --auto` in the origin: one config start saves them.
        _git(origin, "config", "receive.autogc", "false")
        seed = scratch / "seed"
        _git(scratch, "init", "-q", "-b", "main", str(seed))
        (seed / "README.md").write_text("scratch app for the onstation demo\n")
        _git(seed, "add", "README.md")
        _git(seed, "commit", "-q", "-m", "scratch app")
        _git(seed, "remote", "add", "origin", str(origin))
        _git(seed, "push", "-q", "origin", "main")
        say(f"scratch team in {scratch}")
        with Ledger.open(db) as ledger:
            records = HarnessLedger(ledger)
            for member in TEAM:
                spawner = "team-lead" if member.role == "coordinator" else "coord-auth"
                ledger.register_node(member.node, role=member.role, spawner=spawner, by="demo")
                ledger.open_episode(member.node, f"{member.branch}: {member.steps} steps of work")
                clone = scratch / member.node
                # No automatic gc or maintenance after each commit in a repository that lives
                # for one run (two process starts per commit, nothing gained).
                _git(scratch, "clone", "-q", "-c", "gc.auto=0", "-c", "maintenance.auto=false",
                     str(origin), str(clone))  # fmt: skip
                _git(clone, "checkout", "-q", "-b", member.branch)
                # The demo made this clone: its fake agents (and their successors) may work in it.
                mark_scratch_workspace(clone)
                records.bind_workspace(
                    str(clone), member.node, harness=FAKE.session_harness, by="demo"
                )
                install(FAKE.session_harness, project=str(clone), user=False, node=member.node)
                write_config(clone, {"node": member.node, "db": db, "tiers": member.tiers,
                                     "supervised": member.supervised or None})  # fmt: skip
                say(
                    f"  {member.node:<12} {member.role:<12} branch {member.branch}, "
                    f"{member.steps} steps, tiers {member.tiers}"
                    + (" (the lead decides relief)" if member.supervised else " (self-relief)")
                )
        for member in TEAM:
            with (scratch / f"{member.node}-g1.log").open("ab") as log:
                process = subprocess.Popen(
                    [_onstation(), "fake-agent", "--workspace", str(scratch / member.node),
                     "--node", member.node, *member.agent_args(scratch)],
                    cwd=scratch / member.node, stdout=log, stderr=subprocess.STDOUT,
                    env={**os.environ}, start_new_session=True,
                )  # fmt: skip
            bodies.started(member.node, 1, process)
        say("three bodies at work; the team lead is watching the ledger")

        nodes = [m.node for m in TEAM]
        with Ledger.open(db) as ledger:
            progress = Progress(scratch, ledger, stall)

            def finished() -> bool:
                bodies.learn(ledger, nodes)
                return not bodies.alive() and all(
                    (scratch / m.node / "work" / f"step-{m.steps}.txt").exists() for m in TEAM
                )

            def keep_process(outcome: Any) -> None:
                bodies.learn(ledger, nodes)
                if outcome.successor_pid is not None:
                    say(f"  successor of {outcome.node} running as pid {outcome.successor_pid}")

            # The lead's waits are bounded by the same stall window: on a busy machine a brief
            # or a challenge answer takes long, and that is no reason to fail.
            actions = supervise(
                ledger, nodes=nodes, harness="fake", poll=POLL, once=False, max_seconds=None,
                db=db, say=lambda t: say(f"lead: {t}"), brief_wait=stall,
                challenge_wait=stall, shutdown_wait=SHUTDOWN_WAIT,
                launch_args_for={m.node: tuple(m.agent_args(scratch, successor=True))
                                 for m in TEAM},
                on_outcome=keep_process, stop=lambda: finished() or progress.stalled(),
            )  # fmt: skip
            # Successors started by the last relief may still be at work: wait for them too.
            while not finished() and not progress.stalled():
                time.sleep(POLL)
            running = bodies.alive()
            stalled = progress.stalled() and not finished()
            stopped = bodies.stop_all()
            rows = team_rows(ledger, nodes)
            summary = _verify(ledger, scratch)
        summary |= {"actions": actions, "team": rows, "scratch": str(scratch)}
        checks = summary["checks"]
        checks.insert(0, {
            "check": "progress", "node": None, "ok": not stalled,
            "detail": f"no progress for {stall:g} s; still running: {', '.join(running) or '-'}"
            if stalled else "the team finished its work",
        })  # fmt: skip
        checks.insert(1, {
            "check": "bodies exited on their own", "node": None, "ok": not stopped,
            "detail": f"had to stop {len(stopped)}: {', '.join(stopped)}"
            if stopped else "every body exited by itself; none left behind",
        })  # fmt: skip
        summary["failed_checks"] = [c for c in checks if not c["ok"]]
        summary["ok"] = not summary["failed_checks"]
        return summary
    finally:
        signals.hold()  # a second Ctrl-C must not cut the clean-up short
        stopped = bodies.stop_all()  # a second sweep: after an error or an interrupt too
        signals.restore()
        if stopped:
            say(f"stopped {len(stopped)} process(es) of this demo: {', '.join(stopped)}")
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if not keep:
            shutil.rmtree(scratch, ignore_errors=True)


def _now_iso() -> str:
    return datetime.now(UTC).isoformat()


class _Signals:
    """SIGTERM and SIGHUP interrupt the demo as Ctrl-C does, so its clean-up runs (their
    default would end the process there and then, its bodies left running)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        # Handlers can only be set from the main thread; elsewhere the caller's stay.
        self.active = threading.current_thread() is threading.main_thread()
        self.previous: dict[int, Any] = {}
        if self.active:
            self.previous = {sig: signal.getsignal(sig) for sig in self.SIGNALS}
            for sig in (signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, self._interrupt)

    @staticmethod
    def _interrupt(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    def hold(self) -> None:
        """Ignore them while the clean-up runs."""
        for sig, handler in self.previous.items():
            if handler is not None:
                signal.signal(sig, signal.SIG_IGN)

    def restore(self) -> None:
        for sig, handler in self.previous.items():
            if handler is not None:  # None: a handler not set from Python, left as it is
                signal.signal(sig, handler)


class Bodies:
    """Every process of one demo run, known by its process witness, never by a pid alone.

    The bodies the demo starts are witnessed at once; successors are learned from their
    births' launch witnesses in the ledger. Everything else the run started (hooks, git, the
    onstation commands of a body, a successor whose witness never reached the ledger) carries
    ``RUN_VAR`` in its environment, and is found by it at exit.
    """

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.known: dict[tuple[str, int], Any] = {}  # (node, generation) -> ProcessWitness
        self.children: list[subprocess.Popen[bytes]] = []

    def started(self, node: str, generation: int, process: subprocess.Popen[bytes]) -> None:
        from onstation.harness.witness import observe

        self.children.append(process)
        # Our own child keeps its pid until we reap it, so this is the process we started
        # (None if it has already exited).
        self.known[(node, generation)] = observe(
            process.pid, nonce=f"{self.run_id}:{node}:{generation}", observed_at=_now_iso()
        )

    def learn(self, ledger: Any, nodes: list[str]) -> None:
        """Witness the successors the reliefs launched, from their birth records."""
        from onstation.harness.witness import ProcessWitness
        from onstation.ledger.relief_records import ReliefLedger

        relief = ReliefLedger(ledger)
        for node in nodes:
            for generation in range(2, ledger.get_node(node).generation + 1):
                if self.known.get((node, generation)) is not None:
                    continue
                birth = relief.birth(node, generation)
                if birth is not None and birth.launch_witness is not None:
                    seen = ProcessWitness.from_json(birth.launch_witness)
                    self.known[(node, generation)] = seen

    def alive(self) -> list[str]:
        """The bodies whose witness does not say gone (an unverifiable one counts as alive)."""
        from onstation.harness.witness import check

        for child in self.children:
            child.poll()  # reap the ones that exited; the witness says GONE either way
        running = []
        for (node, generation), seen in self.known.items():
            if seen is None:
                continue
            if not check(seen).gone:
                _reap_if_exited_child(seen.pid)
                if check(seen).gone:
                    continue
                running.append(f"{node} generation {generation}")
        return running

    def stop_all(self) -> list[str]:
        """Stop, through their witnesses, every process of this run still there; returns
        what had to be stopped (nothing, when the team finished by itself)."""
        self.alive()  # reaps the bodies that have exited
        stopped = [f"{node} generation {generation} (pid {seen.pid})"
                   for (node, generation), seen in self.known.items()
                   if seen is not None and _stop(seen)]  # fmt: skip
        # Bodies first, then what they left: a body that is gone starts nothing new, and
        # what its children started is found in the next round.
        for _round in range(STOP_ROUNDS):
            found = self._carriers()
            if not found:
                break
            stopped += [f"pid {seen.pid} ({what})" for seen, what in found if _stop(seen)]
        for child in self.children:
            child.poll()
        return stopped

    def _carriers(self) -> list[tuple[Any, str]]:
        """Witnesses of the live processes that carry this run's ``RUN_VAR``."""
        from onstation.harness.witness import check, observe

        needle = f"{RUN_VAR}={self.run_id}".encode()
        found = []
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            pid = int(entry.name)
            try:
                # Witnessed first, read second, checked third: the environment read is then
                # known to be that of the witnessed process, not of one that reused its pid.
                seen = observe(pid, nonce=f"{self.run_id}:sweep", observed_at=_now_iso())
                if seen is None:
                    continue
                with open(f"/proc/{pid}/environ", "rb") as fh:
                    environ = fh.read().split(b"\0")
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    what = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
            except OSError:
                continue  # gone, or another user's: not ours
            if needle in environ and check(seen).alive:
                found.append((seen, what[:120]))
        return found


def _reap_if_exited_child(pid: int) -> None:
    """Reap ``pid`` if it is an exited child of this process.

    The successors a relief launches from this process are its children, and nobody else
    waits for them: unreaped, they stay zombies, which some witness checks cannot tell from
    a hidden live process. An unreaped child's pid cannot be reused, so the pid names it.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    fields = stat[stat.rfind(")") + 1 :].split()
    if len(fields) > 1 and fields[0] == "Z" and fields[1] == str(os.getpid()):
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def _stop(seen: Any) -> bool:
    """SIGTERM, then SIGKILL, through the witness; True when it had to be stopped."""
    from onstation.harness.witness import signal_if_match, wait_gone

    if not signal_if_match(seen, signal.SIGTERM).signalled:
        return False  # gone, or not provably that process: never signalled
    if not wait_gone(seen, TERM_GRACE):
        signal_if_match(seen, signal.SIGKILL)
        wait_gone(seen, TERM_GRACE)
    return True


class Progress:
    """A deadline that moves on while the team makes progress: it expires only after
    ``stall`` seconds in which no step file, transcript, log or ledger event was added."""

    def __init__(self, scratch: Path, ledger: Any, stall: float) -> None:
        self.scratch = scratch
        self.ledger = ledger
        self.stall = stall
        self.mark: tuple[int, ...] | None = None
        self.last = time.monotonic()
        self.sampled = 0.0

    def _sample(self) -> tuple[int, ...]:
        files = [*self.scratch.glob("*.jsonl"), *self.scratch.glob("*.log"),
                 *self.scratch.glob("*/.bridge/transcripts/*.jsonl")]  # fmt: skip
        size = 0
        for path in files:
            with contextlib.suppress(OSError):  # a file removed between glob and stat
                size += path.stat().st_size
        steps = sum(len(list((self.scratch / m.node / "work").glob("step-*.txt"))) for m in TEAM)
        last = self.ledger.history(limit=1)
        return steps, size, last[-1].seq if last else 0

    def stalled(self) -> bool:
        now = time.monotonic()
        if now - self.sampled >= PROGRESS_SAMPLE:
            self.sampled = now
            mark = self._sample()
            if mark != self.mark:
                self.mark, self.last = mark, now
        return now - self.last > self.stall


def _verify(ledger: Any, scratch: Path) -> dict[str, Any]:
    """Every step committed exactly once, nothing ambiguous, the expected reliefs settled;
    each node's facts, and one named check per rule and node."""
    from onstation.ledger.relief_records import ReliefLedger

    per_node: dict[str, Any] = {}
    checks: list[dict[str, Any]] = []
    for member in TEAM:
        clone = scratch / member.node
        log = _git(clone, "log", "--format=%s", "--name-only", "main..HEAD")
        files = [line for line in log.splitlines() if line.startswith("work/step-")]
        effects = ledger.effects(member.node)
        pushes = [e for e in effects if e.operation == "git.push"]
        per_node[member.node] = {
            "steps": member.steps,
            "commits": len(files),
            "each_step_once": sorted(files) == sorted(
                f"work/step-{n}.txt" for n in range(1, member.steps + 1)
            ),
            "generation": ledger.get_node(member.node).generation,
            "pushes_committed": sum(e.state.value == "COMMITTED" for e in pushes),
            "ambiguous": sum(e.state.value == "AMBIGUOUS" for e in effects),
            "reliefs": [
                {"relief_id": r.relief_id, "cause": r.cause, "state": r.state,
                 "verdict": r.verdict, "from": r.from_generation, "to": r.to_generation,
                 "report": r.report_path}
                for r in ReliefLedger(ledger).reliefs(member.node)
            ],
        }  # fmt: skip
        checks += _checks(member, per_node[member.node])
    return {"nodes": per_node, "checks": checks}


def _checks(member: Member, facts: dict[str, Any]) -> list[dict[str, Any]]:
    """The named checks of one member: each says what it found, pass or fail."""
    reliefs = facts["reliefs"]
    unsettled = [r for r in reliefs if r["state"] != "SETTLED"]
    if member.relief is None:
        relief_ok = not reliefs
        relief = "finished in one body" if relief_ok else f"{len(reliefs)} unexpected relief(s)"
    else:
        expected = [r for r in reliefs if member.relief in str(r["cause"])]
        relief_ok = bool(expected) and not unsettled
        relief = (f"{len(expected)} {member.relief} relief(s), "
                  f"{len(reliefs) - len(unsettled)} of {len(reliefs)} settled")  # fmt: skip
    return [
        {"check": "each step committed exactly once", "node": member.node,
         "ok": facts["each_step_once"] and facts["commits"] == member.steps,
         "detail": f"{facts['commits']}/{member.steps} steps committed"},
        {"check": "nothing ambiguous", "node": member.node, "ok": facts["ambiguous"] == 0,
         "detail": f"{facts['ambiguous']} ambiguous effect(s)"},
        {"check": "relieved as planned", "node": member.node, "ok": relief_ok,
         "detail": relief},
    ]  # fmt: skip
