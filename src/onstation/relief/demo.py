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

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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

    def agent_args(self, scratch: Path, *, successor: bool = False) -> list[str]:
        # A successor starts from its brief, not from its predecessor's full context.
        start = SUCCESSOR_START_TOKENS if successor else self.start_tokens
        args = ["--steps", str(self.steps), "--start-tokens", str(start),
                "--tokens-per-step", str(self.tokens_per_step), "--push-every", "3",
                "--heartbeat", "0.5", "--step-seconds", str(STEP_SECONDS),
                "--log", str(scratch / f"{self.node}.agent.jsonl")]  # fmt: skip
        if self.coordinator:
            args += ["--coordinator", self.coordinator]
        return args


STEP_SECONDS = 0.8
SUCCESSOR_START_TOKENS = 18_000

TEAM = [
    # 60 % at start: Red (the coordinator's 70 %) at step 2 of 5.
    Member("coord-auth", "coordinator", "coord", 5, 120_000, 10_000, "coordinator", False,
           coordinator="auth:bosun"),
    # Red (33 %) at step 6 of 14, Critical (38 %) only at step 9: the lead has time to ask
    # for a brief while it is at Red, even on a busy machine.
    Member("exec-login", "executor", "login", 14, 50_000, 3_000, "relief", True),
    # Stays Green.
    Member("exec-cookie", "executor", "cookie", 5, 15_000, 5_000, "relief", True),
]  # fmt: skip


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV}, check=True)  # fmt: skip
    return done.stdout.strip()


def _onstation() -> str:
    beside = Path(sys.executable).with_name("onstation")
    return str(beside) if beside.exists() else "onstation"


def run_demo(*, keep: bool, say: Any, timeout: float = 120.0) -> dict[str, Any]:
    """Run the scratch team to completion; returns the summary (and prints as it goes)."""
    from onstation.harness.config import write_config
    from onstation.harness.install import install
    from onstation.ledger import Ledger
    from onstation.ledger.bodies import HarnessLedger
    from onstation.relief.team import supervise, team_rows

    scratch = Path(tempfile.mkdtemp(prefix="onstation-demo-"))
    db = str(scratch / "ledger.db")
    saved = {k: os.environ.get(k) for k in ("ONSTATION_DB", "ONSTATION_KEYS_DIR")}
    os.environ["ONSTATION_DB"] = db
    os.environ["ONSTATION_KEYS_DIR"] = str(scratch / "keys")
    processes: list[subprocess.Popen[bytes]] = []
    try:
        origin = scratch / "origin.git"
        _git(scratch, "init", "-q", "--bare", "-b", "main", str(origin))
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
                _git(scratch, "clone", "-q", str(origin), str(clone))
                _git(clone, "checkout", "-q", "-b", member.branch)
                records.bind_workspace(str(clone), member.node, harness="claude-code", by="demo")
                install("claude-code", project=str(clone), user=False, node=member.node)
                write_config(clone, {"node": member.node, "db": db, "tiers": member.tiers,
                                     "supervised": member.supervised or None})  # fmt: skip
                say(
                    f"  {member.node:<12} {member.role:<12} branch {member.branch}, "
                    f"{member.steps} steps, tiers {member.tiers}"
                    + (" (the lead decides relief)" if member.supervised else " (self-relief)")
                )
        for member in TEAM:
            log = (scratch / f"{member.node}-g1.log").open("ab")
            processes.append(subprocess.Popen(
                [_onstation(), "fake-agent", "--workspace", str(scratch / member.node),
                 "--node", member.node, *member.agent_args(scratch)],
                cwd=scratch / member.node, stdout=log, stderr=subprocess.STDOUT,
                env={**os.environ}, start_new_session=True,
            ))  # fmt: skip
        say("three bodies at work; the team lead is watching the ledger")

        def done() -> bool:
            if any(p.poll() is None for p in processes):
                return False
            return all((scratch / m.node / "work" / f"step-{m.steps}.txt").exists() for m in TEAM)

        deadline = time.monotonic() + timeout

        def stop() -> bool:
            return done() or time.monotonic() > deadline

        def keep_process(outcome: Any) -> None:
            if outcome.successor_pid is not None:
                say(f"  successor of {outcome.node} running as pid {outcome.successor_pid}")

        with Ledger.open(db) as ledger:
            actions = supervise(
                ledger, nodes=[m.node for m in TEAM], harness="fake", poll=0.3, once=False,
                max_seconds=timeout, db=db, say=lambda t: say(f"lead: {t}"), brief_wait=20.0,
                challenge_wait=30.0, shutdown_wait=1.0,
                launch_args_for={
                    m.node: tuple(m.agent_args(scratch, successor=True)) for m in TEAM
                },
                on_outcome=keep_process, stop=stop,
            )  # fmt: skip
            # Successors were started by the reliefs; wait for the work to be finished.
            while not all((scratch / m.node / "work" / f"step-{m.steps}.txt").exists()
                          for m in TEAM) and time.monotonic() < deadline:  # fmt: skip
                time.sleep(0.3)
            _wait_bodies(ledger, scratch, deadline)
            rows = team_rows(ledger, [m.node for m in TEAM])
            summary = _verify(ledger, scratch)
        summary |= {"actions": actions, "team": rows, "scratch": str(scratch)}
        return summary
    finally:
        for process in processes:
            if process.poll() is None:
                process.terminate()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if not keep:
            shutil.rmtree(scratch, ignore_errors=True)


def _wait_bodies(ledger: Any, scratch: Path, deadline: float) -> None:
    """Wait until every launched successor process has exited (by witness, never by pid)."""
    from onstation.harness import witness as witnesses
    from onstation.ledger.relief_records import ReliefLedger

    relief = ReliefLedger(ledger)
    for member in TEAM:
        for generation in range(2, ledger.get_node(member.node).generation + 1):
            birth = relief.birth(member.node, generation)
            if birth is None or birth.launch_witness is None:
                continue
            expected = witnesses.ProcessWitness.from_json(birth.launch_witness)
            witnesses.wait_gone(expected, max(0.0, deadline - time.monotonic()))


def _verify(ledger: Any, scratch: Path) -> dict[str, Any]:
    """Every step committed exactly once, every push journaled once, nothing ambiguous."""
    from onstation.ledger.relief_records import ReliefLedger

    per_node: dict[str, Any] = {}
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
    return {"nodes": per_node}
