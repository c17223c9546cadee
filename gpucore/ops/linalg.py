"""Matrix products: matmul (with PyTorch's 1-D and batch-broadcasting rules), mm, bmm, addmm,
baddbmm, addbmm, outer, trace (einsum is in einsum.py).

Integer matmul (uint8, int8, int16, int32, int64) wraps as PyTorch's CPU kernel: the exact sums
truncated to the dtype (cpu/igemm.c). The Vulkan GEMM shaders take floats only: integer products
of device tensors run in that C kernel on the host (the same bits) and give a host tensor.

kernels: backends/cpu/kernels/linalg.py (cpu/gemm.c), backends/vulkan/kernels/gemm.py
(shaders/gemm.comp)."""

from __future__ import annotations

import math

import numpy as np

from .. import _cpu, dispatch
from .. import dtypes as D
from ..autograd.grad_mode import _state as _grad_state
from ..errors import DTypeError, ShapeError
from ..tensor import HOST_READ_HOOK, Tensor
from .api import not_tensor, public, tensor_member
from .common import as_operands, broadcast_shapes
from .reduce import SUM
from .registry import AUTOCAST, CAPTURE, apply, capturing, defop, record
from .samples import Sample, uniform, via


def _matmul_infer(a, b):
    return (tuple(a.shape[:-1]) + (b.shape[-1],), a.dtype)


def _mm(a: Tensor, b: Tensor) -> Tensor:
    """apply(MATMUL, a, b) through the fast lane (cpu/python/fastpath.c) when it takes the
    operands: matmul and the backward formulas of matmul and linear."""
    if (CAPTURE[0] is None or not capturing()) and AUTOCAST[0] is None:
        out = _cpu.fast_matmul(a, b)
        if out is not None:
            if _grad_state.enabled:
                record(MATMUL, (a, b), (out,), {})
            return out
    return apply(MATMUL, a, b)


def _matmul_bwd(ctx, g):
    a, b = ctx.saved
    need_a, need_b = ctx.needs_input_grad
    ga = _mm(g, b.mT) if need_a else None
    gb = _mm(a.mT, g) if need_b else None
    return ga, gb


def _np_matmul(a, b):
    return np.einsum("...ik,...kj->...ij", a, b)


def _matmul_samples():
    """Plain and batched matrices, transposed operands (the kernels' transposed packing), batch
    broadcasting and 1-D operands through the public wrapper (zero-stride batch views), a
    degenerate k = 1, and a product above the GPU threshold."""
    return [
        Sample(uniform(3, 4, seed=1), uniform(4, 5, seed=2), ref=_np_matmul),
        Sample(uniform(2, 3, 4, seed=3), uniform(2, 4, 2, seed=4), ref=_np_matmul),
        Sample(
            uniform(4, 3, seed=5),
            uniform(5, 4, seed=6),
            ref=lambda a, b: _np_matmul(a.T, b.T),
            call=via(lambda a, b: apply(MATMUL, a.mT, b.mT)),
        ),
        Sample(
            uniform(2, 1, 3, 4, seed=7), uniform(3, 4, 2, seed=8), ref=_np_matmul, call=via(matmul)
        ),
        Sample(
            uniform(4, seed=9),
            uniform(2, 4, 3, seed=10),
            call=via(matmul),
            ref=lambda a, b: _np_matmul(a[None], b)[:, 0],
        ),
        Sample(uniform(3, 1, seed=11), uniform(1, 4, seed=12), ref=_np_matmul),
        Sample(
            uniform(64, 80, seed=13),
            uniform(80, 72, seed=14),
            ref=_np_matmul,
            grad=False,
            atol=1e-4,
        ),
    ]


# Operands reach the kernel with equal batch dims (the wrapper broadcasts them as views).
MATMUL = defop(
    "matmul", infer=_matmul_infer, save_inputs=(0, 1), backward=_matmul_bwd, samples=_matmul_samples
)


_fast_matmul = _cpu.fast_matmul


