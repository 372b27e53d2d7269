"""A real process that races other processes on one ledger; driven by test_ledger_races.py.

Usage: python race_worker.py MODE URL NODE START_FILE [ARGS...]. It waits for START_FILE to
exist (so every racer starts together), does its work, and prints one JSON line of results.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from onstation.core.errors import BlockedByPolicy, Conflict, StaleGeneration
from onstation.ledger import Ledger


def wait_for(path: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {path}")
        time.sleep(0.001)


def fence_admit(ledger: Ledger, node: str, attempts: int) -> dict[str, object]:
    fences: list[int] = []
    admissions: list[list[int]] = []
    lost = 0
    for _ in range(attempts):
        current = ledger.get_node(node).generation
        try:
            fences.append(
                ledger.fence(node, expect_generation=current, by=f"pid{os.getpid()}").generation
            )
        except Conflict:
            lost += 1
        target = current + 1
        try:
            lease = ledger.acquire_lease(node, expect_generation=target, holder=f"pid{os.getpid()}")
            admissions.append([lease.generation, lease.lease_id])
        except Conflict:
            lost += 1
    return {"fences": fences, "admissions": admissions, "lost": lost}


def respawn(ledger: Ledger, node: str, attempts: int) -> dict[str, object]:
    allowed = blocked = 0
    for _ in range(attempts):
        try:
            ledger.request_respawn(node, by=f"pid{os.getpid()}")
            allowed += 1
        except BlockedByPolicy:
            blocked += 1
    return {"allowed": allowed, "blocked": blocked}


def paused_writer(ledger: Ledger, node: str, checked: Path, go: Path) -> dict[str, object]:
    """Check the generation and write inside ONE transaction, pausing between the two."""

    def body(tx, now):  # type: ignore[no-untyped-def]
        ledger._guard(tx, now, node, 1, "paused write")
        checked.touch()
        wait_for(go)
        ledger._event(tx, now, node=node, kind="test.write", generation=1, actor="writer")
        return "written"

    try:
        return {"outcome": ledger._write(body)}
    except StaleGeneration as exc:
        return {"outcome": "denied", "message": exc.message}


def naive_writer(ledger: Ledger, node: str, checked: Path, go: Path) -> dict[str, object]:
    """Check in one call, pause, then write in another: the write must re-check and be denied."""
    ledger.guard(node, generation=1, action="pre-check")
    checked.touch()
    wait_for(go)
    try:
        ledger.intend_effect(
            node,
            generation=1,
            operation="git.push",
            destination="origin",
            arguments={"commit": "abc"},
        )
        return {"outcome": "written"}
    except StaleGeneration as exc:
        return {"outcome": "denied", "message": exc.message}


def churn(ledger: Ledger, node: str) -> None:
    """Fence and admit forever, acknowledging each committed generation on stdout."""
    while True:
        current = ledger.get_node(node).generation
        result = ledger.fence(node, expect_generation=current)
        print(f"fenced {result.generation}", flush=True)
        lease = ledger.acquire_lease(node, expect_generation=result.generation)
        print(f"admitted {lease.generation}", flush=True)


def admit(ledger: Ledger, node: str, rounds: int) -> dict[str, object]:
    """Start a new session for ``node`` (as a SessionStart hook does); report the verdict."""
    from onstation.ledger.bodies import HarnessLedger

    records = HarnessLedger(ledger)
    session = f"s-{os.getpid()}-{rounds}"
    admission = records.admit_session(session, harness="claude-code", node=node, workspace=None)
    return {"session": session, "admitted": admission.admitted,
            "generation": admission.session.generation}  # fmt: skip


def _prepared(url: str) -> Ledger:
    """The ledger on a PostgreSQL connection warmed as a daemon warms its server sessions:
    the hook fast path's and a session admission's statements prepared by name."""
    from onstation.ledger.pg_backend import PostgresBackend
    from onstation.relief import hotpath_pg

    backend = PostgresBackend(url)
    hotpath_pg.warm(backend)
    assert backend.prepared, "the warm-up prepared nothing"
    return Ledger(backend)


def main() -> None:
    mode, url, node, start = sys.argv[1:5]
    rest = sys.argv[5:]
    if mode == "admit-prepared":
        mode, ledger = "admit", _prepared(url)
    else:
        ledger = Ledger.open(url)
    if mode == "churn":
        churn(ledger, node)
        return
    wait_for(Path(start))
    if mode == "fence-admit":
        result = fence_admit(ledger, node, int(rest[0]))
    elif mode == "admit":
        result = admit(ledger, node, int(rest[0]))
    elif mode == "respawn":
        result = respawn(ledger, node, int(rest[0]))
    elif mode == "paused-writer":
        result = paused_writer(ledger, node, Path(rest[0]), Path(rest[1]))
    elif mode == "naive-writer":
        result = naive_writer(ledger, node, Path(rest[0]), Path(rest[1]))
    else:
        raise SystemExit(f"unknown mode {mode}")
    print(json.dumps(result), flush=True)
    ledger.close()


if __name__ == "__main__":
    main()
