"""The one way onstation runs git, and the git evidence it collects about a workspace.

:func:`git` is the only git runner of the relief, plan and simulation code. The effect
classifier runs its read-only git queries through :func:`run_captured` too, with the agent's
own environment (it predicts what the agent's git will do, so it must see the agent's
``GIT_*`` variables); the fake agent runs git as an agent would. Its policy, for every call:

- **Timeout**: each call is bounded (``timeout``, default :data:`GIT_TIMEOUT` seconds). On
  expiry the whole process group is killed (git runs in a new session, so a pager, a
  credential helper or an alias's shell command cannot outlive the call).
- **No prompt, no terminal**: stdin is ``/dev/null``, the process has no controlling
  terminal (new session) and ``GIT_TERMINAL_PROMPT=0``, so a credential or passphrase prompt
  fails at once instead of waiting for someone to type.
- **No pager**: output is captured and ``GIT_PAGER=cat``, whatever ``core.pager`` says.
- **Environment**: the caller's environment minus every inherited ``GIT_*`` variable (a
  ``GIT_DIR``, ``GIT_WORK_TREE`` or ``GIT_INDEX_FILE`` left by an enclosing git hook would
  otherwise point git at another repository), plus ``GIT_TERMINAL_PROMPT=0``,
  ``GIT_PAGER=cat``, ``GIT_OPTIONAL_LOCKS=0`` (a read does not take the index lock another
  git holds) and ``LC_ALL=C`` (messages and formats do not vary with the locale), plus
  whatever the caller passes explicitly in ``env`` (e.g. a fixed author identity for a
  scratch repository's commits). Configuration files are read as git normally reads them.
- **Output**: stdout decoded as UTF-8 (undecodable bytes replaced), stripped unless
  ``strip=False``.
- **Failure**: by default a failed, timed-out or unstartable git answers None (evidence
  that git could not give is missing, never guessed); with ``check=True`` it raises
  (:class:`subprocess.CalledProcessError`, :class:`subprocess.TimeoutExpired`,
  :class:`OSError`), for setting up scratch repositories.

:func:`collect` asks git, read-only, everything onstation's briefs, manifests and capsules
use, and returns it as the plan layer's :class:`~onstation.plan.evidence.GitEvidence`. The
remote URL is scrubbed of credentials here, where it is collected
(:func:`onstation.core.redact.scrub_url`), so no reader of the evidence ever holds one.

:func:`commit_of` checks that a recorded base still names a commit, and :func:`commits_since`
lists the commits of a body's work (``git log BASE..HEAD``), bounded, their subjects redacted
(:func:`onstation.core.redact.redact`) before they are cut to length, so that no cut can
leave half a secret unrecognised.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, overload

from onstation.core.redact import redact, scrub_url
from onstation.plan.evidence import DiffEntry, GitEvidence, WorkTreeDiff

__all__ = [
    "GIT_TIMEOUT",
    "MAX_COMMITS",
    "MAX_SUBJECT",
    "Commit",
    "CommitLog",
    "DiffEntry",
    "GitEvidence",
    "WorkTreeDiff",
    "collect",
    "commit_of",
    "commits_since",
    "git",
    "run_captured",
]

GIT_TIMEOUT = 30.0
_POLICY_ENV = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PAGER": "cat",
    "GIT_OPTIONAL_LOCKS": "0",
    "LC_ALL": "C",
}


def git_environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment :func:`git` runs in (see the module docstring), ``env`` on top."""
    out = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    out.update(_POLICY_ENV)
    out.update(env or {})
    return out


@overload
def git(
    cwd: str | os.PathLike[str],
    *args: str,
    check: Literal[True],
    strip: bool = ...,
    timeout: float = ...,
    env: Mapping[str, str] | None = ...,
) -> str: ...


@overload
def git(
    cwd: str | os.PathLike[str],
    *args: str,
    check: Literal[False] = ...,
    strip: bool = ...,
    timeout: float = ...,
    env: Mapping[str, str] | None = ...,
) -> str | None: ...


def git(
    cwd: str | os.PathLike[str],
    *args: str,
    check: bool = False,
    strip: bool = True,
    timeout: float = GIT_TIMEOUT,
    env: Mapping[str, str] | None = None,
) -> str | None:
    """The stdout of ``git -C cwd ARGS`` under the module's policy, or None when git fails
    (raises instead with ``check=True``); ``env`` is added to the policy environment."""
    argv = ["git", "-C", os.fspath(cwd), *args]
    try:
        code, out, err = run_captured(argv, timeout=timeout, env=git_environment(env))
    except (OSError, subprocess.TimeoutExpired):
        if check:
            raise
        return None
    if code != 0:
        if check:
            raise subprocess.CalledProcessError(code, argv, out, err)
        return None
    return out.strip() if strip else out


