"""Put the stand-in hosts on a PATH: ``claude`` and ``codex`` executables (see hosts.py), and
wrappers that ``exec`` another program, as a version-manager shim does."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

HOSTS = Path(__file__).with_name("hosts.py")


def install(bin_dir: Path, python: str = sys.executable) -> Path:
    """Write executable ``claude`` and ``codex`` stand-ins into ``bin_dir``; return it."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for host in ("claude", "codex"):
        script = bin_dir / host
        script.write_text(
            f"#!{python}\n"
            "import sys\n"
            f"sys.path.insert(0, {str(HOSTS.parent)!r})\n"
            "from hosts import main\n"
            f"sys.exit(main({host!r}, sys.argv[1:]))\n"
        )
        script.chmod(0o755)
    return bin_dir


def exec_wrapper(path: Path, target: Path, *, before: str = "") -> Path:
    """A ``/bin/sh`` script at ``path`` that runs the shell code ``before`` and then replaces
    itself (``exec``) with ``target``, keeping its arguments, stdin and environment."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\n{before}\nexec {shlex.quote(str(target))} "$@"\n')
    path.chmod(0o755)
    return path
