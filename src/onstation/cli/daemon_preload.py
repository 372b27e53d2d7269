"""What the per-user daemon loads before it serves (:mod:`onstation.cli.daemon`).

Every module the daemon has imported is shared, copy-on-write, by every child it forks, so
a call's child pays for none of those imports; each megabyte loaded is also copied and torn
down by every child, so only what the calls use is loaded (docs/decisions.md, "What is
preloaded").
"""

from __future__ import annotations

import ast
import contextlib
import gc
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

#: The installed package's directory.
PACKAGE = Path(__file__).resolve().parent.parent
#: Packages never imported by the warm-up: the console (onstation serve runs in its own
#: process) and what only tests and the simulator use.
NOT_PRELOADED = ("onstation.api", "onstation.testing", "onstation.sim")


def _imported_names(root: Path) -> Iterator[str]:
    """Every absolute module name the package's sources import, anywhere (also inside
    functions: the hot paths import lazily, and the daemon imports it all ahead)."""
    for path in sorted(root.rglob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                yield from (alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                yield node.module


def preload(root: Path = PACKAGE, *, postgres: bool = False) -> int:
    """Import every module of the package (but the console's, the simulator's and the
    tests') and every standard-library module its sources import anywhere, also inside
    functions (the hot paths import lazily); with ``postgres``, psycopg too. Other
    third-party modules that are imported only inside functions are left to the calls that
    need them: each costs every call's fork and teardown its memory. Returns how many
    modules are loaded."""
    wanted: set[str] = set()
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(p for p in parts if p != "__init__")
        if name.startswith(NOT_PRELOADED) or ".fake_agent" in name or name.endswith("__main__"):
            continue
        wanted.add(name)
    for name in _imported_names(root):
        if name.split(".")[0] in sys.stdlib_module_names and name != "__main__":
            wanted.add(name)
    if postgres:
        wanted.add("psycopg")
    for name in sorted(wanted):
        try:
            importlib.import_module(name)
        except Exception:  # noqa: S112 - an optional dependency absent here is not needed
            continue
    _warm(postgres)
    from onstation.cli.daemon_warmup import warm_hooks

    warm_hooks()  # the hook paths run once here, specialized for every child
    # What is loaded now is shared by every child, copy-on-write: kept out of the garbage
    # collector's sight, a child's collection does not write (and so copy) all of it.
    gc.collect()
    gc.freeze()
    return len(sys.modules)


def load_postgres() -> None:
    """Load psycopg into a daemon started without it once its calls use a PostgreSQL ledger
    (one a workspace's configuration names): as ``--postgres`` would have, so that no spare
    and no call imports it again (about 100 ms each)."""
    if "psycopg" in sys.modules:
        return
    try:
        importlib.import_module("psycopg")
    except Exception:  # not installed: the calls say so themselves
        return
    _warm(True)
    gc.collect()
    gc.freeze()


def _warm(postgres: bool) -> None:
    """Fill the caches every ledger call fills first, once, for every child: the named
    queries (parsed from package data, which the daemon's package watch covers) and the text
    codecs the standard library looks up by name on first use."""
    import codecs

    from onstation.ledger import named_queries

    for dialect in ("sqlite", "postgres") if postgres else ("sqlite",):
        named_queries.queries(dialect)
    for name in ("ascii", "latin-1", "utf-8", "utf-8-sig", "idna", "cp437"):
        with contextlib.suppress(LookupError):
            codecs.lookup(name)
