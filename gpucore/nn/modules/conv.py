"""Conv2d."""

from __future__ import annotations

import math
import operator

from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter
from .linear import _new


def _pair(v, name: str):
    try:
        p = (
            tuple(operator.index(e) for e in v)
            if isinstance(v, (tuple, list))
            else ((operator.index(v),) * 2)
        )
    except TypeError:
        p = ()
    if len(p) == 1:
        p = p * 2
    if len(p) != 2:
        raise ValueError(f"Conv2d: {name} must be an int or a pair of ints, got {v!r}")
    return p


class Conv2d(Module):
    """2-D convolution over [N, C, H, W] (torch.nn.Conv2d), computed as im2col + matmul.

    padding: an int, a pair, 'valid' or 'same' (stride 1); padding_mode 'zeros' only. Weight
    [out_channels, in_channels/groups, kh, kw] initialised kaiming_uniform_(a=sqrt(5)) and
    bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in_channels/groups * kh * kw.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device=None,
        dtype=None,
    ):
        super().__init__()
        if groups <= 0:
            raise ValueError(f"Conv2d: groups must be a positive integer, got {groups}")
        if in_channels % groups:
            raise ValueError(
                f"Conv2d: in_channels ({in_channels}) must be divisible by groups ({groups})"
            )
        if out_channels % groups:
            raise ValueError(
                f"Conv2d: out_channels ({out_channels}) must be divisible by groups ({groups})"
            )
        self.kernel_size = _pair(kernel_size, "kernel_size")
        self.stride = _pair(stride, "stride")
        self.dilation = _pair(dilation, "dilation")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(
                    f"Conv2d: padding must be an int, a pair, 'valid' or 'same', got {padding!r}"
                )
            if padding == "same" and self.stride != (1, 1):
                raise ValueError("Conv2d: padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = _pair(padding, "padding")
        if padding_mode != "zeros":
            if padding_mode in ("reflect", "replicate", "circular"):
                raise NotImplementedError(
                    f"Conv2d: padding_mode={padding_mode!r} is not supported yet; only 'zeros'"
                )
            raise ValueError(
                "Conv2d: padding_mode must be 'zeros', 'reflect', 'replicate' or 'circular', got "
                f"{padding_mode!r}"
            )
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.groups = groups
        self.padding_mode = padding_mode
        self.weight = Parameter(
            _new((out_channels, in_channels // groups, *self.kernel_size), device, dtype)
        )
        if bias:
            self.bias = Parameter(_new((out_channels,), device, dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        return F.conv2d(
            input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups
        )

    def extra_repr(self) -> str:
        s = (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}"
        )
        if self.padding != (0, 0):
            s += f", padding={self.padding}"
        if self.dilation != (1, 1):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s
