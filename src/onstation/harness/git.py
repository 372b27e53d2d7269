"""Read-only git evidence about a workspace: branch, head, changed files.

Every call runs ``git`` with a short timeout, no prompts and no network; a question git
cannot answer comes back as None (and the brief says it is missing), never as a guess.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field


def git(cwd: str, *args: str) -> str | None:
    """The stripped stdout of ``git -C cwd ARGS``, or None when git fails."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0"}
    try:
        done = subprocess.run(
            ["git", "-C", cwd, *args], capture_output=True, text=True, timeout=10, env=env,
            check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.strip()


@dataclass(frozen=True)
class GitEvidence:
    """What git says about a workspace at one moment."""

    repository: bool
    branch: str | None = None
    head: str | None = None
    base: str | None = None
    base_commit: str | None = None
    remote: str | None = None
    changed_files: list[str] = field(default_factory=list)
    untracked_files: list[str] = field(default_factory=list)
    dirty: bool = False


def collect(workspace: str, base: str | None = None) -> GitEvidence:
    """Branch, head, and the files changed against ``base`` (default: the upstream, else
    the merge base with main or master, else HEAD itself)."""
    if git(workspace, "rev-parse", "--is-inside-work-tree") != "true":
        return GitEvidence(repository=False)
    branch = git(workspace, "symbolic-ref", "--short", "-q", "HEAD")
    head = git(workspace, "rev-parse", "HEAD")
    chosen = base
    if chosen is None:
        chosen = git(workspace, "rev-parse", "--abbrev-ref", "--symbolic-full-name", "@{upstream}")
    if chosen is None:
        for candidate in ("main", "master"):
            if candidate != branch and git(workspace, "rev-parse", "--verify", "-q", candidate):
                chosen = candidate
                break
    base_commit = None
    if chosen is not None and head is not None:
        base_commit = git(workspace, "merge-base", chosen, "HEAD")
    if base_commit is None and head is not None:
        base_commit, chosen = head, chosen or "HEAD"
    changed: list[str] = []
    if base_commit is not None:
        names = git(workspace, "diff", "--name-only", base_commit)
        changed = sorted(n for n in (names or "").splitlines() if n)
    untracked_out = git(workspace, "ls-files", "--others", "--exclude-standard")
    untracked = sorted(n for n in (untracked_out or "").splitlines() if n)
    status = git(workspace, "status", "--porcelain")
    remote = git(workspace, "remote", "get-url", "origin")
    return GitEvidence(
        repository=True,
        branch=branch,
        head=head,
        base=chosen,
        base_commit=base_commit,
        remote=remote,
        changed_files=changed,
        untracked_files=untracked,
        dirty=bool(status),
    )
