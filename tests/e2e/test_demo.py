"""The README's main command: `onstation demo` runs a scratch team to completion."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ONSTATION = str(Path(sys.executable).with_name("onstation"))


def test_the_team_demo_relieves_respawns_and_commits_everything_once(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [ONSTATION, "demo", "--json", "--keep"], capture_output=True, text=True, env=env,
        timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    assert summary["ok"] is True
    nodes = summary["nodes"]
    for node in nodes.values():
        assert node["each_step_once"] and node["commits"] == node["steps"]
        assert node["ambiguous"] == 0
    login = nodes["exec-login"]["reliefs"]
    assert [(r["state"], r["from"], r["to"]) for r in login] == [("SETTLED", 1, 2)]
    assert login[0]["cause"] in ("hull integrity red", "hull integrity critical")
    coord = nodes["coord-auth"]["reliefs"]
    assert [(r["cause"], r["state"]) for r in coord] == [("coordinator self-respawn", "SETTLED")]
    assert nodes["exec-cookie"]["reliefs"] == [] and nodes["exec-cookie"]["generation"] == 1
    scratch = Path(summary["scratch"])
    manifests = list((scratch / "coord-auth" / "memory" / "agents" / "coords").glob("*.md"))
    assert len(manifests) == 1 and manifests[0].name.startswith("coord-auth-bosun-respawn-")
    briefs = list((scratch / "exec-login" / ".bridge" / "turnovers").glob("*.md"))
    assert briefs and "## Turnover Brief — exec-login" in briefs[0].read_text()
    report = Path(login[0]["report"]).read_text()
    assert "predecessor generation: 1 (fenced for good)" in report
