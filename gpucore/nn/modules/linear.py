"""Identity, Linear and Bilinear."""

from __future__ import annotations

import math

from ...creation import empty
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter


def _new(shape, device, dtype):
    t = empty(*shape, dtype=dtype)
    return t if device is None else t.to(device)


class Identity(Module):
    """Returns its input; accepts (and ignores) any constructor arguments."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """``y = x @ weight.T + bias``; weight [out_features, in_features] initialised
    kaiming_uniform_(a=sqrt(5)) and bias U(-1/sqrt(in_features), 1/sqrt(in_features)), as
    PyTorch."""

    def __init__(
        self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None
    ):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(_new((out_features, in_features), device, dtype))
        if bias:
            self.bias = Parameter(_new((out_features,), device, dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.in_features
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}"
        )


class NonDynamicallyQuantizableLinear(Linear):
    """A Linear that quantize_dynamic leaves in float, as PyTorch's
    torch.nn.modules.linear.NonDynamicallyQuantizableLinear: MultiheadAttention's out_proj, whose
    weight the attention reads directly."""


class Bilinear(Module):
    """``y = x1 @ weight[k] @ x2 + bias[k]``; weight [out_features, in1_features, in2_features]
    and bias [out_features] initialised U(-1/sqrt(in1_features), 1/sqrt(in1_features)), as
    PyTorch."""

    def __init__(
        self,
        in1_features: int,
        in2_features: int,
        out_features: int,
        bias: bool = True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        self.weight = Parameter(_new((out_features, in1_features, in2_features), device, dtype))
        if bias:
            self.bias = Parameter(_new((out_features,), device, dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1 / math.sqrt(self.weight.shape[1]) if self.weight.shape[1] > 0 else 0
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
            f"out_features={self.out_features}, bias={self.bias is not None}"
        )
