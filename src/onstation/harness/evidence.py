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
Every name a collection resolves goes to git in one ``git cat-file --batch-check``.

:class:`EvidenceCache` is one relief's reader: its brief and its capsule collect through it,
and the second collection reuses what the first proved while ``git status`` still shows the
same HEAD, the same index and no tracked file that differs from the index (issue 14: a
relief used to start about 16 git processes, now about 5). What a controller keeps across
its reliefs (kept ``git cat-file`` processes, ``git remote -v`` answers proven unchanged) is
in :mod:`onstation.harness.git_kept`.

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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar, cast, overload

from onstation.core.redact import redact, scrub_url
from onstation.plan.evidence import DiffEntry, GitEvidence, WorkTreeDiff

if TYPE_CHECKING:
    from onstation.harness.git_kept import GitBatches

__all__ = [
    "GIT_TIMEOUT",
    "MAX_COMMITS",
    "MAX_SUBJECT",
    "OWN_DOCUMENTS_PATHSPEC",
    "OWN_DOCUMENT_DIRS",
    "Commit",
    "CommitLog",
    "DiffEntry",
    "EvidenceCache",
    "GitEvidence",
    "WorkTreeDiff",
    "collect",
    "commit_of",
    "commits_since",
    "git",
    "run_captured",
]

GIT_TIMEOUT = 30.0
_T = TypeVar("_T")
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
    feed: bytes | None = ...,
) -> str: ...


@overload
def git(
    cwd: str | os.PathLike[str],
    *args: str,
    check: Literal[False] = ...,
    strip: bool = ...,
    timeout: float = ...,
    env: Mapping[str, str] | None = ...,
    feed: bytes | None = ...,
) -> str | None: ...


def git(
    cwd: str | os.PathLike[str],
    *args: str,
    check: bool = False,
    strip: bool = True,
    timeout: float = GIT_TIMEOUT,
    env: Mapping[str, str] | None = None,
    feed: bytes | None = None,
) -> str | None:
    """The stdout of ``git -C cwd ARGS`` under the module's policy, or None when git fails
    (raises instead with ``check=True``); ``env`` is added to the policy environment and
    ``feed``, if given, is git's whole stdin."""
    argv = ["git", "-C", os.fspath(cwd), *args]
    try:
        code, out, err = run_captured(argv, timeout=timeout, env=git_environment(env), feed=feed)
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
    argv: list[str],
    *,
    timeout: float,
    env: Mapping[str, str],
    cwd: str | None = None,
    feed: bytes | None = None,
) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``argv`` run the way every git of onstation runs: no
    stdin (or only the bytes of ``feed``, then end of file), no terminal, a new session whose
    whole process group is killed on timeout (which raises
    :class:`subprocess.TimeoutExpired`). The environment is the caller's choice: :func:`git`
    passes its policy; the effect classifier passes the agent's own."""
    with _Captured(
        argv,
        cwd=cwd,
        stdin=subprocess.DEVNULL if feed is None else subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
    ) as proc:
        try:
            out, err = proc.communicate(feed, timeout=timeout)
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


class _Captured(subprocess.Popen[bytes]):
    """:class:`subprocess.Popen` whose bounded wait blocks until the process exits.

    ``communicate(timeout=...)`` ends with ``wait(timeout)``, which polls for the exit in
    sleeps of 1 ms and more: git has closed its pipes and is exiting, and on a busy machine
    it is often not done by the first look, so a call slept a millisecond or more for
    nothing (issue 14). Here the wait first blocks on the process's pidfd (Linux) for at
    most the time left; then the ordinary wait reaps it at once, or, the time being up,
    raises :class:`subprocess.TimeoutExpired` as before. Without a pidfd the ordinary wait
    does it all."""

    def wait(self, timeout: float | None = None) -> int:
        if timeout is not None and timeout > 0 and self.returncode is None:
            exited = _exits_within(self.pid, timeout)
            if exited is not None:
                return super().wait(timeout if exited else 0)
        return super().wait(timeout)


def _exits_within(pid: int, timeout: float) -> bool | None:
    """Whether child ``pid`` (not yet reaped) ends within ``timeout`` seconds, or None when
    no pidfd can be had for it (no pidfd_open here, or the process is already reaped)."""
    import select

    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)  # readable once the process has ended
        return bool(poller.poll(max(1, int(timeout * 1000 + 0.999))))
    finally:
        os.close(fd)


