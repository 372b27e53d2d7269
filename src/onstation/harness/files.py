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
