"""Pointwise compositions: lerp, nan_to_num, round(decimals=), fix, frac, sgn, float_power,
deg2rad/rad2deg, logaddexp(2), xlogy, sinc, copysign, heaviside, fmax/fmin, clamp_min/clamp_max,
addcmul/addcdiv (no kernels: compositions of where, arithmetic and the unary ops, so they run
and differentiate on every backend).

kernels: none (the composed ops').
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as D
from ..errors import ArgumentTypeError, DTypeError
from ..tensor import Tensor
from .api import public
from .common import as_operands, float_input, scalar_tensor
from .elementwise import clamp, maximum, where
from .registry import apply
from .special import signbit
from .unary import ROUND, TRUNC

# The largest finite value of each float dtype (nan_to_num's default replacements for +-inf).
_FMAX = {
    D.float16: float(np.finfo(np.float16).max),
    D.bfloat16: 3.3895313892515355e38,
    D.float32: float(np.finfo(np.float32).max),
    D.float64: float(np.finfo(np.float64).max),
}


@public("lerp", inplace=True)
def lerp(input: Tensor, end: Tensor, weight) -> Tensor:
    """``input + weight * (end - input)``, as torch.lerp (weight a number or a tensor;
    computed as ``end - (end - input) * (1 - weight)`` where ``|weight| >= 0.5``, as PyTorch,
    so that weight 1 gives ``end`` exactly)."""
    if not input.dtype.is_floating_point or end.dtype is not input.dtype:
        raise DTypeError(
            f"lerp(): input and end must have one float dtype, got {input.dtype} and {end.dtype}"
        )
    diff = end - input
    if not isinstance(weight, Tensor):
        if isinstance(weight, bool) or not isinstance(weight, (int, float, np.number)):
            raise DTypeError(f"lerp(): weight must be a number or a Tensor, got {weight!r}")
        w = float(weight)
        return input + diff * w if abs(w) < 0.5 else end - diff * (1.0 - w)
    if weight.dtype is not input.dtype:
        raise DTypeError(
            f"lerp(): weight must have the dtype of input ({input.dtype}), got {weight.dtype}"
        )
    low = input + diff * weight
    high = end - diff * (1.0 - weight)
    return where(weight.abs() < 0.5, low, high)


@public("nan_to_num", inplace=True, saves_self=False)
def nan_to_num(input: Tensor, nan: float = 0.0, posinf=None, neginf=None) -> Tensor:
    """input with NaN replaced by ``nan``, +inf by ``posinf`` and -inf by ``neginf`` (by
    default the dtype's largest and lowest finite values), as torch.nan_to_num; integer and
    bool tensors come back unchanged (a copy)."""
    if not input.dtype.is_floating_point:
        return input.clone()
    big = _FMAX[input.dtype]
    pos = big if posinf is None else posinf
    neg = -big if neginf is None else neginf
    x = input
    out = where(x != x, scalar_tensor(nan, x.dtype), x)
    out = where(x == float("inf"), scalar_tensor(pos, x.dtype), out)
    return where(x == float("-inf"), scalar_tensor(neg, x.dtype), out)


# ---- rounding, signs and elementwise math as compositions (gradients from the composed ops)
def _float_only(op: str, *ts) -> None:
    for t in ts:
        if isinstance(t, Tensor) and not t.dtype.is_floating_point:
            raise DTypeError(f"{op}(): expected a float tensor, got {t.dtype} (as PyTorch)")


@public("round", inplace=True, saves_self=False)
def round(input: Tensor, *, decimals: int = 0) -> Tensor:  # noqa: A001 - PyTorch's name
    """Round half to even, as torch.round; ``decimals`` rounds to that many decimal places
    (negative: to tens, hundreds...) as ``round(x * 10**d) / 10**d`` (float tensors only).
    The gradient is zero."""
    if isinstance(decimals, bool) or not isinstance(decimals, int):
        raise ArgumentTypeError(f"round(): decimals must be an int, got {type(decimals).__name__}")
    if decimals == 0:
        return apply(ROUND, input)
    _float_only("round", input)
    if decimals > 0:
        scale = 10.0**decimals
        return apply(ROUND, input * scale) / scale
    scale = 10.0 ** (-decimals)
    return apply(ROUND, input / scale) * scale


@public("fix", inplace=True, saves_self=False)
def fix(input: Tensor) -> Tensor:
    """Round towards zero: torch.fix, the alias of trunc."""
    return apply(TRUNC, input)


@public("frac", inplace=True, saves_self=False)
def frac(input: Tensor) -> Tensor:
    """The fractional part ``input - trunc(input)`` with input's sign (float tensors only)."""
    _float_only("frac", input)
    return input - apply(TRUNC, input)


@public("sgn", inplace=True, saves_self=False)
def sgn(input: Tensor) -> Tensor:
    """The sign (-1, 0, 1) of a real tensor, as torch.sgn: 0 for NaN and for -0.0 (unlike
    sign); the gradient is zero."""
    if not input.dtype.is_floating_point:
        return input.sign()
    s = where(input != input, scalar_tensor(0.0, input.dtype), input.sign())
    return s + 0.0  # -0.0 + 0.0 is +0.0


@public("float_power", inplace=True)
def float_power(input, exponent) -> Tensor:
    """input ** exponent computed in float64 (the result is float64), as torch.float_power."""
    a, b = as_operands("float_power", input, exponent, ("input", "exponent"))
    return a.to(D.float64) ** b.to(D.float64)


@public("deg2rad", inplace=True, saves_self=False)
def deg2rad(input: Tensor) -> Tensor:
    """Degrees to radians (integers give the default floating dtype)."""
    return float_input(input) * (math.pi / 180.0)


@public("rad2deg", inplace=True, saves_self=False)
def rad2deg(input: Tensor) -> Tensor:
    """Radians to degrees (integers give the default floating dtype)."""
    return float_input(input) * (180.0 / math.pi)


@public("logaddexp", method=True)
def logaddexp(input: Tensor, other: Tensor) -> Tensor:
    """log(exp(input) + exp(other)) without overflow: ``max + log1p(exp(-|a - b|))`` (float
    tensors; both -inf gives -inf, as PyTorch)."""
    a, b = as_operands("logaddexp", input, other)
    _float_only("logaddexp", a)
    m = maximum(a, b)
    d = where(a == b, scalar_tensor(0.0, a.dtype), a - b)  # inf - inf would be NaN
    return m + (-d.abs()).exp().log1p()


@public("logaddexp2")
def logaddexp2(input: Tensor, other: Tensor) -> Tensor:
    """log2(2**input + 2**other) without overflow, as torch.logaddexp2 (float tensors)."""
    a, b = as_operands("logaddexp2", input, other)
    _float_only("logaddexp2", a)
    m = maximum(a, b)
    d = where(a == b, scalar_tensor(0.0, a.dtype), a - b)
    return m + (-d.abs()).exp2().log1p() * (1.0 / math.log(2.0))


@public("xlogy", inplace=True)
def xlogy(input, other) -> Tensor:
    """``input * log(other)``, 0 where input is 0 (unless other is NaN), as torch.xlogy; the
    gradients are 0 there too (integers give the default floating dtype)."""
    a, b = as_operands("xlogy", input, other, ("self", "other"))
    a, b = float_input(a), float_input(b)
    zero = (a == 0) & (b <= 0)  # 0 * log(y) is 0 without help where y > 0
    safe = where(zero, scalar_tensor(1.0, b.dtype), b)
    return a * safe.log()


@public("sinc", inplace=True, saves_self=False)
def sinc(input: Tensor) -> Tensor:
    """The normalized sinc ``sin(pi x) / (pi x)``, 1 at 0 (gradient 0 there), as torch.sinc."""
    x = float_input(input)
    zero = x == 0
    y = where(zero, scalar_tensor(1.0, x.dtype), x) * math.pi
    return where(zero, scalar_tensor(1.0, x.dtype), y.sin() / y)


@public("copysign", inplace=True)
def copysign(input, other) -> Tensor:
    """|input| with the sign of other (-0.0 counts as negative), as torch.copysign (integers give
    the default floating dtype); the gradient is ``±1`` for input (0 where input is 0) and 0 for
    other."""
    a, b = as_operands("copysign", input, other)
    a, b = float_input(a), float_input(b)
    neg = signbit(b)
    return where(neg, -a.abs(), a.abs())


@public("heaviside", inplace=True)
def heaviside(input: Tensor, values: Tensor) -> Tensor:
    """0 where input < 0, ``values`` where input == 0, 1 where input > 0 (one dtype for both,
    as PyTorch; not differentiable)."""
    if input.dtype is not values.dtype:
        raise DTypeError(
            "heaviside(): input and values must have one dtype (as PyTorch), got "
            f"{input.dtype} and {values.dtype}"
        )
    one = (input > 0).to(input.dtype)
    return where(input == 0, values, one).detach()


@public("fmax")
def fmax(input: Tensor, other: Tensor) -> Tensor:
    """Elementwise maximum ignoring NaN (NaN only where both are), as torch.fmax; at a tie the
    gradient goes to input."""
    a, b = as_operands("fmax", input, other)
    return where((a >= b) | (b != b), a, b)


@public("fmin")
def fmin(input: Tensor, other: Tensor) -> Tensor:
    """Elementwise minimum ignoring NaN (NaN only where both are), as torch.fmin."""
    a, b = as_operands("fmin", input, other)
    return where((a <= b) | (b != b), a, b)


@public("clamp_min", inplace=True)
def clamp_min(input: Tensor, min) -> Tensor:  # noqa: A002 - PyTorch's name
    """clamp(input, min=min)."""
    return clamp(input, min=min)


@public("clamp_max", inplace=True)
def clamp_max(input: Tensor, max) -> Tensor:  # noqa: A002 - PyTorch's name
    """clamp(input, max=max)."""
    return clamp(input, max=max)


def _value(op: str, value):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
        raise ArgumentTypeError(f"{op}(): value must be a number, got {type(value).__name__}")
    return value


@public("addcmul", inplace=True)
def addcmul(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value=1) -> Tensor:
    """input + value * tensor1 * tensor2, with broadcasting and type promotion."""
    value = _value("addcmul", value)
    prod = tensor1 * tensor2
    return input + (prod * value if value != 1 else prod)


@public("addcdiv", inplace=True)
def addcdiv(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value=1) -> Tensor:
    """input + value * tensor1 / tensor2 (integer tensor1 and tensor2 are refused, as PyTorch)."""
    value = _value("addcdiv", value)
    if not tensor1.dtype.is_floating_point and not tensor2.dtype.is_floating_point:
        raise DTypeError(
            "addcdiv(): integer division with addcdiv is not supported (as PyTorch); use "
            "(input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integers"
        )
    quot = tensor1 / tensor2
    return input + (quot * value if value != 1 else quot)
