"""What a controller keeps across its reliefs' git evidence (issue 14): kept ``git cat-file
--batch-check`` processes, one per workspace (:class:`GitBatches`), and ``git remote -v``
answers, each kept only while every file git reads to give it is proven unchanged
(:class:`RemoteAnswers`; the argument is in its docstring). Finding where git reads its
system configuration asks ``git config --system --edit`` with ``echo`` as the editor, once
per process and git executable. Every git here runs as :func:`onstation.harness.evidence.git`
runs it; :class:`onstation.harness.evidence.EvidenceCache` asks through these.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from onstation.harness.evidence import (
    _FULL_ID,
    GIT_TIMEOUT,
    _parse_remotes,
    git,
    git_environment,
)

if TYPE_CHECKING:
    from onstation.harness.git_watch import StatusAnswers

__all__ = ["GitBatches", "RemoteAnswers"]


#: The most bytes of names one question to a kept ``git cat-file`` may hold (a pipe's
#: buffer holds them whole, so writing them never waits for git to read).
_BATCH_FEED_MAX = 16 * 1024


class _BatchCheck:
    """One ``git cat-file --batch-check`` of a workspace, kept open while a relief runs.

    Each question is written to it as lines of names and answered, one line per name, by git
    as it resolves them at that moment (it reads HEAD and every ref afresh for each name, as
    a new process would; what it finds is never kept here). Bounded like every call of
    :func:`git` (``timeout`` per question; the process group is killed on expiry); any
    failure (no start, a timeout, an answer cut short) ends the process and answers None, and
    the caller asks a process of its own instead. :meth:`close` ends it."""

    def __init__(self, ws: str, timeout: float = GIT_TIMEOUT) -> None:
        self.ws = ws
        self.timeout = timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.broken = False

    def ask(self, names: list[str]) -> list[str] | None:
        """The answer line of each name, in order; None when this process cannot answer."""
        feed = "".join(f"{name}\n" for name in names).encode("utf-8", "surrogateescape")
        if self.broken or not names or len(feed) > _BATCH_FEED_MAX:
            return None
        import select
        import time

        try:
            proc = self.proc
            if proc is None:
                proc = self.proc = subprocess.Popen(
                    ["git", "-C", self.ws, "cat-file", "--batch-check=%(objectname)"],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                    env=git_environment(), start_new_session=True,
                )  # fmt: skip
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(feed)
            proc.stdin.flush()
            fd = proc.stdout.fileno()
            deadline = time.monotonic() + self.timeout
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            out = b""
            while out.count(b"\n") < len(names):
                left = deadline - time.monotonic()
                if left <= 0 or not poller.poll(max(1, int(left * 1000))):
                    raise TimeoutError
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise EOFError  # git ended (not a work tree, a broken repository)
                out += chunk
        except (OSError, ValueError, TimeoutError, EOFError):
            self.broken = True
            self.close()
            return None
        lines = out.decode("utf-8", "replace").split("\n")
        if len(lines) != len(names) + 1 or lines[-1]:
            self.broken = True  # more than was asked for: nothing here can be trusted
            self.close()
            return None
        return lines[:-1]

    def close(self) -> None:
        """End the process (idempotent). It only reads, so it is killed rather than waited
        for (a bounded wait polls in sleeps of a millisecond and more)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # its session: git and anything it started
        proc.kill()
        proc.wait()  # at once: it was killed
        for pipe in (proc.stdin, proc.stdout):
            with contextlib.suppress(OSError):
                if pipe is not None:
                    pipe.close()


#: The largest configuration file whose bytes a proof keeps (a larger one: git is asked).
_CONFIG_MAX = 256 * 1024
#: The most entries a legacy ``remotes/`` or ``branches/`` directory may hold in a proof.
_LEGACY_MAX = 64
#: How long before a fill a file must have last changed for its stat identity to show any
#: later change (the "racily clean" rule; see :class:`RemoteAnswers`): a file system with
#: sub-microsecond timestamps stamps a change with the kernel's coarse clock, at most one
#: tick (10 ms at HZ=100) behind the time read here; one with coarser timestamps (whole
#: seconds, or FAT's two) gets the wide margin.
_SETTLED_FINE_NS = 100_000_000
_SETTLED_COARSE_NS = 3_000_000_000
#: Where each git executable (path and stat identity) reads its system configuration.
_SYSTEM_CONFIG: dict[tuple[object, ...], str | None] = {}


