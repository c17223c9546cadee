"""Activation modules: ReLU, LeakyReLU, Sigmoid, Tanh, GELU, Softmax, LogSoftmax, and SiLU, Mish,
ELU, SELU, CELU, Softplus, Hardtanh, ReLU6, Hardsigmoid, Hardswish, LogSigmoid, Softsign,
Tanhshrink, Softmin, GLU, PReLU."""

from __future__ import annotations

import warnings

from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter
from .linear import _new


class ReLU(Module):
    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.relu(input, inplace=self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class LeakyReLU(Module):
    def __init__(self, negative_slope: float = 0.01, inplace: bool = False):
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class Sigmoid(Module):
    def forward(self, input):
        return F.sigmoid(input)


class Tanh(Module):
    def forward(self, input):
        return F.tanh(input)


class GELU(Module):
    """GELU, exact (approximate='none') or the tanh approximation."""

    def __init__(self, approximate: str = "none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


def _implicit_dim(name: str, ndim: int) -> int:
    warnings.warn(
        f"Implicit dimension choice for {name} has been deprecated. Change the call to include "
        "dim=X as an argument.",
        UserWarning,
        stacklevel=3,
    )
    return 0 if ndim in (0, 1, 3) else 1


class Softmax(Module):
    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        dim = self.dim if self.dim is not None else _implicit_dim("softmax", input.ndim)
        return F.softmax(input, dim=dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Module):
    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        dim = self.dim if self.dim is not None else _implicit_dim("log_softmax", input.ndim)
        return F.log_softmax(input, dim=dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class _InplaceActivation(Module):
    """An activation whose only argument is inplace."""

    _fn = None
    _show_inplace = True  # PyTorch's Hardsigmoid/Hardswish print no inplace flag

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return type(self)._fn(input, inplace=self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace and self._show_inplace else ""


class SiLU(_InplaceActivation):
    """x * sigmoid(x)."""

    _fn = F.silu


class Mish(_InplaceActivation):
    """x * tanh(softplus(x))."""

    _fn = F.mish


class SELU(_InplaceActivation):
    """Scaled ELU with the self-normalizing constants."""

    _fn = F.selu


class Hardsigmoid(_InplaceActivation):
    """relu6(x + 3) / 6."""

    _fn = F.hardsigmoid
    _show_inplace = False


class Hardswish(_InplaceActivation):
    """x * relu6(x + 3) / 6."""

    _fn = F.hardswish
    _show_inplace = False


class ELU(Module):
    """x where x > 0, else alpha * (exp(x) - 1)."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class CELU(ELU):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""

    def forward(self, input):
        return F.celu(input, self.alpha, self.inplace)


class Softplus(Module):
    """log(1 + exp(beta * x)) / beta, linear above threshold."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Hardtanh(Module):
    """x clamped to [min_val, max_val] (min_value/max_value: PyTorch's deprecated names)."""

    def __init__(
        self,
        min_val: float = -1.0,
        max_val: float = 1.0,
        inplace: bool = False,
        min_value: float | None = None,
        max_value: float | None = None,
    ):
        super().__init__()
        if min_value is not None or max_value is not None:
            warnings.warn(
                "keyword arguments min_value and max_value are deprecated, use min_val and "
                "max_val instead",
                FutureWarning,
                stacklevel=2,
            )
            min_val = min_val if min_value is None else min_value
            max_val = max_val if max_value is None else max_value
        if min_val > max_val:
            raise ValueError(
                f"{type(self).__name__}: min_val ({min_val}) cannot be greater than max_val "
                f"({max_val})"
            )
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}" + (
            ", inplace=True" if self.inplace else ""
        )


class ReLU6(Hardtanh):
    """min(max(x, 0), 6)."""

    def __init__(self, inplace: bool = False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class LogSigmoid(Module):
    """log(sigmoid(x))."""

    def forward(self, input):
        return F.logsigmoid(input)


class Softsign(Module):
    """x / (1 + |x|)."""

    def forward(self, input):
        return F.softsign(input)


class Tanhshrink(Module):
    """x - tanh(x)."""

    def forward(self, input):
        return F.tanhshrink(input)


class Softmin(Module):
    """softmax(-x) along dim (None: PyTorch's deprecated implicit choice, with its warning)."""

    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        dim = self.dim if self.dim is not None else _implicit_dim("softmin", input.ndim)
        return F.softmin(input, dim=dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class GLU(Module):
    """a * sigmoid(b) for the two halves a, b of the input along dim."""

    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class PReLU(Module):
    """x where x > 0, else a * x with a learnable slope a: one (num_parameters=1) or one per
    channel (dim 1 of the input), initialised to init."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(_new((num_parameters,), device, dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.constant_(self.weight, self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"
