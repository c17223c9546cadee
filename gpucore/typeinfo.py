"""PyTorch's dtype helpers and global switches: finfo, iinfo, result_type, promote_types,
can_cast, set_printoptions / get_printoptions (Tensor's repr), use_deterministic_algorithms /
are_deterministic_algorithms_enabled (gpucore's kernels are deterministic whatever the flag:
the flag is recorded and reported, as scripts set and read it)."""

from __future__ import annotations

import numpy as np

from . import dtypes as D
from .errors import DTypeError
from .tensor import Tensor

# ---------------------------------------------------------------------------- finfo, iinfo
_BF16 = dict(bits=16, eps=0.0078125, max=3.3895313892515355e38, tiny=1.1754943508222875e-38)


class finfo:  # noqa: N801 - PyTorch's name
    """Machine limits of a float dtype (by default of ``get_default_dtype()``), as torch.finfo:
    bits, eps, max, min, tiny (= smallest_normal), resolution, dtype."""

    def __init__(self, type=None):  # noqa: A002 - PyTorch's name
        dt = D.default_float() if type is None else D.as_dtype(type)
        if not dt.is_floating_point:
            raise DTypeError(f"finfo(): expected a floating dtype, got {dt}; use iinfo()")
        self.dtype = str(dt).split(".")[-1]
        if dt is D.bfloat16:
            self.bits, self.eps, self.max = _BF16["bits"], _BF16["eps"], _BF16["max"]
            self.tiny = self.smallest_normal = _BF16["tiny"]
            self.resolution = 0.01
        else:
            f = np.finfo(dt.np)
            self.bits, self.eps, self.max = int(f.bits), float(f.eps), float(f.max)
            self.tiny = self.smallest_normal = float(f.smallest_normal)
            self.resolution = float(f.resolution)
        self.min = -self.max

    def __repr__(self) -> str:
        return (
            f"finfo(resolution={self.resolution}, min={self.min:g}, max={self.max:g}, "
            f"eps={self.eps:g}, smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, "
            f"dtype={self.dtype})"
        )


class iinfo:  # noqa: N801 - PyTorch's name
    """Machine limits of an integer dtype, as torch.iinfo: bits, max, min, dtype."""

    def __init__(self, type):  # noqa: A002
        dt = D.as_dtype(type)
        if dt.is_floating_point or dt is D.bool_:
            raise DTypeError(f"iinfo(): expected an integer dtype, got {dt}; use finfo()")
        i = np.iinfo(dt.np)
        self.bits, self.max, self.min = int(i.bits), int(i.max), int(i.min)
        self.dtype = str(dt).split(".")[-1]

    def __repr__(self) -> str:
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


# ---------------------------------------------------------------------------- promotion
def _category(dt) -> int:
    return 2 if dt.is_floating_point else (0 if dt is D.bool_ else 1)


def promote_types(type1, type2):
    """The dtype both promote to, as torch.promote_types."""
    return D.promote(D.as_dtype(type1), D.as_dtype(type2))


def result_type(tensor, other):
    """The dtype of an arithmetic op on the two operands (Tensors or numbers), as
    torch.result_type: a number or a 0-d tensor only lifts the category."""
    if not isinstance(tensor, Tensor) and not isinstance(other, Tensor):
        raise TypeError("result_type(): one of the arguments must be a Tensor")
    if not isinstance(tensor, Tensor):
        tensor, other = other, tensor
    if not isinstance(other, Tensor):
        return D.scalar_result(tensor.dtype, other)
    a, b = tensor.dtype, other.dtype
    if tensor.ndim == 0 and other.ndim > 0 and _category(a) <= _category(b):
        return b
    if other.ndim == 0 and tensor.ndim > 0 and _category(b) <= _category(a):
        return a
    return D.promote(a, b)


def can_cast(from_, to) -> bool:
    """Whether PyTorch's casting rules allow ``from_`` to ``to`` in type promotion (no casting
    to a lower category: float to integer, integer to bool), as torch.can_cast."""
    return _category(D.as_dtype(from_)) <= _category(D.as_dtype(to))


# ---------------------------------------------------------------------------- printing
PRINT_OPTIONS = {
    "precision": 4,
    "threshold": 1000,
    "edgeitems": 3,
    "linewidth": 80,
    "sci_mode": None,
}
_PROFILES = {
    "default": dict(precision=4, threshold=1000, edgeitems=3, linewidth=80),
    "short": dict(precision=2, threshold=1000, edgeitems=2, linewidth=80),
    "full": dict(precision=4, threshold=2**63 - 1, edgeitems=3, linewidth=80),
}


def set_printoptions(
    precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None, sci_mode=None
) -> None:
    """How Tensor's repr prints, as torch.set_printoptions: digits after the point, the element
    count above which it summarizes (``...``) keeping ``edgeitems`` per edge, the line width,
    a profile ('default', 'short', 'full') and scientific notation (True, False, None = auto)."""
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"set_printoptions(): unknown profile {profile!r}")
        PRINT_OPTIONS.update(_PROFILES[profile])
    for name, value in (
        ("precision", precision),
        ("threshold", threshold),
        ("edgeitems", edgeitems),
        ("linewidth", linewidth),
    ):
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"set_printoptions(): {name} must be an int >= 0, got {value!r}")
            PRINT_OPTIONS[name] = value
    PRINT_OPTIONS["sci_mode"] = sci_mode


def get_printoptions() -> dict:
    """The current print options (a copy)."""
    return dict(PRINT_OPTIONS)


# ---------------------------------------------------------------------------- determinism
_DETERMINISTIC = {"mode": False, "warn_only": False}


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Record PyTorch's determinism switch. gpucore's kernels are deterministic already (every
    reduction has a fixed order, results do not depend on the thread count), so nothing else
    changes."""
    if not isinstance(mode, bool):
        raise TypeError(f"use_deterministic_algorithms(): mode must be a bool, got {mode!r}")
    _DETERMINISTIC.update(mode=mode, warn_only=bool(warn_only))


def are_deterministic_algorithms_enabled() -> bool:
    """The switch last set by use_deterministic_algorithms (False by default)."""
    return _DETERMINISTIC["mode"]


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    """The warn_only flag last set by use_deterministic_algorithms."""
    return _DETERMINISTIC["warn_only"]
