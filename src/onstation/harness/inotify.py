"""Linux inotify through ``ctypes`` (the standard library has no binding): the event bits
onstation asks for, the C library's calls, and the events queued on an instance.

Used by the daemon's watch of its own package (:mod:`onstation.cli.daemon_watch`) and by the
kept ``git status`` answers (:mod:`onstation.harness.git_watch`). The values are those of
``<sys/inotify.h>``, the same on every Linux architecture (inotify(7)).
"""

from __future__ import annotations

import functools
import os
import struct
from typing import Any, NamedTuple

__all__ = ["CHANGES", "IN_ISDIR", "IN_Q_OVERFLOW", "Event", "drain", "libc", "new_instance"]

IN_MODIFY = 0x002
IN_ATTRIB = 0x004
IN_CLOSE_WRITE = 0x008
IN_MOVED_FROM = 0x040
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_Q_OVERFLOW = 0x4000
IN_ISDIR = 0x40000000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
#: Every change to what a watched directory holds: content, metadata, and entries created,
#: deleted or moved, and the directory itself deleted or moved.
CHANGES = (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE
           | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF)  # fmt: skip
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len (then len bytes of name, NUL-padded)


class Event(NamedTuple):
    """One queued event: the watch it came from, its bits, and the entry's name ("" when the
    event is about the watched directory itself, or an overflow)."""

    wd: int
    mask: int
    name: str


@functools.cache
def libc() -> Any:
    """The C library's inotify calls; :class:`OSError` where there are none (not Linux)."""
    import ctypes

    try:
        # The symbols the interpreter is linked with, its C library among them: no search for
        # the library's file (ctypes.util.find_library starts ldconfig to find it).
        found = ctypes.CDLL(None, use_errno=True)
        found.inotify_init1.argtypes = [ctypes.c_int]
        found.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        found.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
    except AttributeError as exc:
        raise OSError("no inotify here") from exc
    return found


def new_instance() -> int:
    """A new non-blocking, close-on-exec inotify instance; :class:`OSError` when none can be
    had (no inotify, or ``fs.inotify.max_user_instances`` reached)."""
    fd = int(libc().inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC))
    if fd < 0:
        raise OSError("no inotify instance")
    return fd


def drain(fd: int) -> list[Event]:
    """Every event queued on instance ``fd`` now (none: an empty list); :class:`OSError` when
    it cannot be read."""
    found: list[Event] = []
    while True:
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return found
        if not data:
            return found
        offset = 0
        while offset + _EVENT.size <= len(data):
            wd, mask, _cookie, size = _EVENT.unpack_from(data, offset)
            raw = data[offset + _EVENT.size : offset + _EVENT.size + size]
            offset += _EVENT.size + size
            name = raw.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
            found.append(Event(wd, mask, name))
