"""Functional neural-network ops with PyTorch's names and semantics.

Everything here is a composition of registry ops (matmul, im2col, reductions, where...), so it runs
on whichever backend the dispatch policy picks and autograd differentiates it with no backward of
its own. Geometry constants (pooling masks and divisors) are built once per shape and cached.
The exception is max_pool2d: one fused op with its own backward (gpucore/ops/pool.py), because
the composition (im2col, max, a one-hot mask, where, sum) dominated CNN training steps.
"""

from __future__ import annotations

import functools
import operator
import warnings

import numpy as np

from .. import dtypes as D
from ..autograd.grad_mode import no_grad
from ..errors import DTypeError, GpucoreIndexError, ShapeError
from ..ops import elementwise as E
from ..ops import nnops
from ..ops import pool as _pool
from ..ops.inplace import inplace as _inplace
from ..ops.linalg import LINEAR
from ..ops.registry import apply
from ..tensor import Tensor


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """max(x, 0)."""
    return input.relu_() if inplace else E.relu(input)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """GELU, exact (erf) by default or the tanh approximation with approximate='tanh'."""
    return E.gelu(input, approximate=approximate)


def sigmoid(input: Tensor) -> Tensor:
    """1 / (1 + exp(-x))."""
    return E.sigmoid(input)


def tanh(input: Tensor) -> Tensor:
    """Hyperbolic tangent."""
    return E.tanh(input)


def softmax(input: Tensor, dim: int | None = None, dtype=None) -> Tensor:
    """Softmax along dim (PyTorch requires dim; so do we)."""
    if dim is None:
        raise TypeError("softmax(): pass dim explicitly (e.g. dim=-1)")
    return nnops.softmax(input, dim, dtype=dtype)


def log_softmax(input: Tensor, dim: int | None = None, dtype=None) -> Tensor:
    """log(softmax(x)) along dim, computed stably (PyTorch requires dim; so do we)."""
    if dim is None:
        raise TypeError("log_softmax(): pass dim explicitly (e.g. dim=-1)")
    return nnops.log_softmax(input, dim, dtype=dtype)


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 one-hot encoding of class indices, with a trailing class dim."""
    from ..ops.indexing import one_hot as _one_hot

    return _one_hot(tensor, num_classes)


def unfold(input: Tensor, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Sliding patches [N, C, H, W] -> [N, C*kh*kw, L] (torch.nn.functional.unfold; im2col)."""
    return nnops.im2col(input, kernel_size, stride=stride, padding=padding, dilation=dilation)


