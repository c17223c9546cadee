"""Device memory: a sub-allocator over large blocks.

Drivers cap the number of allocations (~4096) and each vkAllocateMemory is slow, so tensors are
aligned sub-ranges of blocks of ``BLOCK_SIZE`` bytes (free-list reuse with coalescing); a tensor
larger than a block gets a dedicated one. Every block is one VkBuffer over one VkDeviceMemory.

The host sees each block through a numpy uint8 array: the persistent mapping of the block when its
memory is host-visible (lavapipe, integrated GPUs, resizable BAR), or a host mirror when it is
not (discrete GPUs), which transfers fill with vkCmdCopyBuffer. A tensor's ``_data`` is a numpy
view over that array, so views, strides and offsets are numpy's; the byte offset of a tensor in its
block is its data pointer minus the block's. A sub-range is freed when the last numpy view of it
dies (weakref.finalize on the range's owner array; not run at interpreter exit, when the device
may be left to the OS with threads still using it).

Memory a pending command uses stays allocated until its frame finishes (stream.py), so freed
ranges come back only then. Before an allocation fails (the driver refuses a block, or the blocks
would exceed ``limit``), and before the blocks grow past the device heap, the allocator asks the
stream to finish pending work (``reclaim``) and retries; only then does it raise.
"""

from __future__ import annotations

import bisect
import gc
import threading
import weakref

import numpy as np

from ..._cpu import data_ptr as _data_ptr
from ...errors import DeviceError

BLOCK_SIZE = 64 << 20
ALIGN = 256
# The cap on device memory for allocators created from now on (gpucore.vulkan.set_memory_limit).
default_limit: int | None = None


def _buffer_with_memory(vk, dev, size: int, usage: int, memory_type: int):
    """(VkBuffer, VkDeviceMemory) of ``size`` bytes, bound; nothing is left behind when the
    allocation fails (the exception propagates)."""
    buffer = vk.vkCreateBuffer(
        dev,
        vk.VkBufferCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
            size=size,
            usage=usage,
            sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE,
        ),
        None,
    )
    try:
        req = vk.vkGetBufferMemoryRequirements(dev, buffer)
        memory = vk.vkAllocateMemory(
            dev,
            vk.VkMemoryAllocateInfo(
                sType=vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                allocationSize=req.size,
                memoryTypeIndex=memory_type,
            ),
            None,
        )
    except BaseException:
        vk.vkDestroyBuffer(dev, buffer, None)
        raise
    vk.vkBindBufferMemory(dev, buffer, memory, 0)
    return buffer, memory


def _allocation_of(arr: np.ndarray) -> np.ndarray:
    """The uint8 array ``alloc`` returned that ``arr`` views (a tensor's array is a view of it)."""
    while isinstance(arr.base, np.ndarray):
        arr = arr.base
    return arr


class Block:
    """One VkDeviceMemory + VkBuffer, with its host view and free list."""

    def __init__(self, alloc: Allocator, size: int, dedicated: bool):
        vk, dev = alloc.vk, alloc.device
        self.size = size
        self.dedicated = dedicated
        self.staging = None
        usage = (
            vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT
            | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
            | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT
        )
        try:
            self.buffer, self.memory = _buffer_with_memory(vk, dev, size, usage, alloc.device_type)
            if not alloc.host_visible:
                # No host-visible device-local memory (a discrete GPU without resizable BAR):
                # the host works on a host-visible twin buffer; the stream copies between them.
                try:
                    self.staging = _HostBuffer(alloc, size)
                except BaseException:
                    vk.vkDestroyBuffer(dev, self.buffer, None)
                    vk.vkFreeMemory(dev, self.memory, None)
                    raise
        except DeviceError:
            raise
        except Exception as e:
            raise DeviceError(
                f"Vulkan device out of memory: could not allocate {size / 2**20:.1f} MiB "
                f"({type(e).__name__}); gpucore holds {alloc.live_bytes / 2**20:.1f} MiB in live "
                f"tensors of {alloc.heap_size / 2**20:.0f} MiB on the device heap; free tensors "
                "or use smaller batches"
            ) from None
        if self.staging is None:
            self.mapping = vk.vkMapMemory(dev, self.memory, 0, size, 0)
        else:
            self.mapping = self.staging.mapping
        self.host = np.frombuffer(self.mapping, np.uint8)
        self.base_ptr = self.host.ctypes.data
        self.free = [(0, size)]  # sorted (offset, size)

    def take(self, nbytes: int):
        for i, (off, sz) in enumerate(self.free):
            if sz >= nbytes:
                if sz == nbytes:
                    del self.free[i]
                else:
                    self.free[i] = (off + nbytes, sz - nbytes)
                return off
        return None

    def give(self, off: int, nbytes: int):
        fl = self.free
        i = bisect.bisect_left(fl, (off, 0))
        # merge with the previous and next free ranges
        if i > 0 and fl[i - 1][0] + fl[i - 1][1] == off:
            off, nbytes = fl[i - 1][0], fl[i - 1][1] + nbytes
            del fl[i - 1]
            i -= 1
        if i < len(fl) and off + nbytes == fl[i][0]:
            nbytes += fl[i][1]
            del fl[i]
        fl.insert(i, (off, nbytes))

    def is_empty(self) -> bool:
        return len(self.free) == 1 and self.free[0] == (0, self.size)

    def destroy(self, vk, dev):
        if self.staging is None:
            vk.vkUnmapMemory(dev, self.memory)
        else:
            self.staging.destroy(vk, dev)
        vk.vkDestroyBuffer(dev, self.buffer, None)
        vk.vkFreeMemory(dev, self.memory, None)