def _line(cwd: str, *args: str) -> str | None:
    """A one-line answer, None when git fails or prints nothing."""
    return git(cwd, *args) or None


def _names(out: str | None) -> tuple[str, ...]:
    return tuple(sorted(n for n in (out or "").splitlines() if n))


#: onstation's own document directories (briefs, reports, successors' logs and transcripts),
#: each under a ``.bridge`` directory of a workspace.
OWN_DOCUMENT_DIRS = ("turnovers", "reports", "bodies", "transcripts")
#: Those documents, under any ``.bridge`` directory of the repository, are not the work of
#: the body the evidence describes: ``git status`` and ``git diff`` leave them out (issue 14;
#: the kept status answers of :mod:`onstation.harness.git_watch` rely on it).
OWN_DOCUMENTS_PATHSPEC = tuple(
    f":(top,exclude,glob)**/.bridge/{name}/**" for name in OWN_DOCUMENT_DIRS
)

#: A full commit id (SHA-1 or SHA-256 object format).
_FULL_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


@dataclass(frozen=True)
class _Status:
    """What one ``git status --porcelain=v2 --branch`` says of a work tree."""

    branch: str | None
    head: str | None
    upstream: str | None
    dirty: bool
    untracked: tuple[str, ...]
    #: Every record but the untracked files' (the branch headers; each changed, renamed or
    #: unmerged entry with its modes and object ids): equal records mean the same HEAD, the
    #: same upstream distance and the same index.
    tracked: tuple[str, ...] = ()
    #: Some tracked entry's work-tree file differs from the index (or is unmerged): its
    #: content is in no record, so no answer about the work tree can be reused.
    worktree_changed: bool = False
    #: No tracked entry differs from HEAD, in the index or in the work tree.
    clean: bool = True

    @property
    def worktree_proven(self) -> bool:
        """Whether the records prove the whole tracked work tree: no file differs from the
        index, and no untracked ``.gitattributes`` (its content could change how a diff reads
        without changing any record)."""
        return not self.worktree_changed and not any(
            path.rpartition("/")[2] == ".gitattributes" for path in self.untracked
        )


def _status(ws: str) -> _Status | None:
    """The work tree's status, or None when ``ws`` is not in a git work tree (or git fails).

    ``-z`` keeps any path byte-exact; untracked files are listed one by one (``-uall``, as
    ``ls-files --others --exclude-standard`` lists them)."""
    out = git(ws, "status", "--porcelain=v2", "--branch", "-z", "--untracked-files=all",
              "--", *OWN_DOCUMENTS_PATHSPEC, strip=False)  # fmt: skip
    if out is None:
        return None
    branch = head = upstream = None
    has_ab = False
    dirty = False
    worktree_changed = False
    clean = True
    untracked: list[str] = []
    tracked: list[str] = []
    records = out.split("\0")
    i = 0
    while i < len(records):
        record = records[i]
        i += 1
        if record.startswith("? "):
            dirty = True
            untracked.append(record[2:])
            continue
        if record:
            tracked.append(record)
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
        elif record.startswith(("1 ", "2 ")):
            dirty, clean = True, False
            # "1 XY ...": Y is the work tree against the index ("." when they agree).
            worktree_changed = worktree_changed or record[3:4] != "."
            if record.startswith("2 ") and i < len(records):
                tracked.append(records[i])
                i += 1  # a rename's original path follows as its own record
        elif record.startswith("u "):
            dirty, clean, worktree_changed = True, False, True
        elif record.startswith("! "):
            pass  # ignored files are not asked for; never a change
    return _Status(branch, head, upstream if has_ab else None, dirty, tuple(sorted(untracked)),
                   tuple(tracked), worktree_changed, clean)  # fmt: skip


def _parse_remotes(out: str | None) -> tuple[str | None, str | None]:
    """(name, fetch URL) of ``origin``, else of the first remote; (None, None) without one,
    from ``git remote -v`` (URLs as git resolves them, ``insteadOf`` applied)."""
    urls: dict[str, str] = {}
    for line in (out or "").splitlines():
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
              "--", *OWN_DOCUMENTS_PATHSPEC, strip=False)  # fmt: skip
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


def _lookup_safe(name: str) -> bool:
    """A name that can go to git on a line of its own and never as an option."""
    return bool(name) and not name.startswith("-") and not ({"\n", "\r", "\0"} & set(name))


