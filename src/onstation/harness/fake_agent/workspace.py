"""Whose repository: a stand-in works only in scratch repositories and pushes only here.

A scratch repository is one its creator marked (:func:`mark_scratch_workspace`) or one the
command line declares (``--scratch-workspace``); a push target is acceptable only when every
URL git would push to is a bare repository on this machine (:func:`push_refusal`).
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.parse
from pathlib import Path

from onstation.core.errors import BadInput

#: Kept in the repository's git directory, never in its work tree: it is never committed,
#: cloned or shown by ``git status``, so a clone of a scratch repository is not scratch.
SCRATCH_MARKER = "onstation-scratch-workspace"
SCRATCH_FLAG = "--scratch-workspace"

#: The fake agent's own commits: ``git -c`` options, and the variables that would override them.
GIT_IDENTITY = ["-c", "user.name=fake-agent", "-c", "user.email=fake@onstation.invalid"]
GIT_IDENTITY_ENV = frozenset(
    {"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"}
)


def _git_out(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str | None:
    """stdout of a read-only git command, None when it fails."""
    done = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=60,
        check=False,
    )  # fmt: skip
    return done.stdout.strip() if done.returncode == 0 else None


def _toplevel_and_git_dir(workspace: Path, env: dict[str, str] | None) -> tuple[Path, Path]:
    out = _git_out(workspace, "rev-parse", "--show-toplevel", "--absolute-git-dir", env=env)
    lines = (out or "").splitlines()
    if len(lines) != 2:
        raise BadInput(f"--workspace: {workspace} is not a git repository with a work tree")
    return Path(os.path.realpath(lines[0])), Path(lines[1])


def mark_scratch_workspace(workspace: Path) -> Path:
    """Mark a repository its creator made as a throwaway one; returns the marker's path.

    For the demo and the tests, which create the repositories the fake agent works in. The
    marker names the work tree it was written for, so a copied git directory does not carry
    the permission elsewhere. Written atomically, never through a symlink.
    """
    top, git_dir = _toplevel_and_git_dir(workspace, None)
    marker = git_dir / SCRATCH_MARKER
    body = {"workspace": str(top), "why": "a scratch repository: onstation fake-agent may "
            "commit and push here"}  # fmt: skip
    temporary = git_dir / f".{SCRATCH_MARKER}.{os.getpid()}.tmp"
    temporary.unlink(missing_ok=True)
    with temporary.open("x", encoding="utf-8") as fh:
        fh.write(json.dumps(body) + "\n")
    os.replace(temporary, marker)
    return marker


def is_scratch_workspace(workspace: Path, env: dict[str, str] | None = None) -> bool:
    """Whether the repository at ``workspace`` carries a scratch marker written for it."""
    try:
        top, git_dir = _toplevel_and_git_dir(workspace, env)
    except BadInput:
        return False
    marker = git_dir / SCRATCH_MARKER
    try:
        if not marker.is_file() or marker.is_symlink():
            return False
        data = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("workspace") == str(top)


def local_bare_repository(url: str, cwd: Path, env: dict[str, str] | None = None) -> str | None:
    """None when ``url`` is a bare repository on this machine (a path or a ``file://`` URL);
    else why it is not. Follows git's own reading of a remote URL, so nothing git would send
    over a network is taken for a path."""
    if url.lower().startswith("file://"):
        parts = urllib.parse.urlsplit(url)
        if parts.netloc:
            return f"{url!r} is a file:// URL naming host {parts.netloc!r}"
        raw = urllib.parse.unquote(parts.path)
    elif ":" in url.split("/", 1)[0]:
        # git reads a colon before the first slash as SCHEME://, HOST:PATH (ssh) or
        # TRANSPORT::ADDRESS (a remote helper): all of them may leave this machine.
        return f"{url!r} is not a path on this machine"
    else:
        raw = url
    if not raw:
        return "the URL is empty"
    path = Path(raw) if os.path.isabs(raw) else cwd / raw
    if not path.is_dir():
        return f"{url!r} is not a directory on this machine"
    bare = _git_out(path, "--git-dir", str(path), "rev-parse", "--is-bare-repository", env=env)
    if bare != "true":
        # A non-bare repository is somebody's checkout: pushing into it touches their work.
        return f"{url!r} is not a bare git repository"
    return None


def push_refusal(workspace: Path, remote: str, env: dict[str, str] | None = None) -> str | None:
    """None when every URL ``git push REMOTE`` may use (url and pushurl, after git's
    insteadOf rewriting) is a bare repository on this machine; else one line saying why."""
    urls: list[str] = []
    for push in (False, True):
        out = _git_out(workspace, "remote", "get-url", "--all", *(["--push"] if push else []),
                       remote, env=env)  # fmt: skip
        # With no such remote git takes the name itself for a URL (a path).
        for url in out.splitlines() if out is not None else [remote]:
            if url not in urls:
                urls.append(url)
    for url in urls:
        why = local_bare_repository(url, workspace, env)
        if why is not None:
            return f"remote {remote} pushes to {why}"
    return None
