"""Conv1d/2d/3d, ConvTranspose1d/2d/3d, and Fold/Unfold (im2col and col2im)."""

from __future__ import annotations

import math
import operator

from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter
from .linear import _new


def _tuple(v, n: int, name: str, cls: str = "Conv2d"):
    """v (an int or a sequence of 1 or n ints) as an n-tuple (PyTorch's _single/_pair)."""
    try:
        p = (
            tuple(operator.index(e) for e in v)
            if isinstance(v, (tuple, list))
            else ((operator.index(v),) * n)
        )
    except TypeError:
        p = ()
    if len(p) == 1:
        p = p * n
    if len(p) != n:
        what = {1: "an int", 2: "a pair of ints"}.get(n, "a triple of ints")
        raise ValueError(f"{cls}: {name} must be an int or {what}, got {v!r}")
    return p


class _ConvNd(Module):
    """The constructor, parameters and repr Conv1d/2d/3d and ConvTranspose1d/2d/3d share (PyTorch's
    _ConvNd): weight [out, in/groups, *k] ([in, out/groups, *k] when transposed) initialised
    kaiming_uniform_(a=sqrt(5)), bias U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""

    _n = 2
    _transposed = False

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
        output_padding=0,
    ):
        super().__init__()
        cls, n = type(self).__name__, self._n
        if groups <= 0:
            raise ValueError(f"{cls}: groups must be a positive integer, got {groups}")
        if in_channels % groups:
            raise ValueError(
                f"{cls}: in_channels ({in_channels}) must be divisible by groups ({groups})"
            )
        if out_channels % groups:
            raise ValueError(
                f"{cls}: out_channels ({out_channels}) must be divisible by groups ({groups})"
            )
        self.kernel_size = _tuple(kernel_size, n, "kernel_size", cls)
        self.stride = _tuple(stride, n, "stride", cls)
        self.dilation = _tuple(dilation, n, "dilation", cls)
        self.output_padding = _tuple(output_padding, n, "output_padding", cls)
        if isinstance(padding, str) and not self._transposed:
            if padding not in ("same", "valid"):
                raise ValueError(
                    f"{cls}: padding must be an int, a pair, 'valid' or 'same', got {padding!r}"
                )
            if padding == "same" and self.stride != (1,) * n:
                raise ValueError(f"{cls}: padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = _tuple(padding, n, "padding", cls)
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise ValueError(
                f"{cls}: padding_mode must be 'zeros', 'reflect', 'replicate' or 'circular', got "
                f"{padding_mode!r}"
            )
        if padding_mode != "zeros" and self._transposed:
            raise ValueError(f"{cls}: only 'zeros' padding_mode is supported, as in PyTorch")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.transposed = self._transposed
        self.groups = groups
        self.padding_mode = padding_mode
        shape = (
            (in_channels, out_channels // groups)
            if self._transposed
            else (out_channels, in_channels // groups)
        )
        self.weight = Parameter(_new((*shape, *self.kernel_size), device, dtype))
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

    def extra_repr(self) -> str:
        n = self._n
        s = (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}"
        )
        if self.padding != (0,) * n:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * n:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * n:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class _Conv(_ConvNd):
    """Conv1d/2d: the constructor in PyTorch's argument order (no output_padding) and a forward
    through the class's functional form ``_conv``."""

    _conv = None

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
        super().__init__(
            in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
            padding_mode, device, dtype,
        )  # fmt: skip

    def _mode_padding(self) -> tuple:
        """F.pad's amounts for a padding_mode other than 'zeros' (PyTorch's
        _reversed_padding_repeated_twice: the last dim first; 'same' pads one more after)."""
        if self.padding == "valid":
            return (0, 0) * self._n
        out = []
        for i in reversed(range(self._n)):
            if self.padding == "same":
                total = self.dilation[i] * (self.kernel_size[i] - 1)
                out += [total // 2, total - total // 2]
            else:
                out += [self.padding[i]] * 2
        return tuple(out)

    def forward(self, input):
        if self.padding_mode != "zeros":
            # the padding applied first in that mode, then an unpadded convolution (as PyTorch)
            x = F.pad(input, self._mode_padding(), mode=self.padding_mode)
            return self._conv(x, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)
        return self._conv(
            input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups
        )


class Conv1d(_Conv):
    """1-D convolution over [N, C, L] (torch.nn.Conv1d), computed as conv2d over a height of
    one. padding: an int, 'valid' or 'same' (stride 1); padding_mode 'zeros', 'reflect',
    'replicate' or 'circular'."""

    _n = 1
    _conv = staticmethod(F.conv1d)


class Conv2d(_Conv):
    """2-D convolution over [N, C, H, W] (torch.nn.Conv2d), computed as im2col + matmul.

    padding: an int, a pair, 'valid' or 'same' (stride 1); padding_mode 'zeros', 'reflect',
    'replicate' or 'circular' (F.pad's, then an unpadded convolution). Weight
    [out_channels, in_channels/groups, kh, kw] initialised kaiming_uniform_(a=sqrt(5)) and
    bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in_channels/groups * kh * kw.
    """

    _conv = staticmethod(F.conv2d)


class Conv3d(_Conv):
    """3-D convolution over [N, C, D, H, W] (torch.nn.Conv3d), computed as one conv2d of the
    depth taps (F.conv3d).

    padding: an int, a triple, 'valid' or 'same' (stride 1); padding_mode as Conv2d's. Weight
    [out_channels, in_channels/groups, kd, kh, kw] initialised as Conv2d's, fan_in =
    in_channels/groups * kd * kh * kw.
    """

    _n = 3
    _conv = staticmethod(F.conv3d)


class _ConvTransposeNd(_ConvNd):
    """ConvTranspose1d/2d/3d: the constructor in PyTorch's argument order, and forward's
    output_size (which picks output_padding)."""

    _transposed = True

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        output_padding=0,
        groups: int = 1,
        bias: bool = True,
        dilation=1,
        padding_mode: str = "zeros",
        device=None,
        dtype=None,
    ):
        super().__init__(
            in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
            padding_mode, device, dtype, output_padding,
        )  # fmt: skip

    def forward(self, input, output_size=None):
        return self._conv(
            input,
            self.weight,
            self.bias,
            self.stride,
            self.padding,
            self._output_padding(input, output_size),
            self.groups,
            self.dilation,
        )

    def _output_padding(self, input, output_size) -> tuple:
        """output_padding, or the one that gives output_size (its trailing spatial dims)."""
        if output_size is None:
            return self.output_padding
        n = self._n
        size = tuple(output_size)[-n:]
        pads = []
        for i in range(n):
            least = (
                (input.shape[input.ndim - n + i] - 1) * self.stride[i]
                - 2 * self.padding[i]
                + self.dilation[i] * (self.kernel_size[i] - 1)
                + 1
            )
            if not least <= size[i] < least + max(self.stride[i], self.dilation[i]):
                raise ValueError(
                    f"{type(self).__name__}: requested output size {tuple(output_size)} is not "
                    f"reachable from input of shape {tuple(input.shape)}"
                )
            pads.append(size[i] - least)
        return tuple(pads)


