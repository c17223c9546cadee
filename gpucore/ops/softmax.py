"""softmax, log_softmax (fused ops, with their backward ops) and logsumexp (a composition).

Small contiguous float host tensors take the fast lane (cpu/python/fastpath_nn.c): the general
path's kernel in one C call, the same bits.

kernels: backends/cpu/kernels/nn.py (cpu/softmax.c), backends/vulkan/kernels/nn.py
(shaders/softmax.comp)."""

from __future__ import annotations

import numpy as np

from .. import _cpu
from ..autograd.grad_mode import _state as _grad_state
from ..errors import DTypeError
from ..tensor import Tensor
from .api import public
from .common import float_input, host_contiguous, norm_dims, reduced_shape, wrap_dim
from .registry import CAPTURE, apply, capturing, defop, record
from .samples import Sample, uniform

_fast_softmax = _cpu.fast_softmax
_fast_softmax_bwd = _cpu.fast_softmax_backward


def _check_float(op, x):
    if not x.dtype.is_floating_point:
        raise DTypeError(f"{op}(): expects a floating point tensor, got {x.dtype}")


def _softmax_bwd_bwd(ctx, gg):
    # out = y * (g - s), s = sum(g * y): differentiate with respect to g and y.
    g, y = ctx.saved
    dim = ctx.attrs["dim"]
    dg = apply(SOFTMAX_BACKWARD, gg, y, dim=dim)
    s = (g * y).sum(dim, keepdim=True)
    dy = gg * (g - s) - g * (gg * y).sum(dim, keepdim=True)
    return dg, dy


def _log_softmax_bwd_bwd(ctx, gg):
    # out = g - exp(y) * sum(g)
    g, y = ctx.saved
    dim = ctx.attrs["dim"]
    e = y.exp()
    dg = gg - (gg * e).sum(dim, keepdim=True)
    dy = -gg * e * g.sum(dim, keepdim=True)
    return dg, dy


# ----------------------------------------------------------------------------- samples
def _np_sum(a, dim):
    return a.sum(axis=dim, keepdims=True) if a.ndim else a


def _np_log_softmax(x, dim):
    if x.ndim == 0:
        return np.zeros_like(x)
    m = x.max(axis=dim, keepdims=True)
    return x - m - np.log(_np_sum(np.exp(x - m), dim))


def _np_softmax(x, dim):
    return np.exp(_np_log_softmax(x, dim))


# (shape, dim, gradient-checked): rows and columns ([outer, n, inner] with inner > 1), 0-d, and
# large ones: columns and one long row split into chunks (two passes), long rows in one pass.
_SOFTMAX_SHAPES = [
    ((3, 5), 1, True),
    ((2, 3, 4), 1, True),
    ((4, 3), 0, True),
    ((), 0, True),
    ((70, 65), 0, False),
    ((4100,), 0, False),
    ((64, 130), 1, False),
]


def _softmax_samples(ref):
    return lambda: (
        [
            Sample(uniform(*shape, seed=i), dim=dim, ref=ref, grad=grad)
            for i, (shape, dim, grad) in enumerate(_SOFTMAX_SHAPES)
        ]
        + [Sample(uniform(3, 5, low=-90, high=90, seed=9), dim=1, ref=ref)]
    )  # exp would overflow


def _softmax_bwd_samples(fwd, ref):
    """(grad, y) with y the forward's output on random x (any y would do: the op is a polynomial
    in y, and its backward treats y as an input)."""
    return lambda: [
        Sample(
            uniform(*shape, seed=i),
            fwd(uniform(*shape, seed=i + 20), dim),
            dim=dim,
            ref=ref,
            grad=grad,
        )
        for i, (shape, dim, grad) in enumerate(_SOFTMAX_SHAPES)
    ]


def _softmax_bwd(op, ctx, g, log):
    # the fast lane (the general path's kernel in one C call) unless create_graph
    if not _grad_state.enabled and (CAPTURE[0] is None or not capturing()):
        out = _fast_softmax_bwd(host_contiguous(g), ctx.saved[0], ctx.attrs["dim"], log)
        if out is not None:
            return out
    return apply(op, g, ctx.saved[0], **ctx.attrs)


