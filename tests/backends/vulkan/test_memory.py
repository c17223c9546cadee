"""Device memory blocks (gpucore/backends/vulkan/memory.py) against a fake Vulkan API: failure
paths free what they created. No device needed."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import gpucore
from gpucore.backends.vulkan import memory


class FakeVk:
    """Just enough of the ``vulkan`` module for Block/_HostBuffer; counts live objects and fails
    the n-th vkAllocateMemory on request."""

    VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO = 12
    VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO = 5
    VK_BUFFER_USAGE_STORAGE_BUFFER_BIT = 0x20
    VK_BUFFER_USAGE_TRANSFER_SRC_BIT = 0x1
    VK_BUFFER_USAGE_TRANSFER_DST_BIT = 0x2
    VK_SHARING_MODE_EXCLUSIVE = 0

    def __init__(self, fail_alloc_at=None):
        self.buffers, self.memories, self.allocs = set(), set(), 0
        self.fail_alloc_at = fail_alloc_at
        self._next = 0

    def _handle(self):
        self._next += 1
        return self._next

    def VkBufferCreateInfo(self, **kw):  # noqa: N802 - the vulkan module's names
        return SimpleNamespace(**kw)

    VkMemoryAllocateInfo = VkBufferCreateInfo

    def vkCreateBuffer(self, dev, info, _):  # noqa: N802
        h = self._handle()
        self.buffers.add(h)
        return h

    def vkGetBufferMemoryRequirements(self, dev, buf):  # noqa: N802
        return SimpleNamespace(size=4096)

    def vkAllocateMemory(self, dev, info, _):  # noqa: N802
        self.allocs += 1
        if self.allocs == self.fail_alloc_at:
            raise RuntimeError("VkErrorOutOfDeviceMemory")
        h = self._handle()
        self.memories.add(h)
        return h

    def vkBindBufferMemory(self, dev, buf, mem, off):  # noqa: N802
        pass

    def vkMapMemory(self, dev, mem, off, size, flags):  # noqa: N802
        return bytearray(size)

    def vkUnmapMemory(self, dev, mem):  # noqa: N802
        pass

    VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT = 0x1
    VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT = 0x2
    VK_MEMORY_PROPERTY_HOST_COHERENT_BIT = 0x4

    def vkGetPhysicalDeviceMemoryProperties(self, phys):  # noqa: N802
        # one memory type: device-local, host-visible and coherent (as lavapipe)
        t = SimpleNamespace(propertyFlags=0x7, heapIndex=0)
        return SimpleNamespace(
            memoryTypes=[t], memoryTypeCount=1, memoryHeaps=[SimpleNamespace(size=1 << 30)]
        )

    def vkDestroyBuffer(self, dev, buf, _):  # noqa: N802
        self.buffers.remove(buf)

    def vkFreeMemory(self, dev, mem, _):  # noqa: N802
        self.memories.remove(mem)


def _alloc(vk, host_visible: bool):
    return SimpleNamespace(
        vk=vk,
        device=object(),
        device_type=0,
        staging_type=1,
        host_visible=host_visible,
        live_bytes=0,
        heap_size=1 << 30,
    )


@pytest.mark.parametrize("host_visible", [True, False])
def test_a_block_and_its_staging_twin_are_freed_by_destroy(host_visible):
    vk = FakeVk()
    blk = memory.Block(_alloc(vk, host_visible), 4096, dedicated=False)
    assert (blk.staging is None) == host_visible
    assert blk.host.nbytes == 4096 and blk.take(256) == 0
    assert len(vk.buffers) == len(vk.memories) == (1 if host_visible else 2)
    blk.destroy(vk, None)
    assert not vk.buffers and not vk.memories


@pytest.mark.parametrize("fail_at", [1, 2])
def test_a_failed_allocation_leaves_nothing_behind(fail_at):
    # 1: the device memory itself; 2: the staging twin of a device without host-visible memory
    vk = FakeVk(fail_alloc_at=fail_at)
    with pytest.raises(gpucore.DeviceError, match="out of memory"):
        memory.Block(_alloc(vk, host_visible=False), 4096, dedicated=True)
    assert not vk.buffers and not vk.memories


def test_releases_after_destroy_are_ignored():
    # At exit the context is destroyed before the finalizers of tensors still alive run: their
    # releases must not touch the destroyed blocks (no error, no second free).
    vk = FakeVk()
    a = memory.Allocator(
        vk, None, None, {"maxStorageBufferRange": 4096, "minStorageBufferOffsetAlignment": 64}
    )
    owner = a.alloc(8192)  # larger than a block: a dedicated block, dropped when released
    blk = a.blocks[0]
    assert blk.dedicated and a.live_bytes == 8192
    a.destroy()
    assert not vk.buffers and not vk.memories and not a.blocks
    a._release(blk, 0, 8192)  # what the finalizer does
    del owner
    assert not vk.buffers and not vk.memories


def test_the_block_index_is_replaced_never_mutated():
    # locate() runs without the lock in any thread: a block added or dropped meanwhile must not
    # leave it a pointer list and a block list out of step (a wrong block and a negative offset).
    vk = FakeVk()
    a = memory.Allocator(
        vk, None, None, {"maxStorageBufferRange": 4096, "minStorageBufferOffsetAlignment": 64}
    )
    arrays = [a.alloc(4096) for _ in range(3)]  # a full block each
    snapshot = a._index
    frozen = (list(snapshot[0]), list(snapshot[1]))
    more = [a.alloc(4096) for _ in range(3)]
    big = a.alloc(8192)  # dedicated
    del big  # dropped
    assert snapshot == frozen  # the lists a concurrent locate() may hold are untouched
    for arr in arrays + more:
        blk, off = a.locate(arr)
        assert off == 0 and blk.base_ptr == np.asarray(arr).ctypes.data
    starts, blocks = a._index
    assert starts == sorted(starts) and [b.base_ptr for b in blocks] == starts
