"""Dropout, Dropout1d/2d/3d (whole channels), AlphaDropout and FeatureAlphaDropout."""

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


class _DropoutNd(Module):
    _fn = "dropout"

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"{type(self).__name__}: probability p must be in [0, 1], got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input):
        return getattr(F, self._fn)(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(_DropoutNd):
    """Zeroes whole channels of [N, C, L] (or [C, L]) inputs with probability p in training
    (scaling the rest by 1/(1-p)); the identity in eval mode."""

    _fn = "dropout1d"


class Dropout3d(_DropoutNd):
    """Zeroes whole channels of [N, C, D, H, W] (or [C, D, H, W]) inputs with probability p in
    training (scaling the rest by 1/(1-p)); the identity in eval mode."""

    _fn = "dropout3d"


class AlphaDropout(_DropoutNd):
    """Dropout that keeps SELU's mean and variance (F.alpha_dropout) in training; the identity
    in eval mode."""

    _fn = "alpha_dropout"


class FeatureAlphaDropout(_DropoutNd):
    """AlphaDropout of whole channels (F.feature_alpha_dropout) in training; the identity in
    eval mode."""

    _fn = "feature_alpha_dropout"
