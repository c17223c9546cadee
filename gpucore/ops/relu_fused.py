"""ReLU fused into the layer before it: ``linear_relu``, ``conv2d_relu`` and
``conv2d_relu_max_pool2d``, each one graph node with the bits of the unfused ops, and the last
one's backward ``max_pool2d_relu_backward``.

nn.Sequential runs them where a Linear or Conv2d is followed by a ReLU (and, for the last one, a
MaxPool2d) and no module hook or trace could see the tensors in between
(gpucore/nn/modules/relu_fusion.py); they have no public form.

- Forward: the ReLU runs in the GEMM's / convolution's epilogue while the tile is in registers
  (cpu/gemm_epi.h, conv2d_forward's act: ``(v <= 0) ? +0 : v``, NaN kept, relu's own rule), so
  the activation is never written before the ReLU and never read again for it.
- Backward: the incoming gradient masked by ``out > 0`` (relu_backward's ``s > 0 ? g : +0``; the
  saved output is positive exactly where relu's saved input is), then the layer's own backward
  (linear's, conv2d's). For the pooled form the mask runs on the pooled gradient inside
  max_pool2d_backward's pass (``max_pool2d_relu_backward``, cpu/maxpool.c): every window that
  picked an element saw that element's value, so all its contributions share one mask, and a
  masked element gets a sum of +0 (relu_backward's +0), whatever the incoming gradient held.

Their backward is written in registry ops (relu_backward, max_pool2d_backward and the layer's
rule), so create_graph and double backward work as for the unfused modules.
"""

from __future__ import annotations

from .. import _cpu
from ..autograd.grad_mode import _state as _grad_state
from ..errors import ShapeError
from ..tensor import HOST_READ_HOOK
from .linalg import _linear_bwd, _linear_infer, _np_linear
from .nn import _conv2d_bwd, _conv2d_infer, _np_conv2d
from .pool import (
    MAX_POOL2D_BACKWARD,
    _max_pool2d_backward_infer,
    _max_pool2d_infer,
    _np_max_pool2d,
    _np_max_pool2d_backward,
)
from .registry import AUTOCAST, CAPTURE, apply, capturing, defop
from .samples import Sample, uniform
from .unary import RELU_BACKWARD

_fast_relu_backward_bias = _cpu.fast_relu_backward_bias
_fast_matmul = _cpu.fast_matmul


class _LayerCtx:
    """What the layer's backward rule (linear's, conv2d's) reads of its ctx: the saved (x, w),
    which inputs need a gradient and the attributes."""

    __slots__ = ("saved", "needs_input_grad", "attrs")

    def __init__(self, saved, needs_input_grad, attrs):
        self.saved = saved
        self.needs_input_grad = needs_input_grad
        self.attrs = attrs


def _np_relu(y):
    return y * (y > 0)


# ----------------------------------------------------------------------------- linear_relu
# relu(x @ w.T + b): inputs (x, w) or (x, w, b), x [B, in] (nn.Sequential flattens nothing: it
# fuses 2-D inputs only).
def _linear_relu_bwd(ctx, g):
    x, w, out = ctx.saved
    need = ctx.needs_input_grad
    if (
        len(need) == 3
        and need[2]
        and not _grad_state.enabled
        and (CAPTURE[0] is None or capturing() is None)
        and AUTOCAST[0] is None
        and HOST_READ_HOOK[0] is None
    ):
        # the mask and the bias gradient in one pass (linalg._bias_grad's conditions; the fast
        # lane declines device tensors, a closed lane: profiler, trace_ops, a device policy)
        both = _fast_relu_backward_bias(g, out)
        if both is not None:
            gm, gb = both
            # linear's backward as _linear_bwd runs it here (its _mm and _mm_tn take these
            # fast-lane calls with no graph recorded), without its three frames
            gx = _fast_matmul(gm, w) if need[0] else None
            gw = _fast_matmul(gm, x, True) if need[1] else None
            if (gx is None and need[0]) or (gw is None and need[1]):
                gx, gw = _linear_bwd(_LayerCtx((x, w), need[:2], {}), gm)
            return gx, gw, gb
    return _linear_bwd(_LayerCtx((x, w), need, {}), apply(RELU_BACKWARD, g, out))


