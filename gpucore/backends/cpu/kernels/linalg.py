"""Matrix-product kernels (gpucore/ops/linalg.py): matmul (batched, broadcast operands) and
linear (x @ w.T + b in one GEMM call), on the extension's BLIS-style GEMM; integer matmul on
its integer GEMM (cpu/igemm.c)."""

from __future__ import annotations

import math

import numpy as np

from .... import _cpu
from .... import dtypes as D
from .common import kernel


def _gemm_operand(arr: np.ndarray):
    """(contiguous buffer, transposed?, batch stride) describing a batch of matrices."""
    r, c = arr.shape[-2:]
    batch = math.prod(arr.shape[:-2])
    if batch > 1 and all(s == 0 for s in arr.strides[:-2]):
        buf, trans, _ = _gemm_operand(arr[(0,) * (arr.ndim - 2)])
        return buf, trans, 0
    v = arr.reshape(batch, r, c)
    if v.flags.c_contiguous:
        return v, 0, r * c
    vt = v.transpose(0, 2, 1)
    if vt.flags.c_contiguous:
        return vt, 1, r * c
    return np.ascontiguousarray(v), 0, r * c


def _int_operand(arr: np.ndarray):
    """(C-contiguous batch of matrices, batch stride) for igemm; a batch broadcast along every
    batch dim (zero strides) is one matrix with stride 0."""
    r, c = arr.shape[-2:]
    batch = math.prod(arr.shape[:-2])
    if batch > 1 and all(s == 0 for s in arr.strides[:-2]):
        return np.ascontiguousarray(arr[(0,) * (arr.ndim - 2)]), 0
    return np.ascontiguousarray(arr.reshape(batch, r, c)), r * c


def _int_matmul(out, a, b):
    """Integer products in cpu/igemm.c (PyTorch's wrap-around)."""
    m, k = a.shape[-2:]
    n = b.shape[-1]
    batch = math.prod(out.shape[:-2])
    abuf, sa = _int_operand(a)
    bbuf, sb = _int_operand(b)
    _cpu.igemm(abuf.reshape(-1), bbuf.reshape(-1), out.reshape(-1), batch, m, n, k, sa, sb, m * n)


@kernel("matmul")
def _matmul(out, a, b):
    if a.dtype.kind in "iu":
        _int_matmul(out, a, b)
        return
    if a.ndim == 2 and a.flags.c_contiguous and b.flags.c_contiguous:
        # plain matrices: the buffers go to C as they are (it checks their sizes)
        m, k = a.shape
        n = b.shape[1]
        _cpu.gemm(a, b, out, 1, m, n, k, 0, 0, 1.0, 0.0, 0, 0, 0)
        return
    m, k = a.shape[-2:]
    n = b.shape[-1]
    batch = math.prod(out.shape[:-2])
    abuf, ta, sa = _gemm_operand(a)
    bbuf, tb, sb = _gemm_operand(b)
    _cpu.gemm(
        abuf.reshape(-1),
        bbuf.reshape(-1),
        out.reshape(-1),
        batch,
        m,
        n,
        k,
        ta,
        tb,
        1.0,
        0.0,
        sa,
        sb,
        m * n,
    )


def linear_into(out, x, w, b=None, act: int = -1):
    """out = act(x @ w^T + b) in one gemm_ex call (act: a UNARY_* epilogue, -1 none)."""
    m, k = x.shape
    n = w.shape[0]
    xbuf, tx, _ = _gemm_operand(x)
    wbuf, tw, _ = _gemm_operand(w)
    if b is not None and not b.flags.c_contiguous:
        b = np.ascontiguousarray(b)
    # w is [out, in]: the product uses it transposed, which folds into the packing.
    _cpu.gemm_ex(
        xbuf.reshape(-1),
        wbuf.reshape(-1),
        out.reshape(-1),
        1,
        m,
        n,
        k,
        tx,
        1 - tw,
        1.0,
        0.0,
        0,
        0,
        m * n,
        b,
        act,
    )


@kernel("linear")
def _linear(out, x, w, b=None):
    linear_into(out, x, w, b)


# ----------------------------------------------------------------------------- bfloat16
# Where the CPU has AVX-512 BF16 (``_cpu.gemm_bf16_kernel()`` names the micro-kernel), bfloat16
# matmul and linear run cpu/gemm_bf16.c on the bf16 storage itself (uint16 arrays: the backend
# calls a kernel's ``bf16`` form when every input is bfloat16): float32 sums by vdpbf16ps, one
# rounding to bf16 at the end. Elsewhere (and under GPUCORE_CPU_ISA=avx2 ...) the kernels above
# run on the inputs widened to float32.
def _matmul_bf16(out, a, b):
    m, k = a.shape[-2:]
    n = b.shape[-1]
    batch = math.prod(out.shape[:-2])
    abuf, ta, sa = _gemm_operand(a)
    bbuf, tb, sb = _gemm_operand(b)
    _cpu.gemm_bf16(
        abuf.reshape(-1),
        bbuf.reshape(-1),
        out.reshape(-1),
        batch,
        m,
        n,
        k,
        ta,
        tb,
        sa,
        sb,
        m * n,
        None,
        0,
    )


def _linear_bf16(out, x, w, b=None):
    m, k = x.shape
    n = w.shape[0]
    xbuf, tx, _ = _gemm_operand(x)
    wbuf, tw, _ = _gemm_operand(w)
    # the bias joins the float32 sums before the one rounding (as the widened path's gemm_ex)
    bias = None if b is None else D.bf16_to_f32(b)
    _cpu.gemm_bf16(
        xbuf.reshape(-1),
        wbuf.reshape(-1),
        out.reshape(-1),
        1,
        m,
        n,
        k,
        tx,
        1 - tw,
        0,
        0,
        m * n,
        bias,
        0,
    )


if _cpu.gemm_bf16_kernel() is not None:
    _matmul.bf16 = _matmul_bf16
    _linear.bf16 = _linear_bf16
