"""The simulated world: a clock, seeded randomness, processes, witnesses and bodies.

Everything here is simulated; everything it drives is real. Reliefs run the real
:class:`~onstation.relief.relieve.Relief` over a real SQLite ledger; only time, processes, the
process witnesses, and what each body does (and when it crashes, pauses or lies silent) come
from this module. All randomness is drawn from one ``random.Random(seed)`` and no wall clock is
read, so one seed is one run.
"""

from __future__ import annotations

import heapq
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from random import Random
from typing import Any

from onstation.core.errors import BlockedByPolicy, Conflict, OnstationError, StaleGeneration
from onstation.harness.adapters import FAKE
from onstation.harness.launch import LaunchedBody, Launcher, LaunchSpec
from onstation.ledger import Ledger

START = datetime(2026, 1, 1, 0, 0, tzinfo=UTC)
#: A body's own heartbeat extends its lease by this much (the "TTL" of the fault ranges).
BODY_TTL = timedelta(hours=1)

MATCH, GONE, MISMATCH, UNKNOWN = "MATCH", "GONE", "MISMATCH", "UNKNOWN"


class SimClock:
    """Two clocks, as on a real host: a wall clock the ledger reads (it can jump) and a
    monotonic one the relief's waits use (it never does)."""

    def __init__(self) -> None:
        self.wall = START
        self.mono = 0.0

    def __call__(self) -> datetime:
        return self.wall

    def monotonic(self) -> float:
        """Seconds since the run began; never jumps."""
        return self.mono

    def advance(self, seconds: float) -> None:
        """Let time pass on both clocks."""
        self.mono += seconds
        self.wall += timedelta(seconds=seconds)

    def jump(self, seconds: float) -> None:
        """Step the wall clock only (forward or backward), as NTP or a VM migration would."""
        self.wall += timedelta(seconds=seconds)


@dataclass
class FaultRates:
    """One seed's fault rates, each drawn on its own (swarm testing: most seeds stress a few
    faults hard rather than all faults a little)."""

    crash: float  # per body tick
    crash_point_effect: float  # share of crashes that land inside an effect's journal
    pause: float  # per body tick: pause (SIGSTOP-like) then wake and write
    hang: float  # per body tick: stop heartbeating past the lease, then wake
    heartbeat_loss: float  # per body: its heartbeats never reach the ledger
    clock_jump: float  # per hour
    never_started: float  # per launch
    exit_before_challenge: float  # per launch
    race: float  # per relief: a second supervisor starts the same relief
    restart: float  # per hour: the controller restarts (a new Ledger over the same file)
    halt: float  # per hour: an operator halt
    breaker: float  # per blocked relief: the operator opens the breaker
    effect: float  # per body tick: the body performs one non-idempotent effect
    crash_controller: float = 0.0  # per relief: the controller dies in the middle of it

    @classmethod
    def draw(cls, rng: Random) -> FaultRates:
        """Draw every rate independently; some seeds get none of a fault at all."""

        def rate(top: float) -> float:
            return 0.0 if rng.random() < 0.2 else rng.uniform(0.0, top)

        # About a third of the seeds are crash loops: bodies die within minutes, so the
        # governor, the breaker and the birth-failure paths are driven hard.
        crash = rng.uniform(0.3, 0.7) if rng.random() < 0.35 else rate(0.15)
        return cls(
            crash=crash, crash_point_effect=rng.uniform(0.3, 1.0), pause=rate(0.08),
            hang=rate(0.04), heartbeat_loss=rate(0.3), clock_jump=rate(0.3),
            never_started=rate(0.3), exit_before_challenge=rate(0.3), race=rate(0.5),
            restart=rate(0.3), halt=rate(0.08), breaker=rate(0.8), effect=rng.uniform(0.2, 0.9),
            crash_controller=rate(0.15),
        )  # fmt: skip

    @classmethod
    def zero(cls) -> FaultRates:
        """No faults at all (the benchmark's baseline); bodies still do their work."""
        return cls(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0.5)