class ConvTranspose1d(_ConvTransposeNd):
    """1-D transposed convolution over [N, C, L] (torch.nn.ConvTranspose1d); weight
    [in_channels, out_channels/groups, k]."""

    _n = 1
    _conv = staticmethod(F.conv_transpose1d)


class ConvTranspose2d(_ConvTransposeNd):
    """2-D transposed convolution over [N, C, H, W] (torch.nn.ConvTranspose2d), the adjoint of
    Conv2d; weight [in_channels, out_channels/groups, kh, kw]."""

    _conv = staticmethod(F.conv_transpose2d)


class ConvTranspose3d(_ConvTransposeNd):
    """3-D transposed convolution over [N, C, D, H, W] (torch.nn.ConvTranspose3d), the adjoint
    of Conv3d; weight [in_channels, out_channels/groups, kd, kh, kw]."""

    _n = 3
    _conv = staticmethod(F.conv_transpose3d)


class Fold(Module):
    """Sums sliding patches [N, C*kh*kw, L] into [N, C, H, W] (torch.nn.Fold; F.fold)."""

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size = output_size
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input):
        return F.fold(
            input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride
        )

    def extra_repr(self) -> str:
        return (
            f"output_size={self.output_size}, kernel_size={self.kernel_size}, "
            f"dilation={self.dilation}, padding={self.padding}, stride={self.stride}"
        )


class Unfold(Module):
    """Extracts sliding patches [N, C, H, W] -> [N, C*kh*kw, L] (torch.nn.Unfold; F.unfold)."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input):
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding={self.padding}, "
            f"stride={self.stride}"
        )
