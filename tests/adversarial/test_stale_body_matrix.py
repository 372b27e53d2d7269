"""The stale-body matrix: every write path a body has, on every backend, from a fenced
generation. Each must be denied (exit 3), leave a durable denial receipt, and change nothing
else in the ledger.

The rows are the CLI's write paths and the console service's (``onstation serve`` with an
agent token bound to generation 1; the hook path is in test_hooks_hostile.py). A fenced body
is generation 1 of ``app``; generation 2 is live.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import Campaign
from onstation.ledger import Ledger
from onstation.ledger.bodies import HarnessLedger
from onstation.ledger.relief_records import ReliefLedger

ONSTATION = str(Path(sys.executable).with_name("onstation"))

#: (name, argv after `onstation`) — {task} and {message} are filled in per ledger.
WRITE_PATHS: list[tuple[str, list[str]]] = [
    ("lease renew", ["lease", "renew", "app", "--generation", "1"]),
    ("lease release", ["lease", "release", "app", "--generation", "1"]),
    ("guard", ["guard", "app", "--generation", "1"]),
    ("grant issue", ["grant", "issue", "app", "--generation", "1", "--capability", "tool:Bash"]),
    ("effect intend", ["effect", "intend", "app", "--generation", "1", "--op", "git.push",
                       "--dest", "origin", "--args", '{"commit": "c0ffee"}']),
    ("effect dispatch", ["effect", "dispatch", "{effect}", "--generation", "1"]),
    ("effect commit", ["effect", "commit", "{effect}", "--generation", "1"]),
    ("effect fail", ["effect", "fail", "{effect}", "--generation", "1"]),
    ("brief write", ["brief", "write", "app", "--generation", "1", "--task", "old"]),
    ("manifest write", ["manifest", "write", "app", "--generation", "1", "--l3", "auth",
                        "--pun", "old"]),
    ("note", ["note", "app", "--generation", "1", "--note", "from the past"]),
    ("message send", ["message", "send", "--from", "app", "--generation", "1", "--to",
                      "team-lead", "--kind", "respawn_triggered", "--body", "relieve me"]),
    ("task update", ["task", "update", "{task}", "--as", "app", "--generation", "1",
                     "--status", "completed"]),
    ("episode open", ["episode", "open", "app", "--generation", "1", "--objective", "override"]),
    ("episode settle", ["episode", "settle", "app", "--generation", "1"]),
    ("challenge answer", ["challenge", "answer", "app", "--generation", "1", "--echo", "{}"]),
]  # fmt: skip


def _state(ledger: Ledger) -> dict[str, Any]:
    """Everything a stale write could have changed, except the denial receipts and history."""
    records = HarnessLedger(ledger)
    return {
        "node": ledger.get_node("app").to_json(),
        "leases": [ls.to_json() for ls in ledger.leases("app")],
        "grants": [g.to_json() for g in ledger.grants("app")],
        "effects": [e.to_json() for e in ledger.effects("app")],
        "episodes": [e.to_json() for e in ledger.episodes("app")],
        "notes": [n.to_json() for n in records.notes("app")],
        "to_lead": [m.to_json() for m in records.messages("team-lead")],
        "tasks": [t.to_json() for t in ReliefLedger(ledger).tasks()],
        "brief": records.latest_document("app", "brief"),
        "manifest": records.latest_document("app", "manifest"),
    }


@pytest.fixture
def fenced(ledger_url: str, tmp_path: Path) -> dict[str, Any]:
    workspace = tmp_path / "app"
    workspace.mkdir()
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    with Ledger.open(ledger_url) as ledger:
        ledger.register_node("app", spawner="team-lead")
        records = HarnessLedger(ledger)
        records.bind_workspace(str(workspace), "app", harness="claude-code", by="test")
        records.admit_session("s1", harness="claude-code", node="app", workspace=str(workspace))
        ledger.open_episode("app", "the real objective")
        effect, _ = ledger.intend_effect(
            "app", generation=1, operation="gh.pr.create", destination="github",
            arguments={"title": "x"},
        )  # fmt: skip
        task = ReliefLedger(ledger).create_task("login", owner="app", status="in_progress",
                                                by="lead")  # fmt: skip
        # The body's console token, made while generation 1 was live.
        token = ledger.create_agent_token("app", generation=1, by="test").token
        ledger.fence("app", expect_generation=1, by="test")
        ledger.acquire_lease("app", holder="the successor", expect_generation=2)
        before = _state(ledger)
    env = {**os.environ, "ONSTATION_DB": ledger_url}
    for var in ("ONSTATION_NODE", "ONSTATION_GENERATION"):
        env.pop(var, None)
    return {"url": ledger_url, "env": env, "effect": effect.effect_id, "task": task.task_id,
            "before": before, "token": token}  # fmt: skip


@pytest.mark.parametrize(("path", "argv"), WRITE_PATHS, ids=[p for p, _ in WRITE_PATHS])
def test_every_write_path_denies_a_fenced_generation(
    fenced: dict[str, Any], path: str, argv: list[str], campaign: type[Campaign]
) -> None:
    count = campaign("stale-body matrix (CLI write paths x backends)")
    args = [
        a.replace("{effect}", fenced["effect"]).replace("{task}", str(fenced["task"])) for a in argv
    ]
    with Ledger.open(fenced["url"]) as ledger:
        receipts = len(ledger.denials("app"))
    done = subprocess.run([ONSTATION, *args, "--json"], capture_output=True, text=True,
                          env=fenced["env"], timeout=60, check=False)  # fmt: skip
    count.tried()
    with Ledger.open(fenced["url"]) as ledger:
        after = _state(ledger)
        new_receipts = ledger.denials("app")[receipts:]
    kept = after != fenced["before"]
    count.lost(int(kept or done.returncode != 3))
    assert done.returncode == 3, (path, done.stdout, done.stderr)
    count.denied()
    assert json.loads(done.stdout)["error"] == "denied"
    assert len(new_receipts) == 1 and new_receipts[0].presented_generation == 1
    assert not kept, path


#: The console's write paths an agent token has (method, path, JSON body); {effect} is filled
#: in per ledger. A read is guarded too: a fenced body's token may not even look.
SERVICE_PATHS: list[tuple[str, str, dict[str, Any] | None]] = [
    ("POST", "/api/v1/nodes/app/lease/renew", {"generation": 1, "ttl_seconds": 60}),
    ("POST", "/api/v1/nodes/app/notes", {"kind": "note", "text": "from the past"}),
    ("POST", "/api/v1/nodes/app/effects", {"operation": "git.push", "destination": "origin",
                                           "arguments": {"commit": "c0ffee"}}),
    ("POST", "/api/v1/effects/{effect}/dispatch", {"generation": 1}),
    ("POST", "/api/v1/effects/{effect}/observe", {"generation": 1, "result": {"ok": True}}),
    ("POST", "/api/v1/effects/{effect}/commit", {"generation": 1}),
    ("POST", "/api/v1/effects/{effect}/fail", {"generation": 1, "reason": "gave up"}),
    ("POST", "/api/v1/messages", {"sender": "app", "recipient": "team-lead",
                                  "kind": "respawn_triggered", "body": "relieve me"}),
    ("GET", "/api/v1/team", None),
]  # fmt: skip


def test_every_service_path_denies_a_fenced_generations_token(
    fenced: dict[str, Any], campaign: type[Campaign]
) -> None:
    import httpx

    count = campaign("stale-body matrix (service paths x backends)")
    serve = subprocess.Popen([ONSTATION, "serve", "--port", "0", "--no-alerts"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=fenced["env"])  # fmt: skip
    try:
        assert serve.stdout is not None
        url = serve.stdout.readline().split()[3].rstrip("/")
        headers = {"Authorization": f"Bearer {fenced['token']}"}
        with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
            for method, path, body in SERVICE_PATHS:
                with Ledger.open(fenced["url"]) as ledger:
                    receipts = len(ledger.denials("app"))
                answer = client.request(method, path.replace("{effect}", fenced["effect"]),
                                        json=body)  # fmt: skip
                count.tried()
                with Ledger.open(fenced["url"]) as ledger:
                    kept = _state(ledger) != fenced["before"]
                    new_receipts = ledger.denials("app")[receipts:]
                count.lost(int(kept or answer.status_code != 403))
                assert answer.status_code == 403, (path, answer.text)
                count.denied()
                error = answer.json()
                assert (error["error"], error["exit_code"]) == ("stale_generation", 3), path
                assert len(new_receipts) == 1 and new_receipts[0].presented_generation == 1
                assert not kept, path
    finally:
        serve.terminate()
        serve.wait(30)
