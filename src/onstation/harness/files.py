"""Writing human-readable files inside a workspace: atomically, never through a symlink.

Briefs and manifests are the only files onstation writes besides its ledger. Each write
walks from the workspace root one component at a time with ``O_NOFOLLOW`` directory file
descriptors (so no component can be a symlink, whatever races happen), writes a temporary
file in the target directory, fsyncs it, renames it into place and fsyncs the directory. A
failed write leaves no partial file behind.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

from onstation.core.errors import BadInput, OnstationError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _check_component(part: str) -> None:
    if part in ("", ".", "..") or "/" in part or "\x00" in part or part.startswith("-"):
        raise BadInput(f"path component {part!r} is not allowed")


def write_inside(workspace: str | Path, parts: list[str], content: str) -> Path:
    """Write ``content`` to ``workspace/parts[0]/.../parts[-1]`` atomically; return the path.

    Directories are created as needed (mode 0700 for new ones). Any symlink on the way, or
    a symlink or non-regular file at the target, is refused with nothing written.
    """
    if not parts:
        raise BadInput("no file name given")
    for part in parts:
        _check_component(part)
    root = Path(workspace)
    try:
        fd = os.open(root, _DIR_FLAGS)
    except FileNotFoundError as exc:
        raise BadInput(f"workspace {root} does not exist") from exc
    except OSError as exc:
        raise BadInput(f"workspace {root} is not a plain directory: {exc.strerror}") from exc
    try:
        for part in parts[:-1]:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o700, dir_fd=fd)
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                raise BadInput(
                    f"refusing to write through {part!r}: not a plain directory ({exc.strerror})"
                ) from exc
            os.close(fd)
            fd = child
        name = parts[-1]
        try:
            existing = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            existing = None
        if existing is not None and not stat.S_ISREG(existing.st_mode):
            raise BadInput(f"refusing to replace {name!r}: it is not a regular file")
        temp = f".{name}.{secrets.token_hex(6)}.tmp"
        tfd = os.open(
            temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
            dir_fd=fd,
        )  # fmt: skip
        try:
            data = content.encode("utf-8")
            written = 0
            while written < len(data):
                written += os.write(tfd, data[written:])
            os.fsync(tfd)
        except BaseException:
            os.close(tfd)
            os.unlink(temp, dir_fd=fd)
            raise
        os.close(tfd)
        try:
            os.rename(temp, name, src_dir_fd=fd, dst_dir_fd=fd)
        except OSError as exc:
            os.unlink(temp, dir_fd=fd)
            raise OnstationError(f"cannot place {name}: {exc.strerror}") from exc
        os.fsync(fd)
    finally:
        os.close(fd)
    return root.joinpath(*parts)


#: Input size limits, one per kind of file the command line reads. Each is far above what a
#: real document of its kind holds and low enough that a mistaken path (a log, a device, a
#: disk image) is refused at once instead of being read into memory.
MAX_DOCUMENT_BYTES = 4 << 20  # plans, capsules, incidents
MAX_SMALL_JSON_BYTES = 1 << 20  # --facts, --capacity, --echo-file, --team, --from
MAX_KEY_BYTES = 64 << 10  # keys import-public

_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def _size(limit: int) -> str:
    if limit % (1 << 20) == 0:
        return f"{limit >> 20} MiB"
    if limit % (1 << 10) == 0:
        return f"{limit >> 10} KiB"
    return f"{limit} bytes"


def read_bounded(
    path: str | os.PathLike[str], limit: int, field: str, *, follow_symlinks: bool = True
) -> bytes:
    """The bytes of the regular file at ``path``, refused if larger than ``limit``.

    The file type is checked before anything is read, so a device (``/dev/zero``), a FIFO
    or a socket is refused without blocking or reading; at most ``limit + 1`` bytes are
    read, so a file that grows while it is read cannot exhaust memory either. Every error
    is a :class:`BadInput` naming ``field`` and the file.
    """
    name = os.fspath(path)
    where = f"{field}: {name}"
    flags = _READ_FLAGS if follow_symlinks else _READ_FLAGS | os.O_NOFOLLOW
    not_regular = f"not a regular file (give a regular file of at most {_size(limit)})"
    try:
        # stat before open: opening some devices has effects, and a FIFO blocks in open().
        if not stat.S_ISREG(os.stat(name, follow_symlinks=follow_symlinks).st_mode):
            raise BadInput(f"{where}: {not_regular}", field=field)
        fd = os.open(name, flags)
    except FileNotFoundError as exc:
        raise BadInput(f"{where}: no such file", field=field) from exc
    except PermissionError as exc:
        raise BadInput(f"{where}: permission denied", field=field) from exc
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise BadInput(f"{where}: cannot open ({reason})", field=field) from exc
    try:
        # The path may have been swapped between stat and open: judge what was opened.
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise BadInput(f"{where}: {not_regular}", field=field)
        chunks: list[bytes] = []
        remaining = limit + 1
        while remaining > 0:
            try:
                chunk = os.read(fd, min(remaining, 1 << 20))
            except OSError as exc:
                raise BadInput(f"{where}: cannot read ({exc.strerror})", field=field) from exc
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        raise BadInput(f"{where}: larger than the limit ({_size(limit)})", field=field)
    return data
