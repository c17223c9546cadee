"""Atomic file replacement: the target holds either its old content or the complete new one.

The data goes to a temporary file in the target's folder (same file system, so the rename is
atomic), which is flushed and fsynced before ``os.replace`` puts it in place; the folder is then
fsynced so the rename itself survives a power loss. An exception (KeyboardInterrupt included)
removes the temporary file and leaves the target untouched. A hard crash (SIGKILL, power loss)
also leaves the target untouched but may leave a ``.<name>.<random>.tmp`` file behind.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat

_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)


def _create_temp(folder: str, base: str):
    for _ in range(100):
        tmp = os.path.join(folder, f".{base[:100]}.{secrets.token_hex(6)}.tmp")
        try:
            return tmp, os.open(tmp, _FLAGS, 0o666)  # the umask applies, as for open()
        except FileExistsError:
            continue
    raise FileExistsError(f"could not create a temporary file in {folder!r}")


def _fsync_dir(folder: str) -> None:
    """Make the rename durable (POSIX). Not possible on Windows, where it is skipped."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path, write) -> None:
    """Call ``write(f)`` with a binary file whose content atomically replaces ``path``.

    A symlink at ``path`` is followed: the file it points to is replaced. An existing file's
    permission bits are kept.
    """
    target = os.path.realpath(os.fsdecode(os.fspath(path)))
    folder, base = os.path.split(target)
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = None
    tmp, fd = _create_temp(folder, base)
    try:
        if mode is not None and hasattr(os, "fchmod"):
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            fd = None  # owned by f now
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        if fd is not None:
            os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(folder)
