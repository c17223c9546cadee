"""Unary elementwise ops: math (neg, abs, exp, log, sqrt, sin, cos, ...) and activations
(relu, sigmoid, tanh, gelu) with their backward ops; rsqrt, isnan/isinf/isfinite, square and
softplus as compositions. Each op is one ``defop`` with its shape rule, backward and samples;
its kernel code comes from cpu/opcodes.def (gpucore._cpu.OPCODES["unary"]).

kernels: backends/cpu/kernels/unary.py (cpu/unary.c), backends/vulkan/kernels/unary.py
(shaders/unary.comp; log1p on binary.comp)."""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as D
from ..creation import zeros_like
from ..tensor import Tensor
from .api import public, tensor_member
from .common import float_result as _float_result
from .common import no_bool
from .common import same_result as _same
from .elementwise import logical_not, maximum, where
from .registry import apply, defop
from .samples import binary, unary

_SQRT_2_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


_check_neg = no_bool("neg (unary -)")


def _neg_infer(x):
    _check_neg(x)
    return (x.shape, x.dtype)


def _np_erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _np_gelu(x, approximate):
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(_SQRT_2_PI * (x + 0.044715 * x**3)))
    return 0.5 * x * (1 + _np_erf(x / math.sqrt(2)))


def _np_gelu_backward(g, x, approximate):
    if approximate == "tanh":
        u = _SQRT_2_PI * (x + 0.044715 * x**3)
        du = _SQRT_2_PI * (1 + 3 * 0.044715 * x * x)
        t = np.tanh(u)
        return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du)
    return g * (0.5 * (1 + _np_erf(x / math.sqrt(2))) + x * np.exp(-0.5 * x * x) * _INV_SQRT_2PI)


def _gelu_samples():
    return [s for a in ("none", "tanh") for s in unary(_np_gelu, approximate=a)()]


def _gelu_backward_samples():
    return [
        s
        for a in ("none", "tanh")
        for s in binary(_np_gelu_backward, broadcast=False, approximate=a)()
    ]


# The simple unary ops' public forms: gpucore.exp, Tensor.exp, Tensor.exp_.
_UNARY_VARIANTS = ("function", "method", "inplace")
NEG = defop(
    "neg",
    samples=unary(np.negative),
    infer=_neg_infer,
    backward=lambda ctx, g: -g,
    elementwise=True,
)
ABS = defop(
    "abs",
    samples=unary(np.abs, kinks=(0,)),
    elementwise=True,
    variants=_UNARY_VARIANTS,
    infer=_same,
    save_inputs=(0,),
    backward=lambda ctx, g: g * ctx.saved[0].sign(),
)
SIGN = defop(
    "sign",
    samples=unary(np.sign, kinks=(0,)),
    elementwise=True,
    variants=_UNARY_VARIANTS,
    infer=_same,
    backward=lambda ctx, g: g * 0,
)
EXP = defop(
    "exp",
    samples=unary(np.exp),
    elementwise=True,
    variants=_UNARY_VARIANTS,
    infer=_float_result,
    save_outputs=(0,),
    backward=lambda ctx, g: g * ctx.saved[0],
)
LOG = defop(
    "log",
    samples=unary(np.log, low=0.1, high=3.0),
    elementwise=True,
    variants=_UNARY_VARIANTS,
    infer=_float_result,
    save_inputs=(0,),
    backward=lambda ctx, g: g / ctx.saved[0],
)
SQRT = defop(
    "sqrt",
    samples=unary(np.sqrt, low=0.1, high=3.0),
    elementwise=True,
    variants=_UNARY_VARIANTS,
    infer=_float_result,
    save_outputs=(0,),
    backward=lambda ctx, g: g / (2 * ctx.saved[0]),
)
SIN = defop(
    "sin",
    samples=unary(np.sin),
    elementwise=True,
    variants=_UNARY_VARIANTS,
    infer=_float_result,
    save_inputs=(0,),
    backward=lambda ctx, g: g * ctx.saved[0].cos(),
)
COS = defop(
    "cos",
    samples=unary(np.cos),
    elementwise=True,
    variants=_UNARY_VARIANTS,
    infer=_float_result,
    save_inputs=(0,),
    backward=lambda ctx, g: -g * ctx.saved[0].sin(),
)
LOG1P = defop(
    "log1p",
    samples=unary(np.log1p, low=-0.5, high=2.0),
    elementwise=True,
    infer=_float_result,
    save_inputs=(0,),
    backward=lambda ctx, g: g / (ctx.saved[0] + 1),
)
RECIPROCAL = defop(
    "reciprocal",
    samples=unary(np.reciprocal, kinks=(0,), atol=1e-4),
    elementwise=True,
    variants=_UNARY_VARIANTS,
    infer=_float_result,
    save_outputs=(0,),
    backward=lambda ctx, g: -g * ctx.saved[0] * ctx.saved[0],
)
RELU = defop(
    "relu",
    samples=unary(lambda x: np.maximum(x, 0), kinks=(0,)),
    elementwise=True,
    variants=_UNARY_VARIANTS,
    infer=_same,
    save_inputs=(0,),
    backward=lambda ctx, g: apply(RELU_BACKWARD, g, ctx.saved[0]),
)
SIGMOID = defop(
    "sigmoid",
    samples=unary(lambda x: 1 / (1 + np.exp(-x))),
    elementwise=True,
    variants=_UNARY_VARIANTS,
    infer=_float_result,
    save_outputs=(0,),
    backward=lambda ctx, g: apply(SIGMOID_BACKWARD, g, ctx.saved[0]),
)
TANH = defop(
    "tanh",
    samples=unary(np.tanh),
    elementwise=True,
    variants=_UNARY_VARIANTS,
    infer=_float_result,
    save_outputs=(0,),
    backward=lambda ctx, g: apply(TANH_BACKWARD, g, ctx.saved[0]),
)
GELU = defop(
    "gelu",
    samples=_gelu_samples,
    elementwise=True,
    infer=_float_result,
    save_inputs=(0,),
    backward=lambda ctx, g: apply(GELU_BACKWARD, g, ctx.saved[0], **ctx.attrs),
)

