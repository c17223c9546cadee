"""The Vulkan context: logical device, compute queue, memory, pipelines and the stream.

Created lazily on first use by ``get()``; ``None`` when no usable device exists (then gpucore runs
on the CPU). Properties read once here (subgroup size, limits, memory model) let kernels choose
their variants.

Faults. Once the device is lost, the process forked, or the interpreter is exiting, the context
holds a ``Fault`` and every later device call (recording, host access, allocation) raises its
DeviceError instead of touching a fence, command buffer or memory the device may still use:

- lost: a wait or a submission returned an error (VK_ERROR_DEVICE_LOST, or a batch that never
  ran); device tensors are invalid. A wait that merely times out is no fault: the frame stays
  busy and the next use waits for it again (stream.py).
- forked: a child of ``fork()`` inherits the parent's device handles but none of the driver's
  threads, and possibly locks held by threads that do not exist in it; it must never wait on
  them. The ``after_in_child`` hook marks the context before any lock is taken.
- closed: interpreter exit (``_shutdown``). The thread running the shutdown gets the error;
  other threads (daemon threads still issuing ops) block for good on their next device call.
  The device and its memory are destroyed only when every submission has finished and no other
  thread is alive; otherwise they are left to the OS, never freed under a running thread.

Listeners (``on_fault``; dispatch.py registers one) let the 'auto' policy fall back to the CPU.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time

from ...errors import DeviceError
from . import device as _device
from . import pipeline_store
from .memory import Allocator
from .pipelines import PipelineCache
from .stream import Stream

log = logging.getLogger("gpucore.vulkan")

# At exit, how long to wait for the stream lock and for submitted work before leaving the device
# to the OS (seconds; never longer than GPUCORE_VULKAN_TIMEOUT).
EXIT_WAIT_S = 2.0
_DOT_EXT = "VK_KHR_shader_integer_dot_product"

FORK_MESSAGE = (
    "the Vulkan device was initialised in the parent process (pid {parent}) and cannot be used "
    "in this forked child (pid {child}); re-initialise gpucore in the child (a fresh "
    "interpreter) or use the 'spawn' start method (multiprocessing.get_context('spawn')); "
    "tensors created in the child run on the CPU, device tensors inherited from the parent "
    "cannot be read here"
)
CLOSED_MESSAGE = (
    "gpucore's Vulkan context was shut down at interpreter exit; device work is refused from "
    "then on: finish it (and join the threads that run it) before the program exits"
)


class Fault:
    """Why the context refuses device work: ``kind`` is 'lost', 'forked' or 'closed'."""

    def __init__(self, kind: str, message: str):
        self.kind = kind
        self.message = message
        self.thread = threading.get_ident()  # the thread that noticed it (ran the shutdown)
        self._never = threading.Event()

    def refuse(self):
        """Raise the fault's DeviceError; at exit, block threads other than the closing one for
        good instead (daemon threads: the process ends without them)."""
        if self.kind == "closed" and threading.get_ident() != self.thread:
            self._never.wait()
        raise DeviceError(self.message)


class Context:
    """Everything gpucore holds on one Vulkan device."""

    def __init__(self, vk, instance, info: _device.DeviceInfo):
        self.vk = vk
        self.instance = instance
        self.info = info
        phys = info.handle
        self.physical = phys
        families = vk.vkGetPhysicalDeviceQueueFamilyProperties(phys)
        fam = next(
            (i for i, f in enumerate(families) if f.queueFlags & vk.VK_QUEUE_COMPUTE_BIT), None
        )
        if fam is None:
            raise DeviceError(f"Vulkan device {info.name} has no compute queue")
        self.queue_family = fam
        # Push descriptors let a dispatch bind its buffers with one command instead of
        # allocating and writing a descriptor set (the largest per-dispatch cost on the host).
        exts = {e.extensionName for e in vk.vkEnumerateDeviceExtensionProperties(phys, None)}
        enabled = ["VK_KHR_push_descriptor"] if "VK_KHR_push_descriptor" in exts else []
        # The int8 dot product instructions (qgemm_dot.spv, kernels/qgemm.py): the extension and
        # its feature are enabled when the device has them (core in 1.3, but the instance asks
        # for 1.1, so through the extension).
        dot = _DOT_EXT in exts and self._integer_dot_feature(vk, phys)
        dot_features = None
        if dot:
            enabled.append(_DOT_EXT)
            dot_features = vk.VkPhysicalDeviceShaderIntegerDotProductFeatures(
                sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES,
                shaderIntegerDotProduct=vk.VK_TRUE,
            )
        self.integer_dot = dot
        # float64 shaders (binaryf64.spv, kernels/elementwise.py) need shaderFloat64 and
        # shaderInt64 (its int64 casts); enabled when the device has both, else float64 stays on
        # the host (and a model compiled for Vulkan refuses its float64 nodes by name).
        self.float64 = self._float64_features(vk, phys)
        features = None
        if self.float64:
            features = vk.VkPhysicalDeviceFeatures(shaderFloat64=vk.VK_TRUE, shaderInt64=vk.VK_TRUE)
        self.device = vk.vkCreateDevice(
            phys,
            vk.VkDeviceCreateInfo(
                sType=vk.VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                pNext=dot_features,
                enabledExtensionCount=len(enabled),
                ppEnabledExtensionNames=enabled or None,
                pEnabledFeatures=features,
                queueCreateInfoCount=1,
                pQueueCreateInfos=[
                    vk.VkDeviceQueueCreateInfo(
                        sType=vk.VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                        queueFamilyIndex=fam,
                        queueCount=1,
                        pQueuePriorities=[1.0],
                    )
                ],
            ),
            None,
        )
        self.queue = vk.vkGetDeviceQueue(self.device, fam, 0)
        self.push_descriptor = None  # a raw cffi function pointer when the extension is on
        if enabled and os.environ.get("GPUCORE_VULKAN_PUSH_DESCRIPTORS", "1") != "0":
            ptr = vk.lib.vkGetDeviceProcAddr(self.device, b"vkCmdPushDescriptorSetKHR")
            if ptr != vk.ffi.NULL:
                self.push_descriptor = vk.ffi.cast("PFN_vkCmdPushDescriptorSetKHR", ptr)
        self.command_pool = vk.vkCreateCommandPool(
            self.device,
            vk.VkCommandPoolCreateInfo(
                sType=vk.VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                queueFamilyIndex=fam,
            ),
            None,
        )
        self.limits = info.limits
        self.timestamp_period = info.limits["timestampPeriod"]
        # Subgroup properties, queried once: size, VK_SUBGROUP_FEATURE_* bits of the supported
        # operations, and whether compute shaders have them (0 / False when not reported).
        self.subgroup_size, self.subgroup_ops, sg_stages = self._subgroup_properties()
        self.subgroup_compute = bool(sg_stages & vk.VK_SHADER_STAGE_COMPUTE_BIT)
        self.is_cpu = info.type == "cpu"
        self.memory = Allocator(vk, phys, self.device, self.limits)
        self.pipelines = PipelineCache(
            vk,
            self.device,
            push_descriptors=self.push_descriptor is not None,
            key=pipeline_store.Key.of(vk, phys),
        )
        self.stream = Stream(self)
        self.memory.reclaim = self.stream.reclaim
        self.bytes_uploaded = 0
        self.bytes_downloaded = 0
        self.bytes_reused = 0  # device copies of host tensors read again instead of uploaded
        self.tensors_migrated = 0  # host tensors moved onto the device in place (residency.py)
        self.fault: Fault | None = None
        self.on_fault: list = []  # callables (ctx, fault), called once per new fault
        self.pid = os.getpid()
        self.pipelines.prewarm(cpu_device=self.is_cpu)

    def _subgroup_properties(self) -> tuple[int, int, int]:
        """(subgroupSize, supportedOperations, supportedStages) of VkPhysicalDeviceSubgroup-
        Properties; (1, 0, 0) where the loader cannot report them."""
        vk = self.vk
        try:
            sub = vk.VkPhysicalDeviceSubgroupProperties(
                sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES
            )
            props = vk.VkPhysicalDeviceProperties2(
                sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, pNext=sub
            )
            vk.vkGetPhysicalDeviceProperties2(self.physical, props)
            return (
                int(sub.subgroupSize) or 1,
                int(sub.supportedOperations),
                int(sub.supportedStages),
            )
        except Exception:  # pragma: no cover - old loaders
            return 1, 0, 0

    @staticmethod
    def _integer_dot_feature(vk, phys) -> bool:
        """VkPhysicalDeviceShaderIntegerDotProductFeatures.shaderIntegerDotProduct (False where
        the loader cannot report it)."""
        try:
            feat = vk.VkPhysicalDeviceShaderIntegerDotProductFeatures(
                sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES
            )
            f2 = vk.VkPhysicalDeviceFeatures2(
                sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, pNext=feat
            )
            vk.vkGetPhysicalDeviceFeatures2(phys, f2)
            return bool(feat.shaderIntegerDotProduct)
        except Exception:  # pragma: no cover - old loaders
            return False

    @staticmethod
    def _float64_features(vk, phys) -> bool:
        """shaderFloat64 and shaderInt64 of VkPhysicalDeviceFeatures (False where the loader
        cannot report them, or GPUCORE_VULKAN_FLOAT64=0 asks to run float64 on the host)."""
        if os.environ.get("GPUCORE_VULKAN_FLOAT64", "1") == "0":
            return False
        try:
            f = vk.vkGetPhysicalDeviceFeatures(phys)
            return bool(f.shaderFloat64) and bool(f.shaderInt64)
        except Exception:  # pragma: no cover - old loaders
            return False

    def has_subgroup_ops(self, ops: int) -> bool:
        """True when compute shaders on this device have every VK_SUBGROUP_FEATURE_* bit in
        ``ops``."""
        return self.subgroup_compute and (self.subgroup_ops & ops) == ops

    # ----------------------------------------------------------------------------- faults
    def check(self):
        """Raise (or, at exit, block) when the context refuses device work."""
        if self.fault is not None:
            self.fault.refuse()

    def fail(self, kind: str, message: str) -> Fault:
        """Refuse device work from now on. Takes no lock (a forked child may inherit held ones);
        the first fault stays, except that 'forked' replaces any other."""
        cur = self.fault
        if cur is not None and (cur.kind == kind or kind != "forked"):
            return cur
        fault = Fault(kind, message)
        self.fault = self.stream.fault = self.memory.fault = self.pipelines.fault = fault
        if kind == "lost":
            log.error("gpucore: %s", message)
        for fn in list(self.on_fault):
            try:
                fn(self, fault)
            except Exception:  # pragma: no cover - a listener must not hide the fault
                log.exception("gpucore: device fault listener failed")
        return fault

    def mark_forked(self):
        """Called in a child of fork(): the inherited device is unusable there."""
        if os.getpid() != self.pid:
            self.fail("forked", FORK_MESSAGE.format(parent=self.pid, child=os.getpid()))

    def close(self) -> bool:
        """Refuse further device work (interpreter exit) and wait, bounded, for what was
        submitted; True when the device may be destroyed: its work finished and no other thread
        is alive that could hold its memory."""
        if self.fault is not None and self.fault.kind == "forked":
            return False
        stream = self.stream
        wait_s = min(EXIT_WAIT_S, stream.timeout_ns / 1e9)
        t0 = time.monotonic()
        locked = stream.lock.acquire(timeout=wait_s)
        try:
            lost = self.fault is not None and self.fault.kind == "lost"
            self.fail("closed", CLOSED_MESSAGE)
            left = max(0.0, wait_s - (time.monotonic() - t0))
            finished = locked and not lost and stream.drain(int(left * 1e9))
        finally:
            if locked:
                stream.lock.release()
        return finished and threading.active_count() <= 1

    def destroy(self):
        """Free everything; only when no submitted work is left (else leave it to the OS)."""
        if any(f.in_flight for f in self.stream.frames):
            return
        vk = self.vk
        try:
            self.stream.destroy()
        finally:
            self.pipelines.destroy()
            self.memory.destroy()
            vk.vkDestroyCommandPool(self.device, self.command_pool, None)
            vk.vkDestroyDevice(self.device, None)


_lock = threading.Lock()
_ctx: Context | None = None
_tried_cpu: bool | None = None
_unusable = ""  # why this process may not use Vulkan (set in a forked child)


def unusable_reason() -> str:
    """Why no context may be used in this process ('' when one may)."""
    return _unusable


def get(allow_cpu: bool | None = None) -> Context | None:
    """The context, created on first call; None when no usable device (never raises for that).

    ``allow_cpu`` lets a CPU-type device (lavapipe) be used; by default only when the environment
    asks for it (GPUCORE_DEVICE=vulkan or GPUCORE_VULKAN_ALLOW_CPU=1).
    """
    global _ctx, _tried_cpu
    if allow_cpu is None:
        allow_cpu = _device.allow_cpu_device()
    if _unusable:
        return None  # a forked child of a process that used the device
    if _ctx is not None:
        if _ctx.is_cpu and not allow_cpu:
            return None
        return _ctx
    if _tried_cpu is not None and (_tried_cpu or not allow_cpu):
        return None  # already failed with at least this much permission
    with _lock:
        if _ctx is not None:
            return _ctx if (allow_cpu or not _ctx.is_cpu) else None
        vk, inst, infos = _device.probe()
        info = _device.choose(infos, allow_cpu) if vk is not None else None
        if info is None:
            _tried_cpu = allow_cpu
            if vk is not None and infos:
                log.debug("gpucore: only CPU-type Vulkan devices; not used unless asked")
            return None
        try:
            _ctx = Context(vk, inst, info)
        except DeviceError:
            raise
        except Exception as e:
            _tried_cpu = allow_cpu
            log.debug("gpucore: Vulkan device %s failed to initialise: %s", info.name, e)
            return None
        atexit.register(_shutdown)
        return _ctx


def _shutdown():
    """atexit: close the context; destroy it only when nothing can still use it (a leak at
    exit is harmless, a free under a running thread or command is a crash)."""
    ctx = _ctx
    if ctx is None:
        return
    ctx.pipelines.stop_prewarm()  # before save and close: close() waits for other threads
    if ctx.fault is None:
        try:
            ctx.pipelines.save()  # before close(): the cache is destroyed with the device
        except Exception:  # pragma: no cover - best effort at exit
            log.debug("gpucore: pipeline cache not saved", exc_info=True)
    try:
        if ctx.close():
            ctx.destroy()
    except Exception:  # pragma: no cover - best effort at exit
        log.debug("gpucore: Vulkan shutdown failed", exc_info=True)


def _after_fork_in_child():
    # No lock may be taken here or later in the child: a thread of the parent may have held it.
    global _lock, _unusable
    _lock = threading.Lock()
    if _ctx is not None:
        _ctx.mark_forked()
        _unusable = _ctx.fault.message


os.register_at_fork(after_in_child=_after_fork_in_child)