class SimProcess:
    """A simulated OS process: enough of ``subprocess.Popen`` for the relief."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self.paused_until: float | None = None
        self.pending_term = False

    @property
    def alive(self) -> bool:
        """Not yet exited."""
        return self.returncode is None

    def poll(self) -> int | None:
        """The exit code, or None while running."""
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """A paused or running process does not exit on its own within a wait."""
        if self.returncode is None:
            raise subprocess.TimeoutExpired(f"sim-body {self.pid}", timeout or 0)
        return self.returncode

    def exit(self, code: int) -> None:
        """The process ends (a crash, a signal, a clean stop)."""
        if self.returncode is None:
            self.returncode = code


class SimWitness:
    """The simulated ProcessWitness: pid plus the process's identity (pids are never reused
    here, so a pid names one process; the nonce is kept as the real witness keeps it)."""

    def __init__(self, pid: int, nonce: str) -> None:
        self.pid = pid
        self.nonce = nonce

    def to_json(self) -> dict[str, Any]:
        """The stored form."""
        return {"pid": self.pid, "nonce": self.nonce, "host": "sim"}

    @classmethod
    def from_json(cls, data: Any) -> SimWitness:
        """Back from the stored form."""
        return cls(int(data["pid"]), str(data.get("nonce", "")))


@dataclass(frozen=True)
class SimCheck:
    """A witness check: the state and its reason."""

    state: str
    reason: str

    @property
    def gone(self) -> bool:
        """The witnessed process provably no longer exists."""
        return self.state in (GONE, MISMATCH)

    @property
    def alive(self) -> bool:
        """The witnessed process is running (as the real check's MATCH)."""
        return self.state == MATCH


class SimWitnesses:
    """The module-like witness object the relief takes (observe, check, signal_if_match)."""

    ProcessWitness = SimWitness

    def __init__(self, world: World) -> None:
        self.world = world

    def observe(self, pid: int, *, nonce: str, observed_at: str) -> SimWitness | None:
        """A witness of a live process, or None when it has exited."""
        process = self.world.processes.get(pid)
        if process is None or not process.alive:
            return None
        return SimWitness(pid, nonce)

    def check(self, witness: SimWitness) -> SimCheck:
        """MATCH while the process lives (paused counts as alive), GONE once it exited."""
        process = self.world.processes.get(witness.pid)
        if process is None:
            return SimCheck(UNKNOWN, f"pid {witness.pid} never seen")
        if not process.alive:
            return SimCheck(GONE, f"pid {witness.pid} exited ({process.returncode})")
        return SimCheck(MATCH, f"pid {witness.pid} alive")

    def follow_exec(self, witness: SimWitness, result: SimCheck) -> SimWitness:
        """Simulated processes never exec into another program: the witness as it is."""
        return witness

    def signal_if_match(self, witness: SimWitness, sig: int) -> SimCheck:
        """Terminate the process only when the witness matches; a paused process keeps the
        signal pending until it wakes (as SIGTERM does for a stopped process)."""
        seen = self.check(witness)
        if seen.state == MATCH:
            process = self.world.processes[witness.pid]
            if process.paused_until is not None:
                process.pending_term = True
            else:
                process.exit(-int(sig))
                self.world.log(f"pid {witness.pid} terminated by signal")
        return seen


@dataclass
class SimBody:
    """What one launched (or first) body of an identity does, tick by tick."""

    node: str
    generation: int
    process: SimProcess
    heartbeat_lost: bool = False
    relieved: bool = False
    woke_from_pause: bool = False
    fill_at: float = 0.0  # monotonic instant its context reaches Red
    challenge: dict[str, Any] | None = None
    #: What the body knows of its identity's journal (each logical effect's state, by its
    #: index ``k``) and the world's supervisors' token when it last read it (World._effect).
    journal: tuple[object, dict[str, str]] | None = None


@dataclass(order=True)
class _Scheduled:
    at: float
    seq: int
    action: Callable[[], None] = field(compare=False)
    kind: str = field(compare=False, default="body")


class World:
    """The simulated world of one seed: clock, queue of timed actions, processes, bodies."""

    def __init__(self, seed: int, rates: FaultRates) -> None:
        self.seed = seed
        self.rng = Random(seed)
        self.rates = rates
        self.clock = SimClock()
        self.queue: list[_Scheduled] = []
        self._seq = 0
        self.processes: dict[int, SimProcess] = {}
        self._next_pid = 1000
        self.bodies: dict[str, SimBody] = {}
        self.trace: list[str] = []
        self.witnesses = SimWitnesses(self)
        # Ground truth of the outside world: how often each logical effect really happened.
        self.performed: dict[str, int] = {}
        self.compensated: dict[str, int] = {}
        self.body_ledger: Ledger | None = None
        self.coverage: dict[str, int] = {}
        self.on_step: Callable[[], None] = lambda: None
        self.on_denial: Callable[[StaleGeneration], None] = lambda _exc: None
        self.on_stale_accept: Callable[[str, int, str], None] = lambda _n, _g, _w: None
        #: A token that changes whenever a connection other than the bodies' may have
        #: committed (the run's: the rows its supervisors' connections changed); None when
        #: it cannot tell, and then a body reads its journal before each effect and its
        #: identity's generation before each write.
        self.supervisors_token: Callable[[], object | None] = lambda: None
        #: Each identity's generation as last read, with the token of that moment: only a
        #: supervisor's fence moves it (a body's own writes never do).
        self._generations: dict[str, tuple[object, int]] = {}
        self.depth = 0  # > 0 while a relief is running (its sleeps run only body/operator work)

    # -- bookkeeping ------------------------------------------------------------------------

    def log(self, text: str) -> None:
        """Append one line to the minimal trace (simulated time, no random ids)."""
        self.trace.append(f"{self.clock.mono:10.1f} {text}")

    def hit(self, counter: str) -> None:
        """Count one occurrence of an interesting case (a "sometimes" assertion)."""
        self.coverage[counter] = self.coverage.get(counter, 0) + 1

    def schedule(self, delay: float, action: Callable[[], None], kind: str = "body") -> None:
        """Run ``action`` ``delay`` simulated seconds from now."""
        self._seq += 1
        heapq.heappush(self.queue, _Scheduled(self.clock.mono + max(delay, 0.0), self._seq,
                                              action, kind))  # fmt: skip

    def new_process(self) -> SimProcess:
        """Start a process with a fresh pid (pids are never reused in the simulation)."""
        self._next_pid += 1
        process = SimProcess(self._next_pid)
        self.processes[process.pid] = process
        return process

    # -- time -------------------------------------------------------------------------------

    def run_due(self, until: float) -> None:
        """Run every scheduled action due up to ``until`` (supervisor actions wait while a
        relief runs: one supervisor drives one identity's relief at a time)."""
        deferred: list[_Scheduled] = []
        while self.queue and self.queue[0].at <= until:
            item = heapq.heappop(self.queue)
            if self.depth > 0 and item.kind == "supervisor":
                deferred.append(item)
                continue
            if item.at > self.clock.mono:
                self.clock.advance(item.at - self.clock.mono)
            item.action()
            self.on_step()
        for item in deferred:
            heapq.heappush(self.queue, item)
        if until > self.clock.mono:
            self.clock.advance(until - self.clock.mono)

    def sleep(self, seconds: float) -> None:
        """The relief's sleep: time passes and the simulated bodies act meanwhile."""
        self.run_due(self.clock.mono + seconds)
        self.on_step()

    # -- bodies -----------------------------------------------------------------------------

    def _ledger(self) -> Ledger:
        assert self.body_ledger is not None
        return self.body_ledger

    def start_body(self, node: str, generation: int, *, challenge: dict[str, Any] | None,
                   fill_hours: tuple[float, float] = (2.0, 8.0)) -> SimBody:  # fmt: skip
        """A new body process for ``node`` at ``generation`` with its first actions scheduled."""
        rng = self.rng
        body = SimBody(node, generation, self.new_process(),
                       heartbeat_lost=rng.random() < self.rates.heartbeat_loss,
                       fill_at=self.clock.mono + rng.uniform(*fill_hours) * 3600,
                       challenge=challenge)  # fmt: skip
        self.bodies[node] = body
        if challenge is not None:
            if rng.random() < self.rates.exit_before_challenge:
                self.schedule(rng.uniform(1, 20), lambda: self._exit_early(body))
            else:
                self.schedule(rng.uniform(1, 20), lambda: self._answer(body))
        self.schedule(rng.uniform(30, 120), lambda: self._tick(body))
        return body

    def _exit_early(self, body: SimBody) -> None:
        body.process.exit(1)
        self.log(f"{body.node}@{body.generation} exited before its challenge")

    def _answer(self, body: SimBody) -> None:
        if not body.process.alive or body.challenge is None:
            return
        from onstation.ledger.relief_records import ReliefLedger

        ok = self._call(body, "challenge answer", lambda: ReliefLedger(self._ledger())
                        .answer_challenge(body.node, generation=body.generation,
                                          echo=dict(body.challenge or {}),
                                          witness={"pid": body.process.pid}))  # fmt: skip
        if ok and not body.heartbeat_lost:
            self.schedule(self.rng.uniform(1, 10), lambda: self._beat(body))

    def _beat(self, body: SimBody) -> None:
        if body.process.alive and body.process.paused_until is None:
            self._heartbeat(body)

    def _heartbeat(self, body: SimBody) -> bool:
        if body.heartbeat_lost:
            return True  # the process lives; its heartbeats never arrive
        return self._call(body, "lease renew", lambda: self._ledger().renew_lease(
            body.node, generation=body.generation, ttl=BODY_TTL))  # fmt: skip

    def _call(self, body: SimBody, what: str, op: Callable[[], object]) -> bool:
        """One ledger write on the body's behalf; a denial ends the body (it was relieved)."""
        ledger = self._ledger()
        current = self._generation(ledger, body.node)
        try:
            op()
        except StaleGeneration as exc:
            self.on_denial(exc)
            reason = str(exc.details.get("reason", ""))
            if reason == "successor not yet challenged":
                return False  # not RUNNING yet: wait and try again
            if body.woke_from_pause and current > body.generation:
                self.hit("paused_body_fenced")
                self.log(f"{body.node}@{body.generation} woke after its fence: {what} denied")
            else:
                self.log(f"{body.node}@{body.generation} {what} denied ({reason})")
            body.relieved = True
            body.process.exit(0)
            return False
        except BlockedByPolicy as exc:
            if exc.details.get("reason") == "halted":
                self.hit("halt_honoured")
                self.log(f"{body.node}@{body.generation} {what} refused: halted")
            return False
        except Conflict:
            return False
        if current != body.generation:
            self.on_stale_accept(body.node, body.generation, what)
        return True

    def _generation(self, ledger: Ledger, node: str) -> int:
        """The identity's generation as the ledger has it now: read again only when a
        supervisor's connection may have committed since the last read."""
        token = self.supervisors_token()
        known = self._generations.get(node)
        if token is not None and known is not None and known[0] == token:
            return known[1]
        current = ledger.generation_of(node)
        if token is not None:
            self._generations[node] = (token, current)
        return current

    def _tick(self, body: SimBody) -> None:
        """One unit of a body's work: heartbeat, maybe an effect, maybe a fault."""
        process = body.process
        if not process.alive or body.relieved:
            return
        rng, rates = self.rng, self.rates
        if process.paused_until is not None:
            return  # its wake-up continues the work
        roll = rng.random()
        if roll < rates.pause:
            self._pause(body, rng.uniform(0.0, 3.0) * BODY_TTL.total_seconds(), "paused")
            return
        if roll < rates.pause + rates.hang:
            self._pause(body, rng.uniform(1.05, 3.0) * BODY_TTL.total_seconds(), "hung")
            return
        crash = rng.random() < rates.crash
        crash_in_effect = crash and rng.random() < rates.crash_point_effect
        if not self._heartbeat(body):
            return
        if rng.random() < rates.effect or crash_in_effect:
            point = rng.choice(("before-dispatch", "after-dispatch", "after-result",
                                "after-observe")) if crash_in_effect else None  # fmt: skip
            self._effect(body, point)
            if point is not None:
                return
        if crash and process.alive:
            process.exit(137)
            self.log(f"{body.node}@{body.generation} crashed idle")
            return
        if process.alive and not body.relieved:
            self.schedule(rng.uniform(300, 1200), lambda: self._tick(body))

    def _pause(self, body: SimBody, seconds: float, how: str) -> None:
        body.process.paused_until = self.clock.mono + seconds
        self.log(f"{body.node}@{body.generation} {how} for {seconds:.0f}s")
        self.schedule(seconds, lambda: self._wake(body))

    def _wake(self, body: SimBody) -> None:
        process = body.process
        process.paused_until = None
        if not process.alive:
            return
        body.woke_from_pause = True
        # The write it was stopped in front of goes out first (check-then-write interleaving).
        self._effect(body, None)
        if process.pending_term:
            process.exit(-15)
            self.log(f"{body.node}@{body.generation} ended by its pending SIGTERM")
        if process.alive and not body.relieved:
            body.woke_from_pause = False
            self.schedule(self.rng.uniform(60, 600), lambda: self._tick(body))

    def _effect(self, body: SimBody, crash_point: str | None) -> None:
        """Journal one non-idempotent effect around its real-world act, crashing where told."""
        ledger = self._ledger()
        node, gen = body.node, body.generation
        # The body reads its identity's journal once and then keeps what its own steps did,
        # until another connection may have committed (a relief's reconcile, an operator's
        # resolve: the token moves) or a step of its own was refused: what it knows is then
        # exactly what a read would show (bodies write only their own identity's effects,
        # one row per index), without the read of every effect before each one.
        token = self.supervisors_token()
        kept, body.journal = body.journal, None  # kept again once its commit has succeeded
        if token is not None and kept is not None and kept[0] == token:
            states = kept[1]
        else:
            try:
                effects = ledger.effects(node)
            except OnstationError:
                return
            states = {str(e.arguments.get("k")): e.state.value for e in effects
                      if isinstance(e.arguments, dict)}  # fmt: skip
        k = 0
        while states.get(str(k)) in ("COMMITTED", "DISPATCHED", "OBSERVED", "AMBIGUOUS"):
            k += 1
        holder: dict[str, Any] = {}

        def intend() -> None:
            effect, _created = ledger.intend_effect(node, generation=gen, operation="git.push",
                                                    destination="sim://origin",
                                                    arguments={"k": k})  # fmt: skip
            holder["id"] = effect.effect_id

        if not self._call(body, f"intend effect {k}", intend):
            return
        eid = holder["id"]
        if crash_point == "before-dispatch":
            body.process.exit(137)
            self.log(f"{node}@{gen} crashed before dispatching effect {k}")
            return
        if not self._call(body, f"dispatch effect {k}",
                          lambda: ledger.dispatch_effect(eid, generation=gen)):  # fmt: skip
            return
        if crash_point == "after-dispatch":
            if self.rng.random() < 0.5:
                self.performed[eid] = self.performed.get(eid, 0) + 1
            body.process.exit(137)
            self.log(f"{node}@{gen} crashed after dispatching effect {k}")
            return
        self.performed[eid] = self.performed.get(eid, 0) + 1
        if crash_point == "after-result":
            body.process.exit(137)
            self.log(f"{node}@{gen} crashed after effect {k} happened, before recording it")
            return
        if not self._call(body, f"observe effect {k}", lambda: ledger.observe_effect(
                eid, generation=gen, result={"ok": True})):  # fmt: skip
            return
        if crash_point == "after-observe":
            body.process.exit(137)
            self.log(f"{node}@{gen} crashed after observing effect {k}")
            return
        if self._call(body, f"commit effect {k}",
                      lambda: ledger.commit_effect(eid, generation=gen)):  # fmt: skip
            states[str(k)] = "COMMITTED"
            body.journal = (token, states)


class SimLauncher(Launcher):
    """The launcher the relief is given: starts simulated bodies, sometimes fails to."""

    name = "sim"
    harness = FAKE.session_harness  # simulated bodies speak as the fake agent does
    execution_class = "fake"
    model: str | None = None

    def __init__(self, world: World) -> None:
        self.world = world

    def launch(self, spec: LaunchSpec) -> LaunchedBody:
        """Start one simulated successor (or fail to start it at all)."""
        world = self.world
        if world.rng.random() < world.rates.never_started:
            world.log(f"{spec.node}@{spec.generation} launch failed: never started")
            raise OnstationError("simulated launch failure: executable did not start")
        body = world.start_body(spec.node, spec.generation, challenge=dict(spec.challenge))
        return LaunchedBody(pid=body.process.pid, argv=["sim-body"], process=body.process,
                            log_path="", prompt_path="")  # fmt: skip
