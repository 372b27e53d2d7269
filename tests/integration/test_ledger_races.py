"""Real processes racing on one ledger, on every backend; and SIGKILL durability on SQLite."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from onstation.core.leases import LeaseState
from onstation.ledger import Ledger

WORKER = Path(__file__).with_name("race_worker.py")


def _spawn(mode: str, url: str, node: str, start: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), mode, url, node, str(start), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _collect(procs: list[subprocess.Popen[str]]) -> list[dict[str, object]]:
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


@pytest.mark.slow
def test_sixteen_processes_racing_fence_and_admit(ledger_url: str, tmp_path: Path) -> None:
    with Ledger.open(ledger_url) as ledger:
        ledger.register_node("contested")
    start = tmp_path / "start"
    procs = [_spawn("fence-admit", ledger_url, "contested", start, "25") for _ in range(16)]
    start.touch()
    results = _collect(procs)

    fences = [g for r in results for g in r["fences"]]  # type: ignore[attr-defined]
    admissions = [tuple(a) for r in results for a in r["admissions"]]  # type: ignore[attr-defined]
    assert len(fences) + len(admissions) + sum(r["lost"] for r in results) == 16 * 25 * 2  # type: ignore[misc]
    # Every won fence produced a distinct generation, and together they are contiguous.
    assert len(set(fences)) == len(fences)
    assert sorted(fences) == list(range(2, 2 + len(fences)))
    # Never two grants for one generation.
    admitted_generations = [g for g, _ in admissions]
    assert len(set(admitted_generations)) == len(admitted_generations)

    with Ledger.open(ledger_url) as ledger:
        node = ledger.get_node("contested")
        assert node.generation == 1 + len(fences)
        leases = ledger.leases("contested")
        assert sorted(ls.generation for ls in leases) == sorted(admitted_generations)
        assert sum(ls.state is LeaseState.LIVE for ls in leases) <= 1
        assert all(
            ls.state is LeaseState.FENCED for ls in leases if ls.generation < node.generation
        )
        history = ledger.history("contested")
        fenced = [e.generation for e in history if e.kind == "node.fenced"]
        assert fenced == list(range(2, node.generation + 1))  # contiguous, in commit order
        acquired = Counter(e.generation for e in history if e.kind == "lease.acquired")
        assert max(acquired.values(), default=0) <= 1


@pytest.mark.slow
def test_eight_processes_racing_respawn_requests(ledger_url: str, tmp_path: Path) -> None:
    with Ledger.open(ledger_url) as ledger:
        ledger.register_node("coord")
        limit = ledger.respawn_policy.limit
    start = tmp_path / "start"
    procs = [_spawn("respawn", ledger_url, "coord", start, "5") for _ in range(8)]
    start.touch()
    results = _collect(procs)
    assert sum(r["allowed"] for r in results) == limit  # type: ignore[misc]
    assert sum(r["blocked"] for r in results) == 8 * 5 - limit  # type: ignore[misc]
    with Ledger.open(ledger_url) as ledger:
        kinds = Counter(e.kind for e in ledger.history("coord"))
    assert kinds["respawn.counted"] == limit
    assert kinds["respawn.blocked"] == 8 * 5 - limit


def test_stale_writer_paused_between_check_and_write_is_denied(
    ledger_url: str, tmp_path: Path
) -> None:
    with Ledger.open(ledger_url) as ledger:
        ledger.register_node("body")
        ledger.acquire_lease("body")
    checked, go, start = tmp_path / "checked", tmp_path / "go", tmp_path / "start"
    proc = _spawn("naive-writer", ledger_url, "body", start, str(checked), str(go))
    start.touch()
    _wait(checked, proc)
    with Ledger.open(ledger_url) as ledger:
        ledger.fence("body", expect_generation=1, reason="relief while the writer slept")
    go.touch()
    (result,) = _collect([proc])
    assert result["outcome"] == "denied"
    with Ledger.open(ledger_url) as ledger:
        denial = ledger.denials("body")[-1]
        assert (denial.presented_generation, denial.current_generation) == (1, 2)
        assert ledger.effects("body") == []


def test_fence_waits_for_a_writer_inside_its_transaction(ledger_url: str, tmp_path: Path) -> None:
    """The check and the write are one transaction: a fence cannot slip in between."""
    with Ledger.open(ledger_url) as ledger:
        ledger.register_node("body")
        ledger.acquire_lease("body")
    checked, go, start = tmp_path / "checked", tmp_path / "go", tmp_path / "start"
    proc = _spawn("paused-writer", ledger_url, "body", start, str(checked), str(go))
    start.touch()
    _wait(checked, proc)

    fence_done = threading.Event()

    def fence() -> None:
        with Ledger.open(ledger_url) as other:
            other.fence("body", expect_generation=1)
        fence_done.set()

    thread = threading.Thread(target=fence)
    thread.start()
    # While the writer holds its transaction open, the fence must not commit.
    assert not fence_done.wait(0.5)
    go.touch()
    (result,) = _collect([proc])
    thread.join(timeout=60)
    assert fence_done.is_set()
    assert result["outcome"] == "written"
    with Ledger.open(ledger_url) as ledger:
        kinds = [e.kind for e in ledger.history("body")]
    assert kinds.index("test.write") < kinds.index("node.fenced")


def _wait(path: Path, proc: subprocess.Popen[str]) -> None:
    import time

    deadline = time.monotonic() + 60
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(proc.stderr.read() if proc.stderr else "worker died")
        assert time.monotonic() < deadline, "worker never reached its check"
        time.sleep(0.005)


@pytest.mark.slow
def test_sigkill_mid_loop_loses_no_acknowledged_grant(tmp_path: Path) -> None:
    url = str(tmp_path / "ledger.db")
    with Ledger.open(url) as ledger:
        ledger.register_node("churner")
    rng = random.Random(20261130)
    acknowledged: dict[str, int] = {"fenced": 1, "admitted": 0}
    for _round in range(12):
        proc = subprocess.Popen(
            [sys.executable, str(WORKER), "churn", url, "churner", "-"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        for _ in range(rng.randint(1, 40)):
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else "worker died"
            kind, generation = line.split()
            acknowledged[kind] = max(acknowledged[kind], int(generation))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()
        proc.stderr.close()  # type: ignore[union-attr]

        with Ledger.open(url) as ledger:
            assert ledger.backend.integrity_check() == "ok"  # type: ignore[attr-defined]
            node = ledger.get_node("churner")
            assert node.generation >= acknowledged["fenced"]
            leases = {ls.generation for ls in ledger.leases("churner")}
            assert all(g in leases for g in range(2, acknowledged["admitted"] + 1))
            fenced = [e.generation for e in ledger.history("churner") if e.kind == "node.fenced"]
            assert fenced == list(range(2, node.generation + 1))
            # The churner may have died between fence and admit: put the node back in step.
            if node.generation not in leases:
                ledger.acquire_lease("churner")
    assert acknowledged["admitted"] > 12
