"""The hook launcher's start-up (issue 14): ``site`` only when a command needs it, and
``_sqlite3`` without ``functools``.

The installed hook, status-line and heartbeat commands start Python with ``-S``. A fast path
answers with the standard library and onstation alone, so ``site`` is set up only just
before the first import of anything else (cli/entry.py ``SiteOnDemand``); the full path then
imports its installed distributions as after a normal start. ``_sqlite3`` is loaded with a
stand-in ``functools`` that hands it the C ``lru_cache``. Which modules load, never how
long they take.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path

from onstation.ledger import Ledger

PYTHON = sys.executable
LAUNCHER = str(
    Path(__file__).resolve().parents[2] / "src" / "onstation" / "cli" / "hook_launcher.py"
)
SRC = str(Path(LAUNCHER).parents[2])
#: What the fast path must not load: site, and what _sqlite3 or collections.abc would pull in.
START_UP = {"site", "functools", "collections", "types"}


def _imports(stderr: str) -> set[str]:
    return {
        row.rsplit("|", 1)[1].strip()
        for row in stderr.splitlines()
        if row.startswith("import time:") and "|" in row
    }


def _launch(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "ONSTATION_DAEMON": "off",
           "XDG_STATE_HOME": str(tmp_path / "state")}  # fmt: skip
    return subprocess.run([PYTHON, "-S", "-X", "importtime", LAUNCHER, *args], env=env,
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip


def test_a_heartbeat_on_the_fast_path_sets_up_no_site_and_no_functools(tmp_path: Path) -> None:
    db = str(tmp_path / "ledger.db")
    with Ledger.open(db) as ledger:
        ledger.register_node("n1")
        ledger.acquire_lease("n1", holder="body", ttl=timedelta(seconds=60))
    done = _launch(tmp_path, "lease", "renew", "n1", "--generation", "1", "--db", db)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("renewed n1 generation 1 until ")
    loaded = _imports(done.stderr)
    assert "_sqlite3" in loaded and "click" not in loaded
    assert loaded.isdisjoint(START_UP), sorted(loaded & START_UP)


def test_the_full_path_gets_site_when_it_needs_an_installed_distribution(tmp_path: Path) -> None:
    # No such node: the fast path declines, the full command line (click, from site-packages)
    # answers, exactly as the console script would.
    db = str(tmp_path / "ledger.db")
    with Ledger.open(db) as ledger:
        ledger.register_node("n1")
    done = _launch(tmp_path, "lease", "renew", "ghost", "--generation", "1", "--db", db)
    assert done.returncode == 2
    assert [line for line in done.stderr.splitlines() if not line.startswith("import time:")] == [
        "onstation: bad input: no such node 'ghost'"
    ]
    loaded = _imports(done.stderr)
    assert {"site", "click"} <= loaded


def _child(code: str, *path: str) -> str:
    env = {"PYTHONPATH": ":".join((SRC, *path)), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([PYTHON, "-S", "-c", code], capture_output=True, text=True,
                          timeout=60, env=env, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_module_found_only_in_site_packages_is_found_once_site_is_set_up() -> None:
    out = _child(
        "import sys\n"
        "from onstation.cli.entry import SITE_ON_DEMAND\n"
        "SITE_ON_DEMAND.install()\n"
        "assert 'site' not in sys.modules\n"
        "import click\n"  # only in the virtual environment's site-packages
        "assert 'site' in sys.modules and SITE_ON_DEMAND not in sys.meta_path\n"
        "try:\n"
        "    import no_such_module_anywhere\n"
        "except ModuleNotFoundError:\n"
        "    print('missing', click.__name__)\n"
    )
    assert out == "missing click"


def test_site_is_set_up_before_any_third_party_import_even_one_found_without_it(
    tmp_path: Path,
) -> None:
    # A distribution beside onstation (as in a non-editable install, where the launcher's
    # directory is site-packages itself) is found without site; site is set up before it
    # all the same, so its .pth files have run as after a normal start.
    (tmp_path / "beside.py").write_text("import sys\nSITE = 'site' in sys.modules\n")
    out = _child(
        "import sys\n"
        "from onstation.cli.entry import SITE_ON_DEMAND\n"
        "SITE_ON_DEMAND.install()\n"
        "import beside\n"
        "print(beside.SITE, SITE_ON_DEMAND in sys.meta_path)\n",
        str(tmp_path),
    )
    assert out == "True False"


def test_standard_library_and_onstation_imports_never_set_up_site() -> None:
    out = _child(
        "import sys\n"
        "from onstation.cli.entry import SITE_ON_DEMAND\n"
        "SITE_ON_DEMAND.install()\n"
        "import json, sqlite3, email.message, onstation.core.hull\n"
        "print('site' in sys.modules, sys.meta_path[0] is SITE_ON_DEMAND)\n"
    )
    assert out == "False True"


def test_sqlite_loaded_without_functools_caches_statements_as_usual() -> None:
    out = _child(
        "import sys\n"
        "from onstation.cli.entry import load_sqlite_without_functools\n"
        "load_sqlite_without_functools()\n"
        "assert '_sqlite3' in sys.modules and 'functools' not in sys.modules\n"
        "import _sqlite3\n"
        "conn = _sqlite3.connect(':memory:', cached_statements=8)\n"
        "conn.execute('CREATE TABLE t (v INTEGER)')\n"
        # More distinct statements than the cache holds, each run again: evictions and hits.
        "total = 0\n"
        "for round_ in range(3):\n"
        "    for i in range(20):\n"
        "        conn.execute(f'INSERT INTO t VALUES ({i})')\n"
        "        total += conn.execute(f'SELECT count(*) FROM t WHERE v = {i}').fetchone()[0]\n"
        "import functools, sqlite3\n"  # the real ones, loaded normally afterwards
        "assert hasattr(functools, 'reduce') and functools.lru_cache.__module__ == 'functools'\n"
        "print(total, sqlite3.connect(':memory:').execute('SELECT 1').fetchone()[0])\n"
    )
    # Round r finds each value r + 1 times: 20 * (1 + 2 + 3).
    assert out == "120 1"


def test_sqlite_is_loaded_normally_when_functools_is_already_loaded() -> None:
    out = _child(
        "import sys, functools\n"
        "from onstation.cli.entry import load_sqlite_without_functools\n"
        "load_sqlite_without_functools()\n"
        "print('_sqlite3' in sys.modules, sys.modules['functools'] is functools)\n"
    )
    assert out == "False True"
