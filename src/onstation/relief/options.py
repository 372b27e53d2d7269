"""What a relief is asked to do (:class:`ReliefOptions`) and what it ended with
(:class:`ReliefOutcome`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from onstation.harness.launch import Launcher

Progress = Callable[[str], None]


@dataclass
class ReliefOptions:
    """How one relief runs."""

    #: What launches the successor; None: what the body was running under (recorded at its
    #: admission or launch), and no relief at all when nothing was recorded.
    launcher: Launcher | None = None
    by: str = "team-lead"
    cause: str = "manual"
    #: Why the body is relieved (context-pressure, crash, hang or operator) as stated by the
    #: operator; None: as the evidence shows (relief/incident_cause.py).
    incident: str | None = None
    #: Which cap the respawn counts against: coordinator (a self-respawn) or relief.
    respawn_kind: str = "relief"
    emergency: bool = False
    #: How long to wait for an open APPROACH/CHECKPOINT exchange to close before fencing.
    exchange_wait: float = 30.0
    brief_wait: float = 30.0
    challenge_wait: float = 60.0
    shutdown_wait: float = 10.0
    poll: float = 0.2
    workspace: str | None = None
    db: str | None = None
    capacity_file: str | None = None
    facts_file: str | None = None
    native: bool = False
    # An open relief older than this was abandoned by a crashed controller and is taken over.
    stale_after: timedelta = timedelta(hours=1)
    launch_args: tuple[str, ...] = ()
    progress: Progress = field(default=lambda _text: None)
    # Called while a wait goes on: (what, seconds waited, seconds allowed).
    waiting: Callable[[str, float, float], None] = field(default=lambda _w, _e, _t: None)
    # Time and process observation are passed in, so the simulator can drive a relief with
    # a simulated clock and simulated bodies (see onstation.sim).
    sleep: Callable[[float], None] = time.sleep
    monotonic: Callable[[], float] = time.monotonic
    witnesses: Any = None  # a module-like object: observe, check, signal_if_match, ProcessWitness
    #: Kept ``git cat-file`` processes, and ``git remote -v`` answers kept while proven
    #: unchanged, shared by the reliefs of one controller process (harness.git_kept.GitBatches;
    #: the simulation's); None: the relief keeps its own processes, ended with it, and reads
    #: the remote once.
    git_batches: Any = None


@dataclass
class ReliefOutcome:
    """What a relief ended with."""

    relief_id: int
    node: str
    verdict: str
    state: str
    from_generation: int
    to_generation: int | None
    report_path: str | None
    reasons: list[str]
    successor_pid: int | None = None
    #: Whether the predecessor was fenced (a relief stopped before its fence leaves it live).
    fenced: bool = True
    #: What an operator can run to clear what stopped the relief.
    fix: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` form."""
        return dict(self.__dict__)


def _iso(moment: Any) -> str:
    return str(moment.isoformat().replace("+00:00", "Z"))
