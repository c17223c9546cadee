"""Normalization: batch_norm, layer_norm, group_norm and instance_norm (biased variance, with
PyTorch's in-place updates of running statistics), rms_norm, and normalize (x / ||x||_p along a
dim). On host tensors batch_norm, layer_norm, rms_norm and group_norm run the fused ops of
gpucore/ops/norm.py and norm_batch.py (one C pass forward and backward); elsewhere, and while a
graph is captured, they are compositions of gpucore ops (the same results)."""

from __future__ import annotations

import math
import operator

import numpy as np

from ... import dtypes as D
from ...autograd.grad_mode import no_grad
from ...errors import ShapeError
from ...ops import norm as _norm
from ...ops import norm_batch as _bn
from ...ops.joining import cat
from ...ops.registry import CAPTURE, capturing
from ...tensor import Tensor
from ._utils import _check_tensor, _const

_EPS: dict = {}  # rms_norm's default eps per dtype, filled on first use


def _check_per_channel(op: str, input: Tensor, **tensors) -> None:
    """Each given tensor must be a vector with one value per channel (dim 1) of input."""
    c = input.shape[1]
    for name, t in tensors.items():
        if t is not None and tuple(t.shape) != (c,):
            raise ShapeError(
                f"{op}(): {name} must have shape ({c},) for an input with {c} channels "
                f"(shape {tuple(input.shape)}), got {tuple(t.shape)}"
            )