def run_captured(
    argv: list[str], *, timeout: float, env: Mapping[str, str], cwd: str | None = None
) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``argv`` run the way every git of onstation runs: no
    stdin, no terminal, a new session whose whole process group is killed on timeout (which
    raises :class:`subprocess.TimeoutExpired`). The environment is the caller's choice:
    :func:`git` passes its policy; the effect classifier passes the agent's own."""
    with subprocess.Popen(
        argv,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
    ) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except BaseException:  # the timeout, or Ctrl-C: nothing git started may stay behind
            # The new session's process group: git and whatever it started (pager, helper).
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.kill()
            # Not read on: a child that left the group could hold the pipes open forever.
            raise
    return (
        proc.returncode,
        out.decode("utf-8", "replace"),
        err.decode("utf-8", "replace"),
    )


def _line(cwd: str, *args: str) -> str | None:
    """A one-line answer, None when git fails or prints nothing."""
    return git(cwd, *args) or None


def _names(out: str | None) -> tuple[str, ...]:
    return tuple(sorted(n for n in (out or "").splitlines() if n))


@dataclass(frozen=True)
class _Status:
    """What one ``git status --porcelain=v2 --branch`` says of a work tree."""

    branch: str | None
    head: str | None
    upstream: str | None
    dirty: bool
    untracked: tuple[str, ...]


def _status(ws: str) -> _Status | None:
    """The work tree's status, or None when ``ws`` is not in a git work tree (or git fails).

    ``-z`` keeps any path byte-exact; untracked files are listed one by one (``-uall``, as
    ``ls-files --others --exclude-standard`` lists them)."""
    out = git(ws, "status", "--porcelain=v2", "--branch", "-z", "--untracked-files=all",
              strip=False)  # fmt: skip
    if out is None:
        return None
    branch = head = upstream = None
    has_ab = False
    dirty = False
    untracked: list[str] = []
    records = out.split("\0")
    i = 0
    while i < len(records):
        record = records[i]
        i += 1
        if record.startswith("# branch.oid "):
            oid = record[len("# branch.oid ") :]
            head = None if oid == "(initial)" else oid
        elif record.startswith("# branch.head "):
            name = record[len("# branch.head ") :]
            branch = None if name == "(detached)" else name
        elif record.startswith("# branch.upstream "):
            upstream = record[len("# branch.upstream ") :]
        elif record.startswith("# branch.ab "):
            has_ab = True  # only when the upstream's ref exists
        elif record.startswith("? "):
            dirty = True
            untracked.append(record[2:])
        elif record[:2] in ("1 ", "u ", "! "):
            dirty = dirty or not record.startswith("! ")
        elif record.startswith("2 "):
            dirty = True
            i += 1  # a rename's original path follows as its own record
    return _Status(branch, head, upstream if has_ab else None, dirty, tuple(sorted(untracked)))


def _remote(ws: str) -> tuple[str | None, str | None]:
    """(name, fetch URL) of ``origin``, else of the first remote; (None, None) without one.
    One ``git remote -v`` (URLs as git resolves them, ``insteadOf`` applied) instead of a
    listing and a lookup."""
    urls: dict[str, str] = {}
    for line in (git(ws, "remote", "-v") or "").splitlines():
        name, _, rest = line.partition("\t")
        url, _, kind = rest.rpartition(" ")
        if kind == "(fetch)" and name and url:
            urls.setdefault(name, url)
    if not urls:
        return None, None
    name = "origin" if "origin" in urls else sorted(urls)[0]
    return name, urls[name]


def _work_diff(ws: str, against: str) -> tuple[str | None, list[DiffEntry], str | None]:
    """(stat, files with their status, patch) of the work tree against ``against``, from one
    ``git diff --raw --stat -p`` (it writes the raw lines, then the stat and a blank line,
    then the patch: each part byte for byte what ``--name-status``, ``--stat`` and ``-p``
    print alone; tests/integration/test_evidence.py compares them). None for a part git
    could not give."""
    out = git(ws, "diff", "--no-renames", "--binary", "--raw", "--stat", "-p", against,
              strip=False)  # fmt: skip
    if out is None:
        return None, [], None
    files: list[DiffEntry] = []
    lines = out.splitlines(keepends=True)
    i = 0
    while i < len(lines) and lines[i].startswith(":"):
        meta, _, path = lines[i].rstrip("\n").partition("\t")
        change = meta.split(" ")[-1] if meta else ""
        if path and change:
            files.append(DiffEntry(path=path, status=change))
        i += 1
    stat_start = i
    while i < len(lines) and lines[i] != "\n":
        i += 1
    stat = "".join(lines[stat_start:i])
    patch = "".join(lines[i + 1 :]) if i < len(lines) else ""
    return stat, files, patch


