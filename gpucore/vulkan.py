"""``gpucore.vulkan``: the Vulkan device as users see it.

gpucore.vulkan.is_available()   # a usable device (CPU-type ones only when allowed)
gpucore.vulkan.devices()        # every device the loader reports: name, type, driver, limits
gpucore.vulkan.synchronize()    # submit recorded work and wait for it
gpucore.vulkan.stats()          # counters: dispatches, submits, bytes moved, memory
gpucore.vulkan.stats(since=m)   # the counters' growth since m = gpucore.vulkan.mark()
gpucore.vulkan.set_memory_limit(n)  # cap gpucore's device memory at n bytes (None: no cap)

Captured steps (PyTorch's CUDA Graphs model; see gpucore/graphs/graph.py):
g = gpucore.vulkan.VulkanGraph(); with gpucore.vulkan.graph(g): ...; g.replay(); g.reset()
gpucore.vulkan.make_graphed_callables(module, sample_args)
"""

from __future__ import annotations

from threading import get_ident as _thread_id

from . import dispatch
from .backends.vulkan import device as _device
from .backends.vulkan import memory as _memory
from .graphs import (
    VulkanGraph,
    graph,
    graph_pool_handle,
    is_current_stream_capturing,
    make_graphed_callables,
)

__all__ = [
    "VulkanGraph",
    "device_count",
    "devices",
    "graph",
    "graph_pool_handle",
    "is_available",
    "is_current_stream_capturing",
    "make_graphed_callables",
    "mark",
    "reset_peak",
    "set_memory_limit",
    "stats",
    "synchronize",
    "unavailable_reason",
    "current_device",
]


def is_available() -> bool:
    """True when ops can run on a Vulkan device under the current settings."""
    try:
        return dispatch.vulkan_backend() is not None
    except Exception:
        return False


def devices() -> list:
    """All Vulkan devices the loader reports (including CPU-type ones), as dicts."""
    _, _, infos = _device.probe()
    return [d.as_dict() for d in infos]


def device_count() -> int:
    """The number of Vulkan devices the loader reports (CPU-type ones included)."""
    return len(devices())


def unavailable_reason() -> str:
    """Why no device is usable ('' when one is)."""
    if dispatch.unusable_reason():  # lost, or inherited by a forked child
        return dispatch.unusable_reason()
    try:
        if dispatch.vulkan_backend() is not None:
            return ""
    except Exception as e:  # e.g. GPUCORE_VULKAN_DEVICE naming no device
        return str(e)
    why = _device.reason()
    if why:
        return why
    infos = _device.probe()[2]
    if infos and all(d.type == "cpu" for d in infos) and not _device.allow_cpu_device():
        return "only CPU-type Vulkan devices exist; set GPUCORE_VULKAN_ALLOW_CPU=1 to use them"
    return (
        "a Vulkan device was found but could not be initialised; enable DEBUG logging of "
        "'gpucore.vulkan' to see the driver's error"
    )


def current_device() -> dict | None:
    """The device ops run on under the 'auto' policy (as ``devices()`` reports it), or None."""
    be = dispatch.vulkan_backend()
    return None if be is None else be.ctx.info.as_dict()


def synchronize() -> None:
    """Submit the recorded commands and wait until the device has finished them."""
    be = dispatch._vulkan_cache.get("instance")
    if be is not None:
        fault = be.ctx.fault
        if fault is not None and fault.kind == "closed" and fault.thread == _thread_id():
            return  # at exit: what was submitted has been waited for
        be.ctx.stream.synchronize()


def set_memory_limit(nbytes: int | None) -> None:
    """Cap the device memory gpucore allocates at ``nbytes`` (``None``: as much as the driver
    gives). An allocation that would pass it first waits for pending work to free memory, then
    raises DeviceError."""
    if nbytes is not None:
        nbytes = int(nbytes)
        if nbytes <= 0:
            raise ValueError(f"set_memory_limit: nbytes must be positive or None, got {nbytes}")
    _memory.default_limit = nbytes
    be = dispatch._vulkan_cache.get("instance")
    if be is not None:
        be.ctx.memory.limit = nbytes


# Counters only grow; stats(since=...) reports their growth. The other entries are levels.
_COUNTERS = {
    "dispatches": 0,
    "submits": 0,
    "barriers": 0,
    "syncs": 0,
    "bytes_uploaded": 0,
    "bytes_downloaded": 0,
    "bytes_reused": 0,
    "tensors_migrated": 0,
    "pipelines_created": 0,
    "pipeline_seconds": 0.0,
    "timeouts": 0,
    "reclaims": 0,
}
_ZERO = dict(
    _COUNTERS,
    live_bytes=0,
    peak_bytes=0,
    block_bytes=0,
    pipeline_cache_bytes=0,
    pipelines_prewarmed=0,
)


def stats(since: dict | None = None) -> dict:
    """Counters of the Vulkan backend (all zero when it was never used).

    dispatches, submits, barriers, syncs (host waits for results); bytes_uploaded and
    bytes_downloaded (host <-> device copies made for ops and host reads); bytes_reused (device
    copies of unchanged host tensors read again instead of uploaded) and tensors_migrated (host
    parameters and optimizer state moved onto the device); pipelines_created, pipeline_seconds,
    timeouts, reclaims; and the levels live_bytes, peak_bytes, block_bytes (device memory) and
    pipeline_cache_bytes (driver data the on-disk pipeline cache gave at start) and
    pipelines_prewarmed (pipelines created in the background at start, from those recent
    processes used: GPUCORE_VULKAN_PREWARM).

    ``since``: a snapshot from ``mark()``; the counters then give what happened since it (the
    bytes one training step moves, say), the levels stay current::

        m = gpucore.vulkan.mark()
        train_step()
        moved = gpucore.vulkan.stats(since=m)["bytes_uploaded"]
    """
    be = dispatch._vulkan_cache.get("instance")
    s = dict(_ZERO) if be is None else be.stats()
    if since is not None:
        if not isinstance(since, dict):
            raise TypeError(
                f"stats(since=...): expected a snapshot from gpucore.vulkan.mark(), got "
                f"{type(since).__name__}"
            )
        for k in _COUNTERS:
            s[k] -= since.get(k, 0)
    return s


def mark() -> dict:
    """A snapshot of the counters, for ``stats(since=mark)``."""
    return stats()


def reset_peak() -> None:
    """Restart ``stats()['peak_bytes']`` from the bytes live now."""
    be = dispatch._vulkan_cache.get("instance")
    if be is not None:
        be.ctx.memory.peak_bytes = be.ctx.memory.live_bytes