def _immutable(name: str) -> bool:
    """Whether what ``name`` names can never change: a full object id, peeled or not."""
    bare = name.removesuffix("^{commit}").removesuffix("^{tree}")
    return _FULL_ID.fullmatch(bare) is not None


class EvidenceCache:
    """The git evidence of one relief: each question asked once, each answer kept only while
    what proves it still holds.

    Every :meth:`collect` runs ``git status`` first; that answer is the proof. Kept, for
    the cache's life (one relief):

    - what a full object id names (a commit's tree, a base that is a commit id), merge bases
      of two full ids and commit logs between two full ids: objects never change;
    - the work tree's changes (the diff against a commit, the names changed since a commit)
      while the status records every tracked change with its object ids (equal records, no
      work-tree file that differs from the index): then the index is the same and the work
      tree equals it; a work tree with a file that differs from the index is read again;
    - the remote, read once (the status does not prove configuration; a relief reads it
      once, as the brief and the capsule of one relief describe one workspace); with shared
      ``batches``, read through their :class:`~onstation.harness.git_kept.RemoteAnswers`,
      which keeps it across reliefs
      only while every file git reads to answer is proven unchanged.

    Names that can move (a branch, an upstream) are resolved again by every collection, all
    in one ``git cat-file --batch-check``. Untracked files always come from the fresh status.

    With ``keep_open`` (a relief), that ``git cat-file`` is one process kept open for every
    question of the cache's life, until :meth:`close` (see :mod:`onstation.harness.git_kept`):
    the brief,
    the capsule and the launch's HEAD (:meth:`head`) ask it instead of starting one each.
    Given ``batches``, the kept processes are those (shared with other caches, ended by
    their owner, not by :meth:`close`).
    """

    def __init__(self, *, keep_open: bool = False, batches: GitBatches | None = None) -> None:
        self._owns_batches = batches is None
        if batches is None and keep_open:
            from onstation.harness.git_kept import GitBatches

            # A relief's own kept processes keep no remote answer: its one read (below) is
            # all it needs, and proving one would cost more than it saves.
            batches = GitBatches(keep_remotes=False)
        self._batch: GitBatches | None = batches
        self._broken: set[str] = set()  # workspaces whose kept process broke in this cache
        self._objects: dict[tuple[str, str], str | None] = {}
        self._merge_bases: dict[tuple[str, str, str], str | None] = {}
        self._logs: dict[tuple[str, str, str, int], CommitLog | None] = {}
        self._worktree: dict[tuple[object, ...], object] = {}
        self._remotes: dict[str, tuple[str | None, str | None]] = {}

    # -- single answers ---------------------------------------------------------------------

    def resolve(self, workspace: str | os.PathLike[str], names: list[str]) -> dict[str, str | None]:
        """The object id each of ``names`` names, or None (also for a name that could be read
        as an option or holds a line break), from one ``git cat-file --batch-check`` for every
        name not already known."""
        return self._resolve(str(Path(workspace)), names)[0]

    def _resolve(self, ws: str, names: list[str]) -> tuple[dict[str, str | None], bool]:
        """:meth:`resolve`'s answer, and whether git gave it (False: it could not answer,
        and every name it was asked is None)."""
        found: dict[str, str | None] = {}
        ask: list[str] = []
        for name in dict.fromkeys(names):
            if (ws, name) in self._objects:
                found[name] = self._objects[(ws, name)]
            elif not _lookup_safe(name):
                found[name] = None
            else:
                ask.append(name)
        answered = True
        if ask:
            out = self._batch_answer(ws, ask)
            if out is None:
                feed = "".join(f"{name}\n" for name in ask).encode("utf-8", "surrogateescape")
                out = git(ws, "cat-file", "--batch-check=%(objectname)", feed=feed, strip=False)
            lines = (out or "").splitlines()
            if out is None or len(lines) != len(ask):
                lines = [""] * len(ask)  # git could not answer: nothing is known
                answered = False
            for name, line in zip(ask, lines, strict=True):
                oid = line if _FULL_ID.fullmatch(line) else None  # else "NAME missing"
                found[name] = oid
                if answered and _immutable(name):
                    self._objects[(ws, name)] = oid
        return found, answered

    def _batch_answer(self, ws: str, names: list[str]) -> str | None:
        """The kept process's answer lines for ``names`` (as one text), or None (none kept)."""
        if self._batch is None or ws in self._broken:
            return None
        batch = self._batch.of(ws)
        lines = batch.ask(names)
        if batch.broken:
            # Not asked again by this cache: its later questions each start a process of
            # their own, as one that fails would fail again.
            self._broken.add(ws)
        return None if lines is None else "".join(f"{line}\n" for line in lines)

    def close(self) -> None:
        """End the kept ``git cat-file`` processes this cache started (idempotent; a later
        question starts one again); shared ones (``batches``) are left to their owner."""
        if self._batch is not None and self._owns_batches:
            self._batch.close()

    def head(self, workspace: str | os.PathLike[str]) -> str | None:
        """The object id HEAD names now (as ``git rev-parse HEAD``), or None (no work tree,
        an unborn branch, git could not answer); never kept, but read from a kept status
        while its watch proves the repository unchanged (``git_watch``: the status names
        HEAD's commit)."""
        ws = str(Path(workspace))
        statuses = self._batch.statuses if self._batch is not None else None
        status = None if statuses is None else statuses.proven(ws)
        if status is not None:
            return cast(_Status, status).head
        return self.resolve(ws, ["HEAD"])["HEAD"]

    def commit_of(self, workspace: str | os.PathLike[str], revision: str | None) -> str | None:
        """As :func:`commit_of`; a full id's answer is kept."""
        if not revision or revision.startswith("-"):  # never an option to git
            return None
        name = f"{revision}^{{commit}}"
        return self.resolve(workspace, [name])[name]

    def _merge_base(self, ws: str, one: str, head: str) -> str | None:
        if one == head:
            return head  # a commit is its own merge base with itself
        key = (ws, one, head)
        if key not in self._merge_bases:
            self._merge_bases[key] = git(ws, "merge-base", one, head)
        return self._merge_bases[key]

    def _from_worktree(
        self, ws: str, status: _Status, key: tuple[str, str], read: Callable[[], _T]
    ) -> _T:
        if not status.worktree_proven:
            return read()
        full = (ws, status.tracked, *key)
        if full not in self._worktree:
            self._worktree[full] = read()
        return cast(_T, self._worktree[full])

    def _diff(self, ws: str, status: _Status, against: str) -> tuple[str | None, list[DiffEntry],
                                                                   str | None]:  # fmt: skip
        if status.clean and against == status.head:
            # No tracked entry differs from HEAD anywhere: git diff HEAD prints nothing.
            return "", [], ""
        return self._from_worktree(ws, status, ("diff", against), lambda: _work_diff(ws, against))

    def _changed(self, ws: str, status: _Status, since: str) -> tuple[str, ...]:
        if status.clean and since == status.head:
            return ()
        return self._from_worktree(
            ws,
            status,
            ("names", since),
            lambda: _names(git(ws, "diff", "--name-only", since, "--", *OWN_DOCUMENTS_PATHSPEC)),
        )

    def _remote(self, ws: str) -> tuple[str | None, str | None]:
        if ws not in self._remotes:
            kept = self._batch.remotes if self._batch is not None else None
            statuses = self._batch.statuses if self._batch is not None else None

            def read() -> tuple[tuple[str | None, str | None], bool]:
                if kept is not None:
                    return kept.answer_kept(ws)
                return _parse_remotes(git(ws, "remote", "-v")), True

            # Kept with the status while its watch proves the repository's files unchanged;
            # one the shared remote answers have not proven yet is asked of them again.
            self._remotes[ws] = (
                read()[0] if statuses is None else statuses.alongside(ws, "remote", read)
            )
        return self._remotes[ws]

    # -- the evidence -----------------------------------------------------------------------

    def collect(self, workspace: str | os.PathLike[str], base: str | None = None) -> GitEvidence:
        """As :func:`collect`, reusing what this cache already proved."""
        ws = str(Path(workspace))
        # One status answers what used to take six calls: whether this is a work tree, the
        # branch, HEAD, the upstream (only when its ref exists: the ahead/behind line), whether
        # anything changed and which files are untracked. Kept across collections while a
        # watch of the tree proves it unchanged (onstation.harness.git_watch).
        statuses = self._batch.statuses if self._batch is not None else None
        status = _status(ws) if statuses is None else statuses.answer(ws, lambda: _status(ws))
        if status is None:
            return GitEvidence(workspace=ws, repository=False, requested_base=base)
        branch, head, upstream = status.branch, status.head, status.upstream
        tree_name = f"{head}^{{tree}}"
        base_name = f"{base}^{{commit}}"
        candidates = [c for c in ("main", "master") if c != branch]
        names = [tree_name] if head else []
        if base is not None:
            names.append(base_name)
        elif upstream is not None:
            names.append(upstream)
        else:
            names += candidates
        if statuses is None or all(_immutable(name) for name in names):
            found = self.resolve(ws, names)  # one process for every name, none when all known
        else:
            # A branch's or an upstream's object is read from the repository's refs, which the
            # status's watch covers: kept with that status while it stays quiet.
            found = statuses.alongside(ws, "\0".join(["resolve", *names]),
                                       lambda: self._resolve(ws, names))  # fmt: skip
        tree = found[tree_name] if head else None
        requested_commit = found[base_name] if base is not None else None

        chosen = base if base is not None else upstream
        chosen_id = requested_commit if base is not None else found.get(upstream or "")
        if chosen is None:
            for candidate in candidates:
                if found.get(candidate) is not None:
                    chosen, chosen_id = candidate, found[candidate]
                    break
        merge_base = None
        if chosen_id is not None and head is not None:  # never an option: resolve() refused it
            merge_base = self._merge_base(ws, chosen_id, head)
        if merge_base is None and head is not None:
            merge_base, chosen = head, chosen or "HEAD"

        diff = None
        files: list[DiffEntry] = []
        against = requested_commit or head
        if against is not None:
            stat, files, patch = self._diff(ws, status, against)
            diff = WorkTreeDiff(
                against=against,
                stat=stat,
                files=tuple(files),
                patch_sha256=None
                if patch is None
                else hashlib.sha256(patch.encode("utf-8")).hexdigest(),
            )
        changed: tuple[str, ...] = ()
        if merge_base is not None:
            kinds = {f.status for f in files}
            if (merge_base == against and diff is not None and diff.stat is not None
                    and not ({"D", "A"} <= kinds) and "U" not in kinds):  # fmt: skip
                # The diff just read names them: without a deleted and an added path there is
                # no rename for --name-only to fold, and no unmerged path to list twice.
                changed = tuple(sorted(f.path for f in files))
            else:
                changed = self._changed(ws, status, merge_base)

        remote_name, remote_url = self._remote(ws)
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
            untracked_files=status.untracked,
            dirty=status.dirty,
            diff=diff,
        )

    def commits_since(
        self, workspace: str | os.PathLike[str], base: str, *, head: str | None,
        limit: int = MAX_COMMITS,
    ) -> CommitLog | None:  # fmt: skip
        """As :func:`commits_since`, up to ``head`` (the collected evidence's HEAD, so the log
        and the evidence describe one moment); None without a head."""
        ws = str(Path(workspace))
        if limit < 1 or head is None:
            return None
        resolved = base if _FULL_ID.fullmatch(base) else self.commit_of(ws, base)
        if resolved is None:
            return None
        if resolved == head:
            return CommitLog(base=resolved, commits=(), total=0)  # nothing since HEAD itself
        key = (ws, resolved, head, limit)
        if key not in self._logs:
            self._logs[key] = _log(ws, resolved, head, limit)
        return self._logs[key]


