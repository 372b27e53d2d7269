"""The onstation command line as the agent uses it, and what the ledger says about this body.

The agent acts through ``onstation`` commands run as their own processes, as an agent's shell
would, with the agent's ledger (:class:`CLI`); a launched successor renews its lease in a
thread (:class:`Heartbeat`). What it needs to know about its own standing it reads from the
ledger's JSON (``--json``) fields, never from the wording of a hook's answer:

- admitted: the node's ``live_lease`` is held by this session (its ``holder``), at its
  ``generation`` (``onstation node show``);
- fenced: the node's ``generation`` has moved past this body's (``onstation node show``);
- not yet RUNNING: this generation's birth is recorded (``birth.provisional``) and not yet
  made RUNNING (``birth.running``) (``onstation history``);
- asked to hand over: a message of a relief kind, delivered to this body since it started
  and addressed to its generation, from an actor or onstation rather than from another body
  (``onstation message list``: ``kind``, ``generation``, ``sender_generation``,
  ``delivered_at``).

The functions that read those fields do no I/O, so they can be tested on their own.
"""

from __future__ import annotations

import json
import math
import subprocess
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

from onstation.harness.fake_agent.common import EXIT_DENIED, AgentError, Log, onstation_argv

#: The lease holder of a Claude Code session, as the ledger names it
#: (``onstation.ledger.bodies.holder_for("claude-code", session_id)``).
HOLDER = "claude-code session {session_id}"

#: Message kinds that ask a body to hand over: the hull tier's own requests (Red, Critical)
#: and a relief's request to the body it relieves; each with the tier it names.
RELIEF_KINDS = {"relief.requested": "Red", "relief.emergency": "Critical",
                "relief_requested": "Red"}  # fmt: skip


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def admitted_generation(node: dict[str, Any], session_id: str) -> int | None:
    """The generation this session holds when ``node show``'s live lease is its own; else
    None (another body holds it, or none does)."""
    lease = node.get("live_lease")
    if not isinstance(lease, dict) or lease.get("holder") != HOLDER.format(session_id=session_id):
        return None
    return _int(lease.get("generation"))


def is_fenced(node: dict[str, Any], generation: int) -> bool:
    """Whether ``node show`` says the identity has moved past ``generation``."""
    current = _int(node.get("generation"))
    return current is not None and current != generation


def awaiting_birth(history: dict[str, Any], generation: int) -> bool:
    """Whether ``history`` holds a birth of ``generation`` that is not yet RUNNING."""
    events = history.get("events")
    rows = events if isinstance(events, list) else []
    kinds = {
        e.get("kind")
        for e in rows
        if isinstance(e, dict) and _int(e.get("generation")) == generation
    }
    return "birth.provisional" in kinds and "birth.running" not in kinds


def relief_requests(
    messages: dict[str, Any], generation: int, since: datetime
) -> list[dict[str, Any]]:
    """The relief requests ``message list`` shows delivered to ``generation`` since
    ``since``, oldest first. A body's own notice to its spawner (same kind, sent by a body:
    ``sender_generation`` set) asks nothing of the recipient and is not one."""
    found = []
    rows = messages.get("messages")
    for message in rows if isinstance(rows, list) else []:
        if not isinstance(message, dict) or message.get("kind") not in RELIEF_KINDS:
            continue
        if message.get("sender_generation") is not None:
            continue
        if message.get("generation") is not None and _int(message["generation"]) != generation:
            continue
        delivered = message.get("delivered_at")
        try:
            at = datetime.fromisoformat(str(delivered)) if delivered else None
        except ValueError:
            at = None
        if at is not None and at.tzinfo is not None and at >= since:
            found.append(message)
    return sorted(found, key=lambda m: _int(m.get("message_id")) or 0)


class CLI:
    """The onstation command line, run as its own process with the agent's ledger."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self.env = env
        self.cwd = cwd
        self.argv = onstation_argv()

    def command(self, *args: str) -> list[str]:
        return [*self.argv, *args]

    def run(self, *args: str) -> tuple[int, str, str]:
        done = subprocess.run(
            self.command(*args),
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.cwd,
            timeout=120,
            check=False,
        )
        return done.returncode, done.stdout, done.stderr

    def read(self, *args: str) -> dict[str, Any] | None:
        """The JSON object a read-only command prints with ``--json``; None when it fails."""
        code, out, _err = self.run(*args, "--json")
        if code != 0:
            return None
        try:
            data = json.loads(out)
        except ValueError:
            return None
        return data if isinstance(data, dict) else None

    def generation(self, node: str) -> int:
        code, out, err = self.run("node", "show", node, "--json")
        if code != 0:
            raise AgentError(f"onstation node show {node} failed: {err.strip() or out.strip()}")
        try:
            return int(json.loads(out)["generation"])
        except (ValueError, KeyError, TypeError) as exc:
            raise AgentError(f"onstation node show {node}: unexpected output") from exc

    # -- this body's standing, from the ledger's fields ----------------------------------------

    def admitted_generation(self, node: str, session_id: str) -> int | None:
        """The generation this session holds as the node's body; None if it holds none."""
        shown = self.read("node", "show", node)
        return None if shown is None else admitted_generation(shown, session_id)

    def fenced(self, node: str, generation: int) -> bool:
        """Whether ``generation`` is fenced (False when the ledger cannot say)."""
        shown = self.read("node", "show", node)
        return shown is not None and is_fenced(shown, generation)

    def awaiting_birth(self, node: str, generation: int) -> bool:
        """Whether ``generation`` still waits to be made RUNNING (True when the ledger cannot
        say: the wait is bounded anyway)."""
        history = self.read("history", node)
        return True if history is None else awaiting_birth(history, generation)

    def relief_requests(self, node: str, generation: int, since: datetime) -> list[dict[str, Any]]:
        """Relief requests delivered to this body since ``since`` (none when unreadable)."""
        messages = self.read("message", "list", node)
        return [] if messages is None else relief_requests(messages, generation, since)


#: Beats a lease outlives: a body whose beats stop loses its lease after this many missed.
BEATS_PER_LEASE = 3
#: The shortest lease a beat grants (seconds): short, so a silent body is noticed soon.
MIN_LEASE_SECONDS = 30


def lease_ttl(every: float) -> int:
    """The lease (seconds) a beat every ``every`` seconds asks for: at least
    ``MIN_LEASE_SECONDS``, and long enough to outlive ``BEATS_PER_LEASE`` beats, so a beat
    interval only needs to be a third of the lease, not a small fraction of it."""
    return max(MIN_LEASE_SECONDS, math.ceil(every * BEATS_PER_LEASE))


class Heartbeat:
    """Renews the lease every few seconds in a thread; notices when it is denied."""

    def __init__(self, cli: CLI, node: str, generation: int, every: float, log: Log) -> None:
        self.cli = cli
        self.node = node
        self.generation = generation
        self.every = every
        self.log = log
        self.denied = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)
        self.beats = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=30)

    def _run(self) -> None:
        ttl = str(lease_ttl(self.every))
        while not self._stop.is_set():
            code, _out, err = self.cli.run(
                "lease", "renew", self.node, "--generation", str(self.generation), "--ttl", ttl
            )
            self.beats += 1
            if code != 0:
                self.log("heartbeat", ok=False, exit_code=code, error=err.strip()[:300])
                if code == EXIT_DENIED:
                    self.denied.set()
                    return
            elif self.beats == 1:
                self.log("heartbeat", ok=True, generation=self.generation, ttl=int(ttl))
            self._stop.wait(self.every)
