"""``git status`` answers kept while a watch of the work tree proves nothing changed (issue 14).

A relief reads ``git status`` twice (its brief's evidence, then its capsule's, each the proof
of its moment), and a controller reads it again at each of its reliefs; in the simulation
those processes were a fifth of a seed's CPU. For a controller that keeps its git things
across reliefs (:class:`~onstation.harness.git_kept.GitBatches` with ``keep_statuses``: the
simulator's), :class:`StatusAnswers` keeps a workspace's last answer, and its ``git remote
-v`` (:meth:`StatusAnswers.alongside`), together with a :class:`WorkTreeWatch`: a Linux
inotify watch, set up before git is asked, over every directory of the work tree and of its
git directory. The objects a collection resolves from refs (its branches, upstream) are kept
alongside in the same way, and HEAD is read from a kept answer still proven
(:meth:`StatusAnswers.proven`). A single relief asks git each time (one reuse would spare it about a
millisecond on a small tree; watching a large one costs more than its status). The kernel queues
an event for every change made through a watched directory as part of the system call that
makes it (a file written, truncated, created, removed, renamed, chmod'ed or touched; a
directory added or removed; the index, HEAD, a ref or the configuration replaced), so a
watch with nothing queued at the next use proves that nothing git reads in the tree changed
since before git was asked; what git reads outside the repository (its executable, the
system and global configuration, the global ignore and attributes files) is compared byte
for byte at each use, as :class:`~onstation.harness.git_kept.RemoteAnswers` compares it.

What the answer leaves out, and so the watch ignores: onstation's own documents (briefs,
reports, successors' logs and transcripts: :data:`OWN_DOCUMENT_DIRS` under any ``.bridge``
directory). The evidence excludes them with a pathspec
(:data:`onstation.harness.evidence.OWN_DOCUMENTS_PATHSPEC`), and the watch never watches
them, so a relief writing its brief does not make the next reading ask git again.

What a watch cannot see, and what is therefore never kept: anything but a local file
system (:data:`_WATCHABLE_FS`: a network or FUSE file system changes behind the kernel's
back); a tree or git directory of an unusual shape (a ``.git`` file, a linked worktree, a
nested repository or submodule, a mount point inside the tree, a ``core.worktree``,
``core.excludesFile`` or ``core.attributesFile`` setting, an ``include``); more than
:data:`MAX_ENTRIES` entries (files and directories, the git directory's with them: the
walk that sets the watch up is Python's, about 1.5 µs an entry, against git's C, so a large
tree costs more to watch than a status; a tree refused is not walked again by the same
:class:`StatusAnswers`); a full event queue. One kind of change is invisible to
inotify and is not covered: a write through a shared memory mapping (``mmap``), and a
write to a hard link of a tracked file made through a directory outside the tree. Git's
own file system monitor (``core.fsmonitor``) rests on the same events and has the same
reach; editors, shells and git itself write with ``write(2)`` and ``rename(2)``.
Elsewhere than Linux, every reading asks git.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

from onstation.harness import inotify
from onstation.harness.evidence import OWN_DOCUMENT_DIRS
from onstation.harness.git_kept import (
    _discover,
    _global_configuration,
    _read_config,
    _Unproven,
)

__all__ = ["MAX_ENTRIES", "OWN_DOCUMENT_DIRS", "StatusAnswers", "WorkTreeWatch"]

_T = TypeVar("_T")
_V = TypeVar("_V")

#: The most entries (files and directories, the work tree's and the git directory's) a watch
#: lists as it is set up: past it, git is asked (measured on an 8,700-entry tree: 12 ms to
#: set a watch up, against 3 ms for its ``git status``).
MAX_ENTRIES = 2000
#: Local file systems: every change to them goes through this kernel, which tells the watch.
_WATCHABLE_FS = frozenset(
    {"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "f2fs", "jfs", "reiserfs", "overlay"}
)
#: Git directory entries left unwatched: objects never change once written (a new one
#: shows in a ref, the index or HEAD) and reflogs follow their refs.
_GITDIR_UNWATCHED = frozenset({"objects", "logs"})

_FS_TYPES: dict[int, str | None] = {}


class _IdleInstances:
    """Idle inotify instances of one process, for its next watch. Closing an instance waits
    for the kernel's SRCU grace period (measured here: 0.1 ms to 14 ms of sleep, often
    several), so a watch that ends removes its watches (which does not wait) and leaves its
    instance here instead."""

    def __init__(self) -> None:
        self.pid = 0
        self.fds: list[int] = []


_IDLE = _IdleInstances()
_IDLE_MAX = 4


def _fs_type(device: int) -> str | None:
    """The type of the file system mounted as ``device`` (``/proc/self/mountinfo``), or None."""
    if device not in _FS_TYPES:
        wanted = f"{os.major(device)}:{os.minor(device)}"
        found = None
        try:
            with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as lines:
                for line in lines:
                    fields, _, rest = line.partition(" - ")
                    parts = fields.split(" ")
                    if len(parts) > 2 and parts[2] == wanted and rest:
                        found = rest.split(" ", 1)[0]
        except OSError:
            found = None
        _FS_TYPES[device] = found
    return _FS_TYPES[device]


class WorkTreeWatch:
    """An inotify watch over a work tree and its git directory; :meth:`quiet` says whether
    nothing but onstation's own documents changed there since :meth:`start`."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd
        self._wds: list[int] = []
        #: Watch descriptors of ``.bridge`` directories (their own documents' events pass).
        self._bridges: set[int] = set()
        #: The work tree's directories (not the git directory's), by watch descriptor.
        self._tree: dict[int, str] = {}
        self.listed = 0
        self.changed = False

    @classmethod
    def start(cls, ws: str) -> WorkTreeWatch:
        """Watch the work tree ``ws`` lies in; :class:`_Unproven` when it cannot be watched."""
        gitdir, common, _ = _discover(ws, [])
        top = os.path.dirname(gitdir)
        here = os.path.realpath(ws)
        # The .git directory of the tree ws lies in: not a .git file naming a git directory
        # elsewhere (even one named .git), not a linked worktree's.
        inside = here == top or here.startswith(top.rstrip("/") + "/")
        if gitdir != common or os.path.basename(gitdir) != ".git" or not inside or not (
            stat.S_ISDIR(_lstat(gitdir).st_mode)
        ):  # fmt: skip
            raise _Unproven(gitdir)
        device = _lstat(top).st_dev
        if _fs_type(device) not in _WATCHABLE_FS:
            raise _Unproven(top)
        try:
            libc = inotify.libc()
            watch = cls(_take_instance())
        except OSError as exc:
            raise _Unproven("inotify") from exc
        try:
            watch._add_tree(libc, top, device, gitdir)
            # The repository's own configuration, read once it is watched (a later change is
            # an event): one that names another file or moves the work tree is not followed.
            for name in ("config", "config.worktree"):
                if _redirects(_read_config(os.path.join(gitdir, name), [])[1]):
                    raise _Unproven(name)
        except BaseException:
            watch.close()
            raise
        return watch

    def _add_tree(self, libc: Any, top: str, device: int, gitdir: str) -> None:
        # Each directory is watched before it is listed: whatever appears in it after the
        # listing is an event, whatever appeared before is in the listing.
        pending = [top]
        while pending:
            directory = pending.pop()
            in_gitdir = directory == gitdir or directory.startswith(gitdir + "/")
            bridge = not in_gitdir and os.path.basename(directory) == ".bridge"
            self._add(libc, directory, bridge, tree=not in_gitdir)
            try:
                entries = list(os.scandir(directory))
            except OSError as exc:
                raise _Unproven(directory) from exc
            self.listed += len(entries)
            if self.listed > MAX_ENTRIES:
                raise _Unproven(directory)
            for entry in entries:
                name = entry.name
                if name == ".git" and entry.path != gitdir and not in_gitdir:
                    raise _Unproven(entry.path)  # a nested repository or a submodule
                try:
                    # The directory entry's own type: no stat for a file. A symlink to a
                    # directory is a file to git.
                    if not entry.is_dir(follow_symlinks=False):
                        continue
                    info = entry.stat(follow_symlinks=False)
                except OSError as exc:
                    raise _Unproven(entry.path) from exc
                if info.st_dev != device:
                    raise _Unproven(entry.path)  # a mount point inside the tree
                if directory == gitdir and name in _GITDIR_UNWATCHED:
                    continue
                if bridge and name in OWN_DOCUMENT_DIRS:
                    continue
                pending.append(entry.path)

    def _add(self, libc: Any, directory: str, bridge: bool, *, tree: bool) -> None:
        wd = libc.inotify_add_watch(
            self._fd,
            os.fsencode(directory),
            inotify.CHANGES | inotify.IN_ONLYDIR | inotify.IN_DONT_FOLLOW,
        )
        if wd < 0:
            raise _Unproven(directory)  # gone meanwhile, or no watch left (max_user_watches)
        self._wds.append(wd)
        if bridge:
            self._bridges.add(wd)
        if tree:
            self._tree[wd] = directory

    @property
    def watched(self) -> int:
        """How many directories are watched."""
        return len(self._wds)

    def quiet(self) -> bool:
        """Whether nothing git reads changed since :meth:`start` (False once anything did)."""
        if self._fd is None or self.changed:
            return False
        try:
            events = inotify.drain(self._fd)
        except OSError:
            events = [inotify.Event(-1, inotify.IN_Q_OVERFLOW, "")]
        for event in events:
            own = (event.wd in self._bridges and event.mask & inotify.IN_ISDIR
                   and event.name in OWN_DOCUMENT_DIRS)  # fmt: skip
            # An overflow's wd is -1: never one of onstation's own documents, nor a .bridge.
            if not own and not self._new_bridge(event):
                self.changed = True
                return False
        return True

    def _new_bridge(self, event: inotify.Event) -> bool:
        """Whether ``event`` is a ``.bridge`` directory made in the work tree that holds
        nothing but onstation's own document directories, now watched (a relief's first
        brief makes one): git reports nothing of it, as of an empty directory."""
        parent = self._tree.get(event.wd)
        made = inotify.IN_CREATE | inotify.IN_MOVED_TO
        if parent is None or event.name != ".bridge" or not event.mask & made or not (
            event.mask & inotify.IN_ISDIR
        ):  # fmt: skip
            return False
        path = os.path.join(parent, event.name)
        try:
            # Watched before it is listed, as every directory is (see _add_tree).
            self._add(inotify.libc(), path, bridge=True, tree=True)
            with os.scandir(path) as entries:
                return all(
                    entry.name in OWN_DOCUMENT_DIRS and entry.is_dir(follow_symlinks=False)
                    for entry in entries
                )
        except (_Unproven, OSError):
            return False

    def close(self) -> None:
        """End the watch (idempotent): its watches are removed and its instance kept idle
        for the next watch of this process."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        libc = inotify.libc()
        for wd in self._wds:
            libc.inotify_rm_watch(fd, wd)  # a watch already gone fails: nothing to remove
        self._wds.clear()
        _give_instance(fd)


def _take_instance() -> int:
    """An inotify instance with no watch and nothing queued: an idle one of this process,
    or a new one; :class:`OSError` when none can be had."""
    idle = _IDLE.fds
    if _IDLE.pid != os.getpid():
        # Inherited across a fork: the parent's instances, never this process's to read.
        for fd in idle:
            with contextlib.suppress(OSError):
                os.close(fd)  # the parent still holds each: this close does not wait
        idle.clear()
        _IDLE.pid = os.getpid()
    if idle:
        return idle.pop()
    return inotify.new_instance()


def _give_instance(fd: int) -> None:
    """Keep ``fd`` (its watches removed) idle, its queue drained; close it past the bound."""
    try:
        inotify.drain(fd)  # the removals' IN_IGNORED, and anything before them
    except OSError:
        pass
    else:
        if _IDLE.pid == os.getpid() and len(_IDLE.fds) < _IDLE_MAX:
            _IDLE.fds.append(fd)
            return
    with contextlib.suppress(OSError):
        os.close(fd)


def _lstat(path: str) -> os.stat_result:
    try:
        return os.lstat(path)
    except OSError as exc:
        raise _Unproven(path) from exc


#: Configuration words that name a further file or move the work tree: never followed.
_REDIRECTS = (b"excludesfile", b"attributesfile", b"worktree")


def _redirects(data: bytes | None) -> bool:
    return data is not None and any(word in data.lower() for word in _REDIRECTS)


def _status_inputs() -> tuple[object, ...]:
    """What ``git status`` reads outside the watched directories (git's sequence, as
    :class:`~onstation.harness.git_kept.RemoteAnswers` reads it): the executable, the
    environment its configuration is found by, the system and global configuration files'
    bytes, and the default global ignore and attributes files' bytes; :class:`_Unproven`
    when one names another file or moves the work tree (or holds an include)."""
    found = _global_configuration()
    paths = (*found.files, *(os.path.join(found.xdg_git, n) for n in ("ignore", "attributes")))
    files = tuple(_read_config(path, [])[1] for path in paths)
    if any(_redirects(data) for data in files):
        raise _Unproven("configuration")
    return (found.identity, files)


@dataclass
class _Kept(Generic[_T]):
    watch: WorkTreeWatch
    inputs: tuple[object, ...]
    answer: _T
    #: Other answers git gives from the same files (see :meth:`StatusAnswers.alongside`).
    alongside: dict[str, object] = field(default_factory=dict)


class StatusAnswers(Generic[_T]):
    """A ``git status`` answer per workspace, kept while its :class:`WorkTreeWatch` is quiet
    and git's configuration reads the same (see the module docstring)."""

    def __init__(self) -> None:
        self._kept: dict[str, _Kept[_T]] = {}
        #: Workspaces no watch could be set up for (too large, an unusual shape, no
        #: inotify): not walked again in this object's life; git is asked each time.
        self._unwatchable: set[str] = set()
        #: Answers given from a watch, and answers asked of git (for tests and benchmarks).
        self.reused = 0
        self.asked = 0

    def answer(self, ws: str, ask: Callable[[], _T | None]) -> _T | None:
        """The kept answer for ``ws`` when still proven, else ``ask()`` (kept when it can be)."""
        kept = self.proven(ws)
        if kept is not None:  # an answer kept is never None
            return kept
        self.asked += 1
        if ws in self._unwatchable:
            return ask()
        try:
            watch = WorkTreeWatch.start(ws)
        except (_Unproven, OSError):
            self._unwatchable.add(ws)
            return ask()
        try:
            inputs = _status_inputs()
        except (_Unproven, OSError):
            watch.close()
            return ask()
        found = ask()
        if found is None:
            watch.close()
            return found
        # A change while git read stays queued: the next use sees it and asks git again.
        self._kept[ws] = _Kept(watch, inputs, found)
        return found

    def proven(self, ws: str) -> _T | None:
        """``ws``'s kept answer when it is still proven, as :meth:`answer` proves it (its
        watch quiet, git's configuration reading the same), else None; git is not asked
        (a caller that wants only what the status says, such as HEAD, asks git its own
        cheaper way)."""
        kept = self._kept.get(ws)
        if kept is None:
            return None
        try:
            same = kept.watch.quiet() and _status_inputs() == kept.inputs
        except (_Unproven, OSError):  # what git reads could not be read: ask git
            same = False
        if not same:
            del self._kept[ws]
            kept.watch.close()
            return None
        self.reused += 1
        return kept.answer

    def alongside(self, ws: str, name: str, compute: Callable[[], tuple[_V, bool]]) -> _V:
        """Another answer git gives from nothing but the watched directories and the inputs
        :meth:`answer` compares (``git remote -v``: the repository's configuration and its
        legacy ``remotes/`` and ``branches/`` files, the global ones), kept with ``ws``'s
        status answer while its watch stays quiet. ``compute()`` gives the answer and
        whether to keep it (the simulator's remote answers are shared by every seed of a
        process once proven: one not yet proven is asked of them again, so that they can
        prove it). For use right after :meth:`answer` proved that status, as one collection
        does."""
        kept = self._kept.get(ws)
        if kept is None or not kept.watch.quiet():
            return compute()[0]
        if name not in kept.alongside:
            value, keep = compute()
            if not keep:
                return value
            kept.alongside[name] = value
        return cast(_V, kept.alongside[name])

    def close(self) -> None:
        """End every watch (idempotent); nothing is kept after."""
        for kept in self._kept.values():
            kept.watch.close()
        self._kept.clear()
        self._unwatchable.clear()
