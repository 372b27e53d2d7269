"""``./dev bench sim``'s floor counts what a seed really runs (issue 14).

The floor line printed "its SQLite calls (0 statements): 0 ms" once the ledger made its
connections through ``onstation.ledger.fastpath.connect`` (``_sqlite3.connect``): the bench
counted only connections made through ``sqlite3.connect``, so every statement went uncounted
and the floor, and the target's multiple of it, were understated.
"""

from __future__ import annotations

import _sqlite3
import collections
import sqlite3
from collections.abc import Callable
from types import ModuleType

from onstation.sim.run import run_seeds


def test_the_counting_run_sees_every_statement_and_git_process_of_a_seed(
    bench_module: Callable[[str], ModuleType],
) -> None:
    bench = bench_module("bench_sim.py")
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
