"""The durable lifecycle ledger behind one interface: SQLite (default) or PostgreSQL.

``Ledger.open(url)`` picks the backend from the URL: a path or ``sqlite:PATH`` for the
embedded default, ``postgresql://...`` for a fleet. SQL lives here, with numbered
migrations under ``migrations/<dialect>/``.
"""

from onstation.ledger.backends import (
    LedgerUnavailable,
    default_sqlite_path,
    latest_schema_version,
    open_backend,
    parse_url,
)
from onstation.ledger.ledger import DEFAULT_LEASE_TTL, Clock, Ledger, from_us, system_clock, to_us

__all__ = [
    "DEFAULT_LEASE_TTL",
    "Clock",
    "Ledger",
    "LedgerUnavailable",
    "default_sqlite_path",
    "from_us",
    "latest_schema_version",
    "open_backend",
    "parse_url",
    "system_clock",
    "to_us",
]
