"""Simulated seeds per second and simulated agent-hours per wall-clock second.

The crash-loop simulation drives the real relief (git evidence, capsule sealing, schema
validation) and a real SQLite ledger, so its speed is mostly the speed of a relief. Two runs,
single process: the swarm (each seed draws its own fault rates, as CI runs it) and the
baseline, every fault rate at zero (bodies still work and are relieved at Red). Run:
``./dev bench sim``; ``ONSTATION_BENCH_SIM_SEEDS`` sets the seeds per run (default 12).
"""

from __future__ import annotations

import os
import time

from onstation.sim.run import run_seeds
from onstation.sim.world import FaultRates

AGENTS = 2
HOURS = 12.0


def _measure(label: str, seeds: int, rates: FaultRates | None) -> None:
    started = time.perf_counter()
    report = run_seeds(range(seeds), agents=AGENTS, hours=HOURS, rates=rates)
    elapsed = time.perf_counter() - started
    reliefs = sum(r.coverage.get("relief_settled", 0) for r in report.results)
    events = sum(r.events for r in report.results)
    print(f"{label:<9} {seeds} seeds in {elapsed:.1f} s: {seeds / elapsed:.2f} seeds/s, "
          f"{seeds * AGENTS * HOURS / elapsed:.1f} simulated agent-hours/s, "
          f"{events / elapsed:.0f} ledger events/s, {reliefs} settled reliefs, "
          f"{len(report.failures)} failing")  # fmt: skip


def main() -> None:
    """Print both figures for the swarm and for the zero-fault baseline."""
    seeds = int(os.environ.get("ONSTATION_BENCH_SIM_SEEDS", "12"))
    _measure("swarm", seeds, None)
    _measure("baseline", seeds, FaultRates.zero())


if __name__ == "__main__":
    main()