def batch_norm(
    input: Tensor,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Batch normalization over dim 1 of [N, C, ...] (torch.nn.functional.batch_norm).

    training: normalize with the batch's mean and biased variance and, when running stats are
    given, update them in place: ``running = (1 - momentum) * running + momentum * batch`` with
    the unbiased variance. Otherwise normalize with the running stats.
    """
    out = _bn.fast_batch_norm(
        input, running_mean, running_var, weight, bias, training, momentum, eps
    )
    if out is not None:  # small contiguous host tensors: one C call (cpu/python/fastpath_nn.c)
        return out
    _check_tensor("batch_norm", input)
    if input.ndim < 2:
        raise ShapeError(
            f"batch_norm(): expected an input of at least 2 dims [N, C, ...], got shape "
            f"{tuple(input.shape)}"
        )
    c = input.shape[1]
    _check_per_channel(
        "batch_norm",
        input,
        running_mean=running_mean,
        running_var=running_var,
        weight=weight,
        bias=bias,
    )
    if training and input.numel() // max(c, 1) <= 1:
        raise ValueError(
            f"batch_norm(): expected more than 1 value per channel when training, got input "
            f"of shape {tuple(input.shape)}"
        )
    if not training and (running_mean is None or running_var is None):
        raise ValueError(
            "batch_norm(): running_mean and running_var are needed when training=False"
        )
    if _host_same(input, weight, bias) and _host_same(
        input, running_mean, running_var, contig=True
    ):
        return _bn.native_batch_norm(
            input, running_mean, running_var, weight, bias, training, momentum, eps
        )
    return _bn.batch_norm_composed(
        input, running_mean, running_var, weight, bias, training, momentum, eps
    )


def _device_same(input: Tensor, *ts) -> bool:
    """True when input is a device tensor outside the runtime's graph capture and each of ts is
    None or a tensor of its dtype on its device."""
    if input._dev is None or capturing():
        return False
    return all(t is None or (t._dev is input._dev and t.dtype is input.dtype) for t in ts)


def _host_same(input: Tensor, *ts, contig: bool = False) -> bool:
    """True when input is a float host tensor outside graph capture and each of ts is None or a
    host tensor of its dtype (contiguous with contig): the fused ops' condition."""
    if input._dev is not None or not input.dtype.is_floating_point:
        return False
    if CAPTURE[0] is not None and capturing():
        return False
    for t in ts:
        if t is not None and (
            t._dev is not None or t.dtype is not input.dtype or (contig and not t.is_contiguous())
        ):
            return False
    return True


def layer_norm(
    input: Tensor,
    normalized_shape,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """Normalize over the trailing dims named by normalized_shape (biased variance), then scale
    by weight and shift by bias (both shaped normalized_shape)."""
    ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    out = _norm.fast_rows(_norm.LAYER_NORM, input, ns, weight, bias, eps, False)
    if out is not None:  # small contiguous host tensors: one C call (cpu/python/fastpath_nn.c)
        return out
    _check_tensor("layer_norm", input)
    k = len(ns)
    if k == 0 or input.ndim < k or tuple(input.shape[-k:]) != ns:
        raise ShapeError(
            f"layer_norm(): normalized_shape {ns} must match the trailing dims of the input "
            f"(shape {tuple(input.shape)})"
        )
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != ns:
            raise ShapeError(f"layer_norm(): {name} must have shape {ns}, got {tuple(t.shape)}")
    if _host_same(input, weight, bias):
        # host tensors: one C pass per row forward and backward (gpucore/ops/norm.py); a
        # captured graph keeps the composition, which the runtime fuses itself
        return _norm.native_layer_norm(input, weight, bias, k, eps)[0]
    if input.dtype in (D.float32, D.float16, D.bfloat16) and _device_same(input, weight, bias):
        # one shader pass per row on the device, reading and writing halves itself (float32
        # inside); its backward is composed on the device in float32 (gpucore/ops/norm.py)
        return _norm.native_layer_norm(input, weight, bias, k, eps)[0]
    if input.dtype in (D.float16, D.bfloat16):
        # the composition in float32, rounded once at the end: what the C pass computes (and
        # PyTorch's kernels), not a rounding after every step
        w32, b32 = (t if t is None else t.float() for t in (weight, bias))
        return _norm.layer_norm_composed(input.float(), w32, b32, k, eps).to(input.dtype)
    return _norm.layer_norm_composed(input, weight, bias, k, eps)


def group_norm(
    input: Tensor,
    num_groups: int,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """Normalize [N, C, *] over each group of C / num_groups channels (and all of *), with the
    biased variance, then scale by weight and shift by bias (both [C])."""
    out = _norm.fast_group(input, num_groups, weight, bias, eps)
    if out is not None:  # small contiguous host tensors: one C call (cpu/python/fastpath_nn.c)
        return out
    _check_tensor("group_norm", input)
    if input.ndim < 2:
        raise ShapeError(
            f"group_norm(): expected an input of at least 2 dims [N, C, *], got shape "
            f"{tuple(input.shape)}"
        )
    c = input.shape[1]
    num_groups = operator.index(num_groups)
    if num_groups < 1 or c % num_groups:
        raise ShapeError(
            f"group_norm(): expected the number of channels in the input to be divisible by "
            f"num_groups, but got an input of shape {tuple(input.shape)} and "
            f"num_groups={num_groups}"
        )
    _check_per_channel("group_norm", input, weight=weight, bias=bias)
    if _host_same(input, weight, bias):
        return _norm.native_group_norm(input, num_groups, weight, bias, eps)[0]
    return _norm.group_norm_composed(input, num_groups, weight, bias, eps)


def instance_norm(
    input: Tensor,
    running_mean: Tensor | None = None,
    running_var: Tensor | None = None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
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
    _check_per_channel(
        "instance_norm",
        input,
        running_mean=running_mean,
        running_var=running_var,
        weight=weight,
        bias=bias,
    )
    shape = (1, c) + (1,) * (input.ndim - 2)
    if use_input_stats:
        count = math.prod(input.shape[2:])
        if count == 0:
            return input.clone()  # nothing to normalise (PyTorch: an empty result)
        if count == 1:
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


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out=None) -> Tensor:
    """x / max(||x||_p, eps) along dim."""
    if out is not None:
        raise TypeError("normalize(): out= is not supported; use the returned tensor")
    _check_tensor("normalize", input)
    return input / input.norm(p, dim, keepdim=True).clamp(min=eps)


def rms_norm(
    input: Tensor,
    normalized_shape,
    weight: Tensor | None = None,
    eps: float | None = None,
) -> Tensor:
    """Root-mean-square normalization over the trailing dims named by normalized_shape
    (torch.nn.functional.rms_norm): ``x / sqrt(mean(x**2) + eps) * weight``; eps None is the
    machine epsilon of the input's dtype, as PyTorch."""
    ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if type(input) is Tensor and input.dtype.is_floating_point:
        if eps is None:
            eps = _EPS.get(input.dtype)
            if eps is None:
                eps = _EPS[input.dtype] = float(np.finfo(input.dtype.np).eps)
        out = _norm.fast_rows(_norm.RMS_NORM, input, ns, weight, None, eps, True)
        if out is not None:  # small contiguous host tensors: one C call (cpu/python/fastpath_nn.c)
            return out
    _check_tensor("rms_norm", input)
    k = len(ns)
    if k == 0 or input.ndim < k or tuple(input.shape[-k:]) != ns:
        raise ShapeError(
            f"rms_norm(): normalized_shape {ns} must match the trailing dims of the input "
            f"(shape {tuple(input.shape)})"
        )
    if weight is not None and tuple(weight.shape) != ns:
        raise ShapeError(f"rms_norm(): weight must have shape {ns}, got {tuple(weight.shape)}")
    if eps is None:
        eps = float(np.finfo(input.dtype.np).eps)
    if _host_same(input, weight):
        return _norm.native_rms_norm(input, weight, k, eps)[0]
    # the output keeps the input's dtype, as PyTorch
    w = weight if weight is None or weight.dtype is input.dtype else weight.to(input.dtype)
    return _norm.rms_norm_composed(input, w, k, eps)


def local_response_norm(
    input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0
) -> Tensor:
    """Local response normalization across channels (AlexNet's): input / (k + alpha * mean of
    the squares over ``size`` neighbouring channels) ** beta, the window padded with zeros
    (size // 2 before, (size - 1) // 2 after), as torch.nn.functional.local_response_norm."""
    _check_tensor("local_response_norm", input)
    if input.ndim < 3:
        raise ShapeError(
            f"local_response_norm(): expected an input of at least 3 dims [N, C, *], got shape "
            f"{tuple(input.shape)}"
        )
    if input.numel() == 0:
        return input
    sq = input * input
    shape = list(sq.shape)
    parts = []
    for n in (size // 2, None, (size - 1) // 2):
        if n is None:
            parts.append(sq)
        elif n:
            shape[1] = n
            parts.append(sq.new_zeros(tuple(shape)))
    padded = cat(parts, 1) if len(parts) > 1 else sq
    div = padded.unfold(1, size, 1).mean(-1)
    return input / (div * alpha + k) ** beta


def _cross_map_window(channels: int, size: int) -> np.ndarray:
    """[C, C] 0/1: the channels whose squares enter channel c's scale in PyTorch's legacy
    CrossMapLRN2d, found by running its running-sum loop (which, unlike local_response_norm,
    never takes channel 0 out of the sum and pads the window unevenly)."""
    pre_pad = int((size - 1) / 2 + 1)
    w = np.zeros((channels, channels))
    w[0, : min(pre_pad, channels)] = 1
    for c in range(1, channels):
        w[c] = w[c - 1]
        if c < channels - pre_pad + 1:
            w[c, c + pre_pad - 1] += 1
        if c > pre_pad:
            w[c, c - pre_pad] -= 1
    return w


def cross_map_lrn2d(
    input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0
) -> Tensor:
    """nn.CrossMapLRN2d's forward: ``x / (k + alpha / size * s) ** beta`` over a 4-D input
    [N, C, H, W], where s sums the squares of the channels PyTorch's legacy running window
    covers (_cross_map_window); a composition, so autograd gives its exact gradient."""
    _check_tensor("CrossMapLRN2d", input)
    if input.ndim != 4:
        raise ShapeError(
            f"CrossMapLRN2d: Expected input to be 4D, got {input.ndim}D instead (shape "
            f"{tuple(input.shape)})"
        )
    size = operator.index(size)
    if size < 1:
        raise ValueError(f"CrossMapLRN2d: size must be positive, got {size}")
    key = (input.shape[1], size, input.dtype, str(input.device))
    w = _WINDOWS.get(key)
    if w is None:
        win = _cross_map_window(input.shape[1], size).T
        w = _WINDOWS[key] = _const(win, dtype=input.dtype, device=input.device)
    s = ((input * input).permute(0, 2, 3, 1) @ w).permute(0, 3, 1, 2)
    return input * (s * (alpha / size) + k) ** (-beta)


_WINDOWS: dict = {}  # cross_map_lrn2d's window matrices per (channels, size, dtype, device)
