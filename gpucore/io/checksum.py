"""Per-tensor checksums: the SHA-256 of each tensor's bytes as stored in the file.

gpucore writes them into the ``__metadata__`` entry ``gpucore.tensor_sha256`` (a JSON object:
tensor name -> 64 lowercase hex digits) and checks them on load, so any change to a tensor's bytes
is a SerializationError naming the tensor. Anyone can verify a file without gpucore: hash the bytes
``[begin, end)`` of each tensor's data_offsets, counted from the end of the header.

SHA-256 runs at about 1 GB/s per core where the CPU has SHA instructions (faster there than
BLAKE2b, and far stronger than CRC32). hashlib releases the GIL, so buffers of at least
PARALLEL_MIN bytes are hashed on worker threads (as many as the C extension's pool,
``gpucore.get_num_threads()``): hashing overlaps the file I/O and uses several cores when a file
holds several large tensors.
"""

from __future__ import annotations

import hashlib
from collections import deque
from concurrent.futures import ThreadPoolExecutor

from .. import _cpu

ALGORITHM = "sha256"
HEX_DIGITS = 64
PARALLEL_MIN = 1 << 20  # smaller buffers are hashed inline: a thread hand-off costs more
MAX_QUEUED = 256 << 20  # bytes waiting for a worker before ``add`` waits (bounds held copies)


def hexdigest(buf) -> str:
    return hashlib.sha256(buf).hexdigest()


class Hasher:
    """Hashes buffers (in the background when large) and collects key -> hex digest.

    A buffer must stay unchanged until ``finish`` returns. Use as a context manager: leaving it
    early (an exception) cancels what is queued and waits for the running hashes.
    """

    def __init__(self):
        self.digests: dict = {}
        self._pool: ThreadPoolExecutor | None = None
        self._pending: deque = deque()  # (key, future, nbytes)
        self._queued = 0

    def add(self, key, buf) -> None:
        n = memoryview(buf).nbytes
        if n < PARALLEL_MIN:
            self.digests[key] = hexdigest(buf)
            return
        if self._pool is None:
            workers = max(1, min(_cpu.info()["threads"], 16))
            self._pool = ThreadPoolExecutor(workers, thread_name_prefix="gpucore-checksum")
        self._pending.append((key, self._pool.submit(hexdigest, buf), n))
        self._queued += n
        while self._queued > MAX_QUEUED:
            self._collect()

    def _collect(self) -> None:
        key, fut, n = self._pending.popleft()
        self.digests[key] = fut.result()
        self._queued -= n

    def finish(self) -> dict:
        while self._pending:
            self._collect()
        return self.digests

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self._pending.clear()