LINEAR_RELU = defop(
    "linear_relu",
    infer=_linear_infer,
    save_inputs=(0, 1),
    save_outputs=(0,),
    backward=_linear_relu_bwd,
    save_for={0: (1,), 1: (0,)},
    samples=lambda: [
        Sample(
            uniform(3, 4, seed=1),
            uniform(5, 4, seed=2),
            uniform(5, seed=3),
            ref=lambda x, w, b: _np_relu(_np_linear(x, w, b)),
        ),
        Sample(
            uniform(2, 3, seed=4),
            uniform(4, 3, seed=5),
            ref=lambda x, w: _np_relu(_np_linear(x, w)),
        ),
    ],
)


# ----------------------------------------------------------------------------- conv2d_relu
# relu(conv2d(x, w, b)) with groups = 1 and zero padding: conv2d's inputs and attrs (stride,
# padding, dilation as pairs).
def _conv2d_relu_bwd(ctx, g):
    x, w, out = ctx.saved
    layer = _LayerCtx((x, w), ctx.needs_input_grad, ctx.attrs)
    return _conv2d_bwd(layer, apply(RELU_BACKWARD, g, out))


def _conv_relu_samples():
    geoms = [
        ((2, 3, 6, 5), (3, 3), (1, 1), (1, 1), (1, 1)),
        ((1, 2, 7, 7), (2, 3), (2, 1), (0, 1), (1, 2)),
    ]
    out = []
    for i, (shape, k, s, p, d) in enumerate(geoms):
        x, w = uniform(*shape, seed=40 + i), uniform(4, shape[1], *k, seed=50 + i)
        bias = (uniform(4, seed=60 + i),) if i == 0 else ()
        out.append(
            Sample(
                x,
                w,
                *bias,
                ref=lambda *a, **g: _np_relu(_np_conv2d(*a, **g)),
                atol=1e-4,
                stride=s,
                padding=p,
                dilation=d,
            )
        )
    return out


CONV2D_RELU = defop(
    "conv2d_relu",
    infer=_conv2d_infer,
    save_inputs=(0, 1),
    save_outputs=(0,),
    backward=_conv2d_relu_bwd,
    samples=_conv_relu_samples,
)


# ----------------------------------------------------------------------------- + max_pool2d
# max_pool2d(relu(conv2d(x, w, b))): conv2d's inputs and attrs (stride, padding, dilation) and
# max_pool2d's as pool_kernel, pool_stride, pool_padding, pool_dilation, ceil_mode. Outputs: the
# pooled values and their int64 indices into the conv output's planes (max_pool2d's); the conv
# output itself lives only inside the kernel.
def _conv_attrs(a: dict) -> dict:
    return {"stride": a["stride"], "padding": a["padding"], "dilation": a["dilation"]}


def _pool_attrs(a: dict) -> dict:
    return {
        "kernel": a["pool_kernel"],
        "stride": a["pool_stride"],
        "padding": a["pool_padding"],
        "dilation": a["pool_dilation"],
    }


class _Spec:
    """The shape and dtype of the conv output, as the pool's infer reads its input."""

    __slots__ = ("shape", "dtype", "ndim")

    def __init__(self, shape, dtype):
        self.shape, self.dtype, self.ndim = shape, dtype, len(shape)


def conv_out_spec(x, w, b, attrs: dict):
    """The (shape, dtype) of the convolution inside conv2d_relu_max_pool2d."""
    return _conv2d_infer(x, w, b, **_conv_attrs(attrs))


def _crp_infer(x, w, b=None, **a):
    shape, dt = conv_out_spec(x, w, b, a)
    return _max_pool2d_infer(
        _Spec(shape, dt), ceil_mode=a["ceil_mode"], src=shape, **_pool_attrs(a)
    )


