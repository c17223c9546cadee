"""Command buffers recorded once and replayed: what the inference runtime's Vulkan executor and
captured training steps (gpucore.vulkan.graph, gpucore/graphs/) run.

``record(ctx, fn)`` (or ``begin(ctx)`` ... ``end(ctx, cap)``, ``abort`` on an error) runs with the
stream in capture mode: every dispatch, copy and barrier the kernels record goes into a command
buffer of its own (barriers where the stream's hazard tracking puts them, one full barrier at
each end so that a replay is ordered after earlier submissions and before later ones), nothing
is submitted, and any attempt to read device data back in the middle raises DeviceError naming
the op (refusals.py). ``Capture.replay()`` then submits that command buffer, as recorded, and
waits: the host cost of a run is one submit and one wait, whatever the number of dispatches;
``submit()`` alone queues it (the stream's ``replay`` does, and waits for it when the host next
needs a result). The capture keeps alive every array its commands use (the kernels'
temporaries included) until it is destroyed.

Replays of one capture must not overlap (they use the same memory): ``submit`` waits for the
previous one, and the runtime keeps one capture per concurrent run.
"""

from __future__ import annotations

import time

from ...errors import DeviceError
from .stream import LOST_MESSAGE, VK_TIMEOUT, command_buffer, descriptor_pool


class Capture:
    """A recorded command buffer, its descriptor pools, fence and keep-alive list."""

    def __init__(self, ctx):
        vk, dev = ctx.vk, ctx.device
        self.ctx = ctx
        self.cmd = command_buffer(ctx)
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
        self.host_inputs: list = []  # (version box, version, shape) of host tensors read
        self.labels: list = []
        self.count = 0  # dispatches and copies recorded
        self.bound = None
        self.replays = 0
        self.in_flight = False  # submitted and not yet waited for
        self.destroyed = False

    def grow(self):
        """A new descriptor pool (the stream asks for one when the current pool is full)."""
        pool = descriptor_pool(self.ctx.vk, self.ctx.device)
        self.pools.append(pool)
        self.desc_pool = pool
        return pool

    def replay(self) -> None:
        """Submit the recorded commands and wait for them (see ``submit`` and ``wait``)."""
        self.submit()
        self.wait()

    def submit(self) -> None:
        """Queue the recorded commands without waiting; a replay still in flight is waited for
        first (a command buffer is not resubmitted while pending). A lost device makes the
        context refuse further device work."""
        ctx = self.ctx
        stream = ctx.stream
        if ctx.fault is not None:
            ctx.fault.refuse()
        if self.in_flight:
            self.wait()
        lib = ctx.vk.lib
        with stream.lock:  # vkQueueSubmit needs the queue externally synchronised
            if ctx.fault is not None:
                ctx.fault.refuse()
            res = lib.vkQueueSubmit(ctx.queue, 1, self.c_submit, self.fence)
        if res != 0:
            what = "a queue submission failed (out of memory or VK_ERROR_DEVICE_LOST)"
            ctx.fail("lost", LOST_MESSAGE.format(what=what, res=res))
            ctx.fault.refuse()
        self.in_flight = True
        self.replays += 1

    def wait(self) -> None:
        """Wait for the last submission (GPUCORE_VULKAN_TIMEOUT applies; a timeout or a lost
        device makes the context refuse further device work, since this command buffer may
        still be running and cannot be reused safely)."""
        if not self.in_flight:
            return
        ctx = self.ctx
        if ctx.fault is not None:
            ctx.fault.refuse()  # lost or closed: nothing to wait for any more
        lib = ctx.vk.lib
        timeout = ctx.stream.timeout_ns
        t0 = time.perf_counter()
        res = lib.vkWaitForFences(ctx.device, 1, self.c_fence, 1, timeout)
        if res != 0:
            what = (
                f"a replayed graph did not finish within GPUCORE_VULKAN_TIMEOUT="
                f"{timeout / 1e9:g} s (waited {time.perf_counter() - t0:.1f} s)"
                if res == VK_TIMEOUT
                else "waiting for a replayed graph failed (VK_ERROR_DEVICE_LOST)"
            )
            ctx.fail("lost", LOST_MESSAGE.format(what=what, res=res))
            ctx.fault.refuse()
        lib.vkResetFences(ctx.device, 1, self.c_fence)
        self.in_flight = False

    def destroy(self) -> None:
        """Free the Vulkan objects (only when no replay is in flight: replay waits)."""
        if self.destroyed or self.ctx.fault is not None:
            return  # a failed device may still touch them: leave them to the OS
        self.wait()
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
    cap = begin(ctx)
    try:
        fn()
    except BaseException:
        abort(ctx, cap)
        raise
    end(ctx, cap)
    return cap