class _HostBuffer:
    """A host-visible, coherent VkBuffer, persistently mapped (the twin of a device block)."""

    def __init__(self, alloc: Allocator, size: int):
        vk, dev = alloc.vk, alloc.device
        usage = vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT
        self.buffer, self.memory = _buffer_with_memory(vk, dev, size, usage, alloc.staging_type)
        self.mapping = vk.vkMapMemory(dev, self.memory, 0, size, 0)

    def destroy(self, vk, dev):
        vk.vkUnmapMemory(dev, self.memory)
        vk.vkDestroyBuffer(dev, self.buffer, None)
        vk.vkFreeMemory(dev, self.memory, None)


class Allocator:
    """Sub-allocates tensors from blocks; thread-safe; counts live and peak bytes."""

    def __init__(self, vk, physical, device, limits: dict):
        self.vk = vk
        self.device = device
        self.lock = threading.Lock()
        self._owner = None  # thread id of the lock holder inside alloc/_release
        self._deferred: list = []  # releases queued by finalizers run under the lock
        self.blocks: list[Block] = []
        # (sorted host base pointers, their blocks): replaced whole, never mutated, so that
        # locate() (called without the lock, by any thread) never sees the two out of step
        self._index: tuple[list[int], list[Block]] = ([], [])
        self.live_bytes = 0
        self.peak_bytes = 0
        self.destroyed = False  # set at shutdown: later releases have nothing to give back
        self.fault = None  # the context's Fault once device work is refused (see context.py)
        self.reclaim = None  # callable finishing pending work; True when there was any
        self.limit = default_limit  # cap on block bytes (None: what the driver gives)
        self.block_bytes = 0  # bytes in blocks (live, free, and kept alive by pending work)
        self.reclaims = 0  # allocations that had to wait for pending work first
        self.max_range = limits["maxStorageBufferRange"]
        self.align = max(ALIGN, limits["minStorageBufferOffsetAlignment"])
        props = vk.vkGetPhysicalDeviceMemoryProperties(physical)
        want = (
            vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
            | vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT
            | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
        )
        types = [props.memoryTypes[i] for i in range(props.memoryTypeCount)]
        idx = next((i for i, t in enumerate(types) if (t.propertyFlags & want) == want), None)
        self.host_visible = idx is not None
        if idx is None:
            idx = next(
                i
                for i, t in enumerate(types)
                if t.propertyFlags & vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
            )
        self.device_type = idx
        host = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
        self.staging_type = next(
            (i for i, t in enumerate(types) if (t.propertyFlags & host) == host), idx
        )
        self.heap_size = int(props.memoryHeaps[types[idx].heapIndex].size)
        self.block_size = min(BLOCK_SIZE, self.max_range)
        # id(allocation) -> why its contents are undefined (an in-place update of several
        # tensors that failed part-way, see poison); entries go when the allocation dies
        self.poisoned: dict[int, str] = {}

    # ----------------------------------------------------------------------------- alloc
    def alloc(self, nbytes: int) -> np.ndarray:
        """A uint8 host view of a fresh device range of ``nbytes`` (freed when views die)."""
        if self.fault is not None:
            self.fault.refuse()
        size = max(self.align, -(-nbytes // self.align) * self.align)
        final = self.reclaim is None
        while True:
            with self.lock:
                self._owner = threading.get_ident()
                try:
                    got = self._take(size, final)
                finally:
                    self._settle()
            if type(got) is tuple:
                break
            # Out of room (or past the heap): finish pending work, outside the lock (the stream
            # frees kept ranges through _release), and try once more.
            self.reclaims += 1
            self.reclaim()
            if got == "full":
                gc.collect()  # tensors in reference cycles hold memory until collected
            final = True
        blk, off = got
        owner = np.frombuffer(memoryview(blk.host)[off : off + nbytes], np.uint8)
        weakref.finalize(owner, self._release, blk, off, size).atexit = False
        return owner

    def _take(self, size: int, final: bool = True):
        """(block, offset) of a free range. Unless ``final``: 'full' (no room) or 'heap' (the
        blocks would outgrow the device heap) when pending work should be reclaimed first.
        Raises DeviceError when there is no room."""
        blk = off = None
        if size <= self.block_size:
            for b in self.blocks:
                if not b.dedicated:
                    off = b.take(size)
                    if off is not None:
                        blk = b
                        break
        if blk is None:
            dedicated = size > self.block_size
            new = size if dedicated else self.block_size
            if self.limit is not None and self.block_bytes + new > self.limit:
                if not final:
                    return "full"
                self._drop_empty_blocks()
                if self.block_bytes + new > self.limit:
                    raise self._oom(
                        size,
                        f"the limit of {self.limit / 2**20:.1f} MiB set by "
                        "gpucore.vulkan.set_memory_limit",
                    )
            elif self.block_bytes + new > self.heap_size and not final:
                return "heap"  # reuse what finished work freed before growing past the heap
            try:
                blk = Block(self, new, dedicated)
            except DeviceError:
                if not final:
                    return "full"
                self._drop_empty_blocks()
                try:
                    blk = Block(self, new, dedicated)
                except DeviceError:
                    raise self._oom(size, "the driver refused a new block") from None
            self.blocks.append(blk)
            self.block_bytes += blk.size
            starts, blocks = self._index
            i = bisect.bisect_left(starts, blk.base_ptr)
            self._index = (
                starts[:i] + [blk.base_ptr] + starts[i:],
                blocks[:i] + [blk] + blocks[i:],
            )
            off = blk.take(size)
        self.live_bytes += size
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        return blk, off

    def _oom(self, size: int, why: str) -> DeviceError:
        return DeviceError(
            f"Vulkan device out of memory: could not allocate {size / 2**20:.1f} MiB ({why}); "
            f"gpucore holds {self.live_bytes / 2**20:.1f} MiB in live tensors and "
            f"{self.block_bytes / 2**20:.1f} MiB in blocks, of {self.heap_size / 2**20:.0f} MiB "
            "on the device heap, after finishing pending work to reclaim freed memory; free "
            "tensors (del, and drop references such as autograd graphs), use smaller batches, "
            "or run on the CPU (gpucore.device_policy('cpu'))"
        )

    def _drop_empty_blocks(self):
        for b in [b for b in self.blocks if b.is_empty()]:
            self._drop(b)

    def _release(self, blk: Block, off: int, size: int):
        # A finalizer: the garbage collector may run it inside alloc() or _release() on this very
        # thread (any allocation there can start a collection), with self.lock held and a free
        # list mid-update. Then it is only queued; the lock holder applies it before letting go.
        # After destroy() or a fault (device lost, forked child, interpreter exit) nothing is
        # given back: the blocks are gone, or the device may still use them, or (in a forked
        # child) the lock may be held by a thread that does not exist.
        if self.destroyed or self.fault is not None:
            return
        if self._owner == threading.get_ident():
            self._deferred.append((blk, off, size))
            return
        with self.lock:
            if self.destroyed:  # destroy() ran while this thread waited for the lock
                return
            self._owner = threading.get_ident()
            try:
                self._give(blk, off, size)
            finally:
                self._settle()

    def _settle(self):
        """Apply queued releases, then give up ownership (called with self.lock held)."""
        while self._deferred:
            self._give(*self._deferred.pop())
        self._owner = None

    def _give(self, blk: Block, off: int, size: int):
        blk.give(off, size)
        self.live_bytes -= size
        if blk.dedicated and blk.is_empty():
            self._drop(blk)

    def _drop(self, blk: Block):
        self.blocks.remove(blk)
        self.block_bytes -= blk.size
        starts, blocks = self._index
        i = blocks.index(blk)
        self._index = (starts[:i] + starts[i + 1 :], blocks[:i] + blocks[i + 1 :])
        blk.destroy(self.vk, self.device)

    def poison(self, arr: np.ndarray, reason: str) -> None:
        """Mark the allocation under ``arr`` as holding undefined values: every later use of it
        raises DeviceError(reason), until it is overwritten whole (``cure``) or freed."""
        own = _allocation_of(arr)
        key = id(own)
        if key not in self.poisoned:
            weakref.finalize(own, self.poisoned.pop, key, None).atexit = False
        self.poisoned[key] = reason

    def check(self, arr: np.ndarray) -> None:
        """Raise the DeviceError of a poisoned allocation under ``arr``."""
        if self.poisoned:
            reason = self.poisoned.get(id(_allocation_of(arr)))
            if reason is not None:
                raise DeviceError(reason)

    def cure(self, arr: np.ndarray) -> None:
        """``arr`` is about to be overwritten whole: its allocation is defined again."""
        if self.poisoned:
            own = _allocation_of(arr)
            if arr.nbytes >= own.nbytes and arr.flags.c_contiguous:
                self.poisoned.pop(id(own), None)

    def locate(self, arr: np.ndarray):
        """(block, byte offset of arr's first element) for an array over device memory."""
        ptr = _data_ptr(arr)
        starts, blocks = self._index
        i = bisect.bisect_right(starts, ptr) - 1
        if i >= 0:
            blk = blocks[i]
            if ptr < blk.base_ptr + blk.size or (arr.size == 0 and ptr <= blk.base_ptr + blk.size):
                return blk, ptr - blk.base_ptr
        raise DeviceError("internal: array is not in Vulkan device memory")

    def destroy(self):
        with self.lock:
            self.destroyed = True
            for b in list(self.blocks):
                b.destroy(self.vk, self.device)
            self.blocks.clear()
            self._index = ([], [])