# Backward kernels of the activations are ops too, so second derivatives work.
RELU_BACKWARD = defop(
    "relu_backward",
    samples=binary(lambda g, x: g * (x > 0), broadcast=False, kinks_b=(0,)),
    elementwise=True,
    infer=_same,
    save_inputs=(1,),
    backward=lambda ctx, gg: (apply(RELU_BACKWARD, gg, ctx.saved[0]), None),
)


def _sigmoid_bwd_bwd(ctx, gg):
    g, y = ctx.saved
    return apply(SIGMOID_BACKWARD, gg, y), gg * g * (1 - 2 * y)


def _tanh_bwd_bwd(ctx, gg):
    g, y = ctx.saved
    return apply(TANH_BACKWARD, gg, y), gg * g * (-2 * y)


def _gelu_second(x: Tensor, approximate: str) -> Tensor:
    """d²/dx² gelu(x), written in ops so third derivatives exist too."""
    if approximate == "tanh":
        c = 0.044715
        u = _SQRT_2_PI * (x + c * x * x * x)
        du = _SQRT_2_PI * (1 + 3 * c * x * x)
        d2u = _SQRT_2_PI * 6 * c * x
        t = u.tanh()
        sech2 = 1 - t * t
        return sech2 * (du + 0.5 * x * (d2u - 2 * t * du * du))
    pdf = (x * x * -0.5).exp() * _INV_SQRT_2PI
    return pdf * (2 - x * x)


def _gelu_bwd_bwd(ctx, gg):
    g, x = ctx.saved
    approximate = ctx.attrs["approximate"]
    return apply(GELU_BACKWARD, gg, x, approximate=approximate), gg * g * _gelu_second(
        x, approximate
    )


SIGMOID_BACKWARD = defop(
    "sigmoid_backward",
    samples=binary(lambda g, y: g * y * (1 - y), low_b=0.05, high_b=0.95, broadcast=False),
    elementwise=True,
    infer=_same,
    save_inputs=(0, 1),
    backward=_sigmoid_bwd_bwd,
)
TANH_BACKWARD = defop(
    "tanh_backward",
    samples=binary(lambda g, y: g * (1 - y * y), low_b=-0.95, high_b=0.95, broadcast=False),
    elementwise=True,
    infer=_same,
    save_inputs=(0, 1),
    backward=_tanh_bwd_bwd,
)
GELU_BACKWARD = defop(
    "gelu_backward",
    samples=_gelu_backward_samples,
    elementwise=True,
    infer=_same,
    save_inputs=(0, 1),
    backward=_gelu_bwd_bwd,
)


