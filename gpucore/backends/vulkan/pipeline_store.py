"""The pipeline cache on disk: what the driver compiled survives the process, so the next process
on the same device and driver creates its pipelines from the cache instead of compiling the
SPIR-V again (ncnn's on-disk cache cut ResNet-50 start-up 4.5x).

Where: the directory GPUCORE_VULKAN_PIPELINE_CACHE names (``0`` turns the disk cache off), else
``$XDG_CACHE_HOME/gpucore``, else ``~/.cache/gpucore``. One file per device and driver,
``vulkan-pipelines-<key>.bin``, the key a hash of the vendor and device ids, the driver version
and the driver's pipelineCacheUUID: another driver (or another version of it) never reads it.

The file is gpucore's header (``HEADER``: magic, format version, the four key fields, the length
and SHA-256 of the data) followed by the data vkGetPipelineCacheData returned. ``read`` returns
the data only when everything matches, the driver's own header inside the data included; a
truncated, corrupt, foreign or oversized file is ignored (and replaced at the next save), never
an error. ``write`` goes to a temporary file in the same directory, then ``os.replace`` renames
it over the old one (atomic): processes saving at once each leave a whole file, and a reader
sees the old file or a new one, never a mix.

Beside it, ``vulkan-pipelines-<key>.keys`` lists the pipelines recent processes used (JSON: shader
name, bindings, workgroup size, specialization constants, and the digest of the shader's source,
so that another gpucore version's entries are skipped), most recent first, so that the next
process can create them in the background at device start (pipelines.py, ``prewarm``). A
malformed file or entry is ignored, never an error.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import struct
import tempfile
import time
from pathlib import Path

log = logging.getLogger("gpucore.vulkan")

ENV = "GPUCORE_VULKAN_PIPELINE_CACHE"
MAGIC = b"GPUCPC\x00\x01"
FORMAT = 1
# magic, format, vendorID, deviceID, driverVersion, pipelineCacheUUID, data length, data SHA-256
HEADER = struct.Struct("<8sIIII16sQ32s")
# VkPipelineCacheHeaderVersionOne: header length, version (1), vendorID, deviceID, UUID
DRIVER_HEADER = struct.Struct("<IIII16s")
MAX_BYTES = 256 << 20  # a larger file is not a pipeline cache of ours
KEYS_MAX = 64  # pipelines remembered for the background creation at start
KEYS_FILE_BYTES = 1 << 20


class Key:
    """What identifies the driver's cache format: a file is read only by the same four values."""

    __slots__ = ("vendor", "device", "driver", "uuid")

    def __init__(self, vendor: int, device: int, driver: int, uuid: bytes):
        self.vendor, self.device, self.driver, self.uuid = vendor, device, driver, bytes(uuid)

    @classmethod
    def of(cls, vk, physical) -> Key:
        p = vk.vkGetPhysicalDeviceProperties(physical)
        uuid = bytes(vk.ffi.buffer(p.pipelineCacheUUID, 16))
        return cls(int(p.vendorID), int(p.deviceID), int(p.driverVersion), uuid)

    def digest(self) -> str:
        raw = struct.pack("<III16s", self.vendor, self.device, self.driver, self.uuid)
        return hashlib.sha256(raw).hexdigest()[:16]


def directory() -> Path | None:
    """The cache directory, or None when the disk cache is off (GPUCORE_VULKAN_PIPELINE_CACHE=0)."""
    v = os.environ.get(ENV, "").strip()
    if v == "0":
        return None
    if v:
        return Path(v).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "gpucore"


def path_for(key: Key) -> Path | None:
    d = directory()
    return None if d is None else d / f"vulkan-pipelines-{key.digest()}.bin"


def pack(key: Key, data: bytes) -> bytes:
    """The file's bytes for driver data ``data``."""
    head = HEADER.pack(
        MAGIC,
        FORMAT,
        key.vendor,
        key.device,
        key.driver,
        key.uuid,
        len(data),
        hashlib.sha256(data).digest(),
    )
    return head + data


def unpack(key: Key, blob: bytes) -> bytes | None:
    """The driver data in file bytes ``blob``, or None (with the reason logged at DEBUG) when the
    file is not a whole, intact cache of this device and driver."""
    why = _problem(key, blob)
    if why:
        log.debug("gpucore: pipeline cache file ignored: %s", why)
        return None
    return blob[HEADER.size :]


