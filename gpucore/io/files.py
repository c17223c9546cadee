"""Where ``save`` writes and ``load`` reads: a path, or an open binary file object (an
``io.BytesIO``, ``open(..., 'wb')`` / ``open(..., 'rb')``), as ``torch.save`` / ``torch.load``.

A path is written atomically (``atomic.atomic_write``) and must be a regular file to be read. A
file object is written from its current position (through a buffer when it cannot seek), and read
from its current position to its end (all of it read into memory first when it cannot seek).
"""

from __future__ import annotations

import contextlib
import io as _stdio
import os

from .atomic import atomic_write
from .safetensors_format import open_regular


def is_path(f) -> bool:
    """True for a file path (str, bytes, os.PathLike), False for a file object."""
    return isinstance(f, (str, bytes, os.PathLike))


def _check_binary(f, fn: str, mode: str) -> None:
    if isinstance(f, _stdio.TextIOBase):
        raise TypeError(f"{fn}() needs a binary file: open it with mode {mode!r}, not in text mode")


def write_to(f, write, fn: str = "save") -> None:
    """Call ``write(binary_file)`` so that the bytes end up at ``f`` (a path or a file)."""
    if is_path(f):
        atomic_write(os.fsdecode(os.fspath(f)), write)
        return
    if not callable(getattr(f, "write", None)):
        raise TypeError(
            f"{fn}() needs a file path (str or os.PathLike) or a binary file object opened for "
            f"writing, got {type(f).__name__}"
        )
    _check_binary(f, fn, "wb")
    seekable = getattr(f, "seekable", None)
    if callable(seekable) and seekable() and callable(getattr(f, "tell", None)):
        write(f)
    else:  # a pipe or socket: the writer seeks back to fill in checksums, so buffer it
        buf = _stdio.BytesIO()
        write(buf)
        f.write(buf.getbuffer())
    flush = getattr(f, "flush", None)
    if callable(flush):
        flush()


class Window:
    """A read-only view of a file from ``start`` on: positions are relative to ``start``, so the
    readers, which seek to absolute offsets, work on data that begins mid-file."""

    def __init__(self, f, start: int):
        self._f, self._start = f, start

    def seek(self, pos: int, whence: int = 0) -> int:
        """As ``file.seek``, with position 0 at ``start``."""
        if whence == 0:
            pos += self._start
        return self._f.seek(pos, whence) - self._start

    def tell(self) -> int:
        return self._f.tell() - self._start

    def read(self, n: int = -1) -> bytes:
        return self._f.read(n)

    def readinto(self, b) -> int:
        """As ``file.readinto`` (through ``read`` for files without it)."""
        readinto = getattr(self._f, "readinto", None)
        if callable(readinto):
            return readinto(b)
        data = self._f.read(len(memoryview(b)))
        memoryview(b).cast("B")[: len(data)] = data
        return len(data)


@contextlib.contextmanager
def open_source(f, fn: str = "load"):
    """(binary file positioned at the data's start, its size in bytes, the name for errors)."""
    if is_path(f):
        source = os.fsdecode(os.fspath(f))
        with open_regular(source, source) as fh:
            yield fh, os.fstat(fh.fileno()).st_size, source
        return
    if not callable(getattr(f, "read", None)):
        raise TypeError(
            f"{fn}() needs a file path (str or os.PathLike) or a binary file object opened for "
            f"reading, got {type(f).__name__}"
        )
    _check_binary(f, fn, "rb")
    source = str(getattr(f, "name", None) or f"<{type(f).__name__}>")
    seekable = getattr(f, "seekable", None)
    if callable(seekable) and seekable():
        start = f.tell()
        size = f.seek(0, 2) - start
        f.seek(start)
        yield Window(f, start), size, source
        return
    data = f.read()
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError(f"{fn}() needs a binary file: read() gave {type(data).__name__}")
    yield _stdio.BytesIO(data), len(data), source
