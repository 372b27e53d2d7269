"""Requests per second of the operator's console (``onstation serve``) with 100 identities.

A real ``onstation serve`` process on a scratch ledger (SQLite, then PostgreSQL) holding 100
identities, each admitted by a SessionStart hook call, with a context-fill reading, an open
effect and some history. A load generator in this process (keep-alive HTTP clients on
threads) measures, for a few seconds each:

* the team view (``GET /api/v1/team``, every identity's row) in requests/s;
* a static file of the page (``GET /style.css``) on the same server: the HTTP stack's
  floor, the named baseline the team view is compared with;
* ``team_rows`` called in-process on the same ledger: the ledger's floor for the same rows;
* the event stream: catch-up throughput (events/s delivered to one client that resumes from
  the start of a history of several thousand events), and stream opens per second (connect,
  resume with ``Last-Event-ID`` ten events back, read those ten, close).

Run: ``./dev bench api`` (PostgreSQL from ONSTATION_BENCH_PG, default the local test
database, in a scratch schema; skipped with a note when no server answers).
``ONSTATION_BENCH_API_SECONDS`` sets each measurement's length (default 3).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx

from onstation.harness.adapters import HookCall
from onstation.harness.config import WorkspaceConfig
from onstation.ledger import Ledger, open_backend
from onstation.ledger.bodies import HarnessLedger
from onstation.relief.hooks import HookRunner
from onstation.relief.team import team_rows

IDENTITIES = 100
CLIENTS = 4
SECONDS = float(os.environ.get("ONSTATION_BENCH_API_SECONDS", "3"))
ONSTATION = str(Path(sys.executable).with_name("onstation"))


def _populate(url: str, workdir: Path) -> str:
    """100 admitted identities with a reading and an effect each; an operator token."""
    with Ledger.open(url) as ledger:
        records = HarnessLedger(ledger)
        for n in range(IDENTITIES):
            node = f"agent-{n:03d}"
            ledger.register_node(node, role="executor", spawner="lead")
            runner = HookRunner(ledger, "claude-code", WorkspaceConfig(node=node))
            runner.handle(HookCall.from_payload("claude-code", "SessionStart", {
                "session_id": f"sess-{n}", "cwd": str(workdir), "hook_event_name": "SessionStart",
                "source": "startup"}))  # fmt: skip
            session = records.session(f"sess-{n}")
            assert session is not None
            for percent in (8.0, 16.0, 20.0 + n % 20):
                records.record_fill(session, percent=percent, used_tokens=int(percent * 2000),
                                    window_tokens=200_000, source="bench", model=None,
                                    tier="green" if percent < 25 else "amber")  # fmt: skip
            ledger.intend_effect(node, generation=session.generation, operation="git.push",
                                 destination=f"file:///srv/{node}.git",
                                 arguments={"n": n})  # fmt: skip
            for k in range(30):
                records.add_note(node, kind="note", text=f"step {k}", by=node,
                                 generation=session.generation)  # fmt: skip
        return ledger.create_operator_token("bench", by="bench").token


@contextlib.contextmanager
def _serve(url: str) -> Iterator[str]:
    env = {**os.environ, "ONSTATION_DB": url}
    proc = subprocess.Popen([ONSTATION, "serve", "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if "http://" not in line:
            error = proc.stderr.read() if proc.stderr is not None else ""
            raise SystemExit(f"bench: onstation serve did not start: {error}")
        yield line.split("http://", 1)[1].split("/", 1)[0]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _rate(work: Callable[[], int], clients: int = CLIENTS) -> float:
    """Units of ``work`` per second over ``SECONDS``, from ``clients`` threads."""
    done = [0] * clients
    stop = time.perf_counter() + SECONDS

    def loop(i: int) -> None:
        while time.perf_counter() < stop:
            done[i] += work()

    started = time.perf_counter()
    threads = [threading.Thread(target=loop, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(done) / (time.perf_counter() - started)


def _in_process(work: Callable[[], object]) -> float:
    """Calls of ``work`` per second over ``SECONDS``, in this thread (a ledger's connection
    belongs to the thread that opened it)."""
    calls = 0
    started = time.perf_counter()
    while time.perf_counter() - started < SECONDS:
        work()
        calls += 1
    return calls / (time.perf_counter() - started)


def _get(base: str, token: str, path: str) -> Callable[[], int]:
    local = threading.local()

    def once() -> int:
        client = getattr(local, "client", None)
        if client is None:
            client = local.client = httpx.Client(base_url=f"http://{base}", headers={
                "Authorization": f"Bearer {token}"}, timeout=30)  # fmt: skip
        answer = client.get(path)
        if answer.status_code != 200:
            raise SystemExit(f"bench: GET {path} answered {answer.status_code}: {answer.text}")
        return 1

    return once


def _stream_events(base: str, token: str, after: int, want: int) -> int:
    got = 0
    headers = {"Authorization": f"Bearer {token}", "Last-Event-ID": str(after)}
    with (
        httpx.Client(timeout=60) as client,
        client.stream("GET", f"http://{base}/api/v1/events", headers=headers) as answer,
    ):
        for line in answer.iter_lines():
            if line.startswith("id: "):
                got += 1
                if got >= want:
                    break
    return got


def _measure(label: str, url: str) -> None:
    with tempfile.TemporaryDirectory(prefix="onstation-bench-api-") as scratch:
        token = _populate(url, Path(scratch))
        with Ledger.open(url) as ledger:
            newest = ledger.history(limit=1)[-1].seq
            rows = _in_process(lambda: team_rows(ledger))
        with _serve(url) as base:
            _get(base, token, "/api/v1/team")()  # warm: first request opens the ledger
            floor = _rate(_get(base, token, "/style.css"))
            team = _rate(_get(base, token, "/api/v1/team"))
            started = time.perf_counter()
            caught = _stream_events(base, token, 0, newest)
            catch_up = caught / (time.perf_counter() - started)
            opens = _rate(lambda: _stream_events(base, token, newest - 10, 10) // 10)
    print(f"{label:<9} static file (HTTP floor, baseline)  {floor:8.1f} req/s")
    print(f"{label:<9} GET /api/v1/team ({IDENTITIES} rows)       {team:8.1f} req/s"
          f"   {team / floor:5.2f}x the HTTP floor")  # fmt: skip
    print(f"{label:<9} team_rows in process (ledger)     {rows:8.1f} /s"
          f"     (the service reaches {team / rows:4.2f}x of it)")  # fmt: skip
    print(f"{label:<9} event stream catch-up              {catch_up:8.0f} events/s"
          f" ({caught} events)")  # fmt: skip
    print(f"{label:<9} event stream opens (10 events)     {opens:8.1f} streams/s")


def main() -> None:
    print(f"onstation serve with {IDENTITIES} identities, {CLIENTS} keep-alive clients, "
          f"{SECONDS:.0f} s per figure")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="onstation-bench-api-db-") as scratch:
        os.chmod(scratch, 0o700)
        _measure("sqlite", str(Path(scratch) / "ledger.db"))
    base = os.environ.get("ONSTATION_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")
    try:
        import psycopg

        with psycopg.connect(base, autocommit=True, connect_timeout=3) as conn:
            schema = f"bench_{uuid.uuid4().hex[:12]}"
            conn.execute(f'CREATE SCHEMA "{schema}"')
    except Exception as exc:  # no server: say so, do not fail the run
        print(f"postgres  skipped: no server at {base} ({type(exc).__name__})")
        return
    url = f"{base}{'&' if '?' in base else '?'}schema={schema}"
    try:
        backend = open_backend(url, require_migrated=False)
        backend.migrate()
        backend.close()
        _measure("postgres", url)
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


if __name__ == "__main__":
    main()
