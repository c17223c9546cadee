"""Compute pipelines: SPIR-V from the package, created on first use and cached.

A pipeline is keyed by (shader name, specialization constants). Every shader declares its storage
buffers at set 0, bindings 0..n-1, and one push-constant block of at most 128 bytes; the
workgroup size is specialization constant 0 (``local_size_x_id = 0``). A VkPipelineCache makes
re-creating a variant cheap.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np

from ...errors import DeviceError

SPIRV_DIR = Path(__file__).resolve().parent / "spirv"
PUSH_BYTES = 128


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

    def __init__(self, vk, device, push_descriptors: bool = False):
        self.vk = vk
        self.device = device
        self.push_descriptors = push_descriptors
        self.lock = threading.Lock()
        self.pipelines: dict = {}
        self.modules: dict = {}
        self.set_layouts: dict = {}
        self.layouts: dict = {}
        self.created = 0
        self.create_seconds = 0.0
        self.fault = None  # the context's Fault once device work is refused (see context.py)
        self.cache = vk.vkCreatePipelineCache(
            device,
            vk.VkPipelineCacheCreateInfo(sType=vk.VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO),
            None,
        )

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
        if self.fault is not None:  # before the lock: a forked child may inherit it held
            self.fault.refuse()
        with self.lock:
            p = self.pipelines.get(key)
            if p is not None:
                return p
            t0 = time.perf_counter()
            vk = self.vk
            ffi = vk.ffi
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
            set_layout, layout = self._layouts(nbindings)
            stage = vk.VkPipelineShaderStageCreateInfo(
                sType=vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                stage=vk.VK_SHADER_STAGE_COMPUTE_BIT,
                module=self._module(name),
                pName="main",
                pSpecializationInfo=spec_info,
            )
            handle = vk.vkCreateComputePipelines(
                self.device,
                self.cache,
                1,
                [
                    vk.VkComputePipelineCreateInfo(
                        sType=vk.VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
                        stage=stage,
                        layout=layout,
                    )
                ],
                None,
            )[0]
            del data
            p = Pipeline(name, handle, layout, set_layout, nbindings, local_size)
            self.pipelines[key] = p
            self.created += 1
            self.create_seconds += time.perf_counter() - t0
            return p

    def destroy(self):
        vk, dev = self.vk, self.device
        for p in self.pipelines.values():
            vk.vkDestroyPipeline(dev, p.handle, None)
        for pl in self.layouts.values():
            vk.vkDestroyPipelineLayout(dev, pl, None)
        for sl in self.set_layouts.values():
            vk.vkDestroyDescriptorSetLayout(dev, sl, None)
        for m in self.modules.values():
            vk.vkDestroyShaderModule(dev, m, None)
        vk.vkDestroyPipelineCache(dev, self.cache, None)
        self.pipelines.clear()
