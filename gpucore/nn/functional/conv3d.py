"""conv3d (torch.nn.functional.conv3d) as one conv2d over the depth taps, and its adjoint
conv_transpose3d.

Each output depth reads kd input depth slices (strided by the stride, spaced by the dilation);
those slices are stacked on the channel axis, [N*OD, kd*C, H, W] (per group: the kd slices of
its channels), and the weight [O, C/g, kd, kh, kw] is reordered to [O, kd*C/g, kh, kw] to match,
so one conv2d (the fused C kernel on the host, im2col + matmul elsewhere, Vulkan included) computes
the whole 3-D convolution, and autograd differentiates the composition.
"""

from __future__ import annotations

import functools
import operator

import numpy as np

from ...errors import DTypeError, ShapeError
from ...ops.joining import stack
from ...tensor import Tensor
from ._utils import _check_tensor, _const
from .conv import _transposed_geometry, conv2d, conv_transpose2d
from .padding import pad as _pad


def _triple(v, op: str, name: str, least: int) -> tuple:
    """An int or a sequence of 1 or 3 ints (PyTorch's _triple) as a 3-tuple of ints >= least."""
    try:
        if isinstance(v, (tuple, list)):
            p = tuple(operator.index(e) for e in v)
            if len(p) == 1:
                p = p * 3
        else:
            p = (operator.index(v),) * 3
    except TypeError:
        p = ()
    if len(p) != 3 or any(e < least for e in p):
        raise ValueError(f"{op}(): {name} must be an int or a triple of ints >= {least}, got {v!r}")
    return p


def _as_5d(op: str, x) -> tuple:
    """[N, C, D, H, W] (or an unbatched [C, D, H, W], given a batch dim of 1), and whether it
    was."""
    _check_tensor(op, x)
    if x.ndim == 4:
        return x.unsqueeze(0), True
    if x.ndim != 5:
        raise ShapeError(
            f"{op}(): expected a 4-D [C, D, H, W] or 5-D [N, C, D, H, W] input, got shape "
            f"{tuple(x.shape)}"
        )
    return x, False


def _padding3d(padding, kernel: tuple, stride: tuple, dilation: tuple) -> tuple:
    """((before, after) per spatial dim) for an int, a triple, 'valid' or 'same' (PyTorch's
    'same': an odd total pads one more after)."""
    if not isinstance(padding, str):
        return tuple((p, p) for p in _triple(padding, "conv3d", "padding", 0))
    if padding == "valid":
        return ((0, 0),) * 3
    if padding != "same":
        raise ValueError(
            f"conv3d(): padding must be an int, a triple, 'valid' or 'same', got {padding!r}"
        )
    if stride != (1, 1, 1):
        raise ValueError("conv3d(): padding='same' is not supported for strided convolutions")
    return tuple(
        (d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2) for k, d in zip(kernel, dilation)
    )


