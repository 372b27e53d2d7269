"""One seeded simulation run, many seeds, and the planted bugs that prove the checks bite.

``simulate(seed)`` builds a world (clock, bodies, faults) around a real SQLite ledger and the
real relief code, runs it for ``hours`` of simulated time with a supervisor per identity and a
simulated operator, and checks every invariant after every step. The same seed gives the same
trace and the same ledger history (random ids inside onstation are not part of either).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onstation.core.effects import EffectState
from onstation.core.errors import Conflict, OnstationError, StaleGeneration
from onstation.core.governor import RespawnPolicy
from onstation.harness.adapters import FAKE
from onstation.harness.evidence import git
from onstation.harness.git_kept import GitBatches, RemoteAnswers
from onstation.ledger import Ledger
from onstation.ledger.bodies import HarnessLedger
from onstation.ledger.faults import PLANTS, planted
from onstation.sim.invariants import Invariants
from onstation.sim.world import BODY_TTL, FaultRates, SimLauncher, World

#: Counters every multi-seed run must hit at least once ("sometimes" assertions).
REQUIRED_COVERAGE = (
    "breaker_opened",
    "paused_body_fenced",
    "effect_ambiguous",
    "birth_failed",
    "halt_honoured",
    "abandoned_relief_taken_over",
)


OPERATOR = "sim-operator"
SUPERVISOR = "sim-supervisor"
CHECK_EVERY = 600.0  # seconds between a supervisor's looks at one identity
GIT_ENV = {"GIT_AUTHOR_NAME": "sim", "GIT_AUTHOR_EMAIL": "sim@onstation",
           "GIT_COMMITTER_NAME": "sim", "GIT_COMMITTER_EMAIL": "sim@onstation",
           "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
           "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}  # fmt: skip


class _ControllerCrash(BaseException):
    """The simulated controller process dies: nothing after this runs in it."""


class _Stop(Exception):
    """An invariant broke: end the run here (the trace up to this point is the evidence)."""


@dataclass
class SimResult:
    """What one seed did and whether every invariant held."""

    seed: int
    agents: int
    hours: float
    plant: str | None
    violations: list[str]
    coverage: dict[str, int]
    trace: list[str]
    ledger_digest: str
    events: int
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Every invariant held and the run did not crash."""
        return not self.violations and self.error is None

    def replay_command(self) -> str:
        """The exact command that replays this run."""
        cmd = f"onstation simulate --seed {self.seed} --agents {self.agents} --hours {self.hours:g}"
        return cmd + (f" --plant {self.plant}" if self.plant else "")

    def minimal_trace(self, lines: int = 40) -> list[str]:
        """The last steps before the failure (the whole trace is kept in ``trace``)."""
        return self.trace[-lines:]

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` form."""
        return {"seed": self.seed, "ok": self.ok, "agents": self.agents, "hours": self.hours,
                "plant": self.plant, "violations": self.violations, "error": self.error,
                "coverage": self.coverage, "events": self.events,
                "ledger_digest": self.ledger_digest, "replay": self.replay_command(),
                "trace": self.minimal_trace() if not self.ok else []}  # fmt: skip


# --------------------------------------------------------------------------------------------
# one seed


def _scratch_root() -> str | None:
    # tmpfs makes the ledger's fsyncs nearly free; the results are the same on disk.
    shm = "/dev/shm"  # noqa: S108 - a private mkdtemp inside it, removed after the run
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None


@contextlib.contextmanager
def _keys_dir(path: Path) -> Iterator[None]:
    before = os.environ.get("ONSTATION_KEYS_DIR")
    os.environ["ONSTATION_KEYS_DIR"] = str(path)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("ONSTATION_KEYS_DIR", None)
        else:
            os.environ["ONSTATION_KEYS_DIR"] = before


@dataclass(frozen=True)
class _Template:
    """A directory's contents, read once: its subdirectories, and its files with their bytes
    and permission bits."""

    directories: tuple[str, ...]
    files: tuple[tuple[str, bytes, int], ...]

    @classmethod
    def read(cls, root: Path) -> _Template:
        """Everything under ``root`` (no symlinks are expected there: refused)."""
        directories: list[str] = []
        files: list[tuple[str, bytes, int]] = []
        for path in sorted(root.rglob("*")):
            name = path.relative_to(root).as_posix()
            if path.is_symlink():
                raise ValueError(f"template {root}: {name} is a symlink")
            if path.is_dir():
                directories.append(name)
            else:
                files.append((name, path.read_bytes(), path.stat().st_mode & 0o777))
        return cls(tuple(directories), tuple(files))

    def write(self, root: Path) -> None:
        """A copy of the contents under ``root`` (a new directory)."""
        root.mkdir(mode=0o700)
        for name in self.directories:
            (root / name).mkdir(mode=0o700)
        for name, data, mode in self.files:
            target = root / name
            target.write_bytes(data)
            target.chmod(mode)


@functools.cache
def _templates() -> tuple[_Template, _Template]:
    """(a git repository with its one empty commit, an empty migrated ledger), each made once
    per process by git and by the ledger itself, then copied for every seed: a seed's
    repository and ledger are its own, real files, byte for byte what ``git init`` + ``git
    commit`` and the ledger's migrations make, without running them again (issue 14)."""
    with tempfile.TemporaryDirectory(prefix="onstation-sim-template-", dir=_scratch_root()) as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "sim"]):
            git(repo, *args, check=True, env=GIT_ENV)  # a fixed identity and date: same hashes
        ledger_dir = Path(tmp) / "ledger"
        ledger_dir.mkdir(mode=0o700)
        Ledger.open(str(ledger_dir / "ledger.db")).close()  # closing checkpoints the WAL
        return _Template.read(repo), _Template.read(ledger_dir)


@functools.cache
def _remote_answers() -> RemoteAnswers:
    """The ``git remote -v`` answers this process's seeds share: every seed's repository is a
    copy of one template, so one answer, proven as :class:`RemoteAnswers` proves it, serves
    them all (issue 14: a seed's new repository is younger than the proof's settling margin
    for most of its life, so each of its reliefs asked git again)."""
    return RemoteAnswers()


def _git_repo(path: Path, agents: list[str]) -> None:
    _templates()[0].write(path)
    for name in agents:
        (path / name).mkdir()


class _Run:
    """The supervisor, the operator and the checks of one seed."""

    def __init__(self, seed: int, agents: int, hours: float, rates: FaultRates | None,
                 root: Path) -> None:  # fmt: skip
        self.policy = RespawnPolicy()
        self.world = World(seed, rates or FaultRates.draw(_fault_random(seed)))
        self.hours = hours
        self.root = root
        self.db = str(root / "ledger.db")
        self.nodes = [f"agent-{i}" for i in range(1, agents + 1)]
        self.checks = Invariants(self.policy)
        self.next_try: dict[str, float] = {}
        self.abandoned: set[str] = set()  # identities with a relief left open by a crash
        # The controller's kept git cat-file per workspace and its git status answers kept
        # under a watch of the tree, shared by its reliefs (each started processes of its
        # own: issue 14); gone with the controller's process.
        self.git = GitBatches(remotes=_remote_answers(), keep_statuses=True)
        w = self.world
        self.ledger = self._open()
        w.body_ledger = self._open()
        # The racing supervisor's own connection, opened at its first race (most seeds'
        # reliefs are never raced: an open and a close of a ledger a seed spared).
        self.rival: Ledger | None = None
        w.on_step = self._step
        w.on_denial = self._denied
        w.on_stale_accept = lambda n, g, what: self.checks.fail(
            "no-stale-write", f"{what} by {n}@{g} accepted")  # fmt: skip
        w.supervisors_token = self._supervisors_writes
        self._reported = 0

    def _open(self) -> Ledger:
        # The sim relieves bodies (not coordinators): births per window is the cap it proves.
        return Ledger.open(
            self.db, clock=self.world.clock, respawn_policy=self.policy, relief_policy=self.policy
        )

    # -- checks -----------------------------------------------------------------------------

    def _writes(self) -> tuple[object, ...] | None:
        """The rows each of this run's connections changed so far (the supervisors', see
        :meth:`_supervisors_writes`, and the bodies'): every write of a seed goes through one
        of them (its ledger lives in a private directory), so equal counts mean nothing was
        committed. Its own token for the checks: the ledger's (PRAGMA data_version) was a
        statement on every one of a seed's ~300 steps. None when a backend does not count
        (the checks then ask the ledger)."""
        body = self.world.body_ledger
        assert body is not None
        supervisors, bodies = self._supervisors_writes(), body.own_changes()
        return None if supervisors is None or bodies is None else (*supervisors, bodies)

    def _supervisors_writes(self) -> tuple[object, ...] | None:
        """The supervisors' connections (the run's own, a rival's) with the rows each changed
        so far: every write of a seed that is not a body's goes through one of them, so while
        this is equal the bodies' journal is as they left it and each identity's generation as
        it was (World._effect, World._generation). A restarted controller's new connection
        makes it differ. None when a backend does not count."""
        rival = self.rival
        ledger, mine = self.ledger, self.ledger.own_changes()
        theirs = -1 if rival is None else rival.own_changes()
        return None if mine is None or theirs is None else (ledger, mine, rival, theirs)

    def _step(self) -> None:
        self.checks.check(self.ledger, self._writes())
        w = self.world
        for eid, count in w.performed.items():
            if count - w.compensated.get(eid, 0) > 1:
                self.checks.fail("effect-not-repeated", f"{eid} happened {count} times")
        if len(self.checks.violations) > self._reported:
            for text in self.checks.violations[self._reported :]:
                w.log(f"VIOLATION {text}")
            self._reported = len(self.checks.violations)
            raise _Stop

    def _denied(self, exc: StaleGeneration) -> None:
        node = str(exc.details.get("node"))
        denial = exc.details.get("denial_id")
        if denial not in {d.denial_id for d in self.ledger.denials(node)}:
            self.checks.fail("denials-recorded", f"denial {denial} of {node} not on record")

    # -- setup ------------------------------------------------------------------------------

    def start(self) -> None:
        w, ledger = self.world, self.ledger
        _git_repo(self.root / "repo", self.nodes)
        records = HarnessLedger(ledger)
        for i, node in enumerate(self.nodes):
            ledger.register_node(node, role="executor", by=OPERATOR)
            ledger.open_episode(node, f"simulated work of {node}", by=OPERATOR)
            records.bind_workspace(str(self.root / "repo" / node), node,
                                   harness=FAKE.session_harness, by="sim")  # fmt: skip
            ledger.acquire_lease(node, holder=f"sim first body of {node}", ttl=BODY_TTL,
                                 by=OPERATOR)  # fmt: skip
            w.start_body(node, 1, challenge=None)
            self.next_try[node] = 0.0
            w.schedule(CHECK_EVERY * (i + 1) / len(self.nodes), self._supervise_later(node),
                       "supervisor")  # fmt: skip
        w.schedule(w.rng.uniform(0, 3600), self._operator, "body")
        w.schedule(w.rng.uniform(0, 3600), self._restart_roll, "supervisor")
        w.log(f"seed {w.seed}: {len(self.nodes)} agents, {self.hours:g} h, rates {w.rates}")

    def run(self) -> None:
        self.start()
        self.world.run_due(self.hours * 3600)
        self._step()
        self.checks.check_breakers(self.ledger, "at the end of the run")
        self._step()

    # -- the supervisor ---------------------------------------------------------------------

    def _supervise_later(self, node: str) -> Callable[[], None]:
        return lambda: self._supervise(node)

    def _supervise(self, node: str) -> None:
        w = self.world
        w.schedule(CHECK_EVERY, self._supervise_later(node), "supervisor")
        if w.clock.mono < self.next_try[node]:
            return
        body = w.bodies.get(node)
        lease = self.ledger.live_lease(node)
        need = None
        if body is None or not body.process.alive:
            need = "body gone"
        elif lease is None or lease.generation != body.generation:
            need = "lease lost"
        elif w.clock.mono >= body.fill_at:
            need = "hull red"
        if need is not None:
            self._relieve(node, need)

    def _relieve(self, node: str, cause: str) -> None:
        from onstation.relief.relieve import Relief, ReliefOptions

        w = self.world
        raced = {"done": w.rng.random() >= w.rates.race}
        # The controller may die in the middle of this relief (at its k-th wait): its
        # connection goes with it, so the relief cannot even record that it stopped.
        crash = {"at": w.rng.randint(1, 6) if w.rng.random() < w.rates.crash_controller else 0,
                 "waits": 0, "done": False}  # fmt: skip

        def sleep(seconds: float) -> None:
            if not raced["done"]:
                raced["done"] = True
                self._race(node)
            crash["waits"] += 1
            if crash["at"] and crash["waits"] == crash["at"]:
                crash["done"] = True
                self.ledger.close()
                self.git.close()
                raise _ControllerCrash
            w.sleep(seconds)

        options = ReliefOptions(
            launcher=SimLauncher(w), by=SUPERVISOR, cause=cause, emergency=True, brief_wait=0,
            challenge_wait=600, shutdown_wait=30, poll=5, workspace=str(self.root / "repo" / node),
            db=self.db, sleep=sleep, monotonic=w.clock.monotonic, witnesses=w.witnesses,
            git_batches=self.git,
        )  # fmt: skip
        w.depth += 1
        try:
            outcome = Relief(self.ledger, node, options).run()
        except BaseException as exc:
            if not crash["done"]:
                if isinstance(exc, Conflict) and node in self.abandoned:
                    # The relief the crashed controller left open blocks this identity until
                    # it is stale; then the next relief takes it over (relief.abandoned).
                    w.log(f"{node} relief waits: one left open by a crashed controller")
                    return
                if isinstance(exc, OnstationError):
                    # In a single-threaded world nobody races the supervisor (the rival is
                    # refused before it writes), so a relief that cannot finish is broken.
                    why = f"{type(exc).__name__}: {exc.message}"
                    self.checks.fail("relief-completes", f"relief of {node} aborted: {why}")
                    self._step()
                    return
                raise
            self.ledger = self._open()
            self.next_try = dict.fromkeys(self.next_try, w.clock.mono)
            self.abandoned.add(node)
            w.hit("controller_crashed_mid_relief")
            w.log(f"controller crashed in the middle of the relief of {node}")
            self._step()
            return
        finally:
            w.depth -= 1
        if node in self.abandoned:
            self.abandoned.discard(node)
            w.hit("abandoned_relief_taken_over")
        w.log(f"{node} relief ({cause}) {outcome.state} {outcome.verdict} "
              f"g{outcome.from_generation}->g{outcome.to_generation}")  # fmt: skip
        self._after(node, outcome.state, outcome.verdict)

    def _race(self, node: str) -> None:
        from onstation.relief.relieve import Relief, ReliefOptions

        w = self.world
        options = ReliefOptions(launcher=SimLauncher(w), by="sim-rival", emergency=True,
                                brief_wait=0, workspace=str(self.root / "repo" / node),
                                db=self.db, sleep=w.sleep, monotonic=w.clock.monotonic,
                                witnesses=w.witnesses, git_batches=self.git)  # fmt: skip
        if self.rival is None:
            self.rival = self._open()
        try:
            Relief(self.rival, node, options).run()
        except Conflict:
            w.hit("race_refused")
            w.log(f"{node} rival supervisor refused (Conflict)")
            return
        except OnstationError as exc:
            got = type(exc).__name__
            self.checks.fail("supervisors-exclusive", f"rival relief of {node} got {got}")
            return
        self.checks.fail("supervisors-exclusive", f"a second relief of {node} ran")

    def _after(self, node: str, state: str, verdict: str) -> None:
        w, ledger = self.world, self.ledger
        now = w.clock.mono
        # A supervisor retries when something changed, not on a timer alone: each attempt
        # fences (a new generation) and costs a full relief.
        if ledger.effects(node, state=EffectState.AMBIGUOUS):
            w.hit("effect_ambiguous")
            self.next_try[node] = float("inf")  # quarantined until the operator resolves
            w.schedule(w.rng.uniform(1800, 3 * 3600), lambda: self._resolve(node), "body")
        elif state == "SETTLED":
            w.hit("relief_settled")
            self.next_try[node] = now
        elif state == "BIRTH_FAILED":
            w.hit("birth_failed")
            self.next_try[node] = now + 60
        elif ledger.halts() and state != "SETTLED":
            w.hit("halt_honoured")
            self.next_try[node] = float("inf")  # until the halt is lifted
        elif state == "BLOCKED" or verdict == "BLOCKED":
            # The governor (or the breaker) refused: at the verdict, or at the count itself.
            w.hit("respawn_blocked")
            status = ledger.respawn_status(node)
            wait = 3600.0
            if status.reopens_at is not None:
                wait = max(wait, (status.reopens_at - w.clock()).total_seconds())
            self.next_try[node] = now + wait
            if not status.breaker_open and w.rng.random() < w.rates.breaker:
                ledger.open_breaker(node, by=OPERATOR, why="crash loop")
                w.hit("breaker_opened")
                w.log(f"{node} breaker opened by the operator")
                self.next_try[node] = float("inf")  # until the operator closes it
                w.schedule(w.rng.uniform(2, 30) * 3600, lambda: self._close(node), "body")
        else:
            self.next_try[node] = now + 2 * 3600

    # -- the operator -----------------------------------------------------------------------

    def _resolve(self, node: str) -> None:
        w = self.world
        for effect in self.ledger.effects(node, state=EffectState.AMBIGUOUS):
            eid = effect.effect_id
            happened = w.performed.get(eid, 0) > w.compensated.get(eid, 0)
            self.ledger.resolve_effect(eid, outcome="observed" if happened else "compensated",
                                       by=OPERATOR, why="checked the remote")  # fmt: skip
            w.log(f"{node} operator resolved {eid} as {'observed' if happened else 'compensated'}")
        self.next_try[node] = min(self.next_try[node], w.clock.mono)

    def _close(self, node: str) -> None:
        self.ledger.close_breaker(node, by=OPERATOR, why="crash loop investigated")
        self.world.log(f"{node} breaker closed by the operator")
        self.next_try[node] = min(self.next_try[node], self.world.clock.mono)

    def _operator(self) -> None:
        w, rates = self.world, self.world.rates
        w.schedule(3600, self._operator, "body")
        if w.rng.random() < rates.clock_jump:
            seconds = w.rng.uniform(-2.0, 2.0) * BODY_TTL.total_seconds()
            w.clock.jump(seconds)
            w.hit("clock_jump_back" if seconds < 0 else "clock_jump_forward")
            w.log(f"wall clock jumped {seconds:+.0f}s")
        if w.rng.random() < rates.halt and not self.ledger.halts():
            scope = None if w.rng.random() < 0.5 else w.rng.choice(self.nodes)
            self.ledger.halt(node=scope, by=OPERATOR, why="operator drill")
            w.log(f"halt raised on {scope or 'everything'}")
            w.schedule(w.rng.uniform(0.2, 3) * 3600, lambda: self._unhalt(scope), "body")

    def _unhalt(self, scope: str | None) -> None:
        self.ledger.unhalt(node=scope, by=OPERATOR)
        self.world.log(f"halt lifted on {scope or 'everything'}")
        for node in self.nodes:
            if self.next_try[node] == float("inf") and not self.ledger.effects(
                node, state=EffectState.AMBIGUOUS
            ) and not self.ledger.get_node(node).breaker_open:  # fmt: skip
                self.next_try[node] = self.world.clock.mono

    def _restart_roll(self) -> None:
        w = self.world
        w.schedule(3600, self._restart_roll, "supervisor")
        if w.rng.random() < w.rates.restart:
            # A restarted controller knows only what the ledger knows: its memory is gone.
            self.ledger.close()
            self.git.close()
            self.ledger = self._open()
            self.next_try = dict.fromkeys(self.next_try, w.clock.mono)
            w.hit("controller_restart")
            w.log("controller restarted")
            self.checks.check_breakers(self.ledger, "after a controller restart")

    def close(self) -> None:
        self.git.close()
        for ledger in (self.ledger, self.world.body_ledger, self.rival):
            if ledger is not None:
                with contextlib.suppress(Exception):
                    ledger.close()

    def digest(self) -> tuple[str, int]:
        return self.checks.history_digest(self.ledger)


def _fault_random(seed: int) -> Any:
    """The fault-rate draw's own random source (separate from the world's, so changing what
    a world draws never changes a seed's fault rates)."""
    from random import Random

    return Random(f"onstation-faults-{seed}")


def simulate(
    seed: int,
    *,
    agents: int = 2,
    hours: float = 12.0,
    plant: str | None = None,
    rates: FaultRates | None = None,
) -> SimResult:
    """Run one seed; the same arguments give the same trace and ledger history."""
    if agents < 1 or hours <= 0:
        raise ValueError("agents must be >= 1 and hours > 0")
    if plant is not None and plant not in PLANTS:
        raise ValueError(f"unknown plant {plant!r}; one of {', '.join(PLANTS)}")
    ledger_template = _templates()[1]  # made before any planted bug is in force
    root = Path(tempfile.mkdtemp(prefix=f"onstation-sim-{seed}-", dir=_scratch_root()))
    for name, data, mode in ledger_template.files:
        (root / name).write_bytes(data)
        (root / name).chmod(mode)
    run: _Run | None = None
    error: str | None = None
    try:
        with _keys_dir(root / "keys"), planted(plant):
            run = _Run(seed, agents, hours, rates, root)
            try:
                run.run()
            except _Stop:
                pass
            except Exception as exc:  # a crash of the system under test is a failure too
                error = f"{type(exc).__name__}: {exc}"
                run.world.log(f"ERROR {error}")
            digest, events = run.digest()
        return SimResult(seed, agents, hours, plant, list(run.checks.violations),
                         dict(sorted(run.world.coverage.items())), run.world.trace, digest,
                         events, error)  # fmt: skip
    finally:
        if run is not None:
            run.close()
        shutil.rmtree(root, ignore_errors=True)


# --------------------------------------------------------------------------------------------
# many seeds


def _one(args: tuple[int, int, float, str | None, FaultRates | None]) -> SimResult:
    seed, agents, hours, plant, rates = args
    return simulate(seed, agents=agents, hours=hours, plant=plant, rates=rates)


@dataclass
class SeedsReport:
    """The outcome of many seeds: failures, summed coverage and what was never covered."""

    results: list[SimResult] = field(default_factory=list)
    coverage: dict[str, int] = field(default_factory=dict)
    seeds_hit: dict[str, int] = field(default_factory=dict)

    @property
    def failures(self) -> list[SimResult]:
        """Seeds where an invariant broke or the run crashed."""
        return [r for r in self.results if not r.ok]

    @property
    def missing(self) -> list[str]:
        """Required coverage counters that never occurred."""
        return [name for name in REQUIRED_COVERAGE if not self.coverage.get(name)]

    @property
    def ok(self) -> bool:
        """No failure and every required counter hit."""
        return not self.failures and not self.missing


def run_seeds(
    seeds: Iterable[int],
    *,
    agents: int = 2,
    hours: float = 12.0,
    plant: str | None = None,
    stop_on_failure: bool = False,
    rates: FaultRates | None = None,
    jobs: int = 1,
) -> SeedsReport:
    """Run every seed and sum the coverage counters."""
    report = SeedsReport()
    seeds = list(seeds)
    if jobs > 1 and len(seeds) > 1 and not stop_on_failure:
        import concurrent.futures
        import multiprocessing

        # Each seed is independent and deterministic, so running them in several processes
        # changes nothing but the wall time.
        context = multiprocessing.get_context("fork")
        with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context) as pool:
            results = list(pool.map(_one, [(s, agents, hours, plant, rates) for s in seeds]))
    else:
        results = []
        for seed in seeds:
            results.append(_one((seed, agents, hours, plant, rates)))
            if stop_on_failure and not results[-1].ok:
                break
    for result in results:
        report.results.append(result)
        for name, count in result.coverage.items():
            report.coverage[name] = report.coverage.get(name, 0) + count
            report.seeds_hit[name] = report.seeds_hit.get(name, 0) + 1
    report.coverage = dict(sorted(report.coverage.items()))
    return report


__all__ = ["PLANTS", "REQUIRED_COVERAGE", "SeedsReport", "SimResult", "run_seeds", "simulate"]
