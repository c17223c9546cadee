"""Compute pipelines: SPIR-V from the package, created on first use and cached.

A pipeline is keyed by (shader name, specialization constants). Every shader declares its storage
buffers at set 0, bindings 0..n-1, and one push-constant block of at most 128 bytes; the
workgroup size is specialization constant 0 (``local_size_x_id = 0``). A VkPipelineCache makes
re-creating a variant cheap; it starts from the file pipeline_store.py keeps on disk for this
device and driver, and ``save`` (called at exit) writes it back when the driver's data changed.

``prewarm`` (called at device start) creates, on a background thread, the pipelines recent
processes used (pipeline_store's key list), so a program's first ops find them made instead of
compiling one after the other on the calling thread. Pipelines are created outside the lock (a
VkPipelineCache is internally synchronized), so the background thread never makes the caller wait
for a pipeline other than the one it needs. On a CPU-type device (lavapipe) the compile competes
with the kernels for the same cores, so there it is off unless GPUCORE_VULKAN_PREWARM=1;
GPUCORE_VULKAN_PREWARM=0 turns it off everywhere.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import threading
import time
from pathlib import Path

import numpy as np

from ...errors import DeviceError
from . import pipeline_store

log = logging.getLogger("gpucore.vulkan")

PREWARM_ENV = "GPUCORE_VULKAN_PREWARM"
SPIRV_DIR = Path(__file__).resolve().parent / "spirv"
PUSH_BYTES = 128


@functools.cache
def shader_digest(name: str) -> str:
    """The version of shader ``name``: the digest of its source that tools/build_shaders.py
    stores beside the SPIR-V ('' when missing, which no saved key matches)."""
    try:
        return (SPIRV_DIR / f"{name}.spv.sha256").read_text().split()[0][:16]
    except (OSError, IndexError):
        return ""


class Pipeline:
    __slots__ = ("name", "handle", "layout", "set_layout", "nbindings", "local_size")

    def __init__(self, name, handle, layout, set_layout, nbindings, local_size):
        self.name = name
        self.handle = handle
        self.layout = layout
        self.set_layout = set_layout
        self.nbindings = nbindings
        self.local_size = local_size


class PipelineCache:
    """Creates and caches pipelines; counts creations and the time they took."""

    def __init__(self, vk, device, push_descriptors: bool = False, key=None):
        self.vk = vk
        self.device = device
        self.key = key  # pipeline_store.Key of the device and driver; None: no disk cache
        self.push_descriptors = push_descriptors
        self.lock = threading.Lock()
        self.pipelines: dict = {}  # the pipelines this process asked for, in first-use order
        self.warm: dict = {}  # made by the background thread, not asked for yet
        self.pending: dict = {}  # key -> threading.Event, while one thread creates it
        self.prewarmed = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.modules: dict = {}
        self.set_layouts: dict = {}
        self.layouts: dict = {}
        self.created = 0
        self.create_seconds = 0.0
        self.fault = None  # the context's Fault once device work is refused (see context.py)
        self.loaded_bytes = 0  # driver data read from the disk cache at start
        self.saved = None  # SHA-256 of the driver data the disk file holds, when known
        initial = pipeline_store.read(key) if key is not None else None
        self.cache = self._create_cache(initial)
        if self.cache is None:  # the driver refused the file's data: start empty
            self.cache = self._create_cache(None)
        elif initial:
            self.loaded_bytes = len(initial)
            self.saved = hashlib.sha256(initial).digest()

    def _create_cache(self, data: bytes | None):
        vk = self.vk
        kw = {}
        if data:
            buf = vk.ffi.new("char[]", data)  # alive during the call
            kw = {"initialDataSize": len(data), "pInitialData": buf}
        info = vk.VkPipelineCacheCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO, **kw
        )
        try:
            return vk.vkCreatePipelineCache(self.device, info, None)
        except Exception:
            if not data:
                raise
            return None

    def _data(self, cache) -> bytes | None:
        """The driver's serialized cache (vkGetPipelineCacheData, which the ``vulkan`` package
        does not wrap: cffi out-pointers), or None when the driver fails."""
        vk = self.vk
        ffi, lib = vk.ffi, vk.lib
        n = ffi.new("size_t*")
        for _ in range(4):  # the cache may grow between the size query and the copy
            if lib.vkGetPipelineCacheData(self.device, cache, n, ffi.NULL) != 0:
                return None
            buf = ffi.new("char[]", n[0])
            res = lib.vkGetPipelineCacheData(self.device, cache, n, buf)
            if res == 0:
                return ffi.buffer(buf, n[0])[:]
            if res != vk.VK_INCOMPLETE:
                return None
        return None

    def save(self) -> bool:
        """Write the driver's cache to the disk file when it differs from what the file holds;
        pipelines another process saved meanwhile are merged in first. True when written. The
        list of the pipelines this process used goes beside it (for ``prewarm``). Not while the
        background creation still runs (``stop_prewarm`` first)."""
        if self.key is None or self.fault is not None:
            return False
        if self._thread is not None and self._thread.is_alive():
            return False
        try:
            return self._save_cache()
        finally:
            try:
                self._save_keys()
            except Exception:  # best effort: the list only saves time at the next start
                log.debug("gpucore: pipeline key list not saved", exc_info=True)

    def _save_cache(self) -> bool:
        with self.lock:
            data = self._data(self.cache)
            if data is None:
                return False
            digest = hashlib.sha256(data).digest()
            if digest == self.saved:
                return False
            other = pipeline_store.read(self.key)
            if other and hashlib.sha256(other).digest() not in (self.saved, digest):
                merged = self._merge(data, other)
                if merged is not None:
                    data, digest = merged, hashlib.sha256(merged).digest()
            if not pipeline_store.write(self.key, data):
                return False
            self.saved = digest
            return True

    def _save_keys(self) -> None:
        """This process's pipelines in first-use order, then those the file held before that this
        process did not use, when that differs from the file."""
        with self.lock:
            used = [(k, shader_digest(k[0])) for k in self.pipelines]
        if not used:
            return
        before = pipeline_store.read_keys(self.key)
        keys = list(dict(used + [e for e in before if e[0] not in dict(used)]).items())
        keys = keys[: pipeline_store.KEYS_MAX]
        if keys != before:
            pipeline_store.write_keys(self.key, keys)

    def _merge(self, ours: bytes, other: bytes) -> bytes | None:
        """``ours`` with the pipelines of ``other`` (another process's file) merged in, through
        scratch caches: the live cache is never a merge destination (vkMergePipelineCaches needs
        its destination to itself, and other threads may be creating pipelines in it)."""
        vk = self.vk
        dst = self._create_cache(ours)
        if dst is None:
            return None
        src = self._create_cache(other)
        try:
            if src is None:
                return None
            srcs = vk.ffi.new("VkPipelineCache[1]", [src])
            if vk.lib.vkMergePipelineCaches(self.device, dst, 1, srcs) != 0:
                return None
            return self._data(dst)
        finally:
            if src is not None:
                vk.vkDestroyPipelineCache(self.device, src, None)
            vk.vkDestroyPipelineCache(self.device, dst, None)

    def _module(self, name: str):
        mod = self.modules.get(name)
        if mod is None:
            path = SPIRV_DIR / f"{name}.spv"
            try:
                code = path.read_bytes()
            except FileNotFoundError:
                raise DeviceError(
                    f"shader {name!r}: {path} is missing from the installed package; rebuild the "
                    "shaders (python tools/build_shaders.py) and reinstall gpucore, or run on the "
                    "CPU (gpucore.device_policy('cpu'))"
                ) from None
            vk = self.vk
            mod = vk.vkCreateShaderModule(
                self.device,
                vk.VkShaderModuleCreateInfo(
                    sType=vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                    codeSize=len(code),
                    pCode=code,
                ),
                None,
            )
            self.modules[name] = mod
        return mod

    def _layouts(self, nbindings: int):
        vk = self.vk
        if nbindings not in self.set_layouts:
            bindings = [
                vk.VkDescriptorSetLayoutBinding(
                    binding=i,
                    descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                    descriptorCount=1,
                    stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT,
                )
                for i in range(nbindings)
            ]
            sl = vk.vkCreateDescriptorSetLayout(
                self.device,
                vk.VkDescriptorSetLayoutCreateInfo(
                    sType=vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                    flags=vk.VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR
                    if self.push_descriptors
                    else 0,
                    bindingCount=nbindings,
                    pBindings=bindings,
                ),
                None,
            )
            pl = vk.vkCreatePipelineLayout(
                self.device,
                vk.VkPipelineLayoutCreateInfo(
                    sType=vk.VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                    setLayoutCount=1,
                    pSetLayouts=[sl],
                    pushConstantRangeCount=1,
                    pPushConstantRanges=[
                        vk.VkPushConstantRange(
                            stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT, offset=0, size=PUSH_BYTES
                        )
                    ],
                ),
                None,
            )
            self.set_layouts[nbindings] = sl
            self.layouts[nbindings] = pl
        return self.set_layouts[nbindings], self.layouts[nbindings]

    def get(self, name: str, nbindings: int, spec: tuple = (), local_size: int = 64) -> Pipeline:
        """The pipeline of shader ``name`` with specialization constants 0 = local_size, 1.. = spec
        (ints; pass floats as their bit patterns)."""
        key = (name, nbindings, local_size, spec)
        p = self.pipelines.get(key)
        if p is not None:
            return p
        while True:
            if self.fault is not None:  # before the lock: a forked child may inherit it held
                self.fault.refuse()
            with self.lock:
                p = self.pipelines.get(key)
                if p is None and key in self.warm:
                    p = self.pipelines[key] = self.warm.pop(key)
                if p is not None:
                    return p
                ev = self.pending.get(key)
                if ev is None:
                    ev = self.pending[key] = threading.Event()
                    break
            ev.wait()  # another thread is creating this one; then look again
        t0 = time.perf_counter()
        p = None
        try:
            p = self._create(key)
        finally:
            with self.lock:
                del self.pending[key]
                if p is not None:
                    self.pipelines[key] = p
                    self.created += 1
                    self.create_seconds += time.perf_counter() - t0
            ev.set()
        return p

    def _create(self, key) -> Pipeline:
        name, nbindings, local_size, spec = key
        vk = self.vk
        ffi = vk.ffi
        with self.lock:
            set_layout, layout = self._layouts(nbindings)
            module = self._module(name)
        values = np.array((local_size,) + tuple(spec), dtype=np.int32)
        entries = [
            vk.VkSpecializationMapEntry(constantID=i, offset=4 * i, size=4)
            for i in range(len(values))
        ]
        data = ffi.new("char[]", values.tobytes())  # must outlive pipeline creation
        spec_info = vk.VkSpecializationInfo(
            mapEntryCount=len(entries),
            pMapEntries=entries,
            dataSize=values.nbytes,
            pData=data,
        )
        stage = vk.VkPipelineShaderStageCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
            stage=vk.VK_SHADER_STAGE_COMPUTE_BIT,
            module=module,
            pName="main",
            pSpecializationInfo=spec_info,
        )
        info = vk.VkComputePipelineCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO, stage=stage, layout=layout
        )
        handle = vk.vkCreateComputePipelines(self.device, self.cache, 1, [info], None)[0]
        del data
        return Pipeline(name, handle, layout, set_layout, nbindings, local_size)

    def prewarm(self, cpu_device: bool) -> bool:
        """Start creating the pipelines recent processes used on a background thread (see the
        module docstring for when); True when a thread started."""
        want = os.environ.get(PREWARM_ENV, "").strip()
        if want == "0" or (cpu_device and want != "1") or self.key is None:
            return False
        keys = [
            k for k, digest in pipeline_store.read_keys(self.key) if digest == shader_digest(k[0])
        ]
        if not keys:
            return False
        self._thread = threading.Thread(
            target=self._prewarm_all, args=(keys,), name="gpucore-vulkan-prewarm", daemon=True
        )
        self._thread.start()
        return True

    def _prewarm_all(self, keys: list) -> None:
        for key in keys:
            if self._stop.is_set() or self.fault is not None:
                return
            with self.lock:
                if key in self.pipelines or key in self.warm or key in self.pending:
                    continue
                ev = self.pending[key] = threading.Event()
            p = None
            try:
                p = self._create(key)
            except Exception as e:  # a stale key (another gpucore version): the caller retries
                log.debug("gpucore: pipeline %s not created in the background: %s", key, e)
            finally:
                with self.lock:
                    del self.pending[key]
                    if p is not None:
                        self.warm[key] = p
                        self.prewarmed += 1
                ev.set()

    def stop_prewarm(self, timeout: float = 30.0) -> None:
        """Stop the background creation after the pipeline it is making (before save/destroy)."""
        self._stop.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout)
            if not t.is_alive():
                self._thread = None

    def destroy(self):
        self.stop_prewarm()
        if self._thread is not None:  # still creating one after the wait: leak, never free under it
            return
        vk, dev = self.vk, self.device
        for p in (*self.pipelines.values(), *self.warm.values()):
            vk.vkDestroyPipeline(dev, p.handle, None)
        for pl in self.layouts.values():
            vk.vkDestroyPipelineLayout(dev, pl, None)
        for sl in self.set_layouts.values():
            vk.vkDestroyDescriptorSetLayout(dev, sl, None)
        for m in self.modules.values():
            vk.vkDestroyShaderModule(dev, m, None)
        vk.vkDestroyPipelineCache(dev, self.cache, None)
        self.pipelines.clear()
        self.warm.clear()
