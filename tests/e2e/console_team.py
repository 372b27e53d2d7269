"""A scratch team for the console's browser test, run as ``onstation demo`` runs one.

Three identities work on clones of scratch git repositories with the shipped fake agent
(real processes, real hooks, a real SQLite ledger): ``coord-auth`` stays Green, ``exec-login``
fills its context to Red and is relieved by the operator's ``onstation relieve`` (a successor
launched, challenged and settled), ``exec-cookie`` is killed after dispatching a push to a
remote that then disappears, so its relief ends QUARANTINED on an AMBIGUOUS push.

Unlike the demo, the test decides when each thing happens (no supervising loop with its own
timing). Every process of the team carries the demo's run marker in its environment, so the
demo's own sweep (:class:`onstation.relief.demo.Bodies`) stops all of them, successors too.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onstation.relief.demo import GIT_ENV, RUN_VAR, Bodies

ONSTATION = str(Path(sys.executable).with_name("onstation"))
WAIT = 120.0  # a bound on one wait, for a test that hangs; nothing is timed
#: (node, role, steps, start tokens, tokens per step, seconds of thought per step)
MEMBERS = [
    # Green all along, and slow: a live body with a heartbeat, little load on the machine.
    ("coord-auth", "coordinator", 200, 30_000, 2_000, 3.0),
    # Amber at its first reading, Red at step 2 (33 % of 200k): then relieved.
    ("exec-login", "executor", 12, 60_000, 3_000, 0.2),
    # Killed by --crash-after-dispatch at its first push.
    ("exec-cookie", "executor", 6, 20_000, 4_000, 0.2),
]


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True,
                          env={**os.environ, **GIT_ENV})  # fmt: skip
    return done.stdout.strip()


def wait_until(what: str, probe: Any, wait: float = WAIT, every: float = 0.2) -> Any:
    """Poll ``probe`` until it returns something truthy; fail naming ``what`` after ``wait``."""
    deadline = time.monotonic() + wait
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {wait:g} s")
        time.sleep(every)


@dataclass
class Team:
    """The scratch team: its ledger, environment, clones and every process it started."""

    scratch: Path
    db: str = ""
    env: dict[str, str] = field(default_factory=dict)
    bodies: Bodies = field(default_factory=lambda: Bodies(f"console-{uuid.uuid4().hex}"))
    agents: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    server: subprocess.Popen[bytes] | None = None

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([ONSTATION, *args], capture_output=True, text=True, env=self.env,
                              timeout=WAIT, check=False)  # fmt: skip
        if check:
            assert done.returncode == 0, f"onstation {' '.join(args)}: {done.stderr}"
        return done

    def cli_json(self, *args: str) -> Any:
        return json.loads(self.cli(*args, "--json").stdout)

    def build(self) -> Team:
        """Repositories, identities, episodes, installs; nothing running yet."""
        from onstation.harness.adapters import FAKE
        from onstation.harness.config import write_config
        from onstation.harness.fake_agent import mark_scratch_workspace
        from onstation.harness.install import install
        from onstation.ledger import Ledger
        from onstation.ledger.bodies import HarnessLedger

        self.db = str(self.scratch / "ledger.db")
        self.env = {**os.environ, **GIT_ENV, "ONSTATION_DB": self.db,
                    "ONSTATION_KEYS_DIR": str(self.scratch / "keys"),
                    "XDG_STATE_HOME": str(self.scratch / "state"),
                    RUN_VAR: self.bodies.run_id}  # fmt: skip
        for var in ("ONSTATION_NODE", "ONSTATION_GENERATION", "ONSTATION_CHALLENGE"):
            self.env.pop(var, None)
        with Ledger.open(self.db) as ledger:
            records = HarnessLedger(ledger)
            for node, role, steps, *_how in MEMBERS:
                # Each its own bare origin: one of them is moved away mid-run.
                origin = self.scratch / f"{node}-origin.git"
                git(self.scratch, "init", "-q", "--bare", "-b", "main", str(origin))
                clone = self.scratch / node
                git(self.scratch, "init", "-q", "-b", "main", str(clone))
                (clone / "README.md").write_text(f"scratch work of {node}\n")
                git(clone, "add", "README.md")
                git(clone, "commit", "-q", "-m", "scratch app")
                git(clone, "remote", "add", "origin", str(origin))
                git(clone, "push", "-q", "-u", "origin", "main")
                mark_scratch_workspace(clone)
                spawner = "team-lead" if role == "coordinator" else "coord-auth"
                ledger.register_node(node, role=role, spawner=spawner, by="console-test")
                ledger.open_episode(node, f"{node}: {steps} steps of work")
                records.bind_workspace(str(clone), node, harness=FAKE.session_harness,
                                       by="console-test")  # fmt: skip
                install(FAKE.session_harness, project=str(clone), user=False, node=node)
                write_config(clone, {"node": node, "db": self.db, "tiers": "relief",
                                     "supervised": True})  # fmt: skip
        return self

    def agent_args(self, node: str, *, successor: bool = False) -> list[str]:
        (steps, start, per, think) = next(m[2:] for m in MEMBERS if m[0] == node)
        log = self.scratch / f"{node}{'-successor' if successor else ''}.agent.jsonl"
        return ["--steps", str(steps), "--start-tokens", str(18_000 if successor else start),
                "--tokens-per-step", str(per), "--push-every", "2", "--heartbeat", "0.5",
                "--step-seconds", str(think), "--log", str(log)]  # fmt: skip

    def start_agent(self, node: str, *extra: str) -> subprocess.Popen[bytes]:
        with (self.scratch / f"{node}-g1.log").open("ab") as log:
            process = subprocess.Popen(
                [ONSTATION, "fake-agent", "--workspace", str(self.scratch / node), "--node", node,
                 *self.agent_args(node), *extra],
                cwd=self.scratch / node, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                start_new_session=True,
            )  # fmt: skip
        self.bodies.started(node, 1, process)
        self.agents[node] = process
        return process

    def agent_events(self, node: str) -> list[dict[str, Any]]:
        path = self.scratch / f"{node}.agent.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        return [json.loads(line) for line in lines if line.strip().endswith("}")]

    def tier(self, node: str) -> str | None:
        """The tier of the node's latest fill reading, from the ledger."""
        from onstation.ledger import Ledger
        from onstation.ledger.bodies import HarnessLedger

        with Ledger.open(self.db) as ledger:
            fill = HarnessLedger(ledger).latest_fill(node)
        return None if fill is None else str(fill["tier"])

    def relieve(self, node: str, *extra: str) -> subprocess.Popen[str]:
        """``onstation relieve NODE --harness fake`` in the background, as an operator runs it."""
        argv = [ONSTATION, "relieve", node, "--harness", "fake", "--brief-wait", "60",
                "--challenge-wait", "60", "--shutdown-wait", "0.5", "--json", "--by", "ops",
                *[f"--arg={a}" for a in self.agent_args(node, successor=True)], *extra]  # fmt: skip
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=self.env, start_new_session=True)  # fmt: skip

    def serve(self) -> str:
        """``onstation serve --port 0`` on the team's ledger; returns its base URL."""
        # Its output goes to a file: a pipe nobody reads would block it once full.
        log = self.scratch / "serve.log"
        with log.open("wb") as out:
            self.server = subprocess.Popen(
                [ONSTATION, "serve", "--port", "0", "--db", self.db], stdout=out,
                stderr=subprocess.STDOUT, env=self.env, start_new_session=True,
            )  # fmt: skip

        def url() -> str | None:
            assert self.server is not None
            found = re.search(r"http://127\.0\.0\.1:([1-9]\d*)", log.read_text())
            if found is None and self.server.poll() is not None:
                raise AssertionError(f"onstation serve exited: {log.read_text()[-2000:]}")
            return None if found is None else f"http://127.0.0.1:{found.group(1)}"

        return str(wait_until("onstation serve prints its URL", url))

    def operator_token(self, name: str) -> str:
        done = self.cli_json("token", "create", "--operator", name)
        return str(done["token"])

    def stop(self) -> list[str]:
        """Stop the server and every process of the team (successors included)."""
        if self.server is not None and self.server.poll() is None:
            self.server.terminate()
            try:
                self.server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.server.kill()
                self.server.wait()
        with _ledger(self.db) as ledger:
            self.bodies.learn(ledger, [m[0] for m in MEMBERS])
        stopped = self.bodies.stop_all()
        for process in self.agents.values():
            process.poll()
        return stopped


def _ledger(db: str) -> Any:
    from onstation.ledger import Ledger

    return Ledger.open(db)