def collect(workspace: str | os.PathLike[str], base: str | None = None) -> GitEvidence:
    """Everything git can say, read-only, about ``workspace`` (see
    :class:`~onstation.plan.evidence.GitEvidence` for what each field means).

    ``base`` is the base of the work when the caller knows it; without it the brief's base
    is found (upstream, else ``main`` / ``master``, else HEAD) and the capsule's diff is
    taken against HEAD. A ``base`` that names no commit is recorded, not refused: refusing
    is the reader's decision. A relief that collects more than once shares one
    :class:`EvidenceCache` instead.
    """
    return EvidenceCache().collect(workspace, base)


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
    return _log(ws, resolved, "HEAD", limit)


def _log(ws: str, resolved: str, tip: str, limit: int) -> CommitLog | None:
    """The commits ``RESOLVED..TIP``, newest first, at most ``limit`` (and how many in all)."""
    # One more than the limit tells whether the log was cut; only then is the total counted.
    out = git(ws, "log", "--no-show-signature", "--no-decorate", "--no-color",
              f"--max-count={limit + 1}", "--format=%H %s", f"{resolved}^{{commit}}..{tip}",
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
        count = git(ws, "rev-list", "--count", f"{resolved}..{tip}", "--")
        total = int(count) if count is not None and count.isdigit() else None
    return CommitLog(base=resolved, commits=tuple(commits[:limit]), total=total)
