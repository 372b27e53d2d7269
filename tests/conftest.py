"""Shared fixtures: ledgers on every backend, a controllable clock, PostgreSQL discovery.

PostgreSQL tests use ``ONSTATION_TEST_PG`` (default ``postgresql://postgres@127.0.0.1:5432/test``)
and give each test its own schema. Where no server answers they are skipped, except in CI
(``CI=true``) or with ``ONSTATION_REQUIRE_PG=1``, where a missing server fails the run: the
PostgreSQL backend must never go untested in CI.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from onstation.ledger import Ledger
from onstation.testing import FakeClock, scratch_postgres_url, with_schema

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"
#: The checkout the tests run in (its bench/ is not installed with the package).
_ROOT = Path(__file__).parents[1]

# The per-user daemon (``onstation daemon``) never serves the suite by accident: a
# developer's running daemon stays out of it, and a test that wants one starts its own.
# With ONSTATION_TEST_DAEMON=1 the suite's hook and CLI calls all go through a daemon this
# session starts (tests/integration/test_daemon.py runs the hook end-to-end tests so).
if os.environ.get("ONSTATION_TEST_DAEMON") != "1":
    os.environ["ONSTATION_DAEMON"] = "off"


@pytest.fixture(scope="session", autouse=True)
def _suite_daemon() -> Iterator[None]:
    """With ONSTATION_TEST_DAEMON=1: one daemon for this session (each xdist worker its
    own), which must have served calls by the end."""
    if os.environ.get("ONSTATION_TEST_DAEMON") != "1":
        yield
        return
    import subprocess
    import sys
    import tempfile

    onstation = str(Path(sys.executable).with_name("onstation"))
    directory = tempfile.mkdtemp(prefix="onstation-daemon-")
    socket = os.path.join(directory, "d.sock")
    os.environ.pop("ONSTATION_DAEMON", None)
    os.environ["ONSTATION_DAEMON_SOCKET"] = socket
    subprocess.run([onstation, "daemon", "start"], check=True, capture_output=True)
    try:
        yield
    finally:
        status = subprocess.run([onstation, "daemon", "status", "--json"],
                                capture_output=True, text=True, check=False)  # fmt: skip
        subprocess.run([onstation, "daemon", "stop"], check=False, capture_output=True)
        served = __import__("json").loads(status.stdout).get("served", 0) if status.stdout else 0
        print(f"\nonstation daemon: served {served} calls of this session")
        assert served > 0, f"the suite's daemon served nothing ({status.stdout}{status.stderr})"


def _pg_base() -> str:
    return os.environ.get("ONSTATION_TEST_PG", DEFAULT_PG)


def _pg_required() -> bool:
    return (
        os.environ.get("CI", "").lower() == "true" or os.environ.get("ONSTATION_REQUIRE_PG") == "1"
    )


_pg_state: dict[str, str | None] = {}


def pg_available() -> str | None:
    """None when PostgreSQL answers, else the reason it does not."""
    if "reason" not in _pg_state:
        try:
            import psycopg

            with psycopg.connect(_pg_base(), connect_timeout=5) as conn:
                conn.execute("SELECT 1")
            _pg_state["reason"] = None
        except Exception as exc:
            _pg_state["reason"] = f"PostgreSQL not reachable at {_pg_base()}: {exc}"
    return _pg_state["reason"]


def _require_pg() -> None:
    reason = pg_available()
    if reason is not None:
        if _pg_required():
            pytest.fail(f"{reason} (required in CI)")
        pytest.skip(reason)


_with_schema = with_schema


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A migrated, empty PostgreSQL ledger in a schema of its own, dropped afterwards."""
    _require_pg()
    with scratch_postgres_url(_pg_base()) as url:
        yield url


@pytest.fixture
def no_connection_left_ahead() -> Iterator[None]:
    """Close and forget every PostgreSQL connection a test made ahead (``ledger.pg_ahead``)
    and what the process took: module state, which the next test must not find."""
    from onstation.ledger import pg_ahead

    yield
    for backend, _pid, _made in pg_ahead._AHEAD.values():
        backend.close()
    pg_ahead._AHEAD.clear()
    pg_ahead._TAKEN.clear()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A fresh SQLite ledger file path."""
    return str(tmp_path / "ledger.db")


@pytest.fixture(params=["sqlite", "postgres"])
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of an empty ledger, once per backend."""
    if request.param == "sqlite":
        return str(tmp_path / "ledger.db")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def clock() -> FakeClock:
    """A controllable clock starting at 2026-01-01 12:00 UTC."""
    return FakeClock()


