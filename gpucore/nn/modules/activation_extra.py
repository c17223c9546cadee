"""The less common activation modules: Hardshrink, Softshrink, Threshold, RReLU and Softmax2d
(over nn.functional's forms)."""

from __future__ import annotations

from .. import functional as F
from ..module import Module


class Hardshrink(Module):
    """x where |x| > lambd, else 0 (F.hardshrink)."""

    def __init__(self, lambd: float = 0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return F.hardshrink(input, self.lambd)

    def extra_repr(self) -> str:
        return f"{self.lambd}"


class Softshrink(Module):
    """x - lambd above lambd, x + lambd below -lambd, else 0 (F.softshrink)."""

    def __init__(self, lambd: float = 0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return F.softshrink(input, self.lambd)

    def extra_repr(self) -> str:
        return f"{self.lambd}"


class Threshold(Module):
    """x where x > threshold, else value (F.threshold)."""

    def __init__(self, threshold: float, value: float, inplace: bool = False):
        super().__init__()
        self.threshold = threshold
        self.value = value
        self.inplace = inplace

    def forward(self, input):
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        s = f"threshold={self.threshold}, value={self.value}"
        return s + (", inplace=True" if self.inplace else "")


class RReLU(Module):
    """Randomized leaky ReLU (F.rrelu): a random slope in [lower, upper] per element while
    training, their mean in eval mode."""

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3, inplace: bool = False):
        super().__init__()
        if not 0.0 <= lower <= upper:
            raise ValueError(f"RReLU: need 0 <= lower <= upper, got lower {lower}, upper {upper}")
        self.lower = lower
        self.upper = upper
        self.inplace = inplace

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        s = f"lower={self.lower}, upper={self.upper}"
        return s + (", inplace=True" if self.inplace else "")


class Softmax2d(Module):
    """Softmax over the channels of [N, C, H, W] (or [C, H, W]) inputs at every location."""

    def forward(self, input):
        if input.ndim not in (3, 4):
            raise ValueError(
                f"Softmax2d: expected a 3-D or 4-D input, got shape {tuple(input.shape)}"
            )
        return F.softmax(input, -3)
