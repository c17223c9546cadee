"""Unary math and activations: Abs Neg Exp Log Sqrt Reciprocal Sin Cos Tanh Sigmoid Relu Sign
Erf IsNaN IsInf Floor Ceil (static only), LeakyRelu HardSigmoid HardSwish Elu Selu Celu Softplus
Softsign Mish PRelu Gelu, and the importer's own Gelu node (rewrite.py).

gpucore has no erf op: a standalone Erf is a composition accurate to 1.5e-7 (Abramowitz and
Stegun 7.1.26); the Div/Erf/Add/Mul form of GELU that exporters write is recognised before
tracing and becomes gpucore's exact gelu.
"""

from __future__ import annotations

import math

import numpy as np

from ...dtypes import int64
from ...nn import functional as F
from ...tensor import Tensor
from .common import gc, table

HANDLERS, handles = table()

_np_erf = np.vectorize(math.erf, otypes=[np.float64])


def erf(x: Tensor) -> Tensor:
    """erf(x) from gpucore ops (max abs error 1.5e-7)."""
    a1, a2, a3, a4, a5 = 0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429
    ax = x.abs()
    t = (ax * 0.3275911 + 1.0).reciprocal()
    poly = ((((t * a5 + a4) * t + a3) * t + a2) * t + a1) * t
    return x.sign() * (1.0 - poly * (-(ax * ax)).exp())


# from this magnitude on, every value of the dtype is an integer (2 ** mantissa bits)
_INTEGRAL = {"float16": 2.0**10, "float32": 2.0**23, "float64": 2.0**52}


def floor(x: Tensor) -> Tensor:
    """floor(x) from gpucore ops: truncation through int64, one less where it rounded up;
    values already integral (large, infinite, NaN) as they are."""
    if not x.dtype.is_floating_point:
        return x
    t = x.to(int64).to(x.dtype)
    fl = t - gc.gt(t, x).to(x.dtype)
    return gc.where(x.abs() < _INTEGRAL.get(x.dtype.name, 2.0**52), fl, x)


def round_half_even(x: Tensor) -> Tensor:
    """Rounding to the nearest integer, halves to the even one (ONNX's Round, numpy's)."""
    if not x.dtype.is_floating_point:
        return x
    r = floor(x)
    d = x - r  # exact: r and x share their exponent's integer part
    odd = gc.ne(r - floor(r * 0.5) * 2.0, 0.0)
    up = gc.logical_or(gc.gt(d, 0.5), gc.logical_and(gc.eq(d, 0.5), odd))
    return gc.where(x.isfinite(), r + up.to(x.dtype), x)


_UNARY = {
    "Abs": (np.abs, Tensor.abs),
    "Neg": (np.negative, Tensor.neg),
    "Exp": (np.exp, Tensor.exp),
    "Log": (np.log, Tensor.log),
    "Sqrt": (np.sqrt, Tensor.sqrt),
    "Reciprocal": (np.reciprocal, Tensor.reciprocal),
    "Sin": (np.sin, Tensor.sin),
    "Cos": (np.cos, Tensor.cos),
    "Tanh": (np.tanh, Tensor.tanh),
    "Sigmoid": (lambda x: 1 / (1 + np.exp(-x)), Tensor.sigmoid),
    "Relu": (lambda x: np.maximum(x, 0), Tensor.relu),
    "Sign": (np.sign, Tensor.sign),
    "Erf": (_np_erf, erf),
    "IsNaN": (np.isnan, Tensor.isnan),
    "Floor": (np.floor, lambda x: floor(x)),
    "Ceil": (np.ceil, lambda x: -floor(-x)),
    "Round": (np.round, lambda x: round_half_even(x)),  # numpy rounds half to even, as ONNX
}


