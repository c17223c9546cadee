"""The Vulkan context: logical device, compute queue, memory, pipelines and the stream.

Created lazily on first use by ``get()``; ``None`` when no usable device exists (then gpucore runs
on the CPU). Properties read once here (subgroup size, limits, memory model) let kernels choose
their variants.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading

from ...errors import DeviceError
from . import device as _device
from .memory import Allocator
from .pipelines import PipelineCache
from .stream import Stream

log = logging.getLogger("gpucore.vulkan")


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
        self.device = vk.vkCreateDevice(
            phys,
            vk.VkDeviceCreateInfo(
                sType=vk.VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                enabledExtensionCount=len(enabled),
                ppEnabledExtensionNames=enabled or None,
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
            vk, self.device, push_descriptors=self.push_descriptor is not None
        )
        self.stream = Stream(self)
        self.bytes_uploaded = 0
        self.bytes_downloaded = 0

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

    def has_subgroup_ops(self, ops: int) -> bool:
        """True when compute shaders on this device have every VK_SUBGROUP_FEATURE_* bit in
        ``ops``."""
        return self.subgroup_compute and (self.subgroup_ops & ops) == ops

    def destroy(self):
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


def get(allow_cpu: bool | None = None) -> Context | None:
    """The context, created on first call; None when no usable device (never raises for that).

    ``allow_cpu`` lets a CPU-type device (lavapipe) be used; by default only when the environment
    asks for it (GPUCORE_DEVICE=vulkan or GPUCORE_VULKAN_ALLOW_CPU=1).
    """
    global _ctx, _tried_cpu
    if allow_cpu is None:
        allow_cpu = _device.allow_cpu_device()
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
    global _ctx
    if _ctx is not None:
        try:
            _ctx.destroy()
        except Exception:  # pragma: no cover - best effort at exit
            pass
        _ctx = None