def _identity(info: os.stat_result) -> tuple[int, int, int, int, int, int, int]:
    """What changes when a file is changed, replaced or chmod'ed/chown'ed."""
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns,
            info.st_mode, info.st_uid)  # fmt: skip


class _Unproven(Exception):
    """Something git would read cannot be kept track of: ask git, keep nothing."""


def _read_config(path: str, stats: list[tuple[int, ...]]) -> tuple[str, bytes | None]:
    """``(path, bytes)`` of the file git reads at ``path`` (following a symlink, as git
    does), ``(path, None)`` when there is none; its stat identity goes to ``stats``.
    :class:`_Unproven` for anything else (unreadable, not a regular file, too large, or
    holding an include directive)."""
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except (FileNotFoundError, NotADirectoryError):
        return (path, None)
    except (OSError, ValueError) as exc:
        raise _Unproven(path) from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > _CONFIG_MAX:
            raise _Unproven(path)
        data = b""
        while len(data) <= _CONFIG_MAX:
            more = os.read(fd, _CONFIG_MAX + 1 - len(data))
            if not more:
                break
            data += more
    except OSError as exc:
        raise _Unproven(path) from exc
    finally:
        os.close(fd)
    # include.path / includeIf.*.path name further files (and includeIf conditions read the
    # branch, the git dir or the remotes): none is followed here, so none is kept. Matched
    # anywhere, in any case: a false alarm only costs a git process.
    if len(data) > _CONFIG_MAX or b"include" in data.lower():
        raise _Unproven(path)
    stats.append(_identity(info))
    return (path, data)


def _read_legacy(directory: str, stats: list[tuple[int, ...]]) -> tuple[object, ...]:
    """The names and files of a legacy ``remotes/`` or ``branches/`` directory (its stat
    identity and theirs go to ``stats``)."""
    try:
        info = os.stat(directory)
        with os.scandir(directory) as entries:
            names = sorted(e.name for e in entries)
    except (FileNotFoundError, NotADirectoryError):
        return (directory, None)
    except OSError as exc:
        raise _Unproven(directory) from exc
    if len(names) > _LEGACY_MAX:
        raise _Unproven(directory)
    stats.append(_identity(info))
    return (
        directory,
        tuple((n, _read_config(os.path.join(directory, n), stats)[1]) for n in names),
    )


def _small(path: str, stats: list[tuple[int, ...]] | None) -> bytes:
    """A git dir's small pointer file (``.git`` file, ``commondir``, ``HEAD``); its stat
    identity goes to ``stats`` when given."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
                     | getattr(os, "O_NONBLOCK", 0))  # fmt: skip
    except OSError as exc:
        raise _Unproven(path) from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _Unproven(path)
        data = os.read(fd, 4097)
    except OSError as exc:
        raise _Unproven(path) from exc
    finally:
        os.close(fd)
    if len(data) > 4096:
        raise _Unproven(path)
    if stats is not None:
        stats.append(_identity(info))
    return data


def _git_dir_at(gitdir: str, stats: list[tuple[int, ...]]) -> tuple[str, str]:
    """(git dir, common dir) when ``gitdir`` (a physical path) is one by git's test
    (is_git_directory: a valid HEAD, ``objects/`` and ``refs/``, in the common dir when
    ``commondir`` names one); :class:`_Unproven` otherwise (git would then look further up:
    not followed here)."""
    common = gitdir
    pointer = f"{gitdir}/commondir"
    if os.path.lexists(pointer):
        named = _small(pointer, stats).decode("utf-8", "surrogateescape")
        common = os.path.realpath(os.path.join(gitdir, named.rstrip("\r\n")))
    head = _small(f"{gitdir}/HEAD", None).rstrip(b"\r\n")
    if not (head.startswith(b"ref: refs/") or _FULL_ID.fullmatch(head.decode("latin-1"))):
        raise _Unproven(gitdir)
    for part in ("objects", "refs"):
        try:
            if not stat.S_ISDIR(os.stat(f"{common}/{part}").st_mode):
                raise _Unproven(gitdir)
        except OSError as exc:
            raise _Unproven(gitdir) from exc
    return gitdir, common


def _discover(ws: str, stats: list[tuple[int, ...]]) -> tuple[str, str, tuple[object, ...]]:
    """(git dir, common dir, what the discovery depends on) as ``git -C ws`` finds its
    repository: from
    the physical working directory up, the first ``.git`` directory or ``.git`` file; a
    directory on the way that could itself be a bare repository (it holds a ``HEAD``), a
    mount point (git stops there), a ``.git`` of another kind or one git would pass over is
    :class:`_Unproven`. ``safe.directory``'s ownership test is covered by the owners kept."""
    here = os.path.realpath(ws)
    try:
        device = os.stat(here).st_dev
    except OSError as exc:
        raise _Unproven(ws) from exc
    while True:
        dotgit = f"{here.rstrip('/')}/.git"
        try:
            info = os.lstat(dotgit)
        except FileNotFoundError:
            info = None
        except OSError as exc:
            raise _Unproven(dotgit) from exc
        if info is not None:
            pointer: bytes | None = None
            if stat.S_ISDIR(info.st_mode):
                named = dotgit
            elif stat.S_ISREG(info.st_mode):
                pointer = _small(dotgit, stats)
                if not pointer.startswith(b"gitdir: "):
                    raise _Unproven(dotgit)
                target = (
                    pointer[len(b"gitdir: ") :].rstrip(b"\r\n").decode("utf-8", "surrogateescape")
                )
                named = os.path.realpath(os.path.join(here, target))
            else:
                raise _Unproven(dotgit)
            gitdir, common = _git_dir_at(named, stats)
            owners = tuple(os.stat(p).st_uid for p in (here, dotgit, gitdir))
            # Not the .git directory's own identity: it changes with every commit.
            if all(owner == os.geteuid() for owner in owners):
                # Where the repository lies changes nothing git answers from (equal bytes,
                # equal answer; includes are never followed): its shape only, so that
                # repositories with the same files share one answer.
                shape = (os.path.relpath(gitdir, here), os.path.relpath(common, gitdir))
                return gitdir, common, (pointer, shape, owners)
            # safe.directory's values are paths: someone else's repository is kept by its own.
            return gitdir, common, (here, pointer, gitdir, common, owners)
        if os.path.lexists(f"{here.rstrip('/')}/HEAD"):
            raise _Unproven(here)  # possibly a bare repository: git's own question
        parent = os.path.dirname(here)
        if parent == here:
            raise _Unproven(ws)  # no repository
        try:
            if os.stat(parent).st_dev != device:
                raise _Unproven(parent)
        except OSError as exc:
            raise _Unproven(parent) from exc
        here = parent