@pytest.fixture
def make_ledger(ledger_url: str) -> Iterator[Callable[..., Ledger]]:
    """Open (possibly several) ledgers on the same database; all are closed afterwards."""
    opened: list[Ledger] = []

    def factory(**kwargs: object) -> Ledger:
        ledger = Ledger.open(ledger_url, **kwargs)  # type: ignore[arg-type]
        opened.append(ledger)
        return ledger

    yield factory
    for ledger in opened:
        ledger.close()


@pytest.fixture
def ledger(make_ledger: Callable[..., Ledger], clock: FakeClock) -> Ledger:
    """An empty ledger on the current backend, on the fake clock."""
    return make_ledger(clock=clock)


# -- the adversarial campaigns: counts printed at the end of the run --------------------------

#: campaign name -> {"tried": n, "denied": n, "lost": n}, summed over the run (and workers).
_CAMPAIGNS: dict[str, dict[str, int]] = {}


def soak_scale() -> int:
    """How many times larger the adversarial campaigns run: 1 in CI, more under ``./dev soak``
    (``ONSTATION_SOAK=N``)."""
    try:
        return max(1, int(os.environ.get("ONSTATION_SOAK", "1")))
    except ValueError:
        return 1


class Campaign:
    """Counts one adversarial campaign: attempts tried, attempts refused as they must be, and
    anything lost (a promise broken: a double grant, a repeated effect, a fenced write kept)."""

    def __init__(self, name: str) -> None:
        self.counts = _CAMPAIGNS.setdefault(name, {"tried": 0, "denied": 0, "lost": 0})

    def tried(self, n: int = 1) -> None:
        self.counts["tried"] += n

    def denied(self, n: int = 1) -> None:
        self.counts["denied"] += n

    def lost(self, n: int = 1) -> None:
        self.counts["lost"] += n


@pytest.fixture
def campaign() -> type[Campaign]:
    """``campaign("name")``: the counter of one adversarial campaign."""
    return Campaign


def pytest_sessionfinish(session: pytest.Session) -> None:
    output = getattr(session.config, "workeroutput", None)
    if output is not None:  # an xdist worker: hand the counts to the controller
        import json

        output["onstation_campaigns"] = json.dumps(_CAMPAIGNS)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: object, error: object) -> None:
    import json

    text = getattr(node, "workeroutput", {}).get("onstation_campaigns")
    for name, counts in json.loads(text or "{}").items():
        mine = _CAMPAIGNS.setdefault(name, {"tried": 0, "denied": 0, "lost": 0})
        for key, value in counts.items():
            mine[key] += int(value)


def pytest_terminal_summary(terminalreporter: object) -> None:
    if not _CAMPAIGNS:
        return
    write = terminalreporter.write_line  # type: ignore[attr-defined]
    width = max(len("campaign"), *(len(n) for n in _CAMPAIGNS))
    write("")
    write(f"adversarial campaigns (scale {soak_scale()}):")
    write(f"  {'campaign'.ljust(width)}  {'tried':>8}  {'denied':>8}  {'lost':>6}")
    for name in sorted(_CAMPAIGNS):
        c = _CAMPAIGNS[name]
        write(f"  {name.ljust(width)}  {c['tried']:>8}  {c['denied']:>8}  {c['lost']:>6}")


# -- git evidence (tests/integration/test_evidence*.py, test_git_watch.py) -------------------


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME of the test's own (git's global configuration and ignore file live there)."""
    path = tmp_path / "home"
    path.mkdir()
    monkeypatch.setenv("HOME", str(path))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    return path


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Every process the evidence module starts, by git subcommand."""
    from onstation.harness import evidence

    seen: Counter[str] = Counter()
    real = evidence.run_captured

    def counting(argv: list[str], **kwargs: Any) -> tuple[int, str, str]:
        seen[argv[3] if argv[:1] == ["git"] else argv[0]] += 1
        return real(argv, **kwargs)

    monkeypatch.setattr(evidence, "run_captured", counting)
    return seen


@pytest.fixture
def bench_module() -> Callable[[str], ModuleType]:
    """Loads a file of ``bench/`` (``"bench_sim.py"``, ``"__main__.py"``) as a module of its
    own: the benchmarks are not installed with the package, so the tests load them from
    the checkout they run in."""

    def load(filename: str) -> ModuleType:
        name = f"onstation_bench_{Path(filename).stem.strip('_')}"
        spec = importlib.util.spec_from_file_location(name, _ROOT / "bench" / filename)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module

    return load
