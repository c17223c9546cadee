"""More functional nn ops with PyTorch's names and semantics: activations (silu, mish, elu...),
normalize and the distances, pad, group/instance norm, interpolate, dropout2d and the embedding,
ranking and margin losses.

Like the rest of gpucore.nn.functional, each one is a composition of existing tensor ops, so it
runs on whichever backend the dispatch policy picks and autograd differentiates it with no
backward of its own. Re-exported by gpucore.nn.functional (``F.silu`` and so on).
"""

from __future__ import annotations

import functools
import math
import operator
import warnings

import numpy as np

from ..autograd.grad_mode import no_grad
from ..errors import ShapeError
from ..ops import elementwise as E
from ..ops.common import broadcast_shapes
from ..ops.inplace import inplace as _inplace
from ..tensor import Tensor
from .functional import (
    _check_per_channel,
    _check_reduction,
    _check_tensor,
    _const,
    _reduce,
    adaptive_avg_pool2d,
    softmax,
)

__all__ = [
    "celu",
    "cosine_embedding_loss",
    "cosine_similarity",
    "dropout2d",
    "elu",
    "glu",
    "group_norm",
    "hardsigmoid",
    "hardswish",
    "hardtanh",
    "hinge_embedding_loss",
    "instance_norm",
    "interpolate",
    "kl_div",
    "logsigmoid",
    "margin_ranking_loss",
    "mish",
    "multilabel_soft_margin_loss",
    "normalize",
    "pad",
    "pairwise_distance",
    "poisson_nll_loss",
    "prelu",
    "relu6",
    "selu",
    "silu",
    "soft_margin_loss",
    "softmin",
    "softplus",
    "softsign",
    "tanhshrink",
    "triplet_margin_loss",
]

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _activation(op: str, input, compute, inplace: bool) -> Tensor:
    _check_tensor(op, input)
    if inplace:
        return _inplace(input, compute, saves_self=True, op=op + "_")
    return compute(input)


def _broadcast(op: str, *ts: Tensor) -> tuple:
    shape = broadcast_shapes(op, *[t.shape for t in ts])
    return tuple(t if tuple(t.shape) == shape else t.expand(shape) for t in ts)