SOFTMAX_BACKWARD = defop(
    "softmax_backward",
    infer=lambda g, y, dim: (g.shape, g.dtype),
    save_inputs=(0, 1),
    backward=_softmax_bwd_bwd,
    samples=_softmax_bwd_samples(_np_softmax, lambda g, y, dim: y * (g - _np_sum(g * y, dim))),
)
LOG_SOFTMAX_BACKWARD = defop(
    "log_softmax_backward",
    infer=lambda g, y, dim: (g.shape, g.dtype),
    save_inputs=(0, 1),
    backward=_log_softmax_bwd_bwd,
    samples=_softmax_bwd_samples(
        _np_log_softmax, lambda g, y, dim: g - np.exp(y) * _np_sum(g, dim)
    ),
)
SOFTMAX = defop(
    "softmax",
    infer=lambda x, dim: (x.shape, x.dtype),
    save_outputs=(0,),
    backward=lambda ctx, g: _softmax_bwd(SOFTMAX_BACKWARD, ctx, g, 0),
    samples=_softmax_samples(_np_softmax),
)
LOG_SOFTMAX = defop(
    "log_softmax",
    infer=lambda x, dim: (x.shape, x.dtype),
    save_outputs=(0,),
    backward=lambda ctx, g: _softmax_bwd(LOG_SOFTMAX_BACKWARD, ctx, g, 1),
    samples=_softmax_samples(_np_log_softmax),
)


@public("softmax")
def softmax(input: Tensor, dim: int, dtype=None) -> Tensor:
    """exp(x) / sum(exp(x)) along dim, computed stably."""
    if dtype is None and CAPTURE[0] is None and type(dim) is int:
        # _softmax_any's fast lane inline (every attention runs this: one Python call less)
        out = _fast_softmax(input, dim, 0)
        if out is not None:
            if _grad_state.enabled and input._requires_grad:
                record(SOFTMAX, (input,), (out,), {"dim": dim % input.ndim})
            return out
    return _softmax_any(SOFTMAX, "softmax", input, dim, dtype, 0)


def _softmax_any(op, name, input, dim, dtype, log):
    if dtype is None and (CAPTURE[0] is None or not capturing()) and type(dim) is int:
        # the fast lane: a contiguous float host tensor in one C call (cpu/python/fastpath_nn.c)
        out = _fast_softmax(input, dim, log)
        if out is not None:
            if _grad_state.enabled and input._requires_grad:
                record(op, (input,), (out,), {"dim": dim % input.ndim})
            return out
    if dtype is not None:
        input = input.to(dtype)
    _check_float(name, input)
    return apply(op, input, dim=wrap_dim(dim, input.ndim, name))


@public("log_softmax")
def log_softmax(input: Tensor, dim: int, dtype=None) -> Tensor:
    """x - logsumexp(x) along dim, computed stably."""
    return _softmax_any(LOG_SOFTMAX, "log_softmax", input, dim, dtype, 1)


@public("logsumexp")
def logsumexp(input: Tensor, dim, keepdim: bool = False) -> Tensor:
    """log(sum(exp(x))) over dim (an int or a tuple; () is every dim), computed stably (shifted
    by the detached maximum); -inf over an empty dim. Integer and bool inputs give the default
    floating dtype, as PyTorch (computed in float: an int8 input must not overflow)."""
    x = float_input(input)
    dims = norm_dims(dim, x.ndim, "logsumexp")
    if x.numel():
        m = x.detach().amax(dims, keepdim=True)
        m = m.masked_fill(m.abs() == float("inf"), 0.0)
        out = (x - m).exp().sum(dims, keepdim=True).log() + m
    else:  # an empty sum: log(0) = -inf, no shift (amax has no identity)
        out = x.exp().sum(dims, keepdim=True).log()
    return out if keepdim else out.reshape(reduced_shape(tuple(x.shape), dims, False))
