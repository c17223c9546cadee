"""float64 matrix products (shaders/gemm64.comp, native doubles): the ``matmul`` kernel's and the
runtime executor's float64 ``gemm``, on devices with shaderFloat64 (context.py's
``Context.float64``; elsewhere float64 products stay on the host). One invocation per output
element sums its K products in order, in double precision: exact where the CPU's is (integer
values below 2**53, what ONNX's MatMulInteger / QLinearMatMul compositions multiply), else
within a few ulps of the CPU's BLAS order.
"""

from __future__ import annotations

import numpy as np

from ....errors import ShapeError
from .common import _dispatch, contiguous, flat_local_size, groups_1d
from .elementwise import _F64, _OP, _run_strided

_BATCH_DIMS = 4  # gemm64.comp's batch shape / stride arrays


def _fit_batch(x: np.ndarray, strides, batch: tuple) -> list:
    """x's batch strides (elements: ``strides``, its operand's) broadcast to ``batch`` (0 on
    broadcast dims)."""
    pad = len(batch) - (x.ndim - 2)
    return [0] * pad + [s if n != 1 else 0 for n, s in zip(x.shape[:-2], strides[:-2])]


def supported(a_shape: tuple, b_shape: tuple) -> bool:
    """Operands gemm64 takes: at least 2-D, batch dims (broadcast) at most four."""
    if len(a_shape) < 2 or len(b_shape) < 2:
        return False
    return max(len(a_shape), len(b_shape)) - 2 <= _BATCH_DIMS


def gemm64(be, out: np.ndarray, a: np.ndarray, b: np.ndarray, alpha: float = 1.0, bias=None):
    """out[..., M, N] = alpha * (a @ b) (+ bias) for float64 device arrays; a and b's batch dims
    broadcast to out's; out C-contiguous."""
    m, k = a.shape[-2:]
    k2, n = b.shape[-2:]
    if k != k2 or out.shape[-2:] != (m, n) or len(out.shape) - 2 > _BATCH_DIMS:
        raise ShapeError(f"gemm64: shapes a {a.shape}, b {b.shape}, out {out.shape} do not match")
    if out.size == 0:
        return
    if k == 0:  # an empty sum: the shader writes zeros and reads nothing (out stands in)
        a = b = out
    a = contiguous(be, a) if any(s < 0 for s in a.strides) else a
    b = contiguous(be, b) if any(s < 0 for s in b.strides) else b
    batch = out.shape[:-2]
    oa, ob, oc = be.operand(a), be.operand(b), be.operand(out)
    sa, sb = _fit_batch(a, oa.strides, batch), _fit_batch(b, ob.strides, batch)
    keep = [i for i, size in enumerate(batch) if size != 1]
    pad = [0] * (_BATCH_DIMS - len(keep))
    shape = [batch[i] for i in keep] + [1] * len(pad)
    sa = [sa[i] for i in keep] + pad
    sb = [sb[i] for i in keep] + pad
    a_rs, a_cs = oa.strides[-2:]
    b_rs, b_cs = ob.strides[-2:]
    head = [m, n, k, len(keep), oa.offset, ob.offset, 2 * oc.offset, a_rs, a_cs, b_rs, b_cs]
    push = np.array(head + [0, 0] + shape + sa + sb, np.int64).astype(np.uint32)
    push[11:13] = np.array([alpha], np.float64).view(np.uint32)
    _dispatch(
        be,
        "gemm64",
        (),
        [(a, oa, False), (b, ob, False), (out, oc, True)],
        push,
        groups_1d(out.size, flat_local_size(be)),
    )
    if bias is not None:
        _run_strided(be, out, _OP["add"], _F64, out, np.broadcast_to(bias, out.shape))
