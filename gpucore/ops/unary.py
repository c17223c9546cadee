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
from ..tensor import Tensor
from .api import public, tensor_member
from .common import float_result as _float_result
from .common import no_bool
from .common import same_result as _same
from .elementwise import logical_not, maximum
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
