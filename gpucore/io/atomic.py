"""Atomic file replacement: the target holds either its old content or the complete new one.

The data goes to a temporary file in the target's folder (same file system, so the rename is
atomic), which is flushed and fsynced before ``os.replace`` puts it in place; the folder is then
fsynced so the rename itself survives a power loss. An exception (KeyboardInterrupt included)
removes the temporary file and leaves the target untouched. A hard crash (SIGKILL, power loss)
also leaves the target untouched but leaves the temporary file behind.

Temporary files are named ``.<name>.<pid>.<host><random>.tmp``: the target's name, the writer's
pid, 4 hex digits naming the machine and 8 random ones. Where that would pass the file system's
limit on a name (``os.pathconf(folder, 'PC_NAME_MAX')``, else 255 bytes), ``<name>`` is a prefix
of the target's name plus ``~`` and 8 hex digits of its SHA-256, so a legal 255-byte name can be
saved. The writer holds an exclusive ``flock`` on its temporary while it writes (where the
platform has one).

Leftovers are cleaned up: every ``atomic_write`` first deletes the stale temporaries of the same
target (``clean_stale``). A temporary is stale when no one holds its lock and either its pid,
written on this machine, is no longer running or it has not been modified for STALE_SECONDS
(a writer that is alive keeps its file locked and its modification time fresh). Temporaries of
other targets are never touched, nor are those named by gpucore versions before the pid (12 hex
digits) unless STALE_SECONDS old.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import secrets
import socket
import stat
import time

try:
    import fcntl
except ImportError:  # Windows: no flock; a file open for writing cannot be deleted there anyway
    fcntl = None

_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
STALE_SECONDS = 15 * 60
NAME_MAX = 255  # bytes, where os.pathconf cannot tell
_HOST = hashlib.sha256(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:4]
# '.' + '.' + pid (at most 10 digits) + '.' + 12 hex digits + '.tmp'
_OVERHEAD = 1 + 1 + 10 + 1 + 12 + 4
_HASH_TAG = 1 + 8  # '~' + 8 hex digits


def name_max(folder: str) -> int:
    """The file system's limit on a file name in ``folder``, in bytes."""
    try:
        n = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):  # AttributeError: no pathconf (Windows)
        return NAME_MAX
    return n if isinstance(n, int) and n > _OVERHEAD + _HASH_TAG else NAME_MAX


def temp_stem(name: str, limit: int) -> str:
    """The ``<name>`` part of the temporaries of target ``name``: the name itself, or a prefix
    plus a hash of the whole when the temporary's name would pass ``limit`` bytes. The same for
    every writer of the target (the pid's width is budgeted at its maximum)."""
    if len(os.fsencode(name)) + _OVERHEAD <= limit:
        return name
    raw = os.fsencode(name)
    prefix = raw[: max(limit - _OVERHEAD - _HASH_TAG, 0)].decode("utf-8", "ignore")  # whole chars
    return f"{prefix}~{hashlib.sha256(raw).hexdigest()[:8]}"


def _lock(fd: int):
    """Try an exclusive flock: True when taken, False when someone holds it, None when the file
    system or platform cannot say."""
    if fcntl is None:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        return False if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES) else None
    return True


def _pid_running(pid: int) -> bool:
    """Whether ``pid`` runs on this machine; True when it cannot be told (on Windows, os.kill
    would terminate the process: never called there)."""
    if os.name != "posix" or pid <= 0 or pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):  # PermissionError: another user's live process
        return True
    return True


def _remove_if_stale(path: str, pid: int | None, host: str | None) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0))
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or _lock(fd) is False:  # not a file, or in use
            return False
        dead = pid is not None and host == _HOST and not _pid_running(pid)
        if not (dead or time.time() - st.st_mtime > STALE_SECONDS):
            return False
        if not os.path.samestat(st, os.stat(path, follow_symlinks=False)):
            return False  # replaced since we looked: not the file we judged
        os.unlink(path)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def clean_stale(folder: str, name: str) -> list[str]:
    """Delete the stale temporaries of target ``name`` in ``folder`` (see the module docstring);
    returns the names deleted. Never raises: cleaning up is a courtesy, not part of the save."""
    stem = re.escape(temp_stem(name, name_max(folder)))
    ours = re.compile(rf"\.{stem}\.([0-9]{{1,10}})\.([0-9a-f]{{4}})[0-9a-f]{{8}}\.tmp")
    legacy = re.compile(rf"\.{re.escape(name[:100])}\.[0-9a-f]{{12}}\.tmp")
    removed = []
    try:
        with os.scandir(folder) as it:
            found = [(e.name, ours.fullmatch(e.name)) for e in it if e.name.endswith(".tmp")]
    except OSError:
        return removed
    for entry, m in found:
        if m is not None:
            pid, host = int(m.group(1)), m.group(2)
        elif legacy.fullmatch(entry):
            pid = host = None
        else:
            continue
        if _remove_if_stale(os.path.join(folder, entry), pid, host):
            removed.append(entry)
    return removed


def _create_temp(folder: str, base: str):
    stem = temp_stem(base, name_max(folder))
    for _ in range(100):
        tmp = os.path.join(folder, f".{stem}.{os.getpid()}.{_HOST}{secrets.token_hex(4)}.tmp")
        try:
            fd = os.open(tmp, _FLAGS, 0o666)  # the umask applies, as for open()
        except FileExistsError:
            continue
        # A cleaner (another process) that looked at the new file before we locked it may hold
        # its lock or have deleted it: start again with a fresh name.
        if _lock(fd) is False or os.fstat(fd).st_nlink == 0:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            continue
        return tmp, fd
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
    """Call ``write(f)`` with a binary file whose content atomically replaces ``path``, after
    deleting the stale temporaries an earlier crashed write to ``path`` left behind.

    A symlink at ``path`` is followed: the file it points to is replaced. An existing file's
    permission bits are kept.
    """
    target = os.path.realpath(os.fsdecode(os.fspath(path)))
    folder, base = os.path.split(target)
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = None
    clean_stale(folder, base)
    tmp, fd = _create_temp(folder, base)
    replaced = False
    try:
        if mode is not None and hasattr(os, "fchmod"):
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            fd = None  # owned by f now
            write(f)
            f.flush()
            os.fsync(f.fileno())
            if fcntl is not None:  # POSIX: rename while the lock still marks the file in use
                os.replace(tmp, target)
                replaced = True
        if not replaced:  # Windows cannot rename an open file
            os.replace(tmp, target)
    except BaseException:
        if fd is not None:
            os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(folder)
