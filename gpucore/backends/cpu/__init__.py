"""The CPU backend: host storage as 64-byte-aligned numpy arrays, kernels from gpucore._cpu.

float32 and float64 math runs in the C extension; integer and bool ops use numpy; float16 and
bfloat16 compute in float32 and are rounded back, as on PyTorch's CPU for most ops. A kernel with
a ``bf16`` attribute (matmul, linear and conv2d's forward, where the CPU has AVX-512 BF16) is
called with the bfloat16 storage itself (uint16 arrays, the output too) when every input is
bfloat16.
"""

from __future__ import annotations

import numpy as np

from ... import dtypes as D
from ..._cpu import host_empty as _host_empty
from ...errors import DeviceError
from .kernels import KERNELS

_LOW = (D.float16, D.bfloat16)
ALIGN = 64
_ndarray = np.ndarray


def empty_array(shape: tuple, npdtype) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts on a 64-byte boundary.

    The memory comes from the C extension's caching allocator (cpu/host_cache.c): a freed
    tensor's block is reused warm by the next tensor of about its size, instead of faulting in
    fresh pages at ~2 us per 4 KiB.
    """
    if not isinstance(npdtype, np.dtype):
        npdtype = np.dtype(npdtype)
    n = npdtype.itemsize
    for s in shape:
        n *= s
    # one numpy call, and the array's base is the block itself (autograd's ownership test)
    return _ndarray(shape, npdtype, _host_empty(n))


def to_compute(arr: np.ndarray, dtype) -> np.ndarray:
    """Array in the dtype kernels compute in (float32 for the low-precision floats)."""
    if dtype is D.bfloat16:
        return D.bf16_to_f32(arr).reshape(arr.shape)
    if dtype is D.float16:
        return arr.astype(np.float32)
    return arr


def from_compute(arr: np.ndarray, dtype) -> np.ndarray:
    """Round a float32 result back to a low-precision dtype's storage (64-byte aligned)."""
    if dtype is D.bfloat16:
        out = empty_array(arr.shape, np.uint16)
        out[...] = D.f32_to_bf16(arr).reshape(arr.shape)
        return out
    if dtype is D.float16:
        out = empty_array(arr.shape, np.float16)
        with np.errstate(over="ignore"):  # overflow gives inf, as IEEE and PyTorch
            np.copyto(out, arr, casting="unsafe")
        return out
    return arr


class CPUBackend:
    """Runs ops with the kernels of ``kernels.KERNELS`` on host arrays (the ``Backend``
    interface of backends/base.py)."""

    name = "cpu"
    owner = None  # results live in host memory

    def __init__(self):
        self.kernels = KERNELS

    def supports(self, op, inputs, specs) -> bool:
        return op.name in self.kernels

    def run_inplace(self, op, arrays: list, attrs: dict) -> None:
        """Run in-place op ``op`` (an optimizer update) on host arrays it writes into."""
        self.kernels[op.name](None, *arrays, **attrs)

    def upload(self, arr: np.ndarray, dtype) -> np.ndarray:
        out = empty_array(arr.shape, arr.dtype)
        np.copyto(out, arr)
        return out

    def host_view(self, arr: np.ndarray) -> np.ndarray:
        return arr

    def run(self, op, specs, inputs, attrs):
        fn = self.kernels.get(op.name)
        if fn is None:
            raise DeviceError(f"{op.name}: no CPU kernel is registered for this op")
        if type(specs) is tuple and specs[1] not in _LOW:
            # The common case: one output, host inputs, no low-precision conversion.
            ins = []
            for t in inputs:
                if t._dev is not None or t._dtype in _LOW:
                    break
                ins.append(t._data)
            else:
                shape, dt = specs
                out = empty_array(shape, dt.np)
                fn(out, *ins, **attrs)
                return (out,)
        if type(specs) is tuple and specs[1] is D.bfloat16:
            native = getattr(fn, "bf16", None)
            if native is not None:
                # a kernel that takes bfloat16 storage as it is (the bf16 GEMM): no widening
                ins = []
                for t in inputs:
                    if t._dtype is not D.bfloat16:
                        break
                    ins.append(t._data if t._dev is None else t._host())
                else:
                    out = empty_array(specs[0], np.uint16)
                    native(out, *ins, **attrs)
                    return (out,)
        multi = isinstance(specs, list)
        if not multi:
            specs = [specs]
        ins = [
            (t._data if t._dev is None else t._host())
            if t._dtype not in _LOW
            else to_compute(t._host(), t._dtype)
            for t in inputs
        ]
        outs = []
        low = False
        for shape, dt in specs:
            if dt in _LOW:
                low = True
                outs.append(empty_array(shape, np.float32))
            else:
                outs.append(empty_array(shape, dt.np))
        fn(outs if multi else outs[0], *ins, **attrs)
        if low:
            outs = [from_compute(o, dt) for o, (_, dt) in zip(outs, specs)]
        return tuple(outs)


BACKEND = CPUBackend()