# ============================================================================= activations
def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """x * sigmoid(x) (also called swish)."""
    return _activation("silu", input, lambda x: x * x.sigmoid(), inplace)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """x * tanh(softplus(x))."""
    return _activation("mish", input, lambda x: x * E.softplus(x).tanh(), inplace)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold (as PyTorch)."""
    _check_tensor("softplus", input)
    if beta == 0:
        raise ValueError("softplus(): beta must be non-zero")
    bx = input if beta == 1 else input * beta
    sp = E.softplus(bx)
    if beta != 1:
        sp = sp / beta
    return E.where(bx > threshold, input, sp)


def _elu(x: Tensor, alpha: float, inv_alpha: float = 1.0) -> Tensor:
    # exp only sees x <= 0: the unused branch of where must stay finite, or its zero gradient
    # times an infinite exp would be NaN.
    neg = x.clamp(max=0.0)
    if inv_alpha != 1.0:
        neg = neg * inv_alpha
    return E.where(x > 0, x, (neg.exp() - 1) * alpha)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """x where x > 0, else alpha * (exp(x) - 1)."""
    return _activation("elu", input, lambda x: _elu(x, alpha), inplace)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """scale * elu(x, alpha) with the self-normalizing constants alpha ~ 1.6733, scale ~ 1.0507."""
    return _activation("selu", input, lambda x: _elu(x, _SELU_ALPHA) * _SELU_SCALE, inplace)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    if alpha == 0:
        raise ValueError("celu(): alpha cannot be 0")
    return _activation("celu", input, lambda x: _elu(x, alpha, 1.0 / alpha), inplace)


def _hardtanh(x: Tensor, lo: float, hi: float) -> Tensor:
    # PyTorch's gradient is 1 strictly inside (lo, hi) and 0 at the bounds; clamp would pass it
    # at the bounds too, so the clamped values come in detached.
    return E.where((x > lo) & (x < hi), x, x.detach().clamp(lo, hi))


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0,
             inplace: bool = False) -> Tensor:
    """x clamped to [min_val, max_val]; the gradient is 1 strictly between them."""
    if min_val > max_val:
        raise ValueError(
            f"hardtanh(): min_val ({min_val}) cannot be greater than max_val ({max_val})"
        )
    return _activation("hardtanh", input, lambda x: _hardtanh(x, min_val, max_val), inplace)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """min(max(x, 0), 6) (hardtanh(x, 0, 6))."""
    return _activation("relu6", input, lambda x: _hardtanh(x, 0.0, 6.0), inplace)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """relu6(x + 3) / 6: 0 below -3, 1 above 3, linear between."""
    return _activation("hardsigmoid", input, lambda x: _hardtanh(x + 3.0, 0.0, 6.0) / 6.0,
                       inplace)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """x * relu6(x + 3) / 6."""
    # clamp (gradient inclusive at the bounds) reproduces PyTorch's hardswish gradient there:
    # -0.5 at x = -3 and 1.5 at x = 3.
    return _activation("hardswish", input, lambda x: x * (x + 3.0).clamp(0.0, 6.0) / 6.0,
                       inplace)


def logsigmoid(input: Tensor) -> Tensor:
    """log(sigmoid(x)), computed stably as -softplus(-x)."""
    _check_tensor("logsigmoid", input)
    return -E.softplus(-input)


def softsign(input: Tensor) -> Tensor:
    """x / (1 + |x|)."""
    _check_tensor("softsign", input)
    return input / (input.abs() + 1.0)


def tanhshrink(input: Tensor) -> Tensor:
    """x - tanh(x)."""
    _check_tensor("tanhshrink", input)
    return input - input.tanh()


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """softmax(-x) along dim (PyTorch requires dim; so do we)."""
    if dim is None:
        raise TypeError("softmin(): pass dim explicitly (e.g. dim=-1)")
    _check_tensor("softmin", input)
    if dtype is not None:
        input = input.to(dtype)
    return softmax(-input, dim)


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """Gated linear unit: a * sigmoid(b), where a and b are the two halves of input along dim."""
    _check_tensor("glu", input)
    if input.ndim == 0:
        raise ShapeError("glu(): does not support scalars because the halving size must be even")
    d = dim + input.ndim if -input.ndim <= dim < 0 else dim
    if not 0 <= d < input.ndim:
        raise IndexError(
            f"glu(): dim {dim} is out of range for a {input.ndim}-D input of shape "
            f"{tuple(input.shape)}"
        )
    size = input.shape[d]
    if size % 2:
        raise ShapeError(
            f"glu(): halving dimension must be even, but dimension {d} is size {size}"
        )
    half = size // 2
    return input.narrow(d, 0, half) * input.narrow(d, half, half).sigmoid()


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """x where x > 0, else weight * x; weight has one element or one per channel (dim 1)."""
    _check_tensor("prelu", input)
    _check_tensor("prelu", weight, "weight")
    n = weight.numel()
    if n != 1:
        if input.ndim == 0:
            raise ShapeError("prelu(): a zero-dim input needs a weight with one element")
        channels = input.shape[1] if input.ndim > 1 else 1
        if channels != n:
            raise ShapeError(
                f"prelu(): mismatch of parameter numbers and input channel size: found "
                f"parameter numbers = {n} and channel size = {channels}"
            )
        weight = weight.reshape((1, n) + (1,) * (input.ndim - 2))
    elif weight.ndim:
        weight = weight.reshape(())
    return E.where(input > 0, input, input * weight)


# ============================================================================= distances
def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12,
              out=None) -> Tensor:
    """x / max(||x||_p, eps) along dim."""
    if out is not None:
        raise TypeError("normalize(): out= is not supported; use the returned tensor")
    _check_tensor("normalize", input)
    return input / input.norm(p, dim, keepdim=True).clamp(min=eps)


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """Cosine of the angle between x1 and x2 along dim (broadcast): each is divided by its
    norm, clamped below at eps, before the dot product (PyTorch's stable form)."""
    _check_tensor("cosine_similarity", x1, "x1")
    _check_tensor("cosine_similarity", x2, "x2")
    x1, x2 = _broadcast("cosine_similarity", x1, x2)
    n1 = x1.norm(2, dim, keepdim=True).clamp(min=eps)
    n2 = x2.norm(2, dim, keepdim=True).clamp(min=eps)
    return ((x1 / n1) * (x2 / n2)).sum(dim)


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> Tensor:
    """||x1 - x2 + eps||_p over the last dim (broadcast)."""
    _check_tensor("pairwise_distance", x1, "x1")
    _check_tensor("pairwise_distance", x2, "x2")
    broadcast_shapes("pairwise_distance", x1.shape, x2.shape)
    d = x1 - x2 + eps
    if d.ndim == 0:
        d = d.reshape(1)
        return d.norm(p, 0, keepdim=False)
    return d.norm(p, -1, keepdim=keepdim)


# ============================================================================= padding
_PAD_MODES = ("constant", "reflect", "replicate", "circular")


@functools.lru_cache(maxsize=256)
def _pad_index(mode: str, size: int, lo: int, hi: int) -> np.ndarray | None:
    """Source positions (int64) of a padded axis, or None when it is the unpadded axis."""
    pos = np.arange(size + lo + hi, dtype=np.int64) - lo
    if mode == "reflect":
        pos = np.abs(pos)
        pos = np.where(pos > size - 1, 2 * (size - 1) - pos, pos)
    elif mode == "replicate":
        pos = np.clip(pos, 0, size - 1)
    else:
        pos = pos % size
    if len(pos) == size and (pos == np.arange(size)).all():
        return None
    return pos


def pad(input: Tensor, pad, mode: str = "constant", value: float | None = None) -> Tensor:
    """Pad (or, with negative amounts, crop) the trailing dims as torch.nn.functional.pad.

    pad: (left, right) for the last dim, then (top, bottom) for the one before, and so on.
    'constant' fills with value (default 0) and pads any number of dims; 'reflect' (mirror
    without repeating the edge), 'replicate' (repeat the edge) and 'circular' (wrap around) pad
    the last 1, 2 or 3 dims of a 2-3, 3-4 or 4-5 dim input.
    """
    _check_tensor("pad", input, floating=False)
    try:
        amounts = tuple(operator.index(p) for p in pad)
    except TypeError:
        raise TypeError(f"pad(): pad must be a sequence of ints, got {pad!r}") from None
    if len(amounts) % 2:
        raise ValueError(f"pad(): padding length must be divisible by 2, got {len(amounts)}")
    k = len(amounts) // 2
    if k > input.ndim:
        raise ValueError(
            f"pad(): padding length {len(amounts)} is too large for a {input.ndim}-D input "
            f"(at most 2 per dim)"
        )
    if mode not in _PAD_MODES:
        raise ValueError(f"pad(): mode must be one of {', '.join(_PAD_MODES)}; got {mode!r}")
    shape = tuple(input.shape)
    for i in range(k):
        d = input.ndim - 1 - i
        lo, hi = amounts[2 * i], amounts[2 * i + 1]
        if shape[d] + lo + hi < 0:
            raise ShapeError(
                f"pad(): the input size {shape[d]} plus padding {lo} and {hi} gives a negative "
                f"output size at dim {d} of an input of shape {shape}"
            )
    if mode == "constant":
        return _pad_constant(input, amounts, 0 if value is None else value)
    if value is not None and value != 0:
        raise ValueError(f'pad(): padding mode "{mode}" does not take a value argument')
    if not 1 <= k <= 3 or input.ndim not in (k + 1, k + 2):
        raise NotImplementedError(
            f"pad(): mode {mode!r} pads the last 1, 2 or 3 dims of a 2-3, 3-4 or 4-5 dim "
            f"input; got a padding of length {len(amounts)} for a {input.ndim}-D input"
        )
    out = input
    for i in range(k):
        d = input.ndim - 1 - i
        lo, hi = amounts[2 * i], amounts[2 * i + 1]
        n = shape[d]
        if n == 0:
            raise ShapeError(f"pad(): mode {mode!r} needs a non-empty dim {d}, got shape {shape}")
        if mode == "reflect" and (lo >= n or hi >= n):
            raise ValueError(
                f"pad(): reflect padding must be less than the input size, got padding "
                f"({lo}, {hi}) at dim {d} of an input of shape {shape}"
            )
        if mode == "circular" and (lo > n or hi > n):
            raise ValueError(
                f"pad(): circular padding ({lo}, {hi}) at dim {d} of an input of shape {shape} "
                "wraps around more than once"
            )
        idx = _pad_index(mode, n, lo, hi)
        if idx is not None:
            out = out.index_select(d, _const(idx))
    return out


def _pad_constant(input: Tensor, amounts: tuple, value) -> Tensor:
    from ..creation import full
    from ..ops.indexing import cat

    out = input
    for i in range(len(amounts) // 2):
        d = input.ndim - 1 - i
        lo, hi = amounts[2 * i], amounts[2 * i + 1]
        n = out.shape[d]
        start, stop = max(-lo, 0), n - max(-hi, 0)
        if start > n or stop < 0 or stop < start:
            raise ShapeError(
                f"pad(): cropping ({lo}, {hi}) is larger than dim {d} of size {n}"
            )
        if start or stop != n:
            out = out.narrow(d, start, stop - start)
        parts = []
        for amount in (lo, hi):
            if amount > 0:
                fill_shape = tuple(out.shape[:d]) + (amount,) + tuple(out.shape[d + 1:])
                parts.append(full(fill_shape, value, dtype=out.dtype, device=out.device))
            else:
                parts.append(None)
        if parts[0] is not None or parts[1] is not None:
            out = cat([t for t in (parts[0], out, parts[1]) if t is not None], d)
    return out


# ============================================================================= normalization
def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalize [N, C, *] over each group of C / num_groups channels (and all of *), with the
    biased variance, then scale by weight and shift by bias (both [C])."""
    _check_tensor("group_norm", input)
    if input.ndim < 2:
        raise ShapeError(
            f"group_norm(): expected an input of at least 2 dims [N, C, *], got shape "
            f"{tuple(input.shape)}"
        )
    n, c = input.shape[0], input.shape[1]
    num_groups = operator.index(num_groups)
    if num_groups < 1 or c % num_groups:
        raise ShapeError(
            f"group_norm(): expected the number of channels in the input to be divisible by "
            f"num_groups, but got an input of shape {tuple(input.shape)} and "
            f"num_groups={num_groups}"
        )
    _check_per_channel("group_norm", input, weight=weight, bias=bias)
    x = input.reshape(n, num_groups, -1)
    mean = x.mean(-1, keepdim=True)
    xc = x - mean
    var = (xc * xc).mean(-1, keepdim=True)
    out = (xc * (var + eps).rsqrt()).reshape(tuple(input.shape))
    shape = (1, c) + (1,) * (input.ndim - 2)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


def instance_norm(input: Tensor, running_mean: Tensor | None = None,
                  running_var: Tensor | None = None, weight: Tensor | None = None,
                  bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalize each channel of each sample of [N, C, *] over its spatial dims *.

    use_input_stats: normalize with each instance's mean and biased variance and, when running
    stats are given, update them in place with the batch average of the instance statistics
    (unbiased variance), as PyTorch. Otherwise normalize with the running stats.
    """
    _check_tensor("instance_norm", input)
    if input.ndim < 3:
        raise ShapeError(
            f"instance_norm(): expected an input of at least 3 dims [N, C, *], got shape "
            f"{tuple(input.shape)}"
        )
    c = input.shape[1]
    _check_per_channel("instance_norm", input, running_mean=running_mean,
                       running_var=running_var, weight=weight, bias=bias)
    shape = (1, c) + (1,) * (input.ndim - 2)
    if use_input_stats:
        count = math.prod(input.shape[2:])
        if count <= 1:
            raise ValueError(
                f"instance_norm(): expected more than 1 spatial element when training, got "
                f"input of shape {tuple(input.shape)}"
            )
        dims = tuple(range(2, input.ndim))
        mean = input.mean(dims, keepdim=True)
        xc = input - mean
        var = (xc * xc).mean(dims, keepdim=True)
        if running_mean is not None or running_var is not None:
            with no_grad():
                m = float(momentum)
                if running_mean is not None:
                    batch = mean.reshape(-1, c).mean(0).to(running_mean.dtype)
                    running_mean.copy_(running_mean * (1 - m) + batch * m)
                if running_var is not None:
                    batch = (var.reshape(-1, c) * (count / (count - 1))).mean(0)
                    running_var.copy_(running_var * (1 - m) + batch.to(running_var.dtype) * m)
    else:
        if running_mean is None or running_var is None:
            raise ValueError(
                "instance_norm(): running_mean and running_var are needed when "
                "use_input_stats=False"
            )
        xc = input - running_mean.to(input.dtype).reshape(shape)
        var = running_var.to(input.dtype).reshape(shape)
    out = xc * (var + eps).rsqrt()
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


# ============================================================================= interpolate
_LINEAR_MODES = {"linear": 3, "bilinear": 4, "trilinear": 5}
_INTERP_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "trilinear", "area")


@functools.lru_cache(maxsize=256)
def _nearest_index(in_size: int, out_size: int, scale: float | None, exact: bool):
    # PyTorch computes the source index in float32 (1/scale_factor, or in/out); doing the same
    # keeps the picked pixel identical where dst * scale lands on an integer. Its 'nearest'
    # also maps equal and doubled sizes exactly, whatever the scale_factor.
    if not exact and out_size in (in_size, 2 * in_size):
        return np.arange(out_size, dtype=np.int64) * in_size // out_size
    s = np.float32(1.0 / scale) if scale else np.float32(in_size) / np.float32(out_size)
    dst = np.arange(out_size, dtype=np.float32)
    if exact:
        dst = dst + np.float32(0.5)
    src = np.floor(dst * s).astype(np.int64)
    return np.minimum(src, in_size - 1)


@functools.lru_cache(maxsize=256)
def _linear_weights(in_size: int, out_size: int, scale: float | None, align_corners: bool):
    """(i0, i1, lambda): each output blends input i0 (weight 1 - lambda) and i1 (lambda)."""
    dst = np.arange(out_size, dtype=np.float64)
    if align_corners:
        s = (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
        src = dst * s
    else:
        s = 1.0 / scale if scale else in_size / out_size
        src = np.maximum((dst + 0.5) * s - 0.5, 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), in_size - 1)
    i1 = np.minimum(i0 + 1, in_size - 1)
    return i0, i1, src - i0


def _per_dim(op: str, v, n: int, name: str) -> tuple:
    if isinstance(v, (tuple, list)):
        if len(v) != n:
            raise ValueError(
                f"{op}(): {name} must be a number or a sequence of {n} numbers for a "
                f"{n + 2}-D input, got {v!r}"
            )
        return tuple(v)
    return (v,) * n


def interpolate(input: Tensor, size=None, scale_factor=None, mode: str = "nearest",
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> Tensor:
    """Resize the spatial dims of [N, C, *] as torch.nn.functional.interpolate.

    Give size (an int or one per spatial dim) or scale_factor (output = floor(input * scale)).
    mode: 'nearest' (PyTorch's floor(dst * scale) pick), 'nearest-exact', 'linear' (3-D),
    'bilinear' (4-D), 'trilinear' (5-D), with align_corners, or 'area' (4-D; adaptive average
    pooling).
    """
    _check_tensor("interpolate", input)
    if mode not in _INTERP_MODES:
        raise NotImplementedError(
            f"interpolate(): mode {mode!r} is not supported; use one of {', '.join(_INTERP_MODES)}"
        )
    if antialias:
        raise NotImplementedError("interpolate(): antialias=True is not supported")
    if align_corners is not None and mode not in _LINEAR_MODES:
        raise ValueError(
            "interpolate(): align_corners option can only be set with the interpolating modes: "
            "linear | bilinear | trilinear"
        )
    if input.ndim not in (3, 4, 5):
        raise ShapeError(
            f"interpolate(): expected a 3-D, 4-D or 5-D input [N, C, *spatial], got shape "
            f"{tuple(input.shape)}"
        )
    if mode in _LINEAR_MODES and input.ndim != _LINEAR_MODES[mode]:
        raise NotImplementedError(
            f"interpolate(): got {input.ndim}D input, but {mode} mode needs "
            f"{_LINEAR_MODES[mode]}D input"
        )
    if mode == "area" and input.ndim != 4:
        raise NotImplementedError(f"interpolate(): got {input.ndim}D input, but area mode needs 4D")
    if (size is None) == (scale_factor is None):
        raise ValueError(
            "interpolate(): only one of size or scale_factor should be defined" if size is not None
            else "interpolate(): either size or scale_factor should be defined"
        )
    spatial = tuple(input.shape[2:])
    nd = len(spatial)
    if size is not None:
        out_size = tuple(operator.index(s) for s in _per_dim("interpolate", size, nd, "size"))
        scales = (None,) * nd
    else:
        scales = tuple(float(s) for s in _per_dim("interpolate", scale_factor, nd,
                                                  "scale_factor"))
        if any(not s > 0 for s in scales):
            raise ValueError(f"interpolate(): scale_factor must be positive, got {scale_factor!r}")
        out_size = tuple(math.floor(n * s) for n, s in zip(spatial, scales))
        if recompute_scale_factor:
            scales = (None,) * nd
    if any(s <= 0 for s in out_size) or any(s == 0 for s in spatial):
        raise ShapeError(
            f"interpolate(): input spatial size {spatial} and output size {out_size} must be "
            "positive"
        )
    if mode == "area":
        return adaptive_avg_pool2d(input, out_size)
    out = input
    for i, (n, o, s) in enumerate(zip(spatial, out_size, scales)):
        d = 2 + i
        if mode in ("nearest", "nearest-exact"):
            idx = _nearest_index(n, o, s, mode == "nearest-exact")
            if n != o or (idx != np.arange(n)).any():
                out = out.index_select(d, _const(idx))
            continue
        if n == o and not s:
            continue  # every output pixel lands on its input pixel
        i0, i1, lam = _linear_weights(n, o, s, bool(align_corners))
        bshape = (o,) + (1,) * (out.ndim - 1 - d)
        lam_t = _const(lam.reshape(bshape), out.dtype)
        a = out.index_select(d, _const(i0))
        b = out.index_select(d, _const(i1))
        out = a + (b - a) * lam_t
    return out


# ============================================================================= dropout
def dropout2d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Zero whole channels (all of [..., H, W] for one sample and channel) with probability p and
    scale the rest by 1/(1-p); the identity when not training or p == 0. The mask is drawn from
    gpucore's random stream (gpucore.manual_seed)."""
    _check_tensor("dropout2d", input)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout2d(): probability p must be in [0, 1], got {p}")
    if input.ndim < 2:
        raise ShapeError(
            f"dropout2d(): expected a 3-D [N, C, L] or 4-D [N, C, H, W] input, got shape "
            f"{tuple(input.shape)}"
        )
    if input.ndim == 3:
        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D "
            "dropout behavior is desired - input is interpreted as shape (N, C, L), where C is "
            "the channel dim.",
            UserWarning,
            stacklevel=2,
        )
    elif input.ndim != 4:
        warnings.warn(
            f"dropout2d: Received a {input.ndim}-D input to dropout2d; dropout2d exists to "
            "drop channels of 3-D or 4-D inputs. Dims 0 and 1 are taken as batch and channel.",
            UserWarning,
            stacklevel=2,
        )
    if not training or p == 0.0:
        return input
    from ..creation import _dropout_mask

    # A [N, C, 1, ...] view carries the device and dtype the mask needs: one draw per channel.
    like = input.detach()[(slice(None), slice(None)) + (slice(0, 1),) * (input.ndim - 2)]
    mask = _dropout_mask(like, p)
    if inplace:
        return input.mul_(mask)
    return input * mask


# ============================================================================= losses
def _check_same_shape(op: str, *named) -> None:
    shapes = [tuple(t.shape) for _, t in named]
    if any(s != shapes[0] for s in shapes):
        raise ShapeError(
            f"{op}(): " + ", ".join(f"{n} {s}" for (n, _), s in zip(named, shapes))
            + " must have the same shape"
        )


def kl_div(input: Tensor, target: Tensor, size_average=None, reduce=None,
           reduction: str = "mean", log_target: bool = False) -> Tensor:
    """Kullback-Leibler divergence of target from input, input holding log-probabilities:
    target * (log(target) - input) (0 where target is 0), or exp(target) * (target - input)
    with log_target. reduction: 'mean' (over all elements, with PyTorch's warning), 'batchmean'
    (sum / batch size: the KL divergence), 'sum' or 'none'."""
    if reduction != "batchmean":
        _check_reduction("kl_div", reduction, size_average, reduce)
    elif size_average is not None or reduce is not None:
        _check_reduction("kl_div", "mean", size_average, reduce)
    _check_tensor("kl_div", input)
    _check_tensor("kl_div", target, "target")
    if reduction == "mean":
        warnings.warn(
            "reduction: 'mean' divides the total loss by both the batch size and the support "
            "size. 'batchmean' divides only by the batch size, and aligns with the KL div math "
            "definition. 'mean' will be changed to behave the same as 'batchmean' in the next "
            "major release.",
            UserWarning,
            stacklevel=2,
        )
    if log_target:
        loss = target.exp() * (target - input)
    else:
        # xlogy(t, t): 0 where t == 0; the log sees 1 there so its gradient stays finite.
        zero = target == 0
        tlogt = E.where(zero, 0.0, target * E.where(zero, 1.0, target).log())
        loss = tlogt - target * input
    if reduction == "batchmean":
        total = loss.sum()
        return total / input.shape[0] if input.ndim else total
    return _reduce(loss, reduction)


def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool = True, full: bool = False,
                     size_average=None, eps: float = 1e-8, reduce=None,
                     reduction: str = "mean") -> Tensor:
    """Poisson negative log-likelihood: exp(input) - target * input (log_input), else
    input - target * log(input + eps); full adds Stirling's term for target > 1."""
    _check_reduction("poisson_nll_loss", reduction, size_average, reduce)
    _check_tensor("poisson_nll_loss", input)
    _check_tensor("poisson_nll_loss", target, "target")
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + eps).log()
    if full:
        big = target > 1
        t = E.where(big, target, 2.0)  # the masked entries must not take log(0) into the grads
        stirling = t * t.log() - t + (t * (2 * math.pi)).log() * 0.5
        loss = loss + E.where(big, stirling, 0.0)
    return _reduce(loss, reduction)


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                          size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """1 - cos(x1, x2) where target is 1, max(0, cos(x1, x2) - margin) where it is -1; cos over
    the last dim of [N, D] (target [N]) or [D] (target [])."""
    op = "cosine_embedding_loss"
    _check_reduction(op, reduction, size_average, reduce)
    _check_tensor(op, input1, "input1")
    _check_tensor(op, input2, "input2")
    _check_tensor(op, target, "target", floating=False)
    if target.ndim > 1:
        raise ShapeError(f"{op}(): 0D or 1D target tensor expected, multi-target not supported")
    if input1.ndim != target.ndim + 1 or tuple(input1.shape) != tuple(input2.shape) or (
            target.ndim and target.shape[0] != input1.shape[0]):
        raise ShapeError(
            f"{op}(): a {target.ndim}D target of shape {tuple(target.shape)} needs "
            f"{target.ndim + 1}D inputs of one shape, with {'N' if target.ndim else 'no'} "
            f"rows; got input1 {tuple(input1.shape)} and input2 {tuple(input2.shape)}"
        )
    if not target.dtype.is_floating_point:
        target = target.to(input1.dtype)
    # PyTorch's formula: eps added to each squared magnitude, not a clamp of the norms.
    prod = (input1 * input2).sum(-1)
    mag1 = (input1 * input1).sum(-1) + 1e-12
    mag2 = (input2 * input2).sum(-1) + 1e-12
    cos = prod / (mag1 * mag2).sqrt()
    pos = E.where(target == 1, 1 - cos, 0.0)
    neg = E.where(target == -1, (cos - margin).clamp(min=0.0), 0.0)
    return _reduce(pos + neg, reduction)


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                        size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """max(0, -target * (input1 - input2) + margin), target in {1, -1}."""
    op = "margin_ranking_loss"
    _check_reduction(op, reduction, size_average, reduce)
    _check_tensor(op, input1, "input1")
    _check_tensor(op, input2, "input2")
    _check_tensor(op, target, "target", floating=False)
    if not input1.ndim == input2.ndim == target.ndim:
        raise ShapeError(
            f"{op}(): all input tensors should have the same number of dims, got input1 "
            f"{tuple(input1.shape)}, input2 {tuple(input2.shape)} and target "
            f"{tuple(target.shape)}"
        )
    broadcast_shapes(op, input1.shape, input2.shape, target.shape)
    loss = (-target * (input1 - input2) + margin).clamp(min=0.0)
    return _reduce(loss, reduction)


