"""A stand-in successor for relief tests: answers (or fails) its challenge as told.

Usage: successor_stub.py MODE ONSTATION. Modes: ok (echo, heartbeat), exit (exit at once),
wrong-echo (echo a tampered challenge, heartbeat), silent-alive (never answer, stay alive),
no-heartbeat (echo, then stay alive without renewing the lease), sandboxed (echo from a
helper outside the successor's process tree that carries its launch marker, as a command in
Codex's Linux sandbox is seen from outside its PID namespace; heartbeat), stranger (the same
helper without the marker; heartbeat).
"""

from __future__ import annotations

import json
import os
import shlex
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
    if mode in ("sandboxed", "stranger"):
        answer = [onstation, "challenge", "answer", node, "--generation", gen, "--echo",
                  json.dumps(challenge)]  # fmt: skip
        env = dict(os.environ)
        if mode == "stranger":
            env.pop("ONSTATION_WITNESS_MARKER", None)
        # A helper that outlives its parent: once reparented, it is no descendant of this
        # process, and it answers only then.
        code = ("import os, subprocess, sys, time\n"
                "while os.getppid() == int(sys.argv[2]): time.sleep(0.01)\n"
                "subprocess.run(['bash', '-c', sys.argv[1]])\n"
                "time.sleep(60)\n")  # fmt: skip
        helper = subprocess.Popen(
            ["sh", "-c", '"$0" -c "$1" "$2" "$$" & exit 0', sys.executable, code,
             shlex.join(answer)],
            env=env, start_new_session=True,
        )  # fmt: skip
        helper.wait()
    if mode in ("ok", "wrong-echo", "no-heartbeat"):
        done = subprocess.run(
            [onstation, "challenge", "answer", node, "--generation", gen, "--echo",
             json.dumps(challenge)], capture_output=True, text=True, check=False,
        )  # fmt: skip
        print("answer", done.returncode, done.stderr.strip(), flush=True)
    # Heartbeat for a minute at most, and stop once the ledger denies it (fenced, released)
    # or is gone with its test: a stub that outlives its test only loads the machine.
    db = os.environ.get("ONSTATION_DB", "")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if db and "://" not in db and not os.path.exists(db):
            return
        if mode in ("ok", "wrong-echo", "sandboxed", "stranger"):
            renewed = subprocess.run([onstation, "lease", "renew", node, "--generation", gen],
                                     capture_output=True, check=False)  # fmt: skip
            if renewed.returncode == 3:  # denied: this generation may not act any more
                return
        time.sleep(0.3)


if __name__ == "__main__":
    main()