def collect(workspace: str | os.PathLike[str], base: str | None = None) -> GitEvidence:
    """Everything git can say, read-only, about ``workspace`` (see
    :class:`~onstation.plan.evidence.GitEvidence` for what each field means).

    ``base`` is the base of the work when the caller knows it; without it the brief's base
    is found (upstream, else ``main`` / ``master``, else HEAD) and the capsule's diff is
    taken against HEAD. A ``base`` that names no commit is recorded, not refused: refusing
    is the reader's decision.
    """
    ws = str(Path(workspace))
    # One status answers what used to take six calls: whether this is a work tree, the
    # branch, HEAD, the upstream (only when its ref exists: the ahead/behind line), whether
    # anything changed and which files are untracked.
    status = _status(ws)
    if status is None:
        return GitEvidence(workspace=ws, repository=False, requested_base=base)
    branch, head, upstream = status.branch, status.head, status.upstream
    tree = _line(ws, "rev-parse", "--verify", "--quiet", "HEAD^{tree}") if head else None

    requested_commit = None
    if base is not None and not base.startswith("-"):  # never an option to git
        requested_commit = _line(ws, "rev-parse", "--verify", "--quiet", f"{base}^{{commit}}")

    chosen = base if base is not None else upstream
    if chosen is None:
        for candidate in ("main", "master"):
            if candidate != branch and git(ws, "rev-parse", "--verify", "-q", candidate):
                chosen = candidate
                break
    merge_base = None
    if chosen is not None and head is not None and not chosen.startswith("-"):
        merge_base = git(ws, "merge-base", chosen, "HEAD")
    if merge_base is None and head is not None:
        merge_base, chosen = head, chosen or "HEAD"
    changed: tuple[str, ...] = ()
    if merge_base is not None:
        changed = _names(git(ws, "diff", "--name-only", merge_base))
    untracked = status.untracked

    diff = None
    against = requested_commit or head
    if against is not None:
        stat, files, patch = _work_diff(ws, against)
        diff = WorkTreeDiff(
            against=against,
            stat=stat,
            files=tuple(files),
            patch_sha256=None
            if patch is None
            else hashlib.sha256(patch.encode("utf-8")).hexdigest(),
        )

    remote_name, remote_url = _remote(ws)
    if remote_url is not None:
        # Secrets never travel: ``https://user:TOKEN@host`` is scrubbed before anyone reads it.
        remote_url = scrub_url(remote_url)
    return GitEvidence(
        workspace=ws,
        repository=True,
        branch=branch,
        head=head,
        tree=tree,
        base_ref=chosen,
        merge_base=merge_base,
        requested_base=base,
        requested_base_commit=requested_commit,
        remote_name=remote_name,
        remote_url=remote_url,
        changed_files=changed,
        untracked_files=untracked,
        dirty=status.dirty,
        diff=diff,
    )


#: A full commit id (SHA-1 or SHA-256 object format).
_FULL_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
#: The most commits :func:`commits_since` lists (the newest), and a subject's longest form.
MAX_COMMITS = 30
MAX_SUBJECT = 160


@dataclass(frozen=True)
class Commit:
    """One commit of a body's work: its full id and its subject, redacted and bounded."""

    commit: str
    subject: str


@dataclass(frozen=True)
class CommitLog:
    """The commits ``BASE..HEAD``, newest first: at most ``limit`` of them, and how many
    there are in all (``total``; None when git could not count them)."""

    base: str
    commits: tuple[Commit, ...]
    total: int | None


def commit_of(workspace: str | os.PathLike[str], revision: str | None) -> str | None:
    """The full id of the commit ``revision`` names in ``workspace``, or None when it names
    none (never learnt, rewritten away, garbage-collected, or not a revision at all)."""
    if not revision or revision.startswith("-"):  # never an option to git
        return None
    # Peeling to ^{commit} looks the object up: a full id whose object is gone fails here,
    # as ``git cat-file -e`` would.
    return _line(str(workspace), "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}")


def _subject(text: str) -> str:
    clean = "".join(ch if ch.isprintable() else " " for ch in text[: MAX_SUBJECT * 8]).strip()
    clean = redact(clean).text
    return clean if len(clean) <= MAX_SUBJECT else clean[: MAX_SUBJECT - 1].rstrip() + "…"


def commits_since(
    workspace: str | os.PathLike[str], base: str, *, limit: int = MAX_COMMITS
) -> CommitLog | None:
    """The commits of ``git log BASE..HEAD`` in ``workspace``, newest first, at most
    ``limit`` (read-only, bounded like every call of :func:`git`); None when ``base`` names
    no commit or git cannot answer."""
    ws = str(workspace)
    if limit < 1:
        return None
    # A full commit id is used as it is (git log refuses it if its object is gone); anything
    # else is resolved first, never passed on as an option.
    resolved = base if _FULL_ID.fullmatch(base) else commit_of(ws, base)
    if resolved is None:
        return None
    span = f"{resolved}..HEAD"
    # One more than the limit tells whether the log was cut; only then is the total counted.
    out = git(ws, "log", "--no-show-signature", "--no-decorate", "--no-color",
              f"--max-count={limit + 1}", "--format=%H %s", f"{resolved}^{{commit}}..HEAD",
              "--", strip=False)  # fmt: skip
    if out is None:
        return None
    commits = []
    for line in out.splitlines():
        commit, _, subject = line.partition(" ")
        if commit:
            commits.append(Commit(commit=commit, subject=_subject(subject)))
    total: int | None = len(commits)
    if len(commits) > limit:
        count = git(ws, "rev-list", "--count", span, "--")
        total = int(count) if count is not None and count.isdigit() else None
    return CommitLog(base=resolved, commits=tuple(commits[:limit]), total=total)
