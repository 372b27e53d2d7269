"""Git as the evidence tests run it: a fixed author, none of the caller's ``GIT_*``."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

IDENTITY = {"GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.org",
            "GIT_COMMITTER_NAME": "T", "GIT_COMMITTER_EMAIL": "t@example.org"}  # fmt: skip


def sh(cwd: Path, *args: str) -> str:
    """``git ARGS`` in ``cwd`` (raises when it fails), its output stripped."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env={**env, **IDENTITY})  # fmt: skip
    return done.stdout.strip()
