"""Simulated seeds per second and simulated agent-hours per wall-clock second.

The crash-loop simulation drives the real relief (git evidence, capsule sealing, schema
validation) and a real SQLite ledger, so its speed is mostly the speed of a relief. Two runs,
each single process and with two worker processes (``jobs=2``, as CI runs the seeds): the
swarm (each seed draws its own fault rates, as CI runs it) and the baseline, every fault rate
at zero (bodies still work and are relieved at Red). The swarm with two workers is held
against issue 14's target: 10,000 seeds in under 10 minutes on 2 cores, about 17 seeds/s.
Each line also gives the CPU time per seed (this process, its workers and every git they
ran): on a shared machine the wall-clock rate moves with the load, the CPU per seed much less.
Run: ``./dev bench sim``; ``ONSTATION_BENCH_SIM_SEEDS`` sets the seeds of a single-process
run (default 12). A two-worker run takes ``TWO_WORKER_SHARE`` times as many per worker (96 by
default): the target is a long run (10,000 seeds), whose pool start and last, unevenly ending
seeds are a small share of its time; in a run of 24 seeds they were up to a tenth of it.
"""

from __future__ import annotations

import os
import resource
import time

from onstation.sim.run import run_seeds
from onstation.sim.world import FaultRates

AGENTS = 2
HOURS = 12.0
#: Issue 14: 10,000 seeds in under 10 minutes on 2 cores.
TARGET_SEEDS_PER_S = 10_000 / 600
TARGET_JOBS = 2
#: A two-worker run's seeds per worker, as a multiple of a single-process run's.
TWO_WORKER_SHARE = 4


def _cpu() -> float:
    """CPU seconds of this process and of its reaped children (the workers, every git)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _measure(label: str, seeds: int, rates: FaultRates | None, jobs: int) -> float:
    started, cpu = time.perf_counter(), _cpu()
    report = run_seeds(range(seeds), agents=AGENTS, hours=HOURS, rates=rates, jobs=jobs)
    elapsed = time.perf_counter() - started
    cpu_ms = (_cpu() - cpu) / seeds * 1000  # the pool's workers are reaped by now
    reliefs = sum(r.coverage.get("relief_settled", 0) for r in report.results)
    events = sum(r.events for r in report.results)
    rate = seeds / elapsed
    print(f"{label:<9} jobs={jobs} {seeds} seeds in {elapsed:.1f} s: {rate:.2f} seeds/s, "
          f"{seeds * AGENTS * HOURS / elapsed:.1f} simulated agent-hours/s, "
          f"{events / elapsed:.0f} ledger events/s, {reliefs} settled reliefs, "
          f"{len(report.failures)} failing, {cpu_ms:.0f} ms CPU per seed")  # fmt: skip
    return rate


def main() -> None:
    """Print both figures, single process and two workers, for the swarm and the baseline."""
    seeds = int(os.environ.get("ONSTATION_BENCH_SIM_SEEDS", "12"))
    # One seed first, not measured: the modules a relief imports and the template repository
    # and ledger are made once per process (the workers fork from this one), so the first
    # figure is not charged for them.
    run_seeds([seeds * TARGET_JOBS * TWO_WORKER_SHARE], agents=AGENTS, hours=HOURS)
    rates: dict[tuple[str, int], float] = {}
    for label, fault_rates in (("swarm", None), ("baseline", FaultRates.zero())):
        for jobs in (1, TARGET_JOBS):
            share = 1 if jobs == 1 else TWO_WORKER_SHARE
            rates[label, jobs] = _measure(label, seeds * jobs * share, fault_rates, jobs)
    swarm = rates["swarm", TARGET_JOBS]
    verdict = "MEETS" if swarm >= TARGET_SEEDS_PER_S else "MISSES"
    print(f"target (issue 14): {TARGET_SEEDS_PER_S:.1f} seeds/s with jobs={TARGET_JOBS} "
          f"(10,000 seeds in 10 min); swarm: {swarm:.2f} seeds/s: {verdict} "
          f"({swarm / TARGET_SEEDS_PER_S:.0%} of it; 10,000 seeds in "
          f"{10_000 / swarm / 60:.1f} min)")  # fmt: skip
    for jobs in (1, TARGET_JOBS):
        pace = rates["swarm", jobs] / rates["baseline", jobs]
        print(f"swarm / baseline, jobs={jobs}: {pace:.2f}x the zero-fault pace")
    one, two = rates["swarm", 1], rates["swarm", TARGET_JOBS]
    print(f"two workers / one: {two / one:.2f}x (swarm); 1,000 CI seeds with "
          f"jobs={TARGET_JOBS}: about {1000 / two:.0f} s")  # fmt: skip


if __name__ == "__main__":
    main()
