"""A stand-in successor for relief tests: answers (or fails) its challenge as told.

Usage: successor_stub.py MODE ONSTATION. Modes: ok (echo, heartbeat), exit (exit at once),
wrong-echo (echo a tampered challenge, heartbeat), silent-alive (never answer, stay alive),
no-heartbeat (echo, then stay alive without renewing the lease).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time


def main() -> None:
    mode, onstation = sys.argv[1], sys.argv[2]
    node, gen = os.environ["ONSTATION_NODE"], os.environ["ONSTATION_GENERATION"]
    challenge = json.loads(os.environ["ONSTATION_CHALLENGE"])
    if mode == "exit":
        return
    if mode == "wrong-echo":
        challenge["worktree_head"] = "0" * 40
    if mode in ("ok", "wrong-echo", "no-heartbeat"):
        done = subprocess.run(
            [onstation, "challenge", "answer", node, "--generation", gen, "--echo",
             json.dumps(challenge)], capture_output=True, text=True, check=False,
        )  # fmt: skip
        print("answer", done.returncode, done.stderr.strip(), flush=True)
    for _ in range(300):
        if mode in ("ok", "wrong-echo"):
            subprocess.run([onstation, "lease", "renew", node, "--generation", gen],
                           capture_output=True, check=False)  # fmt: skip
        time.sleep(0.1)


if __name__ == "__main__":
    main()