def _git_executable() -> tuple[str, tuple[int, ...]]:
    """(path, stat identity) of the ``git`` :func:`git` starts: the first executable regular
    file named ``git`` along the ``PATH`` it runs with, as :mod:`subprocess` finds it."""
    for directory in os.get_exec_path():
        candidate = os.path.join(directory, "git")
        try:
            info = os.stat(candidate)
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode) and os.access(candidate, os.X_OK):
            return candidate, _identity(info)
    raise _Unproven("git")


def _system_config(executable: str, identity: tuple[object, ...]) -> str | None:
    """Where ``executable`` reads its system configuration (a path fixed when git was built,
    or by a relocatable build from where it is installed), as git itself names it: ``git
    config --system --edit`` with ``echo`` for the editor prints the path and edits nothing.
    None when git does not say (nothing is kept then). Asked once per process and git."""
    key = (executable, identity)
    if key not in _SYSTEM_CONFIG:
        out = git("/", "config", "--system", "--edit", env={"GIT_EDITOR": "echo"})
        path = out if out and os.path.isabs(out) and "\n" not in out else None
        _SYSTEM_CONFIG[key] = path
    return _SYSTEM_CONFIG[key]


@dataclass(frozen=True)
class _RemoteInputs:
    """Everything ``git -C WS remote -v`` answers from, read now."""

    #: Compared whole: the git executable, the environment git reads its configuration by,
    #: the repository found, the bytes of every configuration file (or their absence).
    key: tuple[object, ...]
    #: The stat identity of each file read (the fill's racily-clean test and its second
    #: reading; never compared across reliefs: equal bytes prove enough there).
    stats: tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class _GlobalConfiguration:
    """Where git finds its configuration outside any repository, and what decides it."""

    #: The executable, ``HOME``, ``XDG_CONFIG_HOME``, the effective uid and ``SUDO_UID``.
    identity: tuple[object, ...]
    #: The system file, ``$XDG_CONFIG_HOME/git/config`` (or ``~/.config/git/config``) and
    #: ``~/.gitconfig``, in git's order.
    files: tuple[str, str, str]
    #: ``$XDG_CONFIG_HOME/git`` (or ``~/.config/git``): the default ignore and attributes
    #: files lie there.
    xdg_git: str


