"""``onstation simulate``: run the deterministic crash-loop simulation over many seeds."""

from __future__ import annotations

import json
import os
import sys

import click

from onstation.sim.run import PLANTS, REQUIRED_COVERAGE, SeedsReport, run_seeds

#: Bounds that keep a typo from asking for a run that cannot finish (or fit in memory).
MAX_SEEDS = 1_000_000
MAX_JOBS = 256


def _fail(message: str, as_json: bool = False) -> None:
    if as_json:
        click.echo(json.dumps({"error": "bad_input", "message": message}))
    else:
        click.echo(f"onstation: bad input: {message}", err=True)
    sys.exit(2)


@click.command("simulate")
@click.option(
    "--seeds",
    "count",
    type=int,
    default=100,
    show_default=True,
    help="How many seeds to run (0 .. N-1, or from --seed).",
)
@click.option(
    "--seed",
    "seed",
    type=int,
    default=None,
    help="Run exactly this seed (a replay), or start the range here with --seeds.",
)
@click.option("--agents", type=int, default=2, show_default=True, help="Identities per seed.")
@click.option(
    "--hours", type=float, default=12.0, show_default=True, help="Simulated hours per seed."
)
@click.option(
    "--plant", type=str, default=None, help=f"Apply a deliberate bug: {', '.join(PLANTS)}."
)
@click.option("--jobs", type=int, default=None, help="Worker processes (default: CPU count).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def simulate_cmd(count: int, seed: int | None, agents: int, hours: float, plant: str | None,
                 jobs: int | None, as_json: bool) -> None:  # fmt: skip
    """Drive the real relief and ledger with a simulated clock, bodies and faults; check every
    invariant after every step. Exit 0 when all hold and every coverage counter was hit."""
    if not 1 <= count <= MAX_SEEDS or agents < 1 or agents > 50 or not 0 < hours <= 24 * 30:
        _fail(f"--seeds in [1, {MAX_SEEDS}], --agents in [1, 50], --hours in (0, 720]", as_json)
    if jobs is not None and not 1 <= jobs <= MAX_JOBS:
        _fail(f"--jobs: must be between 1 and {MAX_JOBS}", as_json)
    if seed is not None and seed < 0:
        _fail("--seed must not be negative", as_json)
    if plant is not None and plant not in PLANTS:
        _fail(f"--plant: unknown bug {plant!r}; one of {', '.join(PLANTS)}", as_json)
    source = click.get_current_context().get_parameter_source("count")
    single = seed is not None and source is click.core.ParameterSource.DEFAULT
    start = seed if seed is not None else 0
    seeds = [start] if single else list(range(start, start + count))
    workers = jobs if jobs is not None else min(os.cpu_count() or 1, MAX_JOBS)
    report = run_seeds(seeds, agents=agents, hours=hours, plant=plant, jobs=max(1, workers))
    _emit(report, as_json, coverage_required=not single)


def _emit(report: SeedsReport, as_json: bool, *, coverage_required: bool) -> None:
    failures = report.failures
    missing = report.missing if coverage_required else []
    if as_json:
        click.echo(json.dumps({
            "ok": not failures and not missing, "seeds": len(report.results),
            "coverage": report.coverage, "seeds_hit": report.seeds_hit,
            "missing_coverage": missing,
            "failures": [f.to_json() for f in failures],
        }, indent=2))  # fmt: skip
    else:
        click.echo(f"{len(report.results)} seed(s), {len(failures)} failing")
        for name, hits in report.coverage.items():
            mark = "*" if name in REQUIRED_COVERAGE else " "
            click.echo(f" {mark} {name}: {hits} (in {report.seeds_hit.get(name, 0)} seeds)")
        for name in missing:
            click.echo(f"coverage never hit: {name}")
        for result in failures[:1]:
            click.echo(f"FAILED seed {result.seed}")
            for violation in result.violations:
                click.echo(f"  invariant broken: {violation}")
            if result.error:
                click.echo(f"  crashed: {result.error}")
            click.echo("  trace (last steps):")
            for line in result.minimal_trace():
                click.echo(f"    {line}")
            click.echo(f"  replay: {result.replay_command()}")
    sys.exit(1 if failures or missing else 0)