# ---- rounding (zero gradient) and special functions (floor .. digamma in cpu/opcodes.def)
_ROUND_KINKS = tuple(k / 2 for k in range(-4, 5))  # the jumps of floor/ceil/trunc/round


def _zero_grad(ctx, g):
    """The gradient of a step function: zeros (also where g is inf or NaN, as PyTorch)."""
    return zeros_like(g)


def _erfinv_one(y: float) -> float:
    """float64 erfinv of one value by bisection on math.erf (|y| < 0.5) or math.erfc (the tails,
    where 1 - |y| is exact): the samples' reference, NaN outside [-1, 1]."""
    a = abs(y)
    if not a <= 1.0:
        return math.nan
    if a == 1.0:
        return math.copysign(math.inf, y)
    lo, hi = 0.0, 6.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        above = math.erf(mid) > a if a < 0.5 else math.erfc(mid) < 1.0 - a
        lo, hi = (lo, mid) if above else (mid, hi)
    return math.copysign(0.5 * (lo + hi), y)


_np_erfinv = np.vectorize(_erfinv_one, otypes=[np.float64])


def _lgamma_one(x: float) -> float:
    """math.lgamma with +inf at the poles (0, -1, ...) instead of an error, as PyTorch."""
    if x <= 0 and x == math.floor(x):
        return math.inf
    return math.lgamma(x)


def _np_digamma(x):
    """digamma for x > 0 in numpy's long double (the recurrence to x >= 20 cancels near the
    root 1.4616..., which double would leave ~1e-14 off), then the asymptotic series."""
    x = np.asarray(x, np.longdouble)
    r = np.zeros_like(x)
    with np.errstate(all="ignore"):
        while (x < 20).any():
            r = r - np.where(x < 20, 1 / x, 0)
            x = np.where(x < 20, x + 1, x)
        f = 1 / (x * x)
        t = f * (-1 / 12 + f * (1 / 120 + f * (-1 / 252 + f * (1 / 240 + f * (-1 / 132)))))
        return (r + np.log(x) - 0.5 / x + t).astype(np.float64)


FLOOR, CEIL, TRUNC, ROUND = (
    defop(
        name,
        samples=unary(ref, kinks=_ROUND_KINKS),
        elementwise=True,
        variants=_UNARY_VARIANTS if name != "round" else (),
        infer=_same,
        backward=_zero_grad,
    )
    for name, ref in (
        ("floor", np.floor),
        ("ceil", np.ceil),
        ("trunc", np.trunc),
        ("round", np.round),
    )
)
ERF = defop(
    "erf",
    samples=unary(_np_erf, low=-3.0, high=3.0),
    elementwise=True,
    variants=_UNARY_VARIANTS,
    infer=_float_result,
    save_inputs=(0,),
    backward=lambda ctx, g: g * (-ctx.saved[0] * ctx.saved[0]).exp() * (2 / math.sqrt(math.pi)),
)
ERFC = defop(
    "erfc",
    samples=unary(np.vectorize(math.erfc, otypes=[np.float64]), low=-3.0, high=3.0),
    elementwise=True,
    variants=_UNARY_VARIANTS,
    infer=_float_result,
    save_inputs=(0,),
    backward=lambda ctx, g: g * (-ctx.saved[0] * ctx.saved[0]).exp() * (-2 / math.sqrt(math.pi)),
)
ERFINV = defop(
    "erfinv",
    samples=unary(_np_erfinv, low=-0.95, high=0.95),
    elementwise=True,
    variants=_UNARY_VARIANTS,
    infer=_float_result,
    save_outputs=(0,),
    backward=lambda ctx, g: g * (ctx.saved[0] * ctx.saved[0]).exp() * (math.sqrt(math.pi) / 2),
)
EXPM1 = defop(
    "expm1",
    samples=unary(np.expm1),
    elementwise=True,
    variants=_UNARY_VARIANTS,
    infer=_float_result,
    save_outputs=(0,),
    backward=lambda ctx, g: g * (ctx.saved[0] + 1),
)
EXP2 = defop(
    "exp2",
    samples=unary(np.exp2, low=-4.0, high=4.0),
    elementwise=True,
    variants=_UNARY_VARIANTS,
    infer=_float_result,
    save_outputs=(0,),
    backward=lambda ctx, g: g * ctx.saved[0] * math.log(2.0),
)
LOG2 = defop(
    "log2",
    samples=unary(np.log2, low=0.1, high=4.0),
    elementwise=True,
    variants=_UNARY_VARIANTS,
    infer=_float_result,
    save_inputs=(0,),
    backward=lambda ctx, g: g / (ctx.saved[0] * math.log(2.0)),
)
LOG10 = defop(
    "log10",
    samples=unary(np.log10, low=0.1, high=4.0),
    elementwise=True,
    variants=_UNARY_VARIANTS,
    infer=_float_result,
    save_inputs=(0,),
    backward=lambda ctx, g: g / (ctx.saved[0] * math.log(10.0)),
)
LGAMMA = defop(
    "lgamma",
    samples=unary(np.vectorize(_lgamma_one, otypes=[np.float64]), low=0.2, high=5.0),
    elementwise=True,
    variants=_UNARY_VARIANTS,
    infer=_float_result,
    save_inputs=(0,),
    backward=lambda ctx, g: g * apply(DIGAMMA, ctx.saved[0]),
)


