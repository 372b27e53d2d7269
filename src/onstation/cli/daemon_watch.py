"""Whether the installed package changed on disk since the daemon imported it.

The daemon must never serve a call with code older than what is installed: an upgrade or an
edit of an editable install makes it refuse and stop (:mod:`onstation.cli.daemon`). Stating
every file of the package on every call costs about a millisecond, on the caller's clock;
so on Linux the daemon watches the package's directories with inotify (through ctypes:
the standard library has no binding) and states the files only when something under them
moved. Elsewhere, or when inotify cannot be had, every call states every file.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import struct
from pathlib import Path

# inotify(7) event bits: content, metadata, and entries created, deleted or moved.
_IN_MODIFY = 0x002
_IN_ATTRIB = 0x004
_IN_CLOSE_WRITE = 0x008
_IN_MOVED_FROM = 0x040
_IN_MOVED_TO = 0x080
_IN_CREATE = 0x100
_IN_DELETE = 0x200
_IN_DELETE_SELF = 0x400
_IN_MOVE_SELF = 0x800
_IN_Q_OVERFLOW = 0x4000
_MASK = (_IN_MODIFY | _IN_ATTRIB | _IN_CLOSE_WRITE | _IN_MOVED_FROM | _IN_MOVED_TO
         | _IN_CREATE | _IN_DELETE | _IN_DELETE_SELF | _IN_MOVE_SELF)  # fmt: skip
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = os.O_CLOEXEC
_EVENT = struct.Struct("iIII")
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
        name = ctypes.util.find_library("c")
        try:
            libc = ctypes.CDLL(name, use_errno=True)
            fd = int(libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC))
        except (OSError, AttributeError):
            return None
        if fd < 0:
            return None
        for directory, dirs, _files in os.walk(root):
            dirs[:] = [d for d in dirs if d != _BYTECODE]
            if libc.inotify_add_watch(fd, os.fsencode(directory), _MASK) < 0:
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
        moved = False
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return moved
            except OSError:
                return True
            offset = 0
            while offset + _EVENT.size <= len(data):
                _wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
                raw = data[offset + _EVENT.size : offset + _EVENT.size + length]
                offset += _EVENT.size + length
                name = raw.rstrip(b"\0").decode("utf-8", "surrogateescape")
                if mask & _IN_Q_OVERFLOW or not (
                    name == _BYTECODE or name.endswith((".pyc", ".pyo"))
                ):
                    moved = True

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
