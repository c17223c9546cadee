"""Vulkan instance and device selection.

Preference: discrete > integrated > virtual GPU. A CPU-type device (Mesa's lavapipe) is only used
when asked for (``GPUCORE_DEVICE=vulkan``, ``GPUCORE_VULKAN_ALLOW_CPU=1`` or the 'vulkan' policy),
because the C extension is 20-30x faster on the same cores. ``GPUCORE_VULKAN_DEVICE=N`` picks the
N-th device of ``devices()``.

Nothing here raises when Vulkan is missing: ``probe()`` returns the device list (possibly empty)
and the reason, and gpucore runs on the CPU.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field

from ...errors import DeviceError

log = logging.getLogger("gpucore.vulkan")

_TYPE_NAMES = {0: "other", 1: "integrated", 2: "discrete", 3: "virtual", 4: "cpu"}
_PREFERENCE = {2: 0, 1: 1, 3: 2, 0: 3, 4: 4}


@dataclass
class DeviceInfo:
    """What ``gpucore.vulkan.devices()`` reports about one physical device."""

    index: int
    name: str
    type: str
    driver: str
    api_version: str
    limits: dict = field(default_factory=dict)
    handle: object = None

    def as_dict(self) -> dict:
        return {
            "index": self.index,
            "name": self.name,
            "type": self.type,
            "driver": self.driver,
            "api_version": self.api_version,
            "limits": dict(self.limits),
        }


class _Probe:
    lock = threading.Lock()
    done = False
    vk = None
    instance = None
    devices: list = []
    reason = ""


def _after_fork_in_child():
    _Probe.lock = threading.Lock()  # a parent thread may have held it at fork()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _version_str(v: int) -> str:
    return f"{v >> 22}.{(v >> 12) & 0x3FF}.{v & 0xFFF}"


def probe():
    """(vulkan module, instance, [DeviceInfo]) or (None, None, []) with ``reason()`` set."""
    with _Probe.lock:
        if _Probe.done:
            return _Probe.vk, _Probe.instance, _Probe.devices
        _Probe.done = True
        try:
            import vulkan as vk
        except Exception as e:  # ImportError, or OSError when libvulkan.so is missing
            _Probe.reason = (
                f"the Vulkan loader is not usable ({type(e).__name__}: {e}); install the "
                "'vulkan' Python package and libvulkan1 (pip install gpucore[vulkan]; "
                "apt-get install libvulkan1 mesa-vulkan-drivers)"
            )
            log.debug("gpucore: Vulkan unavailable: %s", _Probe.reason)
            return None, None, []
        try:
            app = vk.VkApplicationInfo(
                sType=vk.VK_STRUCTURE_TYPE_APPLICATION_INFO,
                pApplicationName="gpucore",
                applicationVersion=1,
                pEngineName="gpucore",
                engineVersion=1,
                apiVersion=vk.VK_MAKE_VERSION(1, 1, 0),
            )
            inst = vk.vkCreateInstance(
                vk.VkInstanceCreateInfo(
                    sType=vk.VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, pApplicationInfo=app
                ),
                None,
            )
            handles = vk.vkEnumeratePhysicalDevices(inst)
        except Exception as e:
            _Probe.reason = (
                f"no Vulkan driver answered ({type(e).__name__}: {e}); on a machine without a "
                "GPU install Mesa's CPU driver: apt-get install mesa-vulkan-drivers"
            )
            log.debug("gpucore: Vulkan unavailable: %s", _Probe.reason)
            return None, None, []
        infos = []
        for i, h in enumerate(handles):
            p = vk.vkGetPhysicalDeviceProperties(h)
            lim = p.limits
            limits = {
                "maxStorageBufferRange": int(lim.maxStorageBufferRange),
                "maxPushConstantsSize": int(lim.maxPushConstantsSize),
                "maxComputeSharedMemorySize": int(lim.maxComputeSharedMemorySize),
                "maxComputeWorkGroupInvocations": int(lim.maxComputeWorkGroupInvocations),
                "maxComputeWorkGroupCount": [int(x) for x in lim.maxComputeWorkGroupCount],
                "minStorageBufferOffsetAlignment": int(lim.minStorageBufferOffsetAlignment),
                "timestampPeriod": float(lim.timestampPeriod),
                "maxMemoryAllocationCount": int(lim.maxMemoryAllocationCount),
                "maxPerStageDescriptorStorageBuffers": int(lim.maxPerStageDescriptorStorageBuffers),
            }
            infos.append(
                DeviceInfo(
                    index=i,
                    name=str(p.deviceName),
                    type=_TYPE_NAMES.get(int(p.deviceType), "other"),
                    driver=_version_str(int(p.driverVersion)),
                    api_version=_version_str(int(p.apiVersion)),
                    limits=limits,
                    handle=h,
                )
            )
        if not infos:
            _Probe.reason = (
                "the Vulkan loader found no device; on a machine without a GPU install Mesa's "
                "CPU driver: apt-get install mesa-vulkan-drivers"
            )
        _Probe.vk, _Probe.instance, _Probe.devices = vk, inst, infos
        return vk, inst, infos


def reason() -> str:
    """Why Vulkan is unavailable (empty when it is)."""
    probe()
    return _Probe.reason


def allow_cpu_device() -> bool:
    return os.environ.get("GPUCORE_VULKAN_ALLOW_CPU", "") not in ("", "0") or (
        os.environ.get("GPUCORE_DEVICE", "").lower() == "vulkan"
    )


def choose(infos: list, allow_cpu: bool) -> DeviceInfo | None:
    """The device to use: GPUCORE_VULKAN_DEVICE, else the most preferred usable type."""
    forced = os.environ.get("GPUCORE_VULKAN_DEVICE")
    if forced not in (None, ""):
        try:
            idx = int(forced)
        except ValueError:
            idx = -1
        if not 0 <= idx < len(infos):
            raise DeviceError(
                f"GPUCORE_VULKAN_DEVICE={forced!r} does not name a device; there are "
                f"{len(infos)}: " + ", ".join(f"{d.index}: {d.name} ({d.type})" for d in infos)
            )
        return infos[idx]
    usable = [d for d in infos if d.type != "cpu" or allow_cpu]
    if not usable:
        return None
    return min(
        usable,
        key=lambda d: (_PREFERENCE[[k for k, v in _TYPE_NAMES.items() if v == d.type][0]], d.index),
    )
