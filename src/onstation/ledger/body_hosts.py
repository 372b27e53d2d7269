"""The host processes a body's sessions recorded: read for evidence of a body's end.

A relief classifies why a body is relieved from what it can prove: every host process its
lease's sessions recorded being gone is a crash (see :mod:`onstation.relief.incident_cause`).
"""

from __future__ import annotations

import json
from typing import Any

from onstation.ledger.bodies import HarnessLedger


def hosts_of_lease(records: HarnessLedger, lease_id: int) -> list[tuple[str, dict[str, Any]]]:
    """(session id, host process witness as JSON) of each session of lease ``lease_id`` that
    recorded its host, oldest first."""
    rows = records.ledger._read_single(
        lambda tx, _now: tx.all(records._q("body_hosts_of_lease"), (lease_id,))
    )
    return [(str(session_id), json.loads(witness)) for session_id, witness in rows]


__all__ = ["hosts_of_lease"]
