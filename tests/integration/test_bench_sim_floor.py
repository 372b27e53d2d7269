"""``./dev bench sim``'s floor counts what a seed really runs (issue 14).

The floor line printed "its SQLite calls (0 statements): 0 ms" once the ledger made its
connections through ``onstation.ledger.fastpath.connect`` (``_sqlite3.connect``): the bench
counted only connections made through ``sqlite3.connect``, so every statement went uncounted
and the floor, and the target's multiple of it, were understated.
"""

from __future__ import annotations

import _sqlite3
import collections
import importlib.util
import sqlite3
import sys
from pathlib import Path
from types import ModuleType

from onstation.sim.run import run_seeds

ROOT = Path(__file__).parents[2]


def _bench_sim() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_sim", ROOT / "bench" / "bench_sim.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_sim"] = module
    spec.loader.exec_module(module)
    return module


def test_the_counting_run_sees_every_statement_and_git_process_of_a_seed() -> None:
    bench = _bench_sim()
    before = (sqlite3.connect, _sqlite3.connect)
    calls: collections.Counter[str] = collections.Counter()
    sql = [0.0]
    with bench._counting(calls, sql):
        run_seeds([3], agents=2, hours=2.0)
    # Each ledger write is at least BEGIN IMMEDIATE, a statement and COMMIT.
    assert calls["sqlite statement"] > 100
    assert sql[0] > 0
    assert calls["git status"] >= 1
    # Both ways of connecting are put back as they were.
    assert (sqlite3.connect, _sqlite3.connect) == before