@handles(*_UNARY)
def unary(ctx, node, ins):
    """The elementwise ops of ``_UNARY``."""
    (x,) = ins
    np_fn, gc_fn = _UNARY[node.op_type]
    if ctx.is_static(x):
        with np.errstate(all="ignore"):
            out = np.asarray(np_fn(x))
        return out if out.dtype == np.bool_ else out.astype(x.dtype)
    if gc_fn is None:
        raise ctx.unsupported(f"{node.op_type} of a tensor (gpucore has no such op yet)")
    return gc_fn(x)


@handles("IsInf")
def isinf(ctx, node, ins):
    """IsInf(detect_positive, detect_negative)."""
    pos, neg = ctx.attr("detect_positive", 1), ctx.attr("detect_negative", 1)
    x = ctx.tensor(ins[0])
    if pos and neg:
        return x.isinf()
    if not pos and not neg:
        return gc.logical_and(gc.eq(x, x), gc.ne(x, x))  # all False, shaped like x
    inf = float("inf") if pos else float("-inf")
    return gc.eq(x, inf)


def _tensor_input(ctx, ins) -> Tensor:
    return ctx.tensor(ins[0])


@handles("LeakyRelu")
def leaky_relu(ctx, node, ins):
    """LeakyRelu(alpha)."""
    return F.leaky_relu(_tensor_input(ctx, ins), float(ctx.attr("alpha", 0.01)))


@handles("HardSigmoid")
def hard_sigmoid(ctx, node, ins):
    """HardSigmoid: max(0, min(1, alpha * x + beta))."""
    alpha, beta = float(ctx.attr("alpha", 0.2)), float(ctx.attr("beta", 0.5))
    return (_tensor_input(ctx, ins) * alpha + beta).clamp(0.0, 1.0)


@handles("HardSwish")
def hard_swish(ctx, node, ins):
    """HardSwish: x * HardSigmoid(x) with alpha 1/6, beta 1/2 (PyTorch's hardswish)."""
    return F.hardswish(_tensor_input(ctx, ins))


@handles("Elu")
def elu(ctx, node, ins):
    """Elu(alpha)."""
    return F.elu(_tensor_input(ctx, ins), float(ctx.attr("alpha", 1.0)))


@handles("Celu")
def celu(ctx, node, ins):
    """Celu(alpha)."""
    return F.celu(_tensor_input(ctx, ins), float(ctx.attr("alpha", 1.0)))


@handles("Selu")
def selu(ctx, node, ins):
    """Selu(alpha, gamma): gamma * (x if x > 0 else alpha * (exp(x) - 1))."""
    alpha = float(ctx.attr("alpha", 1.67326319217681884765625))
    gamma = float(ctx.attr("gamma", 1.05070102214813232421875))
    x = _tensor_input(ctx, ins)
    return gc.where(x > 0, x, (x.exp() - 1.0) * alpha) * gamma


@handles("Softplus")
def softplus(ctx, node, ins):
    """Softplus: log(1 + exp(x))."""
    return F.softplus(_tensor_input(ctx, ins))


@handles("Softsign")
def softsign(ctx, node, ins):
    """Softsign: x / (1 + |x|)."""
    x = _tensor_input(ctx, ins)
    return x / (x.abs() + 1.0)


@handles("Mish")
def mish(ctx, node, ins):
    """Mish: x * tanh(softplus(x))."""
    return F.mish(_tensor_input(ctx, ins))


@handles("PRelu")
def prelu(ctx, node, ins):
    """PRelu(X, slope): slope broadcast to X (unidirectionally)."""
    x, slope = ctx.tensor(ins[0]), ctx.tensor(ins[1])
    if tuple(ctx.broadcast(x.shape, slope.shape)) != tuple(x.shape):
        raise ctx.invalid(f"slope of shape {tuple(slope.shape)} for X of {tuple(x.shape)}")
    return gc.where(x < 0, x * slope, x)


