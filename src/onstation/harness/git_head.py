"""The commit a workspace's HEAD names, read from the repository's files where they settle it.

A session's first hook call records the commit its generation started from (the capsule's
diff of the body's work is taken against it). Asking ``git rev-parse`` costs a process start,
a few milliseconds of a call the host waits for, so the common repositories are read here
instead, and git is asked whenever the files alone might not say what git would say.

What is read, as git's own layout has it (``gitrepository-layout(5)``, ``git-worktree(1)``,
``gitglossary(7)`` "ref"): the first ``.git`` found walking up from the workspace (a
directory, or a file ``gitdir: PATH`` as a linked worktree or a submodule has it), its
``HEAD`` (an object name when detached, ``ref: refs/heads/NAME`` on a branch), the
``commondir`` file of a linked worktree (where its shared refs live), and the branch as a
loose ref file or a line of ``packed-refs``.

Git is asked instead (:data:`ASK_GIT`) for anything else: a ``.git`` that is a symlink or
unreadable, a repository or work tree owned by another user (git's ``safe.directory``
check), a repository with any ``[extensions]`` in its configuration (reftable and the
other formats the files backend does not describe), a ``HEAD`` that is neither form, a
branch found neither loose nor packed (unborn), a walk that crosses a filesystem boundary
(git stops there) or meets a ``HEAD`` file outside a ``.git`` (a bare repository). ``None``
means no repository holds the workspace: git would find none either.
"""

from __future__ import annotations

import os
import stat

#: The answer that means "run git": the files do not settle what it would say.
ASK_GIT: object = object()

_HEX = frozenset("0123456789abcdef")
_SMALL = 4096  # HEAD, a gitfile, commondir and a loose ref are one short line each
_CONFIG_LIMIT = 1 << 20


def _object_id(text: str) -> bool:
    return len(text) in (40, 64) and not set(text) - _HEX


def _read(path: str, limit: int = _SMALL) -> str | None:
    """The text of the regular file at ``path`` (at most ``limit`` bytes), or None. Read as
    every bounded file of onstation is (``harness.files.read_bounded``): a FIFO or a device
    named HEAD is refused before it is opened, never waited on by a session's start."""
    from onstation.core.errors import BadInput
    from onstation.harness.files import read_bounded

    try:
        return read_bounded(path, limit, "git").decode("utf-8")
    except (BadInput, UnicodeDecodeError):
        return None


def head_commit(workspace: str) -> str | object | None:
    """HEAD's commit id in the repository that holds ``workspace``, None when no repository
    holds it, or :data:`ASK_GIT` when git must be asked."""
    try:
        here = os.path.abspath(workspace)
        device = os.stat(here).st_dev
    except (OSError, ValueError):
        return ASK_GIT
    while True:
        dotgit = os.path.join(here, ".git")
        try:
            found = os.lstat(dotgit)
        except FileNotFoundError:
            found = None
        except OSError:
            return ASK_GIT
        if found is not None:
            return _in_repository(here, dotgit, found)
        if os.path.lexists(os.path.join(here, "HEAD")):
            return ASK_GIT  # a bare repository, or inside a git directory
        parent = os.path.dirname(here)
        if parent == here:
            return None
        try:
            if os.stat(parent).st_dev != device:
                return ASK_GIT  # git's discovery stops at a filesystem boundary
        except OSError:
            return ASK_GIT
        here = parent


def _in_repository(top: str, dotgit: str, found: os.stat_result) -> str | object:
    if stat.S_ISDIR(found.st_mode):
        gitdir = dotgit
    elif stat.S_ISREG(found.st_mode):
        text = _read(dotgit)
        if text is None or not text.startswith("gitdir: "):
            return ASK_GIT
        gitdir = os.path.join(top, text[len("gitdir: ") :].rstrip("\r\n"))
    else:
        return ASK_GIT
    common = gitdir
    pointer = _read(os.path.join(gitdir, "commondir"))
    if pointer is not None:
        common = os.path.normpath(os.path.join(gitdir, pointer.rstrip("\r\n")))
    try:
        uid = os.geteuid()
        if any(os.stat(p).st_uid != uid for p in (top, gitdir, common)):
            return ASK_GIT  # git's ownership check (safe.directory) decides
    except OSError:
        return ASK_GIT
    config = _read(os.path.join(common, "config"), _CONFIG_LIMIT)
    if config is None or "extensions" in config.lower():
        return ASK_GIT
    head = _read(os.path.join(gitdir, "HEAD"))
    if head is None:
        return ASK_GIT
    head = head.rstrip("\r\n")
    if _object_id(head):
        return head
    if not head.startswith("ref: refs/heads/"):
        return ASK_GIT
    ref = head[len("ref: ") :]
    if ".." in ref or "\\" in ref or ref.endswith((".lock", "/")):
        return ASK_GIT
    loose = _read(os.path.join(common, ref))
    if loose is not None:
        loose = loose.rstrip("\r\n")
        return loose if _object_id(loose) else ASK_GIT
    packed = _read(os.path.join(common, "packed-refs"), _CONFIG_LIMIT * 64)
    for line in (packed or "").splitlines():
        if line.startswith(("#", "^")):
            continue
        name, _, refname = line.partition(" ")
        if refname == ref:
            return name if _object_id(name) else ASK_GIT
    return ASK_GIT  # unborn, or stored where this reader does not look
