"""Dropout and Dropout2d (whole channels)."""

from __future__ import annotations

from .. import functional as F
from ..module import Module


class Dropout(Module):
    """Zeroes elements with probability p in training (scaling the rest by 1/(1-p)); the
    identity in eval mode."""

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: probability p must be in [0, 1], got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout2d(Module):
    """Zeroes whole channels with probability p in training (scaling the rest by 1/(1-p)); the
    identity in eval mode."""

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout2d: probability p must be in [0, 1], got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input):
        return F.dropout2d(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"