def _digamma_backward(ctx, g):
    """g * trigamma(x): the derivative of the series behind digamma, in gpucore ops (x shifted
    up to 20 by the recurrence; below 0 by the reflection, trigamma(1 - x) + pi^2 / sin^2(pi x))."""
    x = ctx.saved[0]
    neg = x < 0
    y = where(neg, 1 - x, x)
    r = zeros_like(y)
    for _ in range(20):
        small = y < 20
        r = r + where(small, 1 / (y * y), zeros_like(y))
        y = where(small, y + 1, y)
    f = 1 / (y * y)
    r = r + 1 / y + f / 2 + f / y * (1 / 6 + f * (-1 / 30 + f * (1 / 42 + f * (-1 / 30))))
    s = (x * math.pi).sin()
    r = where(neg, -r + (math.pi * math.pi) / (s * s), r)
    return g * r


DIGAMMA = defop(
    "digamma",
    samples=unary(_np_digamma, low=0.2, high=5.0),
    elementwise=True,
    variants=_UNARY_VARIANTS,
    infer=_float_result,
    save_inputs=(0,),
    backward=_digamma_backward,
)

tensor_member("__abs__", ABS.function)
relu, sigmoid, tanh = RELU.function, SIGMOID.function, TANH.function  # nn.functional's


@public("neg", "negative", "__neg__", inplace=True)
def neg(input: Tensor) -> Tensor:
    """-input, elementwise (bool tensors are refused, as PyTorch)."""
    return apply(NEG, input)


@public("gelu")
def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """GELU: ``x * Phi(x)`` (approximate='none', erf form) or the tanh approximation."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return apply(GELU, input, approximate=approximate)


@public("rsqrt")
def rsqrt(input: Tensor) -> Tensor:
    """1 / sqrt(x)."""
    return input.sqrt().reciprocal()


@public("isnan")
def isnan(input: Tensor) -> Tensor:
    """True where the element is NaN (a bool tensor)."""
    return input != input


@public("isinf")
def isinf(input: Tensor) -> Tensor:
    """True where the element is +inf or -inf."""
    return input.abs() == math.inf


@public("isfinite")
def isfinite(input: Tensor) -> Tensor:
    """True where the element is neither NaN nor infinite."""
    return logical_not(isnan(input) | isinf(input))


@public("square")
def square(input: Tensor) -> Tensor:
    """x * x, elementwise (bool gives int64, as PyTorch's square, a power)."""
    if input.dtype is D.bool_:
        input = input.to(D.int64)
    return input * input


@public("log1p")
def log1p(input: Tensor) -> Tensor:
    """log(1 + x), accurate for tiny x (where ``(x + 1).log()`` rounds to 0)."""
    return apply(LOG1P, input)


@public("softplus", function=False)
def softplus(input: Tensor) -> Tensor:
    """log(1 + exp(x)), computed stably as max(x, 0) + log1p(exp(-|x|)); the gradient at 0 is 1/2
    (maximum splits ties)."""
    return maximum(input, 0.0) + (-input.abs()).exp().log1p()
