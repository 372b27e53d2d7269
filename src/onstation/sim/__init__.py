"""Deterministic crash-loop simulation: the real relief code and the real ledger, driven by a
simulated clock, simulated processes and a seeded fault injector (see docs/simulation.md)."""

from onstation.sim.run import PLANTS, REQUIRED_COVERAGE, SeedsReport, SimResult, run_seeds, simulate

__all__ = ["PLANTS", "REQUIRED_COVERAGE", "SeedsReport", "SimResult", "run_seeds", "simulate"]