def _problem(key: Key, blob: bytes) -> str:
    if len(blob) < HEADER.size:
        return f"{len(blob)} bytes, shorter than the header"
    magic, fmt, vendor, device, driver, uuid, n, digest = HEADER.unpack_from(blob)
    if magic != MAGIC or fmt != FORMAT:
        return "not a gpucore pipeline cache (magic or format version)"
    if (vendor, device, driver, uuid) != (key.vendor, key.device, key.driver, key.uuid):
        return "made by another device or driver version"
    data = blob[HEADER.size :]
    if len(data) != n:
        return f"truncated or padded: {len(data)} bytes of data, the header says {n}"
    if hashlib.sha256(data).digest() != digest:
        return "checksum mismatch (corrupt)"
    if len(data) < DRIVER_HEADER.size:
        return "the driver's header is missing"
    length, version, d_vendor, d_device, d_uuid = DRIVER_HEADER.unpack_from(data)
    if length < DRIVER_HEADER.size or version != 1:
        return "the driver's header is malformed"
    if (d_vendor, d_device, d_uuid) != (key.vendor, key.device, key.uuid):
        return "the driver's header names another device"
    return ""


def read(key: Key) -> bytes | None:
    """The driver data saved for ``key``, or None (no file, disk cache off, or a bad file)."""
    path = path_for(key)
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            blob = f.read(MAX_BYTES + HEADER.size + 1)
    except OSError:
        return None
    if len(blob) > MAX_BYTES + HEADER.size:
        log.debug("gpucore: pipeline cache file %s ignored: larger than %d bytes", path, MAX_BYTES)
        return None
    return unpack(key, blob)


def write(key: Key, data: bytes) -> bool:
    """Save driver data ``data`` for ``key`` atomically; False (logged) when it cannot be written
    (disk cache off, read-only or full disk): never an error."""
    path = path_for(key)
    if path is None or len(data) > MAX_BYTES:
        return False
    return _replace(path, pack(key, data))


def keys_path(key: Key) -> Path | None:
    p = path_for(key)
    return None if p is None else p.with_suffix(".keys")


def _valid_key(e) -> tuple | None:
    """(pipeline key, shader digest) from a JSON entry, or None when the entry is not one gpucore
    could have written (bounded, so a damaged file cannot ask the driver for an absurd pipeline).
    A key is (name, bindings, workgroup size, spec); the digest names the shader's version."""
    if not (isinstance(e, list) and len(e) == 5):
        return None
    name, nb, local, spec, digest = e
    if not (isinstance(spec, list) and len(spec) <= 32 and isinstance(digest, str)):
        return None
    if not all(type(v) is int and -(2**31) <= v < 2**31 for v in (nb, local, *spec)):
        return None
    if not (isinstance(name, str) and name.isidentifier() and 0 < nb <= 32 and 0 < local <= 1024):
        return None
    return (name, nb, local, tuple(spec)), digest


def read_keys(key: Key) -> list:
    """[(pipeline key, shader digest)] of the pipelines recent processes on this device and
    driver used, most recent first; [] when there is no file, the disk cache is off, or the file
    is damaged."""
    path = keys_path(key)
    if path is None:
        return []
    try:
        with open(path, "rb") as f:
            entries = json.loads(f.read(KEYS_FILE_BYTES + 1))
    except (OSError, ValueError):
        return []
    if not isinstance(entries, list):
        return []
    out: dict = {}
    for e in entries[:KEYS_MAX]:
        v = _valid_key(e)
        if v is not None:
            out.setdefault(v[0], v[1])
    return list(out.items())


def write_keys(key: Key, entries: list) -> bool:
    """Remember ``entries`` ([(pipeline key, shader digest)], most recent first, at most
    KEYS_MAX) for the next process; atomic as ``write``, False when it cannot be written."""
    path = keys_path(key)
    if path is None:
        return False
    rows = [
        [str(n), int(nb), int(local), [int(v) for v in spec], str(digest)]
        for (n, nb, local, spec), digest in entries[:KEYS_MAX]
    ]
    return _replace(path, json.dumps(rows, separators=(",", ":")).encode())


def _replace(path: Path, blob: bytes) -> bool:
    """Write ``blob`` to a temporary file beside ``path``, then rename it over ``path``."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        _remove_stale_temporaries(path)
        return True
    except OSError as e:
        log.debug("gpucore: pipeline cache not saved to %s: %s", path, e)
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        return False


STALE_S = 3600.0  # a temporary file this old was left by a process that died while saving


def _remove_stale_temporaries(path: Path) -> None:
    now = time.time()
    for tmp in path.parent.glob(path.name + ".*.tmp"):
        try:
            if now - tmp.stat().st_mtime > STALE_S:
                tmp.unlink()
        except OSError:
            pass  # another process removed or replaced it first