def _global_configuration() -> _GlobalConfiguration:
    """As git finds it (git's ``config.c`` do_git_config_sequence), or :class:`_Unproven`."""
    env = os.environ  # as git_environment() passes them: none of these starts with GIT_
    executable, binary = _git_executable()
    system = _system_config(executable, binary)
    home = env.get("HOME")
    if system is None or not home:
        raise _Unproven("configuration")
    xdg_home = env.get("XDG_CONFIG_HOME")
    xdg_git = os.path.join(xdg_home if xdg_home else os.path.join(home, ".config"), "git")
    return _GlobalConfiguration(
        (executable, binary, home, xdg_home, os.geteuid(), env.get("SUDO_UID")),
        (system, os.path.join(xdg_git, "config"), os.path.join(home, ".gitconfig")),
        xdg_git,
    )


def _remote_inputs(ws: str) -> _RemoteInputs:
    """What ``git remote -v`` in ``ws`` reads (see :class:`RemoteAnswers`), or
    :class:`_Unproven`."""
    found_config = _global_configuration()
    stats: list[tuple[int, ...]] = []
    gitdir, common, found = _discover(ws, stats)
    files = [_read_config(p, stats) for p in (*found_config.files,
                                              os.path.join(common, "config"),
                                              os.path.join(gitdir, "config.worktree"))]  # fmt: skip
    legacy = [_read_legacy(os.path.join(d, kind), stats) for d in dict.fromkeys((common, gitdir))
              for kind in ("remotes", "branches")]  # fmt: skip
    # Each file by its place in the sequence and its bytes, not its path: the repository's
    # own files lie where the repository does, and ``found`` says what of that place counts.
    key = (*found_config.identity, found, tuple(data for _, data in files),
           tuple(entries for _, entries in legacy))  # fmt: skip
    return _RemoteInputs(key, tuple(stats))


def _settled(stats: tuple[tuple[int, ...], ...], now_ns: int) -> bool:
    """Whether every file last changed long enough before ``now_ns`` that a change from then
    on shows in its stat identity (the racily-clean rule)."""
    for identity in stats:
        mtime, ctime = identity[3], identity[4]
        coarse = mtime % 1000 == 0 or ctime % 1000 == 0
        margin = _SETTLED_COARSE_NS if coarse else _SETTLED_FINE_NS
        if max(mtime, ctime) > now_ns - margin:
            return False
    return True


class RemoteAnswers:
    """``git remote -v`` answers kept across reliefs (issue 14: every relief asked git again),
    each only while every file git reads to give it is proven unchanged.

    What git reads to answer (git's ``config.c`` do_git_config_sequence and ``setup.c``
    repository discovery, git-config(1) FILES): the system file (``$(prefix)/etc/gitconfig``;
    its path is git's own answer, :func:`_system_config`), the global files
    (``$XDG_CONFIG_HOME/git/config``, or ``$HOME/.config/git/config`` when that is unset or
    empty, then ``$HOME/.gitconfig``), the repository's ``config`` in its common dir and
    ``config.worktree`` in its git dir (read by git only with ``extensions.worktreeConfig``;
    kept track of always), the command line (none: :func:`git` passes no ``-c`` and strips
    every ``GIT_*`` variable, ``GIT_CONFIG_*`` included), and the repository found from the
    physical working directory (a ``.git`` directory or ``.git`` file, ``commondir``). The
    legacy ``remotes/`` and ``branches/`` files are kept track of too, although ``git remote
    -v`` lists only configured remotes. ``safe.directory`` depends on the owners of the work
    tree, the ``.git`` and the git dir: kept, with the effective uid and ``SUDO_UID``.
    Where the repository lies is not an input when the user owns all three: git prints each
    URL as configured (a relative one is not resolved against the repository's path), and
    the one directive that reads the path, ``includeIf "gitdir:..."``, is never followed; so
    repositories whose files hold the same bytes, laid out the same way, share one answer.
    When another user owns any of the three, ``safe.directory``'s values (paths) decide
    whether git reads the repository at all, and its paths are part of the proof.

    The proof. Before git is asked, those files are read (the bytes, or their absence) and
    stat'ed; the answer is kept under all of it. Each later use reads them again and reuses
    the answer only when every byte, every absence, the repository found, the executable
    (path and stat identity), ``HOME`` and ``XDG_CONFIG_HOME`` are the same: equal inputs,
    equal answer, whatever the timestamps say. The one gap is git reading a file while it is
    changed and changed back (A, B, A) during the fill: so the answer is kept only when the
    same inputs are read again after git answered (stat identities included) and every file
    last changed before the fill began by more than the file system's timestamp grain (the
    racily-clean rule: :data:`_SETTLED_FINE_NS`, :data:`_SETTLED_COARSE_NS`); then any
    change during the fill shows in a stat identity. Anything not followed (an ``include``
    or ``includeIf`` directive, whose files and conditions are not tracked; a possible bare
    repository; a mount point on the way up; an unreadable, special or large file; no
    ``HOME``; git not naming its system file) keeps nothing, and git is asked each time; so
    is a failed git (nothing kept). A network file system whose server clock runs behind by
    more than the margin is outside the racily-clean rule's reach (as for git's own index).
    """

    def __init__(self, clock: Callable[[], int] = time.time_ns) -> None:
        self._clock = clock
        # Keyed by the inputs themselves, not by the workspace: two workspaces in one
        # repository (subdirectories of one work tree) read the very same files, so one
        # answer serves both (the simulation's two agents share one repository); so do two
        # repositories of the user's own whose files hold the same bytes (each seed of the
        # simulation has a new one, copied from one template).
        self._kept: dict[tuple[object, ...], tuple[str | None, str | None]] = {}

    def answer(self, ws: str) -> tuple[str | None, str | None]:
        """(name, fetch URL) of ``ws``'s remote, as :func:`_parse_remotes` reads ``git
        remote -v``: kept, or asked now."""
        return self.answer_kept(ws)[0]

    def answer_kept(self, ws: str) -> tuple[tuple[str | None, str | None], bool]:
        """As :meth:`answer`, and whether the answer is one kept here (proven, and so found
        again by any workspace whose files read the same)."""
        began = self._clock()
        try:
            before = _remote_inputs(ws)
        except _Unproven:
            return _parse_remotes(git(ws, "remote", "-v")), False
        kept = self._kept.get(before.key)
        if kept is not None:
            return kept, True
        out = git(ws, "remote", "-v")
        found = _parse_remotes(out)
        if out is not None and _settled(before.stats, began):
            try:
                after = _remote_inputs(ws)
            except _Unproven:
                return found, False
            if after == before:
                while len(self._kept) >= _REMOTES_KEPT:
                    del self._kept[next(iter(self._kept))]  # the oldest: inputs long changed
                self._kept[before.key] = found
                return found, True
        return found, False


