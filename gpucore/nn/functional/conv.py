"""conv2d (torch.nn.functional.conv2d) and its lowering's building blocks, unfold (im2col) and
fold (col2im).

conv2d runs as one fused op (a C kernel) where its im2col would run in the C extension, and as
im2col + matmul (a batch of matmuls for groups) everywhere else, device included.
"""

from __future__ import annotations

import operator

from ... import dispatch
from ... import dtypes as D
from ...errors import DTypeError, ShapeError
from ...ops import nn as nn_ops
from ...tensor import Tensor
from ._utils import _as_4d, _check_tensor, _pair


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
    for t in (x, weight, bias):
        if t is not None and t._dev is not None:
            return False
    return dispatch.backend_for(nn_ops.IM2COL, (x,), (cols_shape, x.dtype)) is dispatch.CPU


def _no_channels(x: Tensor, weight: Tensor, bias, nhw: tuple) -> Tensor:
    """conv2d of an input with no channels, as PyTorch's eager conv2d (its "empty" convolution
    in aten/src/ATen/native/Convolution.cpp): no output channels either, [N, 0, OH, OW], with
    zero gradients for input, weight and bias (they stay in the graph)."""
    n, oh, ow = nhw
    out = x.reshape(n, 0, oh, ow) + weight.sum()  # an empty sum: 0
    return out if bias is None else out + bias.sum() * 0


def conv2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride=1,
    padding=0,
    dilation=1,
    groups: int = 1,
) -> Tensor:
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
    if kh == 0 or kw == 0:
        raise ValueError(
            f"conv2d(): kernel size must be greater than zero, got weight of shape "
            f"{tuple(weight.shape)}"
        )
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
    if c == 0:
        out = _no_channels(x, weight, bias, (n, oh - crop[0], ow - crop[1]))
        return out.squeeze(0) if squeeze else out
    if groups == 1 and _fused_conv_ok(x, weight, bias, (n, c * kh * kw, oh * ow)):
        out = nn_ops.conv2d_fused(x, weight, bias, stride, pad, dilation)
        if crop != (0, 0):
            out = out[:, :, crop[0] :, crop[1] :]
        return out.squeeze(0) if squeeze else out
    cols = nn_ops.im2col(x, (kh, kw), stride, pad, dilation)  # [N, C*kh*kw, OH*OW]
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
        out = out[:, :, crop[0] :, crop[1] :]
    return out.squeeze(0) if squeeze else out


def unfold(input: Tensor, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Sliding patches [N, C, H, W] -> [N, C*kh*kw, L] (torch.nn.functional.unfold; im2col);
    an unbatched [C, H, W] input gives [C*kh*kw, L]; bool patches stay bool."""
    if isinstance(input, Tensor) and input.ndim == 3:
        return unfold(input.unsqueeze(0), kernel_size, dilation, padding, stride).squeeze(0)
    if isinstance(input, Tensor) and input.dtype is D.bool_:  # copies: exact through float32
        return unfold(input.to(D.float32), kernel_size, dilation, padding, stride).to(D.bool_)
    return nn_ops.im2col(input, kernel_size, stride=stride, padding=padding, dilation=dilation)


def fold(input: Tensor, output_size, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """The adjoint of unfold: sums [N, C*kh*kw, L] patches into [N, C, H, W] (col2im)."""
    kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else tuple(kernel_size)
    oh, ow = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
    if input.ndim != 3 or input.shape[1] % (kh * kw):
        raise ShapeError(
            f"fold(): expected input [N, C*{kh}*{kw}, L], got shape {tuple(input.shape)}"
        )
    if input.dtype is D.bool_:  # overlapping patches add as logical or, as PyTorch's bool sum
        out = fold(input.to(D.float32), output_size, kernel_size, dilation, padding, stride)
        return out != 0
    shape = (input.shape[0], input.shape[1] // (kh * kw), oh, ow)
    return nn_ops.col2im(input, shape, (kh, kw), stride=stride, padding=padding, dilation=dilation)
