"""Padding layers: ConstantPad, ZeroPad, ReflectionPad, ReplicationPad and CircularPad in 1, 2
and 3 dims (F.pad with the matching mode)."""

from __future__ import annotations

from .. import functional as F
from ..module import Module


def _ntuple(name: str, padding, n: int) -> tuple:
    if isinstance(padding, int):
        return (padding,) * (2 * n)
    padding = tuple(padding)
    if len(padding) != 2 * n or not all(isinstance(p, int) for p in padding):
        raise ValueError(f"{name}: padding must be an int or {2 * n} ints, got {padding!r}")
    return padding


class _PadNd(Module):
    _n = 2
    _mode = "constant"

    def __init__(self, padding):
        super().__init__()
        self.padding = _ntuple(type(self).__name__, padding, self._n)

    def forward(self, input):
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value: float):
        super().__init__(padding)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pads the last dim with a constant value; padding: int or (left, right)."""

    _n = 1


class ConstantPad2d(_ConstantPadNd):
    """Pads the last 2 dims with a constant value; padding: int or (left, right, top,
    bottom)."""

    _n = 2


class ConstantPad3d(_ConstantPadNd):
    """Pads the last 3 dims with a constant value; padding: int or 6 ints."""

    _n = 3


class _ZeroPadNd(_ConstantPadNd):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad1d(_ZeroPadNd):
    """Pads the last dim with zeros."""

    _n = 1


class ZeroPad2d(_ZeroPadNd):
    """Pads the last 2 dims with zeros; padding: int or (left, right, top, bottom)."""

    _n = 2


class ZeroPad3d(_ZeroPadNd):
    """Pads the last 3 dims with zeros."""

    _n = 3


class ReflectionPad1d(_PadNd):
    """Pads the last dim with its reflection (the edge not repeated)."""

    _n, _mode = 1, "reflect"


class ReflectionPad2d(_PadNd):
    """Pads the last 2 dims with their reflection (the edge not repeated)."""

    _n, _mode = 2, "reflect"


class ReflectionPad3d(_PadNd):
    """Pads the last 3 dims with their reflection (the edge not repeated)."""

    _n, _mode = 3, "reflect"


class ReplicationPad1d(_PadNd):
    """Pads the last dim by repeating its edge values."""

    _n, _mode = 1, "replicate"


class ReplicationPad2d(_PadNd):
    """Pads the last 2 dims by repeating their edge values."""

    _n, _mode = 2, "replicate"


class ReplicationPad3d(_PadNd):
    """Pads the last 3 dims by repeating their edge values."""

    _n, _mode = 3, "replicate"


class CircularPad1d(_PadNd):
    """Pads the last dim by wrapping around (F.pad mode 'circular')."""

    _n, _mode = 1, "circular"


class CircularPad2d(_PadNd):
    """Pads the last 2 dims by wrapping around (F.pad mode 'circular')."""

    _n, _mode = 2, "circular"


class CircularPad3d(_PadNd):
    """Pads the last 3 dims by wrapping around (F.pad mode 'circular')."""

    _n, _mode = 3, "circular"
