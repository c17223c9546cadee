"""Lazy command recording: ops append dispatches to a pending command buffer.

A barrier is recorded only when a dispatch touches a byte range written (or, for a write, read)
since the last barrier. The batch is submitted when the host needs data (``synchronize``), when it
reaches ``CAP`` dispatches, or early, once it holds ``MIN_BATCH`` dispatches while the device has
nothing left to run: then the device works on that batch while Python records the next one in the
other frame of a ring of two, instead of idling until the host asks for a result. An early submit
never makes the host wait. A frame keeps every buffer its commands use alive until its fence
signals, so memory freed by Python is never reused under a running command.

All recording and submission happens under one lock, so several Python threads may issue ops.

A wait that exceeds GPUCORE_VULKAN_TIMEOUT raises, but its frame stays busy: its fence is neither
reset nor reused and its keep-alive list is kept until a later wait (the next use of the frame,
or any synchronize) sees it finish, so later calls give correct results or the same clear error.
A failed wait or submission (device lost) is a fault of the context (context.py): every later
call refuses device work.
"""

from __future__ import annotations

import bisect
import os
import threading
import time

from ...errors import DeviceError
from . import fusion
from .kernels import groups_1d
from .refusals import host_sync_error

CAP = 256
# Early submission: checked every EARLY_CHECK dispatches from MIN_BATCH on (one fence query each).
# A 100-dispatch relu chain on lavapipe with LP_NUM_THREADS=0 (µs per dispatch, recording
# included; medians of 15 alternating rounds): MIN_BATCH 16 / 32 / 64 gave 16.6 / 17.9 / 20.1,
# one submit at the end 23.6. With lavapipe's worker threads all four were within noise (41-49):
# the driver then needs both of the VM's cores, so recording cannot overlap it.
MIN_BATCH = 16
EARLY_CHECK = 8
TIMEOUT_NS = int(float(os.environ.get("GPUCORE_VULKAN_TIMEOUT", "120")) * 1e9)
VK_TIMEOUT = 2
LOST_MESSAGE = (
    "the Vulkan device failed: {what} (VkResult {res}); the work recorded since the last "
    "synchronize is lost, device tensors are invalid and gpucore refuses further device work in "
    "this process; new tensors run on the CPU under the 'auto' policy, restart the process to use "
    "the device again"
)


def descriptor_pool(vk, dev):
    """A descriptor pool for CAP dispatches of up to 8 storage buffers each."""
    return vk.vkCreateDescriptorPool(
        dev,
        vk.VkDescriptorPoolCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
            maxSets=CAP,
            poolSizeCount=1,
            pPoolSizes=[
                vk.VkDescriptorPoolSize(
                    type=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptorCount=CAP * 8
                )
            ],
        ),
        None,
    )


def command_buffer(ctx):
    """A primary command buffer from the context's command pool."""
    vk = ctx.vk
    return vk.vkAllocateCommandBuffers(
        ctx.device,
        vk.VkCommandBufferAllocateInfo(
            sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
            commandPool=ctx.command_pool,
            level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY,
            commandBufferCount=1,
        ),
    )[0]


class Frame:
    """A command buffer with its descriptor pool, fence, timestamp queries and keep-alive list."""

    def __init__(self, ctx):
        vk, dev = ctx.vk, ctx.device
        self.cmd = command_buffer(ctx)
        self.desc_pool = descriptor_pool(vk, dev)
        self.fence = vk.vkCreateFence(
            dev, vk.VkFenceCreateInfo(sType=vk.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO), None
        )
        self.queries = vk.vkCreateQueryPool(
            dev,
            vk.VkQueryPoolCreateInfo(
                sType=vk.VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                queryType=vk.VK_QUERY_TYPE_TIMESTAMP,
                queryCount=2 * CAP,
            ),
            None,
        )
        self.c_fence = ctx.vk.ffi.new("VkFence[1]", [self.fence])
        self.in_flight = False
        self.keep: list = []
        self.labels: list = []  # (name, query index) of timed dispatches
        self.count = 0
        self.bound = None  # the pipeline last bound in cmd

    def destroy(self, vk, dev):
        vk.vkDestroyQueryPool(dev, self.queries, None)
        vk.vkDestroyFence(dev, self.fence, None)
        vk.vkDestroyDescriptorPool(dev, self.desc_pool, None)


