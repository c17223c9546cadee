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
from ._utils import _as_4d, _check_tensor, _pair, _single
from .padding import pad as _pad


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


def _as_3d(op: str, x) -> tuple:
    """[N, C, L] (or an unbatched [C, L], given a batch dim of 1), and whether it was."""
    _check_tensor(op, x)
    if x.ndim == 2:
        return x.unsqueeze(0), True
    if x.ndim != 3:
        raise ShapeError(
            f"{op}(): expected a 2-D [C, L] or 3-D [N, C, L] input, got shape {tuple(x.shape)}"
        )
    return x, False


def conv1d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride=1,
    padding=0,
    dilation=1,
    groups: int = 1,
) -> Tensor:
    """1-D cross-correlation (torch.nn.functional.conv1d): conv2d over a height of one.

    input [N, C, L] (or [C, L]); weight [O, C/groups, k]; padding an int, 'valid' or 'same'.
    """
    x, squeeze = _as_3d("conv1d", input)
    _check_tensor("conv1d", weight, "weight")
    if weight.ndim != 3:
        raise ShapeError(
            f"conv1d(): weight must be 3-D [out_channels, in_channels/groups, k], got shape "
            f"{tuple(weight.shape)}"
        )
    s = _single(stride, "conv1d", "stride", 1)
    d = _single(dilation, "conv1d", "dilation", 1)
    p = padding if isinstance(padding, str) else (0, _single(padding, "conv1d", "padding", 0))
    out = conv2d(x.unsqueeze(2), weight.unsqueeze(2), bias, (1, s), p, (1, d), groups)
    out = out.squeeze(2)
    return out.squeeze(0) if squeeze else out


def _transposed_geometry(name: str, x, weight, bias, groups, args: tuple, ntuple) -> tuple:
    """Checks a transposed convolution's arguments (x batched, weight [C, O/groups, *k], bias
    [O] or None; args = (stride, padding, output_padding, dilation), each an int or a sequence
    that ``ntuple`` expands per spatial dim) and returns the four as tuples and the output's
    spatial size, (in - 1)*stride - 2*padding + dilation*(k - 1) + output_padding + 1."""
    if weight.dtype is not x.dtype:
        raise DTypeError(
            f"{name}(): input ({x.dtype}) and weight ({weight.dtype}) must have the same dtype"
        )
    groups = operator.index(groups)
    c, cin, out_g = x.shape[1], weight.shape[0], weight.shape[1]
    if groups < 1 or cin % groups or c != cin:
        raise ShapeError(
            f"{name}(): input of shape {tuple(x.shape)} does not fit weight of shape "
            f"{tuple(weight.shape)} with groups={groups}"
        )
    kernel = tuple(weight.shape[2:])
    if 0 in kernel:
        raise ValueError(
            f"{name}(): kernel size must be greater than zero, got weight of shape "
            f"{tuple(weight.shape)}"
        )
    stride, padding, output_padding, dilation = args
    s = ntuple(stride, name, "stride", 1)
    p = ntuple(padding, name, "padding", 0)
    op = ntuple(output_padding, name, "output_padding", 0)
    d = ntuple(dilation, name, "dilation", 1)
    if any(o >= max(si, di) for o, si, di in zip(op, s, d)):
        raise ValueError(
            f"{name}(): output_padding must be smaller than either stride or dilation, got "
            f"output_padding={op}, stride={s} and dilation={d}"
        )
    outs = tuple(
        (size - 1) * s[i] - 2 * p[i] + d[i] * (k - 1) + op[i] + 1
        for i, (size, k) in enumerate(zip(x.shape[2:], kernel))
    )
    if min(outs) <= 0:
        raise ShapeError(f"{name}(): output size {outs} is not positive")
    if bias is not None:
        _check_tensor(name, bias, "bias")
        if tuple(bias.shape) != (groups * out_g,):
            raise ShapeError(
                f"{name}(): bias must have shape ({groups * out_g},), got {tuple(bias.shape)}"
            )
    return s, p, op, d, outs