@handles("Gelu")
def gelu(ctx, node, ins):
    """Gelu(approximate: 'none' | 'tanh') (opset 20, and the importer's own node)."""
    approximate = ctx.attr("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise ctx.unsupported(f"approximate={approximate!r}", attribute="approximate")
    return F.gelu(_tensor_input(ctx, ins), approximate=approximate)


# arctan on [0, 1] as z * (1 + sum a_k z^2k), |error| <= 2e-8 (Abramowitz and Stegun 4.4.49)
_ATAN = (-0.3333314528, 0.1999355085, -0.1420889944, 0.1065626393, -0.0752896400, 0.0429096138,
         -0.0161657367, 0.0028662257)  # fmt: skip


def atan(x: Tensor) -> Tensor:
    """arctan(x) from gpucore ops: the polynomial on [0, 1], pi/2 - atan(1/|x|) above."""
    ax = x.abs()
    big = ax > 1.0
    z = gc.where(big, ax.reciprocal(), ax)
    z2 = z * z
    poly = z2 * _ATAN[-1]
    for a in reversed(_ATAN[:-1]):
        poly = (poly + a) * z2
    p = z * (poly + 1.0)
    return x.sign() * gc.where(big, math.pi / 2 - p, p)


def asin(x: Tensor) -> Tensor:
    """arcsin(x) = atan(x / sqrt(1 - x^2)) (+-1 give +-inf, whose atan is +-pi/2)."""
    return atan(x / (1.0 - x * x).sqrt())


_TRIG = {
    "Tan": lambda x: x.sin() / x.cos(),
    "Atan": atan,
    "Asin": asin,
    "Acos": lambda x: math.pi / 2 - asin(x),
    "Sinh": lambda x: (x.exp() - (-x).exp()) * 0.5,
    "Cosh": lambda x: (x.exp() + (-x).exp()) * 0.5,
    # log1p forms keep small arguments' relative precision
    "Asinh": lambda x: x.sign() * gc.log1p(x.abs() + x * x / ((x * x + 1.0).sqrt() + 1.0)),
    "Acosh": lambda x: (x + (x * x - 1.0).sqrt()).log(),
    "Atanh": lambda x: gc.log1p(x * 2.0 / (1.0 - x)) * 0.5,
}
_NP_TRIG = {"Tan": np.tan, "Atan": np.arctan, "Asin": np.arcsin, "Acos": np.arccos}
_NP_TRIG.update(Sinh=np.sinh, Cosh=np.cosh, Asinh=np.arcsinh, Acosh=np.arccosh, Atanh=np.arctanh)


@handles(*_TRIG)
def trig(ctx, node, ins):
    """Tan, the inverse and hyperbolic functions: compositions of gpucore ops."""
    (x,) = ins
    if ctx.is_static(x):
        with np.errstate(all="ignore"):
            return np.asarray(_NP_TRIG[node.op_type](x)).astype(x.dtype)
    return _TRIG[node.op_type](x)


@handles("ThresholdedRelu")
def thresholded_relu(ctx, node, ins):
    """ThresholdedRelu(alpha): x where x > alpha, else 0."""
    x = _tensor_input(ctx, ins)
    return gc.where(x > float(ctx.attr("alpha", 1.0)), x, x * 0)


@handles("Shrink")
def shrink(ctx, node, ins):
    """Shrink(bias, lambd): x + bias below -lambd, x - bias above lambd, 0 between."""
    x = _tensor_input(ctx, ins)
    bias, lambd = float(ctx.attr("bias", 0.0)), float(ctx.attr("lambd", 0.5))
    if not x.dtype.is_floating_point:
        bias = int(bias)  # integer inputs stay integers
    zero = x * 0
    return gc.where(x < -lambd, x + bias, gc.where(x > lambd, x - bias, zero))


@handles("Swish")
def swish(ctx, node, ins):
    """Swish(alpha): x * sigmoid(alpha * x) (opset 24)."""
    x = _tensor_input(ctx, ins)
    alpha = float(ctx.attr("alpha", 1.0))
    return x * (x * alpha).sigmoid() if alpha != 1.0 else x * x.sigmoid()