def fold(input: Tensor, output_size, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """The adjoint of unfold: sums [N, C*kh*kw, L] patches into [N, C, H, W] (col2im)."""
    kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else tuple(kernel_size)
    oh, ow = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
    if input.ndim != 3 or input.shape[1] % (kh * kw):
        raise ShapeError(
            f"fold(): expected input [N, C*{kh}*{kw}, L], got shape {tuple(input.shape)}"
        )
    shape = (input.shape[0], input.shape[1] // (kh * kw), oh, ow)
    return nnops.col2im(input, shape, (kh, kw), stride=stride, padding=padding, dilation=dilation)


def cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average=None,
    ignore_index: int = -100,
    reduce=None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """Cross-entropy between logits [N, C] (or [N, C, d1, ...], or [C]) and a target of class
    indices [N, d1, ...] (int64) or class probabilities shaped like the input (floating), with
    torch.nn.functional.cross_entropy's arguments and semantics.

    weight: per-class rescaling [C]. reduction: 'mean' (weighted by the targets' weights over
    the entries that are not ignore_index; over N*d1*... for probabilities), 'sum' or 'none'.
    label_smoothing in [0, 1] mixes the target with the uniform distribution.
    """
    if size_average is not None or reduce is not None:
        raise TypeError(
            "cross_entropy(): size_average and reduce are deprecated in PyTorch and not "
            "supported; use reduction='mean', 'sum' or 'none'"
        )
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(
            f"cross_entropy(): reduction must be 'mean', 'sum' or 'none', got {reduction!r}"
        )
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(
            f"cross_entropy(): label_smoothing must be in [0, 1], got {label_smoothing}"
        )
    if not isinstance(input, Tensor) or not input.dtype.is_floating_point:
        raise DTypeError(
            "cross_entropy(): input must be a floating point tensor of logits"
            + (f", got {input.dtype}" if isinstance(input, Tensor) else "")
        )
    probs = isinstance(target, Tensor) and target.dtype.is_floating_point
    if not isinstance(target, Tensor) or (not probs and target.dtype is not D.int64):
        raise DTypeError(
            "cross_entropy(): target must be an int64 tensor of class indices or a floating "
            "tensor of class probabilities"
            + (f", got {target.dtype}" if isinstance(target, Tensor) else "")
        )
    squeeze = input.ndim == 1
    if squeeze:
        input, target = input.unsqueeze(0), target.unsqueeze(0)
    expected = None if input.ndim < 2 else (
        tuple(input.shape) if probs else (input.shape[0],) + tuple(input.shape[2:])
    )
    if expected is None or tuple(target.shape) != expected:
        raise ShapeError(
            f"cross_entropy(): input of shape {tuple(input.shape)} needs a target of shape "
            f"{expected}, got {tuple(target.shape)}"
        )
    c = input.shape[1]
    if weight is not None:
        if not isinstance(weight, Tensor) or tuple(weight.shape) != (c,):
            raise ShapeError(
                f"cross_entropy(): weight must be a tensor of shape ({c},) (one per class), got "
                f"{tuple(weight.shape) if isinstance(weight, Tensor) else type(weight).__name__}"
            )
        if weight.dtype is not input.dtype:
            weight = weight.to(input.dtype)
    out_shape = () if squeeze else (input.shape[0],) + tuple(input.shape[2:])
    if input.ndim > 2:
        input = input.movedim(1, -1).reshape(-1, c)
        target = target.movedim(1, -1).reshape(-1, c) if probs else target.reshape(-1)
    if probs:
        if label_smoothing > 0:
            target = target * (1 - label_smoothing) + label_smoothing / c
        logp = nnops.log_softmax(input, 1)
        if weight is not None:
            logp = logp * weight
        rows = -(logp * target).sum(1)
        denom = input.shape[0]
    else:
        rows = nnops.cross_entropy_rows(input, target, ignore_index)  # 0 where ignored
        valid = None
        if weight is not None or label_smoothing > 0 or target._dev is not None:
            valid = target != ignore_index
        if weight is not None:
            wt = weight[target.masked_fill(~valid, 0)] * valid.to(input.dtype)
            rows = rows * wt
            denom = wt.sum()
        elif valid is None:
            # host targets: count them on the host (a constant for autograd) instead of 4 ops
            denom = int(np.count_nonzero(target._data != ignore_index))
        else:
            denom = valid.sum()
        if label_smoothing > 0:
            logp = nnops.log_softmax(input, 1)
            if weight is not None:
                logp = logp * weight
            smooth = (-logp.sum(1)).masked_fill(~valid, 0.0)
            rows = rows * (1 - label_smoothing) + smooth * (label_smoothing / c)
    if reduction == "none":
        return rows.reshape(out_shape)
    if reduction == "sum":
        return rows.sum()
    return rows.sum() / denom  # nan when every target is ignored, as PyTorch


# ============================================================================= helpers
_REDUCTIONS = ("mean", "sum", "none")


def _check_tensor(op: str, x, what: str = "input", floating: bool = True) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): {what} must be a gpucore Tensor, got {type(x).__name__}")
    if floating and not x.dtype.is_floating_point:
        raise DTypeError(f"{op}(): {what} must be a floating point tensor, got {x.dtype}")


def _pair(v, op: str, name: str, least: int) -> tuple:
    try:
        if isinstance(v, (tuple, list)):
            p = tuple(operator.index(e) for e in v)
            if len(p) == 1:
                p = p * 2
        else:
            p = (operator.index(v),) * 2
    except TypeError:
        p = ()
    if len(p) != 2 or any(e < least for e in p):
        raise ValueError(f"{op}(): {name} must be an int or a pair of ints >= {least}, got {v!r}")
    return p


def _as_4d(op: str, x) -> tuple:
    """[N, C, H, W] (or an unbatched [C, H, W], given a batch dim of 1), and whether it was."""
    _check_tensor(op, x)
    if x.ndim == 3:
        return x.unsqueeze(0), True
    if x.ndim != 4:
        raise ShapeError(
            f"{op}(): expected a 3-D [C, H, W] or 4-D [N, C, H, W] input, got shape "
            f"{tuple(x.shape)}"
        )
    return x, False


def _check_reduction(op: str, reduction: str, size_average=None, reduce=None) -> None:
    if size_average is not None or reduce is not None:
        raise TypeError(
            f"{op}(): size_average and reduce are deprecated in PyTorch and not supported; use "
            "reduction='mean', 'sum' or 'none'"
        )
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{op}(): reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.mean()


def _const(arr: np.ndarray, dtype=None) -> Tensor:
    """A constant tensor (no grad) from integer or bool numpy data built from shapes."""
    from ..creation import tensor

    return tensor(arr, dtype=dtype)


# ============================================================================= linear, conv
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias``: input [..., in_features], weight [out_features, in_features],
    bias [out_features]."""
    _check_tensor("linear", input)
    _check_tensor("linear", weight, "weight")
    if weight.ndim != 2 or input.ndim == 0 or input.shape[-1] != weight.shape[1]:
        raise ShapeError(
            f"linear(): input of shape {tuple(input.shape)} does not fit weight of shape "
            f"{tuple(weight.shape)}; expected input [..., {weight.shape[-1]}] and weight "
            "[out_features, in_features]"
        )
    if bias is not None:
        _check_tensor("linear", bias, "bias")
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ShapeError(
            f"linear(): bias must have shape ({weight.shape[0]},), got {tuple(bias.shape)}"
        )
    lead = tuple(input.shape[:-1])
    x = input if input.ndim == 2 else input.reshape(-1, input.shape[-1])
    ins = (x, weight) if bias is None else (x, weight, bias)
    if not x.dtype.is_floating_point or any(t.dtype is not x.dtype for t in ins):
        raise DTypeError(
            "linear(): input, weight and bias must share one floating point dtype, got "
            f"{', '.join(str(t.dtype) for t in ins)}; convert them with .to(dtype)"
        )
    out = apply(LINEAR, *ins)
    return out if input.ndim == 2 else out.reshape(*lead, weight.shape[0])


def _conv_padding(padding, kernel: tuple, stride: tuple, dilation: tuple):
    """(symmetric padding, leading rows/cols to crop) for an int, pair, 'valid' or 'same'."""
    if not isinstance(padding, str):
        return _pair(padding, "conv2d", "padding", 0), (0, 0)
    if padding == "valid":
        return (0, 0), (0, 0)
    if padding != "same":
        raise ValueError(
            f"conv2d(): padding must be an int, a pair, 'valid' or 'same', got {padding!r}"
        )
    if stride != (1, 1):
        raise ValueError("conv2d(): padding='same' is not supported for strided convolutions")
    pad, crop = [], []
    for k, d in zip(kernel, dilation):
        total = d * (k - 1)
        left = total // 2
        # An odd total pads one more on the right/bottom (as PyTorch): pad the larger side on
        # both and drop the extra leading output row/column.
        pad.append(total - left)
        crop.append(total - 2 * left)
    return tuple(pad), tuple(crop)


def _fused_conv_ok(x, weight, bias, cols_shape) -> bool:
    """The fused conv2d op has only a C kernel: take it where the lowering's first op (im2col)
    would run in the C extension too, so device-resident convolutions stay on the device."""
    from .. import dispatch

    for t in (x, weight, bias):
        if t is not None and t._dev is not None:
            return False
    return dispatch.backend_for(nnops.IM2COL, (x,), (cols_shape, x.dtype)) is dispatch.CPU


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """2-D cross-correlation (torch.nn.functional.conv2d), lowered to im2col + matmul.

    input [N, C, H, W] (or [C, H, W]); weight [O, C/groups, kh, kw]; bias [O]; padding an int,
    a pair, 'valid' or 'same' (zeros). Groups split the channels into a batch of matmuls.
    """
    x, squeeze = _as_4d("conv2d", input)
    _check_tensor("conv2d", weight, "weight")
    if weight.ndim != 4:
        raise ShapeError(
            f"conv2d(): weight must be 4-D [out_channels, in_channels/groups, kh, kw], got shape "
            f"{tuple(weight.shape)}"
        )
    if weight.dtype is not x.dtype:
        raise DTypeError(
            f"conv2d(): input ({x.dtype}) and weight ({weight.dtype}) must have the same dtype"
        )
    groups = operator.index(groups)
    out_c, cin_g, kh, kw = weight.shape
    n, c, h, w = x.shape
    if groups < 1 or out_c % groups:
        raise ValueError(
            f"conv2d(): groups must be a positive divisor of out_channels ({out_c}), got {groups}"
        )
    if c != cin_g * groups:
        raise ShapeError(
            f"conv2d(): input of shape {tuple(input.shape)} has {c} channels, but weight of "
            f"shape {tuple(weight.shape)} with groups={groups} expects {cin_g * groups}"
        )
    stride = _pair(stride, "conv2d", "stride", 1)
    dilation = _pair(dilation, "conv2d", "dilation", 1)
    pad, crop = _conv_padding(padding, (kh, kw), stride, dilation)
    oh = (h + 2 * pad[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (w + 2 * pad[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    if oh <= 0 or ow <= 0:
        raise ShapeError(
            f"conv2d(): input of shape {tuple(input.shape)} (padded by {pad}) is smaller than "
            f"the dilated kernel {(kh, kw)} with dilation {dilation}"
        )
    if bias is not None and tuple(bias.shape) != (out_c,):
        raise ShapeError(f"conv2d(): bias must have shape ({out_c},), got {tuple(bias.shape)}")
    if groups == 1 and _fused_conv_ok(x, weight, bias, (n, c * kh * kw, oh * ow)):
        out = nnops.conv2d_fused(x, weight, bias, stride, pad, dilation)
        if crop != (0, 0):
            out = out[:, :, crop[0]:, crop[1]:]
        return out.squeeze(0) if squeeze else out
    cols = nnops.im2col(x, (kh, kw), stride, pad, dilation)  # [N, C*kh*kw, OH*OW]
    if groups == 1:
        out = weight.reshape(out_c, -1).matmul(cols)  # [N, O, L]
    else:
        wg = weight.reshape(groups, out_c // groups, -1)
        out = wg.matmul(cols.reshape(n, groups, cin_g * kh * kw, oh * ow))  # [N, G, O/G, L]
        out = out.reshape(n, out_c, oh * ow)
    if bias is not None:
        if tuple(bias.shape) != (out_c,):
            raise ShapeError(f"conv2d(): bias must have shape ({out_c},), got {tuple(bias.shape)}")
        out = out + bias.reshape(out_c, 1)
    out = out.reshape(n, out_c, oh, ow)
    if crop != (0, 0):
        out = out[:, :, crop[0]:, crop[1]:]
    return out.squeeze(0) if squeeze else out


# ============================================================================= pooling
_pool_out = _pool.pool_out  # (output size, end padding for ceil_mode) of one axis


@functools.lru_cache(maxsize=512)
def _window_mask(h, w, k, s, p, d, oh, ow, lo, hi):
    """bool [kh*kw, oh*ow]: which window positions of each output lie in rows/cols [lo, hi)
    (lo/hi: pairs, relative to the unpadded input). None when all of them do."""
    inside = []
    for ax in range(2):
        pos = (np.arange([oh, ow][ax])[None, :] * s[ax] - p[ax]
               + np.arange(k[ax])[:, None] * d[ax])  # [k, o]
        inside.append((pos >= lo[ax]) & (pos < hi[ax]))
    m = inside[0][:, None, :, None] & inside[1][None, :, None, :]
    m = m.reshape(k[0] * k[1], oh * ow)
    return None if m.all() else m


def _pool_cols(op, x, k, s, p, d, ceil_mode):
    """Windows of every channel: ([N*C, kh*kw, OH*OW], (OH, OW))."""
    n, c, h, w = x.shape
    oh, eh = _pool_out(op, h, k[0], s[0], p[0], d[0], ceil_mode)
    ow, ew = _pool_out(op, w, k[1], s[1], p[1], d[1], ceil_mode)
    xi = x.reshape(n * c, 1, h, w)
    if eh or ew:  # ceil_mode: windows reach past the padding; extend with zeros (masked later)
        from ..creation import zeros
        from ..ops.indexing import cat

        if eh:
            xi = cat([xi, zeros(n * c, 1, eh, w, dtype=x.dtype)], 2)
        if ew:
            xi = cat([xi, zeros(n * c, 1, h + eh, ew, dtype=x.dtype)], 3)
    return nnops.im2col(xi, k, s, p, d), (oh, ow)


def _pool_args(op, kernel_size, stride, padding, dilation=1):
    k = _pair(kernel_size, op, "kernel_size", 1)
    empty = stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0)
    s = k if empty else _pair(stride, op, "stride", 1)
    p = _pair(padding, op, "padding", 0)
    d = _pair(dilation, op, "dilation", 1)
    return k, s, p, d


def max_pool2d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
               ceil_mode: bool = False, return_indices: bool = False):
    """Max over sliding windows (torch.nn.functional.max_pool2d); padding counts as -inf.

    One fused op (gpucore.ops.pool): the gradient goes to the first maximum of each window
    (row-major; a NaN wins, the window's last NaN as in PyTorch), summed where windows overlap.
    With return_indices, also the flat index into H*W of each maximum.
    """
    x, squeeze = _as_4d("max_pool2d", input)
    k, s, p, d = _pool_args("max_pool2d", kernel_size, stride, padding, dilation)
    for i in range(2):
        if p[i] > (d[i] * (k[i] - 1) + 1) // 2:
            raise ValueError(
                f"max_pool2d(): padding should be at most half of the effective kernel size, "
                f"got padding={p}, kernel_size={k} and dilation={d}"
            )
    out, ind = _pool.max_pool2d_with_indices(x, k, s, p, d, ceil_mode)
    if squeeze:
        out, ind = out.squeeze(0), ind.squeeze(0)
    return (out, ind) if return_indices else out


def avg_pool2d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """Mean over sliding windows (torch.nn.functional.avg_pool2d): zero padding counts in the
    divisor unless count_include_pad=False; divisor_override replaces the divisor."""
    x, squeeze = _as_4d("avg_pool2d", input)
    k, s, p, d = _pool_args("avg_pool2d", kernel_size, stride, padding)
    if p[0] > k[0] // 2 or p[1] > k[1] // 2:
        raise ValueError(
            f"avg_pool2d(): padding should be at most half of the kernel size, got padding={p} "
            f"and kernel_size={k}"
        )
    if divisor_override is not None and divisor_override == 0:
        raise ValueError("avg_pool2d(): divisor_override must be non-zero")
    n, c, h, w = x.shape
    cols, (oh, ow) = _pool_cols("avg_pool2d", x, k, s, p, d, ceil_mode)
    if divisor_override is not None:
        out = cols.sum(1) / divisor_override
    else:
        lo, hi = ((0, 0), (h, w)) if not count_include_pad else (
            (-p[0], -p[1]), (h + p[0], w + p[1]))
        mask = _window_mask(h, w, k, s, p, d, oh, ow, lo, hi)
        if mask is None:
            out = cols.mean(1)
        else:
            out = cols.sum(1) / _const(mask.sum(0), x.dtype)
    out = out.reshape(n, c, oh, ow)
    return out.squeeze(0) if squeeze else out


@functools.lru_cache(maxsize=256)
def _adaptive_bins(size: int, out: int):
    """0/1 matrix [out, size] of PyTorch's adaptive bins (floor(i*size/out) to
    ceil((i+1)*size/out)) and each bin's length [out, 1]."""
    m = np.zeros((out, size), np.int64)
    for i in range(out):
        m[i, (i * size) // out: -(-((i + 1) * size) // out)] = 1
    return m, m.sum(1, keepdims=True)


def adaptive_avg_pool2d(input: Tensor, output_size) -> Tensor:
    """Average over PyTorch's adaptive bins to an output of output_size (an int, or a pair whose
    entries may be None to keep that input size)."""
    x, squeeze = _as_4d("adaptive_avg_pool2d", input)
    n, c, h, w = x.shape
    if isinstance(output_size, (tuple, list)):
        if len(output_size) != 2:
            raise ValueError(
                f"adaptive_avg_pool2d(): output_size must be an int or a pair, got {output_size!r}"
            )
        oh, ow = (h if output_size[0] is None else operator.index(output_size[0]),
                  w if output_size[1] is None else operator.index(output_size[1]))
    else:
        oh = ow = operator.index(output_size)
    if oh < 1 or ow < 1:
        raise ValueError(f"adaptive_avg_pool2d(): output_size must be positive, got {(oh, ow)}")
    if h == 0 or w == 0:
        raise ShapeError(f"adaptive_avg_pool2d(): empty spatial input {tuple(input.shape)}")
    if (oh, ow) == (1, 1):
        out = x.mean((2, 3), keepdim=True)
    elif h % oh == 0 and w % ow == 0:
        out = x.reshape(n, c, oh, h // oh, ow, w // ow).mean((3, 5))
    else:
        mh, ch = _adaptive_bins(h, oh)
        mw, cw = _adaptive_bins(w, ow)
        ph = _const(mh, x.dtype) / _const(ch, x.dtype)  # [OH, H]
        pw = _const(mw, x.dtype) / _const(cw, x.dtype)  # [OW, W]
        out = ph.matmul(x).matmul(pw.t())
    return out.squeeze(0) if squeeze else out


# ============================================================================= normalization
def _check_per_channel(op: str, input: Tensor, **tensors) -> None:
    """Each given tensor must be a vector with one value per channel (dim 1) of input."""
    c = input.shape[1]
    for name, t in tensors.items():
        if t is not None and tuple(t.shape) != (c,):
            raise ShapeError(
                f"{op}(): {name} must have shape ({c},) for an input with {c} channels "
                f"(shape {tuple(input.shape)}), got {tuple(t.shape)}"
            )


def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Batch normalization over dim 1 of [N, C, ...] (torch.nn.functional.batch_norm).

    training: normalize with the batch's mean and biased variance and, when running stats are
    given, update them in place: ``running = (1 - momentum) * running + momentum * batch`` with
    the unbiased variance. Otherwise normalize with the running stats.
    """
    _check_tensor("batch_norm", input)
    if input.ndim < 2:
        raise ShapeError(
            f"batch_norm(): expected an input of at least 2 dims [N, C, ...], got shape "
            f"{tuple(input.shape)}"
        )
    c = input.shape[1]
    _check_per_channel("batch_norm", input, running_mean=running_mean, running_var=running_var,
                       weight=weight, bias=bias)
    shape = (1, c) + (1,) * (input.ndim - 2)
    if training:
        dims = (0,) + tuple(range(2, input.ndim))
        count = input.numel() // max(c, 1)
        if count <= 1:
            raise ValueError(
                f"batch_norm(): expected more than 1 value per channel when training, got input "
                f"of shape {tuple(input.shape)}"
            )
        mean = input.mean(dims, keepdim=True)
        xc = input - mean
        var = (xc * xc).mean(dims, keepdim=True)
        if running_mean is not None or running_var is not None:
            with no_grad():
                m = float(momentum)
                if running_mean is not None:
                    running_mean.copy_(running_mean * (1 - m) + mean.reshape(c) * m)
                if running_var is not None:
                    unbiased = var.reshape(c) * (count / (count - 1))
                    running_var.copy_(running_var * (1 - m) + unbiased * m)
    else:
        if running_mean is None or running_var is None:
            raise ValueError(
                "batch_norm(): running_mean and running_var are needed when training=False"
            )
        xc = input - running_mean.to(input.dtype).reshape(shape)
        var = running_var.to(input.dtype).reshape(shape)
    scale = (var + eps).rsqrt()
    if weight is not None:
        scale = scale * weight.reshape(shape)
    out = xc * scale
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


def layer_norm(input: Tensor, normalized_shape, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalize over the trailing dims named by normalized_shape (biased variance), then scale
    by weight and shift by bias (both shaped normalized_shape)."""
    _check_tensor("layer_norm", input)
    ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(ns)
    if k == 0 or input.ndim < k or tuple(input.shape[-k:]) != ns:
        raise ShapeError(
            f"layer_norm(): normalized_shape {ns} must match the trailing dims of the input "
            f"(shape {tuple(input.shape)})"
        )
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != ns:
            raise ShapeError(
                f"layer_norm(): {name} must have shape {ns}, got {tuple(t.shape)}"
            )
    dims = tuple(range(input.ndim - k, input.ndim))
    mean = input.mean(dims, keepdim=True)
    xc = input - mean
    var = (xc * xc).mean(dims, keepdim=True)
    out = xc * (var + eps).rsqrt()
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


# ============================================================================= dropout, embedding
def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability p (a Philox mask from gpucore.rand) and scale the rest
    by 1/(1-p); the identity when not training or p == 0."""
    _check_tensor("dropout", input)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout(): probability p must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return input
    from ..creation import _dropout_mask

    mask = _dropout_mask(input, p)  # one kernel on the input's device; same stream as rand
    if inplace:
        return input.mul_(mask)
    return input * mask


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None,
              max_norm: float | None = None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Rows of weight [num_embeddings, dim] picked by the integer indices in input.

    padding_idx: that row's gradient is always zero. max_norm: rows looked up are first
    renormalized in place to at most that norm (as PyTorch).
    """
    if not isinstance(input, Tensor) or input.dtype not in (D.int64, D.int32):
        raise DTypeError(
            "embedding(): input must be an int64 (or int32) tensor of indices"
            + (f", got {input.dtype}" if isinstance(input, Tensor) else "")
        )
    _check_tensor("embedding", weight, "weight")
    if weight.ndim != 2:
        raise ShapeError(
            f"embedding(): weight must be 2-D [num_embeddings, embedding_dim], got "
            f"{tuple(weight.shape)}"
        )
    if scale_grad_by_freq or sparse:
        raise NotImplementedError(
            "embedding(): scale_grad_by_freq and sparse gradients are not supported"
        )
    num = weight.shape[0]
    if input.dtype is not D.int64:
        input = input.to(D.int64)
    if padding_idx is not None:
        if not -num <= padding_idx < num:
            raise GpucoreIndexError(
                f"embedding(): padding_idx {padding_idx} is out of range for {num} embeddings"
            )
        padding_idx = padding_idx % num
    if max_norm is not None:
        with no_grad():
            idx = input.reshape(-1)
            rows = weight[idx]
            norms = rows.norm(norm_type, dim=1, keepdim=True)
            scale = E.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
            weight[idx] = rows * scale
    out = weight[input]
    if padding_idx is not None and out.requires_grad:
        pad = (input == padding_idx).unsqueeze(-1)
        out = E.where(pad, out.detach(), out)
    return out


# ============================================================================= activations
def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """x where x > 0, else negative_slope * x."""
    _check_tensor("leaky_relu", input)

    def compute(x):
        return E.where(x > 0, x, x * negative_slope)

    if inplace:
        return _inplace(input, compute, saves_self=True, op="leaky_relu_")
    return compute(input)


# ============================================================================= losses
def _check_pair(op: str, input, target, same_shape: bool) -> None:
    _check_tensor(op, input)
    _check_tensor(op, target, "target")
    if tuple(target.shape) != tuple(input.shape):
        if same_shape:
            raise ShapeError(
                f"{op}(): target size {tuple(target.shape)} must be the same as input size "
                f"{tuple(input.shape)}"
            )
        warnings.warn(
            f"{op}(): using a target size ({tuple(target.shape)}) that is different to the "
            f"input size ({tuple(input.shape)}); they will be broadcast, which is likely not "
            "what you want",
            UserWarning,
            stacklevel=3,
        )


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
             ignore_index: int = -100, reduce=None, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of log-probabilities input [N, C] (or [C], or [N, C, d1, ...])
    at the int64 class indices target [N] ([], [N, d1, ...]).

    weight: per-class rescaling [C]; 'mean' divides by the summed weights of the targets that
    are not ignore_index (nan when all are ignored, as PyTorch).
    """
    _check_reduction("nll_loss", reduction, size_average, reduce)
    _check_tensor("nll_loss", input)
    if not isinstance(target, Tensor) or target.dtype is not D.int64:
        raise DTypeError(
            "nll_loss(): target must be an int64 tensor of class indices"
            + (f", got {target.dtype}" if isinstance(target, Tensor) else "")
        )
    squeeze = input.ndim == 1
    if squeeze:
        input, target = input.unsqueeze(0), target.unsqueeze(0)
    expected = None if input.ndim < 2 else (input.shape[0],) + tuple(input.shape[2:])
    if expected is None or tuple(target.shape) != expected:
        raise ShapeError(
            f"nll_loss(): input of shape {tuple(input.shape)} needs a target of shape "
            f"{expected}, got {tuple(target.shape)}"
        )
    c = input.shape[1]
    out_shape = () if squeeze else expected
    if input.ndim > 2:
        input = input.movedim(1, -1).reshape(-1, c)
        target = target.reshape(-1)
    valid = target != ignore_index
    safe = target.masked_fill(~valid, 0)
    picked = input.gather(1, safe.unsqueeze(1)).squeeze(1)
    if weight is not None:
        if not isinstance(weight, Tensor) or tuple(weight.shape) != (c,):
            raise ShapeError(
                f"nll_loss(): weight must be a tensor of shape ({c},) (one per class), got "
                f"{tuple(weight.shape) if isinstance(weight, Tensor) else type(weight).__name__}"
            )
        wt = weight.to(input.dtype)[safe] * valid.to(input.dtype)
    else:
        wt = valid.to(input.dtype)
    rows = -picked * wt
    if reduction == "none":
        return rows.reshape(out_shape)
    if reduction == "sum":
        return rows.sum()
    return rows.sum() / wt.sum()


def mse_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
             reduction: str = "mean") -> Tensor:
    """(input - target)^2, reduced."""
    _check_reduction("mse_loss", reduction, size_average, reduce)
    _check_pair("mse_loss", input, target, False)
    d = input - target
    return _reduce(d * d, reduction)


def l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
            reduction: str = "mean") -> Tensor:
    """|input - target|, reduced."""
    _check_reduction("l1_loss", reduction, size_average, reduce)
    _check_pair("l1_loss", input, target, False)
    return _reduce((input - target).abs(), reduction)


def smooth_l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                   reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """0.5 * d^2 / beta where |d| < beta, else |d| - 0.5 * beta (d = input - target); beta = 0
    is the L1 loss."""
    _check_reduction("smooth_l1_loss", reduction, size_average, reduce)
    _check_pair("smooth_l1_loss", input, target, False)
    if beta < 0:
        raise ValueError(f"smooth_l1_loss(): beta must be non-negative, got {beta}")
    d = input - target
    ad = d.abs()
    if beta == 0:
        return _reduce(ad, reduction)
    return _reduce(E.where(ad < beta, d * d * (0.5 / beta), ad - 0.5 * beta), reduction)


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean",
               delta: float = 1.0) -> Tensor:
    """0.5 * d^2 where |d| < delta, else delta * (|d| - 0.5 * delta) (d = input - target)."""
    _check_reduction("huber_loss", reduction)
    _check_pair("huber_loss", input, target, False)
    if delta <= 0:
        raise ValueError(f"huber_loss(): delta must be positive, got {delta}")
    d = input - target
    ad = d.abs()
    return _reduce(E.where(ad < delta, d * d * 0.5, (ad - 0.5 * delta) * delta), reduction)


def _log_clamped(x: Tensor) -> Tensor:
    """max(log(x), -100) for x in [0, 1], with finite gradients at 0 (PyTorch's BCE clamp)."""
    pos = x > 0
    return E.where(pos, E.where(pos, x, 1.0).log().clamp(min=-100.0), -100.0)


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                         size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """-w * (t * log(x) + (1 - t) * log(1 - x)) for probabilities x in [0, 1], each log clamped
    at -100 as PyTorch. Where a log is clamped (x within e^-100 of 0 or 1) the gradient is that
    of the clamped value, 0, where PyTorch's hand-written backward gives (x - t) / 1e-12."""
    _check_reduction("binary_cross_entropy", reduction, size_average, reduce)
    _check_pair("binary_cross_entropy", input, target, True)
    with no_grad():
        bad = bool(((input < 0) | (input > 1)).any())
    if bad:
        raise ValueError("binary_cross_entropy(): all elements of input should be in [0, 1]")
    loss = -(target * _log_clamped(input) + (1 - target) * _log_clamped(1 - input))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                     size_average=None, reduce=None, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """Sigmoid + binary cross-entropy in one stable formula:
    ``(1 - t) * x + (1 + (pos_weight - 1) * t) * softplus(-x)``, times weight."""
    _check_reduction("binary_cross_entropy_with_logits", reduction, size_average, reduce)
    _check_pair("binary_cross_entropy_with_logits", input, target, True)
    sp = E.softplus(-input)  # -log(sigmoid(x)), stable
    if pos_weight is not None:
        sp = sp * ((pos_weight - 1) * target + 1)
    loss = (1 - target) * input + sp
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


from .functional_extra import *  # noqa: E402, F401, F403
