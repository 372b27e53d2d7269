"""Whether the installed package changed on disk since the daemon imported it.

The daemon must never serve a call with code older than what is installed: an upgrade or an
edit of an editable install makes it refuse and stop (:mod:`onstation.cli.daemon`). Stating
every file of the package on every call costs about a millisecond, on the caller's clock;
so on Linux the daemon watches the package's directories with inotify (through ctypes:
the standard library has no binding) and states the files only when something under them
moved. Elsewhere, or when inotify cannot be had, every call states every file.
"""

from __future__ import annotations

import os
from pathlib import Path

from onstation.harness import inotify

_BYTECODE = "__pycache__"


def package_stamp(root: Path) -> tuple[tuple[str, int, int], ...]:
    """Every file of the package under ``root`` (path, size, modification time), sorted;
    bytecode caches left out (they are written as the package is imported)."""
    found: list[tuple[str, int, int]] = []
    for directory, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != _BYTECODE)
        for name in files:
            if name.endswith((".pyc", ".pyo")):
                continue
            path = os.path.join(directory, name)
            try:
                st = os.stat(path)
            except OSError:
                continue
            found.append((path, st.st_size, st.st_mtime_ns))
    return tuple(sorted(found))


class PackageWatch:
    """Answers :meth:`changed` cheaply: inotify says when to look, the stamp decides."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.stamp = package_stamp(root)
        self.fd = self._watch(root)

    @staticmethod
    def _watch(root: Path) -> int | None:
        try:
            libc = inotify.libc()
            fd = inotify.new_instance()
        except OSError:
            return None
        for directory, dirs, _files in os.walk(root):
            dirs[:] = [d for d in dirs if d != _BYTECODE]
            if libc.inotify_add_watch(fd, os.fsencode(directory), inotify.CHANGES) < 0:
                os.close(fd)  # a directory not watched: fall back to stating every call
                return None
        return fd

    def changed(self) -> bool:
        """Whether any file of the package differs from when the daemon started."""
        if self.fd is not None and not self._moved():
            return False
        return package_stamp(self.root) != self.stamp

    def _moved(self) -> bool:
        """Whether inotify reported anything but bytecode caches since the last look."""
        assert self.fd is not None
        try:
            events = inotify.drain(self.fd)
        except OSError:
            return True
        return any(
            event.mask & inotify.IN_Q_OVERFLOW
            or not (event.name == _BYTECODE or event.name.endswith((".pyc", ".pyo")))
            for event in events
        )

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