class Stream:
    """The recorder. ``dispatch`` and ``copy`` record; ``synchronize`` submits and waits."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.vk = ctx.vk
        self.lock = threading.RLock()
        self.frames = [Frame(ctx), Frame(ctx)]
        self.cur = 0
        self.recording = False
        # byte ranges read / written since the last barrier, per block (id -> _RangeSet)
        self.reads: dict = {}
        self.writes: dict = {}
        # syncs: times the host waited for the device to finish everything (it needed a result)
        self.stats = {"dispatches": 0, "submits": 0, "barriers": 0, "syncs": 0}
        self.profile = None  # list collecting (label, seconds) when profiling
        self.label = ""  # the op being recorded (set by the backend), names timed dispatches
        self.fuse = fusion.enabled_for(ctx)  # elementwise ops join a pending program
        self.program = fusion.Program()
        self.fault = None  # the context's Fault once device work is refused
        self.timeout_ns = TIMEOUT_NS
        self.timeouts = 0  # waits that timed out (their frames were waited for again later)
        # A graph being captured once for replay (capture.py): while set, dispatches and copies
        # are recorded into its command buffer, never submitted, and nothing may synchronize.
        self.capture = None
        self.graphs: list = []  # captures replayed asynchronously, not yet waited for
        self._prepare_c_structs()

    def _refused(self):
        self.fault.refuse()

    # ----------------------------------------------------------------------------- recording
    def _begin(self):
        vk = self.vk
        f = self.frames[self.cur]
        if f.in_flight:
            self._wait(f)
        vk.vkResetDescriptorPool(self.ctx.device, f.desc_pool, 0)
        vk.vkBeginCommandBuffer(
            f.cmd,
            vk.VkCommandBufferBeginInfo(
                sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
            ),
        )
        if self.profile is not None:
            vk.vkCmdResetQueryPool(f.cmd, f.queries, 0, 2 * CAP)
        f.count = 0
        f.bound = None
        f.labels = []
        self.reads.clear()
        self.writes.clear()
        self.recording = True
        return f

    def _barrier(self, cmd):
        st = self._barrier_stages
        self._lib.vkCmdPipelineBarrier(
            cmd, st, st, 0, 1, self._c_barrier, 0, self._ffi.NULL, 0, self._ffi.NULL
        )
        self.reads.clear()
        self.writes.clear()
        self.stats["barriers"] += 1

    def _hazard(self, bindings) -> bool:
        reads, writes = self.reads, self.writes
        for blk, off, size, w in bindings:
            key = id(blk)
            rs = writes.get(key)
            if rs is not None and rs.overlaps(off, off + size):
                return True
            if w:
                rs = reads.get(key)
                if rs is not None and rs.overlaps(off, off + size):
                    return True
        return False

    def _track(self, bindings):
        reads, writes = self.reads, self.writes
        for blk, off, size, w in bindings:
            table = writes if w else reads
            key = id(blk)
            rs = table.get(key)
            if rs is None:
                rs = table[key] = _RangeSet()
                rs.starts.append(off)
                rs.ends.append(off + size)
            else:
                rs.add(off, off + size)

    def _prepare_c_structs(self):
        # Hot path structs built once and mutated per dispatch; calling vk.lib directly is
        # several times cheaper than the wrappers, which build new structs on every call.
        vk = self.vk
        ffi = vk.ffi
        self._ffi = ffi
        self._lib = vk.lib
        self._c_info = ffi.new("VkDescriptorBufferInfo[8]")
        self._c_writes = ffi.new("VkWriteDescriptorSet[8]")
        for i in range(8):
            w = self._c_writes[i]
            w.sType = vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET
            w.dstBinding = i
            w.descriptorCount = 1
            w.descriptorType = vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
            w.pBufferInfo = self._c_info + i
        self._c_layout = ffi.new("VkDescriptorSetLayout[1]")
        self._c_alloc = ffi.new("VkDescriptorSetAllocateInfo*")
        self._c_alloc.sType = vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO
        self._c_alloc.descriptorSetCount = 1
        self._c_alloc.pSetLayouts = self._c_layout
        self._c_set = ffi.new("VkDescriptorSet[1]")
        self._bind_compute = vk.VK_PIPELINE_BIND_POINT_COMPUTE
        self._stage_compute = vk.VK_SHADER_STAGE_COMPUTE_BIT
        self._push_desc = self.ctx.push_descriptor
        # barriers: between dependent dispatches/copies, and before the host reads (at submit)
        writes = vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT
        mb = ffi.new("VkMemoryBarrier*")
        mb.sType = vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER
        mb.srcAccessMask = writes
        mb.dstAccessMask = writes | vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_TRANSFER_READ_BIT
        self._c_barrier = mb
        hb = ffi.new("VkMemoryBarrier*")
        hb.sType = vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER
        hb.srcAccessMask = writes
        hb.dstAccessMask = vk.VK_ACCESS_HOST_READ_BIT
        self._c_host_barrier = hb
        self._barrier_stages = (
            vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | vk.VK_PIPELINE_STAGE_TRANSFER_BIT
        )
        self._stage_host = vk.VK_PIPELINE_STAGE_HOST_BIT
        self._c_cmds = ffi.new("VkCommandBuffer[1]")
        si = ffi.new("VkSubmitInfo*")
        si.sType = vk.VK_STRUCTURE_TYPE_SUBMIT_INFO
        si.commandBufferCount = 1
        si.pCommandBuffers = self._c_cmds
        self._c_submit = si

    def dispatch(self, pipeline, bindings, push, groups, label: str = "", keep=()):
        """Record one dispatch. bindings: [(block, byte offset, byte size, writes?)];
        push: a numpy array of at most 128 bytes; groups: (x, y, z)."""
        lib = self._lib
        ffi = self._ffi
        if self.fault is not None:  # before the lock: a forked child may inherit it held
            self._refused()
        with self.lock:
            if self.fault is not None:
                self._refused()
            if self.program.codes:
                self.flush_program()
            f = self.capture
            if f is None:
                f = self.frames[self.cur] if self.recording else self._begin()
            cmd = f.cmd
            if self._hazard(bindings):
                self._barrier(cmd)
            n = len(bindings)
            infos = self._c_info
            for i in range(n):
                blk, off, size, _ = bindings[i]
                info = infos[i]
                info.buffer = blk.buffer
                info.offset = off
                info.range = size
            push_desc = self._push_desc
            if push_desc is None:
                dev = self.ctx.device
                self._c_alloc.descriptorPool = f.desc_pool
                self._c_layout[0] = pipeline.set_layout
                res = lib.vkAllocateDescriptorSets(dev, self._c_alloc, self._c_set)
                if res != 0 and f is self.capture:  # a captured graph has no set limit
                    self._c_alloc.descriptorPool = f.grow()
                    res = lib.vkAllocateDescriptorSets(dev, self._c_alloc, self._c_set)
                if res != 0:
                    raise DeviceError(f"vkAllocateDescriptorSets failed with VkResult {res}")
                dset = self._c_set[0]
                for i in range(n):
                    self._c_writes[i].dstSet = dset
                lib.vkUpdateDescriptorSets(dev, n, self._c_writes, 0, ffi.NULL)
            # Rebinding the bound pipeline is not free on a CPU driver (lavapipe re-binds the
            # shader state), and a chain of one op repeats it every time.
            if f.bound is not pipeline:
                lib.vkCmdBindPipeline(cmd, self._bind_compute, pipeline.handle)
                f.bound = pipeline
            if push_desc is None:
                lib.vkCmdBindDescriptorSets(
                    cmd, self._bind_compute, pipeline.layout, 0, 1, self._c_set, 0, ffi.NULL
                )
            else:
                push_desc(cmd, self._bind_compute, pipeline.layout, 0, n, self._c_writes)
            if push is not None and push.nbytes:
                lib.vkCmdPushConstants(
                    cmd,
                    pipeline.layout,
                    self._stage_compute,
                    0,
                    push.nbytes,
                    ffi.from_buffer(push),
                )
            timed = self.profile is not None and f is not self.capture
            if timed:
                q = 2 * len(f.labels)
                lib.vkCmdWriteTimestamp(
                    cmd, self.vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, f.queries, q
                )
            lib.vkCmdDispatch(cmd, groups[0], groups[1], groups[2])
            if timed:
                lib.vkCmdWriteTimestamp(
                    cmd, self.vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, f.queries, q + 1
                )
                f.labels.append(self.label or label or pipeline.name)
            self._track(bindings)
            f.keep.extend(keep)
            f.count += 1
            self.stats["dispatches"] += 1
            c = f.count
            if f is self.capture:
                return
            if c >= CAP or (c >= MIN_BATCH and c % EARLY_CHECK == 0 and self._device_idle()):
                self._submit()

    def elementwise(self, code, name, n, out_op, in_ops, keep, local) -> bool:
        """Append one elementwise op to the pending fused program (see fusion.py); False when
        it cannot join one even alone (the caller then dispatches its own kernel)."""
        if self.fault is not None:
            self._refused()
        with self.lock:
            if self.fault is not None:
                self._refused()
            prog = self.program
            if not prog.add(code, name, n, out_op, in_ops):
                if not prog.codes:
                    return False
                self.flush_program()
                if not prog.add(code, name, n, out_op, in_ops):
                    return False
            prog.local = local
            prog.keep.extend(keep)
            # the profiler times ops one by one
            if self.profile is not None or len(prog.codes) >= fusion.MAX_OPS:
                self.flush_program()
            return True

    def flush_program(self):
        """Record the pending fused program as one dispatch."""
        with self.lock:
            prog = self.program
            if not prog.codes:
                return
            ctx = self.ctx
            pipe = ctx.pipelines.get("fused", fusion.MAX_SLOTS, (), prog.local)
            if not self.recording and self.capture is None:
                # Get a free frame first: if waiting for it times out, the program stays
                # pending (its outputs are computed later) instead of being dropped.
                self._begin()
            bindings, push, label, keep = prog.bindings(), prog.push(), prog.label(), prog.keep
            groups = groups_1d(prog.n, prog.local)
            prog.clear()
            self.dispatch(pipe, bindings, push, groups, label=label, keep=keep)

    def copy(self, src_buffer, src_off, dst_buffer, dst_off, size, dst_key, keep=()):
        """Record a buffer-to-buffer copy (staging transfers); always behind a barrier.
        ``dst_key`` is the block the destination belongs to, for hazard tracking."""
        vk = self.vk
        if self.fault is not None:
            self._refused()
        with self.lock:
            if self.fault is not None:
                self._refused()
            if self.program.codes:
                self.flush_program()
            f = self.capture
            if f is None:
                f = self.frames[self.cur] if self.recording else self._begin()
            self._barrier(f.cmd)
            vk.vkCmdCopyBuffer(
                f.cmd,
                src_buffer,
                dst_buffer,
                1,
                [vk.VkBufferCopy(srcOffset=src_off, dstOffset=dst_off, size=size)],
            )
            self._track([(dst_key, dst_off, size, True)])
            f.keep.extend(keep)
            f.count += 1

    # ----------------------------------------------------------------------------- submission
    def _device_idle(self) -> bool:
        """Whether every submitted frame has finished (a fence query; no waiting)."""
        dev, lib = self.ctx.device, self._lib
        for fr in self.frames:
            if fr.in_flight and lib.vkGetFenceStatus(dev, fr.fence) != 0:  # 0: VK_SUCCESS
                return False
        return True

    def _submit(self):
        """End the current frame's command buffer and queue it; never waits."""
        lib, ffi = self._lib, self._ffi
        f = self.frames[self.cur]
        # Make device writes visible to the host once the fence signals.
        lib.vkCmdPipelineBarrier(
            f.cmd,
            self._barrier_stages,
            self._stage_host,
            0,
            1,
            self._c_host_barrier,
            0,
            ffi.NULL,
            0,
            ffi.NULL,
        )
        lib.vkEndCommandBuffer(f.cmd)
        self._c_cmds[0] = f.cmd
        res = lib.vkQueueSubmit(self.ctx.queue, 1, self._c_submit, f.fence)
        self.recording = False
        if res != 0:
            # The batch never ran: tensors it should have written hold garbage, so nothing may
            # read them; the device may also be lost. Refuse all further work (f.keep stays:
            # nothing is freed that a lost device might still touch).
            what = "a queue submission failed (out of memory or VK_ERROR_DEVICE_LOST)"
            self.ctx.fail("lost", LOST_MESSAGE.format(what=what, res=res))
            self._refused()
        f.in_flight = True
        self.stats["submits"] += 1
        self.cur = (self.cur + 1) % len(self.frames)

    def _wait(self, f: Frame, timeout_ns: int | None = None):
        """Wait for a submitted frame, then make it free. On a timeout the frame stays busy
        (fence, command buffer and keep-alive list untouched) and the next wait retries."""
        t0 = time.perf_counter()
        dev = self.ctx.device
        timeout = self.timeout_ns if timeout_ns is None else timeout_ns
        res = self._lib.vkWaitForFences(dev, 1, f.c_fence, 1, timeout)
        if res == VK_TIMEOUT:
            self.timeouts += 1
            raise DeviceError(
                f"the Vulkan device did not finish its work within GPUCORE_VULKAN_TIMEOUT="
                f"{self.timeout_ns / 1e9:g} s (waited {time.perf_counter() - t0:.1f} s); the work "
                "is still queued and later calls wait for it again (their results are correct "
                "once it completes); raise GPUCORE_VULKAN_TIMEOUT for long kernels, or split the "
                "work into smaller ops"
            )
        if res != 0:
            what = "waiting for submitted work failed (VK_ERROR_DEVICE_LOST)"
            self.ctx.fail("lost", LOST_MESSAGE.format(what=what, res=res))
            self._refused()
        self._lib.vkResetFences(dev, 1, f.c_fence)
        f.in_flight = False
        if self.profile is not None and f.labels:
            self._collect_times(f)
        f.keep.clear()

    def _collect_times(self, f: Frame):
        import numpy as np

        vk = self.vk
        n = 2 * len(f.labels)
        data = vk.ffi.new("uint64_t[]", n)
        vk.lib.vkGetQueryPoolResults(
            self.ctx.device,
            f.queries,
            0,
            n,
            n * 8,
            data,
            8,
            vk.VK_QUERY_RESULT_64_BIT | vk.VK_QUERY_RESULT_WAIT_BIT,
        )
        ts = np.frombuffer(vk.ffi.buffer(data, n * 8), np.uint64).astype(np.float64)
        period = self.ctx.timestamp_period * 1e-9
        for i, label in enumerate(f.labels):
            self.profile.append((label, (ts[2 * i + 1] - ts[2 * i]) * period))
        f.labels = []

    def synchronize(self):
        """Submit what is recorded and wait for the device to finish everything."""
        if self.fault is not None:
            self._refused()
        with self.lock:
            if self.fault is not None:
                self._refused()
            if self.capture is not None:
                raise host_sync_error()
            if self.program.codes:
                self.flush_program()
            if self.recording and self.frames[self.cur].count:
                self._submit()
            elif self.recording:
                # nothing recorded: end the empty command buffer without submitting it
                self.vk.vkEndCommandBuffer(self.frames[self.cur].cmd)
                self.recording = False
            waited = False
            for fr in self.frames:
                if fr.in_flight:
                    self._wait(fr)
                    waited = True
            while self.graphs:
                self.graphs.pop().wait()
                waited = True
            if waited:
                self.stats["syncs"] += 1

    def pending(self) -> bool:
        return (
            self.recording
            or bool(self.program.codes)
            or bool(self.graphs)
            or any(f.in_flight for f in self.frames)
        )

    def reclaim(self) -> bool:
        """Finish pending work so that the memory its frames keep alive can be reused (the
        allocator calls this before it reports out of memory); True when there was any."""
        if not self.pending():
            return False
        self.synchronize()
        return True

    def drain(self, timeout_ns: int) -> bool:
        """Wait (at most ``timeout_ns`` in all) for every submitted frame, without submitting
        what is being recorded; True when all finished. The caller holds the lock."""
        deadline = time.monotonic_ns() + timeout_ns
        for f in self.frames:
            if f.in_flight:
                left = max(0, deadline - time.monotonic_ns())
                res = self._lib.vkWaitForFences(self.ctx.device, 1, f.c_fence, 1, left)
                if res != 0:
                    return False
                f.in_flight = False
                f.keep.clear()
        for cap in self.graphs:
            left = max(0, deadline - time.monotonic_ns())
            if self._lib.vkWaitForFences(self.ctx.device, 1, cap.c_fence, 1, left) != 0:
                return False
        return True

    def destroy(self):
        """Destroy the frames; only once nothing is in flight (context.close drained it)."""
        if any(f.in_flight for f in self.frames):
            return  # the device may still use them: leave them to the OS
        if self.recording:
            self.vk.vkEndCommandBuffer(self.frames[self.cur].cmd)
            self.recording = False
        for f in self.frames:
            f.destroy(self.vk, self.ctx.device)


class _RangeSet:
    """Disjoint, sorted byte ranges (merged on insert): overlap queries in O(log n), so a batch
    of many independent dispatches stays linear."""

    __slots__ = ("starts", "ends")

    def __init__(self):
        self.starts: list = []
        self.ends: list = []

    def overlaps(self, s: int, e: int) -> bool:
        i = bisect.bisect_right(self.ends, s)  # first range ending after s
        return i < len(self.starts) and self.starts[i] < e

    def add(self, s: int, e: int) -> None:
        starts, ends = self.starts, self.ends
        i = bisect.bisect_left(ends, s)  # first range that ends at or after s (touching merges)
        j = bisect.bisect_right(starts, e)  # ranges [i, j) touch [s, e)
        if i < j:
            s = min(s, starts[i])
            e = max(e, ends[j - 1])
        starts[i:j] = [s]
        ends[i:j] = [e]
