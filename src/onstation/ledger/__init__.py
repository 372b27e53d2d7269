"""The durable lifecycle ledger behind one interface: SQLite (default) or PostgreSQL.

``Ledger.open(url)`` picks the backend from the URL: a path or ``sqlite:PATH`` for the
embedded default, ``postgresql://...`` for a fleet. All SQL lives in this package, with
numbered migrations under ``migrations/<dialect>/``.

The names below load on first use: importing one light module of the package (the hook
fast path's :mod:`onstation.ledger.fastpath`, :mod:`onstation.ledger.urls`) does not
load the whole ledger.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # the hook fast path imports this package: typing costs import time

if TYPE_CHECKING:
    from typing import Any

    from onstation.ledger.backends import (
        LedgerUnavailable,
        default_sqlite_path,
        latest_schema_version,
        open_backend,
    )
    from onstation.ledger.base import UnitOfWork
    from onstation.ledger.ledger import (
        DEFAULT_LEASE_TTL,
        Clock,
        Ledger,
        from_us,
        system_clock,
        to_us,
    )
    from onstation.ledger.urls import parse_url

_WHERE = {
    "DEFAULT_LEASE_TTL": "onstation.ledger.base",
    "Clock": "onstation.ledger.base",
    "Ledger": "onstation.ledger.ledger",
    "LedgerUnavailable": "onstation.ledger.backends",
    "UnitOfWork": "onstation.ledger.base",
    "default_sqlite_path": "onstation.ledger.backends",
    "from_us": "onstation.ledger.base",
    "latest_schema_version": "onstation.ledger.backends",
    "open_backend": "onstation.ledger.backends",
    "parse_url": "onstation.ledger.urls",
    "system_clock": "onstation.ledger.base",
    "to_us": "onstation.ledger.base",
}

__all__ = [
    "DEFAULT_LEASE_TTL",
    "Clock",
    "Ledger",
    "LedgerUnavailable",
    "UnitOfWork",
    "default_sqlite_path",
    "from_us",
    "latest_schema_version",
    "open_backend",
    "parse_url",
    "system_clock",
    "to_us",
]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'onstation.ledger' has no attribute {name!r}")
    __import__(where)  # not importlib: it costs the hook fast path an import
    value = getattr(sys.modules[where], name)
    globals()[name] = value
    return value