def conv3d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride=1,
    padding=0,
    dilation=1,
    groups: int = 1,
) -> Tensor:
    """3-D cross-correlation (torch.nn.functional.conv3d).

    input [N, C, D, H, W] (or [C, D, H, W]); weight [O, C/groups, kd, kh, kw]; bias [O];
    stride, dilation an int or a triple; padding an int, a triple, 'valid' or 'same' (zeros).
    Computed as one conv2d of the depth taps stacked on the channel axis.
    """
    x, squeeze = _as_5d("conv3d", input)
    _check_tensor("conv3d", weight, "weight")
    if weight.ndim != 5:
        raise ShapeError(
            f"conv3d(): weight must be 5-D [out_channels, in_channels/groups, kd, kh, kw], got "
            f"shape {tuple(weight.shape)}"
        )
    if weight.dtype is not x.dtype:
        raise DTypeError(
            f"conv3d(): input ({x.dtype}) and weight ({weight.dtype}) must have the same dtype"
        )
    groups = operator.index(groups)
    out_c, cin_g, kd, kh, kw = weight.shape
    if 0 in (kd, kh, kw):
        raise ValueError(
            f"conv3d(): kernel size must be greater than zero, got weight of shape "
            f"{tuple(weight.shape)}"
        )
    n, c, d, h, w = x.shape
    if groups < 1 or out_c % groups:
        raise ValueError(
            f"conv3d(): groups must be a positive divisor of out_channels ({out_c}), got {groups}"
        )
    if c != cin_g * groups:
        raise ShapeError(
            f"conv3d(): input of shape {tuple(input.shape)} has {c} channels, but weight of "
            f"shape {tuple(weight.shape)} with groups={groups} expects {cin_g * groups}"
        )
    if bias is not None:
        _check_tensor("conv3d", bias, "bias")
        if tuple(bias.shape) != (out_c,):
            raise ShapeError(f"conv3d(): bias must have shape ({out_c},), got {tuple(bias.shape)}")
    stride = _triple(stride, "conv3d", "stride", 1)
    dilation = _triple(dilation, "conv3d", "dilation", 1)
    pads = _padding3d(padding, (kd, kh, kw), stride, dilation)
    outs = [
        (size + lo + hi - dl * (k - 1) - 1) // s + 1
        for size, (lo, hi), dl, k, s in zip((d, h, w), pads, dilation, (kd, kh, kw), stride)
    ]
    if min(outs) <= 0:
        raise ShapeError(
            f"conv3d(): input of shape {tuple(input.shape)} (padded by {pads}) is smaller than "
            f"the dilated kernel {(kd, kh, kw)} with dilation {dilation}"
        )
    od = outs[0]
    if pads[0] != (0, 0):  # the depth padding here; the rows/columns are conv2d's
        x = _pad(x, (0, 0, 0, 0, *pads[0]))
    xt = x.transpose(1, 2)  # [N, Dp, C, H, W]
    sd, dd = stride[0], dilation[0]
    taps = [xt[:, t * dd : t * dd + (od - 1) * sd + 1 : sd] for t in range(kd)]  # [N, OD, C, H, W]
    g = groups
    if kd == 1:
        cols = taps[0].reshape(n * od, c, h, w)
        w2 = weight.reshape(out_c, cin_g, kh, kw)
    else:
        # [N, OD, G, kd, C/G, H, W]: each group's channels are its kd slices of its C/G channels
        cols = stack([t.reshape(n, od, g, cin_g, h, w) for t in taps], 3)
        cols = cols.reshape(n * od, g * kd * cin_g, h, w)
        w2 = weight.transpose(1, 2).reshape(out_c, kd * cin_g, kh, kw)
    hw_pad = "same" if padding == "same" else (pads[1][0], pads[2][0])
    y = conv2d(cols, w2, bias, stride[1:], hw_pad, dilation[1:], groups)  # [N*OD, O, OH, OW]
    y = y.reshape(n, od, out_c, outs[1], outs[2]).transpose(1, 2)
    return y.squeeze(0) if squeeze else y


@functools.lru_cache(maxsize=256)
def _depth_scatter(d: int, k: int, s: int, p: int, dl: int, od: int) -> np.ndarray:
    """[od, d*k]: output depth z of a transposed convolution sums input depth i's tap t where
    i*s + t*dl - p == z (the padding cropped, output_padding rows left empty)."""
    m = np.zeros((od, d * k))
    for i in range(d):
        for t in range(k):
            z = i * s + t * dl - p
            if 0 <= z < od:
                m[z, i * k + t] = 1.0
    return m


def conv_transpose3d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride=1,
    padding=0,
    output_padding=0,
    groups: int = 1,
    dilation=1,
) -> Tensor:
    """3-D transposed convolution (torch.nn.functional.conv_transpose3d), the adjoint of conv3d.

    input [N, C, D, H, W] (or [C, D, H, W]); weight [C, O/groups, kd, kh, kw]; each output
    size (in - 1)*stride - 2*padding + dilation*(k - 1) + output_padding + 1. Computed as one
    conv_transpose2d of every depth plane with the kd taps as extra output channels, then a
    constant [OD, D*kd] matrix that adds each plane's taps into their output depths.
    """
    x, squeeze = _as_5d("conv_transpose3d", input)
    _check_tensor("conv_transpose3d", weight, "weight")
    if weight.ndim != 5:
        raise ShapeError(
            f"conv_transpose3d(): weight must be 5-D [in_channels, out_channels/groups, kd, kh, "
            f"kw], got shape {tuple(weight.shape)}"
        )
    s, p, op, dl, outs = _transposed_geometry(
        "conv_transpose3d",
        x,
        weight,
        bias,
        groups,
        (stride, padding, output_padding, dilation),
        _triple,
    )
    groups = operator.index(groups)
    n, c, d, h, w = x.shape
    cin, out_g, kd, kh, kw = weight.shape
    out_c = groups * out_g
    planes = x.transpose(1, 2).reshape(n * d, c, h, w)
    w2 = weight.reshape(cin, out_g * kd, kh, kw)  # output channel (o, t) of each group
    y = conv_transpose2d(planes, w2, None, s[1:], p[1:], op[1:], groups, dl[1:])
    oh, ow = outs[1], outs[2]
    y = y.reshape(n, d, out_c, kd, oh * ow).permute(0, 2, 1, 3, 4).reshape(n, out_c, d * kd, -1)
    m = _depth_scatter(d, kd, s[0], p[0], dl[0], outs[0])
    out = _const(m, x.dtype).matmul(y).reshape(n, out_c, *outs)
    if bias is not None:
        out = out + bias.reshape(out_c, 1, 1, 1)
    return out.squeeze(0) if squeeze else out
