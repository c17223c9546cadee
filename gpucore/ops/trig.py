"""Trigonometric and hyperbolic compositions: tan, asin, acos, atan, sinh, cosh, asinh, acosh,
atanh and their NumPy-style ``arc*`` aliases, as function, method and in-place method (no
kernels: compositions of sin/cos, exp/expm1, log/log1p, sqrt and atan2, so they run and
differentiate on every backend).

Accuracy: each is written so that float32 keeps its relative precision where PyTorch's libm
does: sinh from expm1 near 0 and from exp(|x|) / 2 beyond (inf where exp overflows, as PyTorch's
float32 sinh / cosh), asinh and
acosh through log1p with a log(x) + ln 2 branch where x^2 would overflow, atanh from two log1p,
asin / acos / atan from atan2. Branches see clamped arguments only, so the branch not taken
never puts NaN or inf into a gradient. Integer inputs compute in the default float dtype;
float16 and bfloat16 ones in float32, rounded back once (as PyTorch computes them: their range
would overflow the intermediate squares and exponentials).

kernels: none (the composed ops').
"""

from __future__ import annotations

import functools
import math

from .. import dtypes as D
from ..tensor import Tensor
from .api import public
from .common import float_input
from .elementwise import where
from .special import atan2

_LN2 = math.log(2.0)
_BIG = 2.0**28  # beyond, x^2 + 1 == x^2 in float64 and sqrt(x^2 + 1) ~ x: log(x) + ln 2


def _half_in_float32(fn):
    """fn computed in float32 for float16 / bfloat16 inputs, the result rounded back."""

    @functools.wraps(fn)
    def wrapper(input: Tensor) -> Tensor:
        x = float_input(input)
        if x.dtype in (D.float16, D.bfloat16):
            return fn(x.float()).to(x.dtype)
        return fn(x)

    return wrapper


def _odd(f, x: Tensor) -> Tensor:
    """f extended to negative x as an odd function: s * f(s * x) with s = +-1 (1 at 0, so the
    gradient at 0 is f'(0))."""
    s = where(x < 0, x.new_full((), -1.0), x.new_full((), 1.0))
    return s * f(x * s)


@public("tan", inplace=True)
@_half_in_float32
def tan(input: Tensor) -> Tensor:
    """The tangent, elementwise, as torch.tan."""
    x = float_input(input)
    return x.sin() / x.cos()


@public("sinh", inplace=True)
@_half_in_float32
def sinh(input: Tensor) -> Tensor:
    """The hyperbolic sine, elementwise, as torch.sinh."""
    x = float_input(input)
    xs = x.clamp(-1.0, 1.0)
    small = (xs.expm1() - (-xs).expm1()) * 0.5

    def big(a):
        t = a.clamp(min=1.0).exp() * 0.5
        return t - 0.25 / t

    return where(x.abs() < 1.0, small, _odd(big, x))


@public("cosh", inplace=True)
@_half_in_float32
def cosh(input: Tensor) -> Tensor:
    """The hyperbolic cosine, elementwise, as torch.cosh."""
    x = float_input(input)
    t = x.abs().exp() * 0.5
    return t + 0.25 / t


def _asinh_pos(a: Tensor) -> Tensor:
    s = a.clamp(max=_BIG)
    small = (s + s * s / (1.0 + (1.0 + s * s).sqrt())).log1p()
    return where(a > _BIG, a.clamp(min=_BIG).log() + _LN2, small)


@public("asinh", "arcsinh", inplace=True)
@_half_in_float32
def asinh(input: Tensor) -> Tensor:
    """The inverse hyperbolic sine, elementwise, as torch.asinh."""
    x = float_input(input)
    return where(x == 0, x, _odd(_asinh_pos, x))  # -0.0 stays -0.0 (slope 1 there, as asinh's)


@public("acosh", "arccosh", inplace=True)
@_half_in_float32
def acosh(input: Tensor) -> Tensor:
    """The inverse hyperbolic cosine, elementwise (NaN below 1), as torch.acosh."""
    x = float_input(input)
    u = x.clamp(max=_BIG) - 1.0
    small = (u + u.sqrt() * (u + 2.0).sqrt()).log1p()  # NaN below 1
    return where(x > _BIG, x.clamp(min=_BIG).log() + _LN2, small)


@public("atanh", "arctanh", inplace=True)
@_half_in_float32
def atanh(input: Tensor) -> Tensor:
    """The inverse hyperbolic tangent, elementwise (+-inf at +-1, NaN beyond), as torch.atanh."""
    x = float_input(input)
    return (x.log1p() - (-x).log1p()) * 0.5


@public("atan", "arctan", inplace=True)
@_half_in_float32
def atan(input: Tensor) -> Tensor:
    """The inverse tangent, elementwise, as torch.atan."""
    x = float_input(input)
    return atan2(x, x.new_ones(()))


@public("asin", "arcsin", inplace=True)
@_half_in_float32
def asin(input: Tensor) -> Tensor:
    """The inverse sine, elementwise (NaN outside [-1, 1]), as torch.asin."""
    x = float_input(input)
    return atan2(x, ((1.0 - x) * (1.0 + x)).sqrt())


@public("acos", "arccos", inplace=True)
@_half_in_float32
def acos(input: Tensor) -> Tensor:
    """The inverse cosine, elementwise (NaN outside [-1, 1]), as torch.acos."""
    x = float_input(input)
    return atan2(((1.0 - x) * (1.0 + x)).sqrt(), x)
