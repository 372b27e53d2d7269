"""What git says about a workspace at one moment, as plain data.

The shape lives here, in the plan layer, so that :mod:`onstation.plan.build` can take it as
an argument without importing the harness (the plan layer sits below the harness and does
no I/O of its own). :func:`onstation.harness.evidence.collect` is the only producer; the
plan layer and the relief documents only read it.

Every field is what git answered, or None (or empty) when git could not answer: nothing is
guessed here, and deciding what an unanswered question means is left to the reader.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DiffEntry:
    """One path of ``git diff --name-status --no-renames``."""

    path: str
    status: str  # git's status letter(s): A, M, D, T, ...


@dataclass(frozen=True)
class WorkTreeDiff:
    """The work tree against one commit (``git diff <against>``)."""

    against: str  # the commit: the requested base's, else HEAD
    stat: str | None  # ``git diff --stat`` verbatim (trailing newline kept); None: no answer
    files: tuple[DiffEntry, ...]
    patch_sha256: str | None  # SHA-256 of ``git diff --binary`` (UTF-8); None: no answer


@dataclass(frozen=True)
class GitEvidence:
    """What git says about a workspace at one moment.

    Two bases are kept apart because two readers need them:

    - ``base_ref`` / ``merge_base``: where the work *started* (for a turnover brief): the
      requested base, else the branch's upstream, else ``main`` or ``master``, else HEAD
      itself; ``merge_base`` is the merge base of that ref and HEAD (HEAD when there is
      none). ``changed_files`` are measured against ``merge_base``.
    - ``requested_base`` / ``requested_base_commit``: exactly the base the caller asked for
      and the commit it names (None when it names none, or starts with ``-``); ``diff`` is
      taken against that commit, else against HEAD (for a capsule).
    """

    workspace: str
    repository: bool  # True only inside a git work tree
    branch: str | None = None  # None when detached or unborn
    head: str | None = None  # HEAD's commit; None when the repository has no commit
    tree: str | None = None  # HEAD's tree
    base_ref: str | None = None
    merge_base: str | None = None
    requested_base: str | None = None
    requested_base_commit: str | None = None
    remote_name: str | None = None  # ``origin`` if configured, else the first remote
    #: That remote's URL, its credentials already replaced by a marker where the evidence
    #: was collected (:func:`onstation.harness.evidence.collect`,
    #: :func:`onstation.core.redact.scrub_url`).
    remote_url: str | None = None
    changed_files: tuple[str, ...] = ()  # sorted, against ``merge_base``
    untracked_files: tuple[str, ...] = ()  # sorted, not ignored
    dirty: bool | None = None  # ``git status --porcelain`` non-empty; None: no answer
    diff: WorkTreeDiff | None = None  # None when there is nothing to diff against