@public("matmul", "__matmul__")
def matmul(input: Tensor, other: Tensor) -> Tensor:
    """Matrix product with torch.matmul's rules: 1-D operands are promoted and the added dim
    removed; batch dims broadcast."""
    if (CAPTURE[0] is None or not capturing()) and AUTOCAST[0] is None:
        # the fast lane: host matrices (or equal batches of them) of one float dtype, row-major
        # or transposed views, in one C call (cpu/python/fastpath.c), or None
        out = _fast_matmul(input, other)
        if out is not None:
            if _grad_state.enabled:
                record(MATMUL, (input, other), (out,), {})
            return out
    if type(input) is Tensor and type(other) is Tensor:
        # the common case (two matrices of one float dtype) without the general checks
        a, b = input._data.shape, other._data.shape
        if (
            len(a) == 2
            and len(b) == 2
            and a[1] == b[0]
            and input._dtype is other._dtype
            and input._dtype.is_floating_point
        ):
            return apply(MATMUL, input, other)
    for i, v in enumerate((input, other)):
        if not isinstance(v, Tensor):
            raise not_tensor("matmul", ("input", "other")[i], i + 1, v)
    a, b = as_operands("matmul", input, other)
    if a.dtype is D.bool_:
        raise DTypeError(
            "matmul(): not implemented for bool tensors (as in PyTorch); convert them first, "
            "e.g. a.to(gpucore.int64) @ b.to(gpucore.int64)"
        )
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(
            f"matmul(): both arguments need at least 1 dim, got shapes {tuple(a.shape)} and "
            f"{tuple(b.shape)}"
        )
    squeeze_a = a.ndim == 1
    squeeze_b = b.ndim == 1
    if squeeze_a:
        a = a.unsqueeze(0)
    if squeeze_b:
        b = b.unsqueeze(1)
    if a.shape[-1] != b.shape[-2]:
        raise ShapeError(
            f"matmul(): shapes {tuple(input.shape)} and {tuple(other.shape)} cannot be "
            f"multiplied ({a.shape[-1]} != {b.shape[-2]}); the last dim of the first must "
            "equal the second-to-last of the second"
        )
    if b.ndim == 2 and a.ndim > 2:
        # a batch times one matrix (a Linear's weight): one GEMM over the batch's rows, as
        # torch.matmul folds it, instead of copying b once per batch entry
        # the row count spelled out: -1 is ambiguous when the inner dim is 0 (a (3, 3, 0) @ (0, 4)
        # is zeros (3, 3, 4), as in torch)
        rows = a.reshape(math.prod(a.shape[:-1]), a.shape[-1])
        out = apply(MATMUL, rows, b).reshape(*a.shape[:-1], b.shape[-1])
        return out.squeeze(-1) if squeeze_b else out
    batch = broadcast_shapes("matmul", tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    if tuple(a.shape[:-2]) != batch:
        a = a.expand(batch + tuple(a.shape[-2:]))
    if tuple(b.shape[:-2]) != batch:
        b = b.expand(batch + tuple(b.shape[-2:]))
    out = apply(MATMUL, a, b)
    if squeeze_a:
        out = out.squeeze(-2)
    if squeeze_b:
        out = out.squeeze(-1)
    return out


tensor_member("__rmatmul__", lambda self, other: matmul(other, self))


@public("mm")
def mm(input: Tensor, mat2: Tensor) -> Tensor:
    """2-D matrix product."""
    if input.ndim != 2 or mat2.ndim != 2:
        raise ShapeError(
            f"mm(): expects 2-D tensors, got shapes {tuple(input.shape)} and {tuple(mat2.shape)}"
        )
    return matmul(input, mat2)


@public("bmm")
def bmm(input: Tensor, mat2: Tensor) -> Tensor:
    """Batched 3-D matrix product without broadcasting."""
    if input.ndim != 3 or mat2.ndim != 3 or input.shape[0] != mat2.shape[0]:
        raise ShapeError(
            f"bmm(): expects 3-D tensors with equal batch, got {tuple(input.shape)} and "
            f"{tuple(mat2.shape)}"
        )
    return matmul(input, mat2)


@public("addmm")
def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """beta * input + alpha * (mat1 @ mat2)."""
    prod = mm(mat1, mat2)
    if alpha != 1:
        prod = prod * alpha
    return prod + (input if beta == 1 else input * beta)


def _scaled_sum(input, prod: Tensor, beta, alpha) -> Tensor:
    """``beta * input + alpha * prod``; beta == 0 ignores input (NaN in it does not spread),
    as PyTorch's addmm family."""
    if alpha != 1:
        prod = prod * alpha
    if beta == 0:
        return prod
    return prod + (input if beta == 1 else input * beta)


@public("baddbmm", inplace=True, saves_self=False)
def baddbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """``beta * input + alpha * bmm(batch1, batch2)`` (input broadcast to the result), as
    torch.baddbmm."""
    prod = bmm(batch1, batch2)
    if broadcast_shapes("baddbmm", tuple(input.shape), tuple(prod.shape)) != tuple(prod.shape):
        raise ShapeError(
            f"baddbmm(): input of shape {tuple(input.shape)} does not broadcast to the product's "
            f"shape {tuple(prod.shape)}"
        )
    return _scaled_sum(input, prod, beta, alpha)


@public("addbmm", inplace=True, saves_self=False)
def addbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """``beta * input + alpha * sum_b(batch1[b] @ batch2[b])``, as torch.addbmm."""
    prod = bmm(batch1, batch2).sum(0)
    if broadcast_shapes("addbmm", tuple(input.shape), tuple(prod.shape)) != tuple(prod.shape):
        raise ShapeError(
            f"addbmm(): input of shape {tuple(input.shape)} does not broadcast to the product's "
            f"shape {tuple(prod.shape)}"
        )
    return _scaled_sum(input, prod, beta, alpha)


@public("outer", "ger")
def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """The outer product of two 1-D tensors, ``input[i] * vec2[j]``, as torch.outer."""
    if input.ndim != 1 or vec2.ndim != 1:
        raise ShapeError(
            f"outer(): expects 1-D tensors, got shapes {tuple(input.shape)} and {tuple(vec2.shape)}"
        )
    return input.unsqueeze(1) * vec2.unsqueeze(0)


@public("trace")
def trace(input: Tensor) -> Tensor:
    """The sum of the main diagonal of a 2-D tensor, as torch.trace."""
    if input.ndim != 2:
        raise ShapeError(f"trace(): expects a 2-D tensor, got shape {tuple(input.shape)}")
    return input.diagonal().sum()


# ----------------------------------------------------------------------------- linear
def _linear_infer(x, w, b=None):
    return ((x.shape[0], w.shape[0]), x.dtype)


def _mm_tn(a: Tensor, b: Tensor) -> Tensor:
    """a.mT @ b; where no graph is recorded (a plain backward), through the fast lane with the
    transpose folded into the GEMM's flags instead of a view made first."""
    if (
        (CAPTURE[0] is None or capturing() is None)
        and AUTOCAST[0] is None
        and not _grad_state.enabled
    ):
        out = _cpu.fast_matmul(a, b, True)
        if out is not None:
            return out
    return _mm(a.mT, b)


def _bias_grad(g: Tensor) -> Tensor:
    """g's rows summed (linear's bias gradient): the SUM op over dim 0; where no graph is recorded
    and g is a contiguous float host matrix on the CPU's fast lane (dispatch.cpu_fast: not under a
    Vulkan policy, trace_ops or the profiler), its reduce kernel called here (the op's own call, so
    its bits) without the registry's dispatch (~5 of ~11 us for a 64 x 512 g, one thread)."""
    a = g._data
    if (
        (CAPTURE[0] is None or capturing() is None)
        and AUTOCAST[0] is None
        and not _grad_state.enabled
        and HOST_READ_HOOK[0] is None
        and g._dev is None
        and (g._dtype is D.float32 or g._dtype is D.float64)
        and type(a) is np.ndarray
        and a.ndim == 2
        and a.flags.c_contiguous
        and dispatch.cpu_fast(a.size)  # the other fast lanes' gate: policy, trace_ops, profiler
    ):
        out = np.ndarray((a.shape[1],), a.dtype, _cpu.host_empty(a.shape[1] * a.itemsize))
        _cpu.reduce(_cpu.REDUCE_SUM, a.reshape(-1), out, 1, a.shape[0], a.shape[1])
        return Tensor._from_kernel(out, g._dtype)
    return apply(SUM, g, dims=(0,), keepdim=False, shape=g.shape)


def _linear_bwd(ctx, g):
    x, w = ctx.saved
    need = ctx.needs_input_grad
    gx = _mm(g, w) if need[0] else None
    # g.T @ x is (out, in) and contiguous, as the weight: the leaf takes it without a copy.
    gw = _mm_tn(g, x) if need[1] else None
    if len(need) == 2:
        return gx, gw
    # the bias gradient: the rows of g summed (the sum op itself, without the public wrapper)
    return gx, gw, (_bias_grad(g) if need[2] else None)


# x [B, in] @ w[out, in].T (+ b[out]) as one GEMM with the bias added while the tile is in
# registers; inputs (x, w) or (x, w, b).
def _np_linear(x, w, b=None):
    y = np.einsum("bi,oi->bo", x, w)
    return y if b is None else y + b


LINEAR = defop(
    "linear",
    infer=_linear_infer,
    save_inputs=(0, 1),
    backward=_linear_bwd,
    save_for={0: (1,), 1: (0,)},
    samples=lambda: [
        Sample(uniform(3, 4, seed=1), uniform(5, 4, seed=2), uniform(5, seed=3), ref=_np_linear),
        Sample(uniform(2, 3, seed=4), uniform(4, 3, seed=5), ref=_np_linear),
        Sample(
            uniform(4, 3, seed=6),
            uniform(4, 2, seed=7),
            uniform(2, seed=8),
            ref=lambda x, w, b: _np_linear(x.T, w.T, b),
            call=via(lambda x, w, b: apply(LINEAR, x.mT, w.mT, b)),
        ),
        Sample(
            uniform(64, 48, seed=9),
            uniform(70, 48, seed=10),
            uniform(70, seed=11),
            ref=_np_linear,
            grad=False,
            atol=1e-4,
        ),
    ],
)