def _crp_bwd(ctx, g):
    x, w, vals, idx = ctx.saved
    a = ctx.attrs
    shape, _ = conv_out_spec(x, w, None, a)
    if _grad_state.enabled:  # create_graph: differentiable ops
        gm = apply(RELU_BACKWARD, g, vals)
        gy = apply(MAX_POOL2D_BACKWARD, gm, idx, input_shape=shape, **_pool_attrs(a))
    else:  # the mask inside max_pool2d_backward's pass (cpu/maxpool.c)
        gy = apply(MAX_POOL2D_RELU_BACKWARD, g, idx, vals, input_shape=shape, **_pool_attrs(a))
    return _conv2d_bwd(_LayerCtx((x, w), ctx.needs_input_grad, _conv_attrs(a)), gy)


def _np_crp(x, w, b=None, **a):
    y = _np_relu(_np_conv2d(x, w, b, **_conv_attrs(a)))
    return _np_max_pool2d(y, ceil_mode=a["ceil_mode"], **_pool_attrs(a))


def _crp_samples():
    geoms = [
        # (input, conv kernel, stride, padding; pool kernel, stride, padding, ceil_mode)
        ((2, 2, 8, 7), (3, 3), (1, 1), (1, 1), (2, 2), (2, 2), (0, 0), False),
        ((1, 3, 9, 9), (3, 2), (1, 1), (0, 1), (3, 3), (1, 1), (1, 1), False),  # overlapping
        ((1, 1, 7, 6), (2, 2), (1, 1), (0, 0), (2, 2), (2, 2), (0, 0), True),
    ]
    out = []
    for i, (shape, k, s, p, pk, ps, pp, ceil) in enumerate(geoms):
        x, w = uniform(*shape, seed=70 + i), uniform(3, shape[1], *k, seed=80 + i)
        bias = (uniform(3, seed=90 + i),) if i != 1 else ()
        out.append(
            Sample(
                x,
                w,
                *bias,
                ref=_np_crp,
                atol=1e-4,
                stride=s,
                padding=p,
                dilation=(1, 1),
                pool_kernel=pk,
                pool_stride=ps,
                pool_padding=pp,
                pool_dilation=(1, 1),
                ceil_mode=ceil,
            )
        )
    return out


CONV2D_RELU_MAX_POOL2D = defop(
    "conv2d_relu_max_pool2d",
    infer=_crp_infer,
    save_inputs=(0, 1),
    save_outputs=(0, 1),
    backward=_crp_bwd,
    samples=_crp_samples,
)


# ----------------------------------------------------------------------------- its backward
# max_pool2d_backward(relu_backward(g, vals), indices): the gradient scattered where the pooled
# value is > 0 (+0 elsewhere) in max_pool2d_backward's one pass; inputs (g, indices, vals),
# max_pool2d_backward's attrs. No backward of its own: conv2d_relu_max_pool2d's backward composes
# relu_backward and max_pool2d_backward when a graph of the gradients is wanted.
def _mprb_infer(g, indices, vals, **a):
    if tuple(vals.shape) != tuple(g.shape) or vals.dtype is not g.dtype:
        raise ShapeError(
            f"max_pool2d_relu_backward: vals {tuple(vals.shape)} {vals.dtype} must match g "
            f"{tuple(g.shape)} {g.dtype}"
        )
    return _max_pool2d_backward_infer(g, indices, **a)


def _np_mprb(g, indices, vals, **a):
    return _np_max_pool2d_backward(g * (vals > 0), indices, **a)


def _mprb_samples():
    out = []
    for i, (shape, k, s, p, ceil) in enumerate(
        [
            ((2, 2, 8, 8), (2, 2), (2, 2), (0, 0), False),
            ((1, 2, 7, 6), (3, 3), (1, 1), (1, 1), True),
        ]
    ):
        geom = {"kernel": k, "stride": s, "padding": p, "dilation": (1, 1)}
        vals, idx = _np_max_pool2d(uniform(*shape, seed=100 + i), ceil_mode=ceil, **geom)
        g = uniform(*vals.shape, seed=110 + i)
        out.append(Sample(g, idx, vals, input_shape=shape, ref=_np_mprb, grad=False, **geom))
    return out


MAX_POOL2D_RELU_BACKWARD = defop(
    "max_pool2d_relu_backward", infer=_mprb_infer, samples=_mprb_samples
)