#: The most ``git remote -v`` answers a :class:`RemoteAnswers` keeps (one per set of inputs:
#: an answer whose inputs changed is never found again, so the oldest go first).
_REMOTES_KEPT = 64


class GitBatches:
    """Kept ``git cat-file --batch-check`` processes (:class:`_BatchCheck`), one per workspace,
    shared by the reliefs of one controller process (the simulation's: issue 14); ended by
    :meth:`close`, not by a cache's. Only the process is shared, never an answer: git resolves
    every name as it stands when asked. One that broke is replaced at the next question."""

    def __init__(
        self,
        timeout: float = GIT_TIMEOUT,
        *,
        keep_remotes: bool = True,
        remotes: RemoteAnswers | None = None,
        keep_statuses: bool = False,
    ) -> None:
        self.timeout = timeout
        self._kept: dict[str, _BatchCheck] = {}
        #: ``git remote -v`` answers kept across the reliefs while proven unchanged
        #: (:class:`RemoteAnswers`; ``remotes`` when given, to share them wider, as the
        #: simulation does across the seeds of a process); None: each cache asks git itself.
        self.remotes: RemoteAnswers | None = (
            (remotes if remotes is not None else RemoteAnswers()) if keep_remotes else None
        )
        #: ``git status`` answers kept while a watch of the work tree proves them
        #: (:class:`~onstation.harness.git_watch.StatusAnswers`), for a controller that
        #: keeps these across its reliefs (the simulator's); None: asked every time, as a
        #: single relief asks (its one reuse would save about a millisecond on a small tree,
        #: and the watch of a large one costs more than the status it spares).
        self.statuses: StatusAnswers[Any] | None = None
        if keep_statuses:
            from onstation.harness.git_watch import StatusAnswers

            self.statuses = StatusAnswers()

    def of(self, ws: str) -> _BatchCheck:
        """The kept process of ``ws`` (started at its first question)."""
        batch = self._kept.get(ws)
        if batch is None or batch.broken:
            batch = self._kept[ws] = _BatchCheck(ws, self.timeout)
        return batch

    def close(self) -> None:
        """End every kept process (idempotent; a later question starts one again)."""
        for batch in self._kept.values():
            batch.close()
        self._kept.clear()
        if self.statuses is not None:
            self.statuses.close()
