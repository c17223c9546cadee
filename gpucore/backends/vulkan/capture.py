"""Command buffers recorded once and replayed: what the inference runtime's Vulkan executor runs.

``record(ctx, fn)`` runs ``fn`` with the stream in capture mode: every dispatch, copy and
barrier the kernels record goes into a command buffer of its own (barriers where the stream's
hazard tracking puts them, one host-visibility barrier at the end), nothing is submitted, and
any attempt to read device data back in the middle raises DeviceError. ``Capture.replay()``
then submits that command buffer, as recorded, and waits: the host cost of a run is one submit
and one wait, whatever the number of dispatches. The capture keeps alive every array its
commands use (the kernels' temporaries included) until it is destroyed.

Replays of one capture must not overlap (they use the same memory): the runtime keeps one
capture per concurrent run.
"""

from __future__ import annotations

import time

from .stream import LOST_MESSAGE, VK_TIMEOUT, descriptor_pool


class Capture:
    """A recorded command buffer, its descriptor pools, fence and keep-alive list."""

    def __init__(self, ctx):
        vk, dev = ctx.vk, ctx.device
        self.ctx = ctx
        self.cmd = vk.vkAllocateCommandBuffers(
            dev,
            vk.VkCommandBufferAllocateInfo(
                sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                commandPool=ctx.command_pool,
                level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                commandBufferCount=1,
            ),
        )[0]
        self.pools: list = []
        self.desc_pool = self.grow()
        self.fence = vk.vkCreateFence(
            dev, vk.VkFenceCreateInfo(sType=vk.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO), None
        )
        self.c_fence = vk.ffi.new("VkFence[1]", [self.fence])
        self.c_cmds = vk.ffi.new("VkCommandBuffer[1]", [self.cmd])
        si = vk.ffi.new("VkSubmitInfo*")
        si.sType = vk.VK_STRUCTURE_TYPE_SUBMIT_INFO
        si.commandBufferCount = 1
        si.pCommandBuffers = self.c_cmds
        self.c_submit = si
        self.keep: list = []
        self.labels: list = []
        self.count = 0  # dispatches and copies recorded
        self.bound = None
        self.replays = 0
        self.destroyed = False

    def grow(self):
        """A new descriptor pool (the stream asks for one when the current pool is full)."""
        pool = descriptor_pool(self.ctx.vk, self.ctx.device)
        self.pools.append(pool)
        self.desc_pool = pool
        return pool

    def replay(self) -> None:
        """Submit the recorded commands and wait for them (GPUCORE_VULKAN_TIMEOUT applies; a
        timeout or a lost device makes the context refuse further device work, since this
        command buffer may still be running and cannot be reused safely)."""
        ctx = self.ctx
        stream = ctx.stream
        if ctx.fault is not None:
            ctx.fault.refuse()
        lib = ctx.vk.lib
        with stream.lock:  # vkQueueSubmit needs the queue externally synchronised
            if ctx.fault is not None:
                ctx.fault.refuse()
            res = lib.vkQueueSubmit(ctx.queue, 1, self.c_submit, self.fence)
        if res != 0:
            what = "a queue submission failed (out of memory or VK_ERROR_DEVICE_LOST)"
            ctx.fail("lost", LOST_MESSAGE.format(what=what, res=res))
            ctx.fault.refuse()
        t0 = time.perf_counter()
        res = lib.vkWaitForFences(ctx.device, 1, self.c_fence, 1, stream.timeout_ns)
        if res != 0:
            what = (
                f"a replayed graph did not finish within GPUCORE_VULKAN_TIMEOUT="
                f"{stream.timeout_ns / 1e9:g} s (waited {time.perf_counter() - t0:.1f} s)"
                if res == VK_TIMEOUT
                else "waiting for a replayed graph failed (VK_ERROR_DEVICE_LOST)"
            )
            ctx.fail("lost", LOST_MESSAGE.format(what=what, res=res))
            ctx.fault.refuse()
        lib.vkResetFences(ctx.device, 1, self.c_fence)
        self.replays += 1

    def destroy(self) -> None:
        """Free the Vulkan objects (only when no replay is in flight: replay waits)."""
        if self.destroyed or self.ctx.fault is not None:
            return  # a failed device may still touch them: leave them to the OS
        vk, dev = self.ctx.vk, self.ctx.device
        vk.vkFreeCommandBuffers(dev, self.ctx.command_pool, 1, [self.cmd])
        for pool in self.pools:
            vk.vkDestroyDescriptorPool(dev, pool, None)
        vk.vkDestroyFence(dev, self.fence, None)
        self.keep.clear()
        self.destroyed = True


def record(ctx, fn) -> Capture:
    """Run ``fn()`` with every command it records captured into a new ``Capture`` (see the
    module docstring). Other threads' device work waits until the capture ends."""
    stream = ctx.stream
    vk = ctx.vk
    with stream.lock:
        stream.synchronize()  # pending work first: the graph may read what it writes
        cap = Capture(ctx)
        vk.vkBeginCommandBuffer(
            cap.cmd,
            vk.VkCommandBufferBeginInfo(sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO),
        )
        stream.reads.clear()
        stream.writes.clear()
        stream.capture = cap
        try:
            fn()
            if stream.program.codes:
                stream.flush_program()
            lib, ffi = stream._lib, stream._ffi
            lib.vkCmdPipelineBarrier(
                cap.cmd,
                stream._barrier_stages,
                stream._stage_host,
                0,
                1,
                stream._c_host_barrier,
                0,
                ffi.NULL,
                0,
                ffi.NULL,
            )
            lib.vkEndCommandBuffer(cap.cmd)
        except BaseException:
            stream.program.clear()
            stream.capture = None
            lib = stream._lib
            lib.vkEndCommandBuffer(cap.cmd)
            cap.destroy()
            raise
        finally:
            stream.capture = None
            stream.reads.clear()
            stream.writes.clear()
    return cap