def enqueue(ctx, cap: Capture) -> None:
    """Queue ``cap`` behind the work the stream recorded so far (submitted first), without
    waiting: the stream waits for it when the host next needs a result (``synchronize``)."""
    stream = ctx.stream
    if stream.fault is not None:
        stream._refused()
    with stream.lock:
        if stream.capture is not None:
            raise DeviceError(
                "a captured graph cannot be replayed while another graph is being captured"
            )
        if stream.program.codes:
            stream.flush_program()
        if stream.recording and stream.frames[stream.cur].count:
            stream._submit()
        cap.submit()
        stream.stats["submits"] += 1
        if cap not in stream.graphs:
            stream.graphs.append(cap)


def begin(ctx) -> Capture:
    """Start capturing: pending work is finished, the stream lock is held (by this thread)
    until ``end`` or ``abort``, and every command recorded from now goes into the returned
    capture. It opens with a barrier behind all earlier submissions, so a replay sees what
    eager work queued before it wrote (the new data copied into a graph's inputs)."""
    stream = ctx.stream
    stream.lock.acquire()
    try:
        stream.synchronize()  # pending work first: the graph may read what it writes
        cap = Capture(ctx)
    except BaseException:
        stream.lock.release()
        raise
    vk = ctx.vk
    vk.vkBeginCommandBuffer(
        cap.cmd,
        vk.VkCommandBufferBeginInfo(sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO),
    )
    stream._barrier(cap.cmd)
    stream.reads.clear()
    stream.writes.clear()
    stream.capture = cap
    return cap


def end(ctx, cap: Capture) -> None:
    """Finish capturing ``cap``: its command buffer ends with a barrier that makes its writes
    visible to the host and to every later submission; the stream lock is released."""
    stream = ctx.stream
    try:
        if stream.program.codes:
            stream.flush_program()
        lib, ffi = stream._lib, stream._ffi
        stages = stream._barrier_stages
        lib.vkCmdPipelineBarrier(
            cap.cmd,
            stages,
            stages | stream._stage_host,
            0,
            1,
            _final_barrier(stream),
            0,
            ffi.NULL,
            0,
            ffi.NULL,
        )
        res = lib.vkEndCommandBuffer(cap.cmd)
        if res != 0:
            raise DeviceError(f"vkEndCommandBuffer failed with VkResult {res}")
    except BaseException:
        _close(stream)
        cap.destroy()
        raise
    _close(stream)


def abort(ctx, cap: Capture) -> None:
    """Abandon capturing ``cap`` (an op failed): nothing it recorded ever runs."""
    stream = ctx.stream
    stream.program.clear()
    stream.capture = None
    stream._lib.vkEndCommandBuffer(cap.cmd)
    cap.destroy()
    _close(stream)


def _close(stream) -> None:
    stream.capture = None
    stream.reads.clear()
    stream.writes.clear()
    stream.lock.release()


def _final_barrier(stream):
    """Shader and transfer writes made visible to the host and to later shaders and copies."""
    mb = getattr(stream, "_c_final_barrier", None)
    if mb is None:
        vk = stream.vk
        mb = vk.ffi.new("VkMemoryBarrier*")
        mb.sType = vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER
        mb.srcAccessMask = stream._c_barrier.srcAccessMask
        mb.dstAccessMask = stream._c_barrier.dstAccessMask | vk.VK_ACCESS_HOST_READ_BIT
        stream._c_final_barrier = mb
    return mb