def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0, size_average=None,
                         reduce=None, reduction: str = "mean") -> Tensor:
    """x where target is 1, max(0, margin - x) where it is -1 (as PyTorch: both terms for a
    target that is neither)."""
    op = "hinge_embedding_loss"
    _check_reduction(op, reduction, size_average, reduce)
    _check_tensor(op, input)
    _check_tensor(op, target, "target", floating=False)
    broadcast_shapes(op, input.shape, target.shape)
    margin_term = E.where(target != 1, (margin - input).clamp(min=0.0), 0.0)
    self_term = E.where(target != -1, input, 0.0)
    return _reduce(margin_term + self_term, reduction)


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0,
                        p: float = 2, eps: float = 1e-6, swap: bool = False, size_average=None,
                        reduce=None, reduction: str = "mean") -> Tensor:
    """max(0, margin + d(a, p) - d(a, n)) with d the pairwise_distance (p-norm, eps); swap uses
    min(d(a, n), d(p, n)) as the negative distance."""
    op = "triplet_margin_loss"
    _check_reduction(op, reduction, size_average, reduce)
    for name, t in (("anchor", anchor), ("positive", positive), ("negative", negative)):
        _check_tensor(op, t, name)
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise ShapeError(
            f"{op}(): the anchor, positive, and negative tensors are expected to have the same "
            f"number of dimensions, but got: anchor {anchor.ndim}D, positive {positive.ndim}D, "
            f"and negative {negative.ndim}D inputs"
        )
    if margin <= 0:
        raise ValueError(f"{op}(): margin must be greater than 0, got {margin}")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = E.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return _reduce((d_pos - d_neg + margin).clamp(min=0.0), reduction)


def soft_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                     reduction: str = "mean") -> Tensor:
    """log(1 + exp(-target * input)) (as a stable softplus), target in {1, -1}."""
    _check_reduction("soft_margin_loss", reduction, size_average, reduce)
    _check_tensor("soft_margin_loss", input)
    _check_tensor("soft_margin_loss", target, "target", floating=False)
    _check_same_shape("soft_margin_loss", ("input", input), ("target", target))
    return _reduce(E.softplus(-target * input), reduction)


def multilabel_soft_margin_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                size_average=None, reduce=None,
                                reduction: str = "mean") -> Tensor:
    """Per-class logistic loss -(t * logsigmoid(x) + (1 - t) * logsigmoid(-x)), times weight,
    averaged over the classes (last dim) of [N, C] (or [C])."""
    op = "multilabel_soft_margin_loss"
    _check_reduction(op, reduction, size_average, reduce)
    _check_tensor(op, input)
    _check_tensor(op, target, "target", floating=False)
    if input.ndim == 0:
        raise ShapeError(f"{op}(): expected a 1-D [C] or 2-D [N, C] input, got a scalar")
    _check_same_shape(op, ("input", input), ("target", target))
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    loss = loss.sum(-1) / input.shape[-1]
    return _reduce(loss, reduction)