def conv_transpose2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride=1,
    padding=0,
    output_padding=0,
    groups: int = 1,
    dilation=1,
) -> Tensor:
    """2-D transposed convolution (torch.nn.functional.conv_transpose2d), the adjoint of
    conv2d: one matmul per group to patches, summed into the output by fold (col2im).

    input [N, C, H, W] (or [C, H, W]); weight [C, O/groups, kh, kw]; output height
    (H - 1)*stride - 2*padding + dilation*(kh - 1) + output_padding + 1 (likewise width).
    """
    x, squeeze = _as_4d("conv_transpose2d", input)
    _check_tensor("conv_transpose2d", weight, "weight")
    if weight.ndim != 4:
        raise ShapeError(
            f"conv_transpose2d(): weight must be 4-D [in_channels, out_channels/groups, kh, kw], "
            f"got shape {tuple(weight.shape)}"
        )
    s, p, op, d, (oh, ow) = _transposed_geometry(
        "conv_transpose2d",
        x,
        weight,
        bias,
        groups,
        (stride, padding, output_padding, dilation),
        _pair,
    )
    groups = operator.index(groups)
    n, c, h, w = x.shape
    out_g, kh, kw = weight.shape[1:]
    cg = c // groups
    xg = x.reshape(n, groups, cg, h * w)
    wg = weight.reshape(groups, cg, out_g * kh * kw).transpose(1, 2)  # [G, O/G*kh*kw, C/G]
    cols = wg.matmul(xg).reshape(n, groups * out_g * kh * kw, h * w)
    # fold (unpadded) to the full extent of the blocks, append the output_padding rows/cols
    # (nothing lands there) and crop the padding
    full = fold(cols, (oh + 2 * p[0] - op[0], ow + 2 * p[1] - op[1]), (kh, kw), d, 0, s)
    if op != (0, 0):
        full = _pad(full, (0, op[1], 0, op[0]))
    out = full[:, :, p[0] : p[0] + oh, p[1] : p[1] + ow] if p != (0, 0) else full
    if bias is not None:
        out = out + bias.reshape(groups * out_g, 1, 1)
    return out.squeeze(0) if squeeze else out


def conv_transpose1d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride=1,
    padding=0,
    output_padding=0,
    groups: int = 1,
    dilation=1,
) -> Tensor:
    """1-D transposed convolution (torch.nn.functional.conv_transpose1d): conv_transpose2d
    over a height of one; weight [C, O/groups, k]."""
    x, squeeze = _as_3d("conv_transpose1d", input)
    _check_tensor("conv_transpose1d", weight, "weight")
    if weight.ndim != 3:
        raise ShapeError(
            f"conv_transpose1d(): weight must be 3-D [in_channels, out_channels/groups, k], got "
            f"shape {tuple(weight.shape)}"
        )
    args = [
        (0, _single(v, "conv_transpose1d", name, least))
        for v, name, least in (
            (stride, "stride", 1),
            (padding, "padding", 0),
            (output_padding, "output_padding", 0),
            (dilation, "dilation", 1),
        )
    ]
    args[0] = (1, args[0][1])
    args[3] = (1, args[3][1])
    out = conv_transpose2d(
        x.unsqueeze(2), weight.unsqueeze(2), bias, args[0], args[1], args[2], groups, args[3]
    ).squeeze(2)
    return out.squeeze(0) if squeeze else out


def conv_tbc(input: Tensor, weight: Tensor, bias: Tensor, pad: int = 0) -> Tensor:
    """A 1-D convolution over a time-major sequence, as torch.nn.functional.conv_tbc: input
    [T, B, C_in], weight [K, C_in, C_out], bias [C_out], ``pad`` zeros at both ends of time;
    returns [T + 2 pad - K + 1, B, C_out] (conv1d on the permuted operands)."""
    _check_tensor("conv_tbc", input)
    _check_tensor("conv_tbc", weight, "weight")
    _check_tensor("conv_tbc", bias, "bias")
    if input.ndim != 3 or weight.ndim != 3 or bias.ndim != 1:
        raise ShapeError(
            f"conv_tbc(): expected input [T, B, C_in], weight [K, C_in, C_out] and bias [C_out], "
            f"got {tuple(input.shape)}, {tuple(weight.shape)}, {tuple(bias.shape)}"
        )
    if weight.shape[1] != input.shape[2] or bias.shape[0] != weight.shape[2]:
        raise ShapeError(
            f"conv_tbc(): input channels {input.shape[2]}, weight {tuple(weight.shape)} and "
            f"bias {tuple(bias.shape)} do not fit (weight [K, C_in, C_out], bias [C_out])"
        )
    if weight.dtype is not input.dtype or bias.dtype is not input.dtype:
        raise DTypeError(
            f"conv_tbc(): input, weight and bias must be floating point of one dtype, got "
            f"{input.dtype}, {weight.dtype} and {bias.dtype}"
        )
    pad = operator.index(pad)
    if pad < 0:
        raise ValueError(f"conv_tbc(): pad must be non-negative, got {pad}")
    out = conv1d(input.permute(1, 2, 0), weight.permute(2, 1, 0), bias, padding=pad)
    return out.permute(2, 0, 1)
