"""Special functions of torch.special that no composition computes accurately, as registry ops:
the Hurwitz zeta function ``zeta(x, q)`` (differentiable in q), the regularized incomplete gamma
functions ``igamma`` / ``igammac`` (torch.special.gammainc / gammaincc; differentiable in the
second argument), the scaled complementary error function ``erfcx`` and ``ndtri``, the inverse
of the normal CDF (both differentiable), and ``entr`` (-x log x, with PyTorch's gradient
-(1 + log x): inf at 0, which a composition through ``where`` would not give). A gradient
PyTorch does not implement raises the same error when backward reaches it. The compositions
logit, polygamma and mvlgamma (gpucore.<name> and Tensor.<name>) are declared here too.

Computed in C in double on the CPU (float32 rounded once); Vulkan tensors go through the host.

kernels: backends/cpu/kernels/transcendental.py (erfcx/ndtri/entr: cpu/special.c; zeta and
igamma: cpu/special_gamma.c) · none on Vulkan.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as D
from ..errors import DTypeError
from ..tensor import Tensor
from .api import INPLACE, public, tensor_member
from .bessel import full_precision_only
from .common import as_operands, broadcast_shapes, float_input, float_result
from .registry import apply, defop
from .samples import Sample, integers, uniform


def _mp(fn, n=1):
    """An elementwise float64 reference from an mpmath function (30 digits), for the samples."""

    def ref(*xs):
        import mpmath  # noqa: PLC0415 - a test-time dependency, not gpucore's

        xs = np.broadcast_arrays(*[np.asarray(x, np.float64) for x in xs])
        with mpmath.workdps(30):
            f = np.vectorize(
                lambda *v: float(fn(mpmath, *[mpmath.mpf(float(a)) for a in v])),
                otypes=[np.float64],
            )
            return f(*xs) if xs[0].size else np.zeros(xs[0].shape)

    return ref


def _not_implemented(what: str):
    return NotImplementedError(f"the derivative for '{what}' is not implemented.")


def _binary_infer(name):
    def infer(a, b):
        dt = D.promote(a.dtype, b.dtype)
        return broadcast_shapes(
            name, a.shape, b.shape
        ), dt if dt.is_floating_point else D.default_float()

    return infer


# ------------------------------------------------------------------ zeta
def _zeta_bwd(ctx, g):
    x, q = ctx.saved
    need_x, need_q = ctx.needs_input_grad
    if need_x:
        raise _not_implemented("zeta")
    return None, (-g * x * apply(ZETA, x + 1, q) if need_q else None)


def _zeta_samples():
    ref = _mp(lambda m, x, q: m.zeta(x, q))
    xi = integers(5, 3, 4, low=2, seed=1)  # int x: gradcheck leaves it alone (no x gradient)
    return [
        Sample(xi, uniform(3, 4, low=0.2, high=6.0, seed=2), ref=ref),
        Sample(
            uniform(3, 4, low=1.1, high=12, seed=3),
            uniform(4, low=0.1, high=20, seed=4),
            ref=ref,
            grad=False,
        ),
        Sample(
            np.array([2.0, 3.0, 4.0, 2.0]), np.array([-1.5, -2.25, -0.5, 1e3]), ref=ref, grad=False
        ),
    ]


ZETA = defop(
    "zeta",
    infer=full_precision_only("zeta", _binary_infer("zeta")),
    save_inputs=(0, 1),
    backward=_zeta_bwd,
    samples=_zeta_samples,
)


# ------------------------------------------------------------------ igamma, igammac
def _igamma_bwd(sign: float, name: str):
    def bwd(ctx, g):
        a, x = ctx.saved
        need_a, need_x = ctx.needs_input_grad
        if need_a:
            raise _not_implemented(f"{name}: input")
        if not need_x:
            return None, None
        # d/dx P(a, x) = x^(a-1) e^-x / Gamma(a)
        return None, g * ((a - 1) * x.log() - x - a.lgamma()).exp() * sign

    return bwd


def _igamma_samples(upper: bool):
    def ref_fn(m, a, x):
        return (
            m.gammainc(a, x, m.inf, regularized=True)
            if upper
            else m.gammainc(a, 0, x, regularized=True)
        )

    ref = _mp(ref_fn)

    def samples():
        ai = integers(6, 3, 4, low=1, seed=1)
        return [
            Sample(ai, uniform(3, 4, low=0.2, high=8.0, seed=2), ref=ref),
            Sample(
                uniform(3, 4, low=0.1, high=15, seed=3),
                uniform(4, low=0.05, high=25, seed=4),
                ref=ref,
                grad=False,
            ),
            Sample(
                np.array([0.5, 3.0, 50.0, 200.0]),
                np.array([0.4, 4.5, 49.0, 230.0]),
                ref=ref,
                grad=False,
            ),
        ]

    return samples


IGAMMA = defop(
    "igamma",
    infer=_binary_infer("igamma"),
    save_inputs=(0, 1),
    backward=_igamma_bwd(1.0, "igamma"),
    samples=_igamma_samples(False),
)
IGAMMAC = defop(
    "igammac",
    infer=_binary_infer("igammac"),
    save_inputs=(0, 1),
    backward=_igamma_bwd(-1.0, "igammac"),
    samples=_igamma_samples(True),
)


# ------------------------------------------------------------------ erfcx, ndtri
def _erfcx_bwd(ctx, g):
    x, y = ctx.saved
    return (g * (2 * x * y - 2 / math.sqrt(math.pi)),)


def _ndtri_bwd(ctx, g):
    (y,) = ctx.saved
    return (g * math.sqrt(2 * math.pi) * (y * y / 2).exp(),)


def _unary_samples(ref, low, high, extra):
    def samples():
        return [
            Sample(uniform(3, 5, low=low, high=high, seed=1), ref=ref),
            Sample(uniform(low=low, high=high, seed=2), ref=ref),
            Sample(np.zeros((0, 3)), ref=ref, grad=False),
            Sample(np.array(extra, np.float64), ref=ref, grad=False),
        ]

    return samples


ERFCX = defop(
    "erfcx",
    infer=full_precision_only("erfcx", float_result),
    save_inputs=(0,),
    save_outputs=(0,),
    backward=_erfcx_bwd,
    samples=_unary_samples(
        _mp(lambda m, x: m.exp(x * x) * m.erfc(x)), -3, 6, (-9.0, 25.9, 26.1, 1e3, 1e10)
    ),
)
NDTRI = defop(
    "ndtri",
    infer=full_precision_only("ndtri", float_result),
    save_outputs=(0,),
    backward=_ndtri_bwd,
    samples=_unary_samples(
        _mp(lambda m, p: m.sqrt(2) * m.erfinv(2 * p - 1)),
        0.02,
        0.98,
        (2.0**-100, 2.0**-66, 0.5, 1 - 2.0**-20),
    ),
)


# ------------------------------------------------------------------ entr
def _entr_bwd(ctx, g):
    """PyTorch's -(1 + log x): inf at 0, NaN below (a composition through where would give 0)."""
    (x,) = ctx.saved
    return (g * -(1 + x.log()),)


ENTR = defop(
    "entr",
    infer=float_result,
    save_inputs=(0,),
    backward=_entr_bwd,
    samples=_unary_samples(
        _mp(lambda m, x: -x * m.log(x) if x > 0 else (0.0 if x == 0 else -m.inf)),
        0.05,
        3.0,
        (0.0, -1.0, 1.0, 1e-300),
    ),
)


# ------------------------------------------------------------------ public forms
def _float_pair(name: str, input, other) -> tuple:
    a, b = as_operands(name, input, other)
    if name.startswith("igamma") and not a.dtype.is_floating_point:
        raise DTypeError(f"{name}(): not implemented for {a.dtype} tensors; pass float tensors")
    return float_input(a), float_input(b)


@public("igamma", inplace=True)
def igamma(input, other) -> Tensor:
    """The regularized lower incomplete gamma function P(input, other), as torch.igamma
    (torch.special.gammainc): differentiable in ``other`` only, as PyTorch."""
    return apply(IGAMMA, *_float_pair("igamma", input, other))


@public("igammac", inplace=True)
def igammac(input, other) -> Tensor:
    """The regularized upper incomplete gamma function Q(input, other) = 1 - P, as
    torch.igammac (torch.special.gammaincc): differentiable in ``other`` only, as PyTorch."""
    return apply(IGAMMAC, *_float_pair("igammac", input, other))


def zeta(input, other) -> Tensor:
    """The Hurwitz zeta function sum_k (k + other)^-input, as torch.special.zeta."""
    return apply(ZETA, *_float_pair("zeta", input, other))


# ------------------------------------------------------------------ compositions
@public("logit", inplace=True)
def logit(input: Tensor, eps: float | None = None) -> Tensor:
    """log(p / (1 - p)), as torch.logit: with ``eps`` the input is clamped to [eps, 1 - eps]
    first (gradient 0 outside), without it values outside [0, 1] give NaN (integers give the
    default floating dtype)."""
    x = float_input(input)
    if eps is not None:
        x = x.clamp(float(eps), 1.0 - float(eps))
    return (x / (1 - x)).log()


@public("polygamma", method=False)
def polygamma(n: int, input: Tensor) -> Tensor:
    """The n-th derivative of digamma, as torch.polygamma: digamma for n = 0, else
    (-1)^(n+1) n! zeta(n + 1, input) (integers give the default floating dtype)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"polygamma(): argument 'n' must be int, not {type(n).__name__}")
    if n < 0:
        raise ValueError("polygamma(n, x) does not support negative n.")
    x = float_input(input)
    if n == 0:
        return x.digamma()
    scale = math.factorial(n) if n < 171 else math.inf
    order, x = as_operands("polygamma", float(n + 1), x)
    return apply(ZETA, order, x) * (scale if n % 2 else -scale)


def _polygamma_method(self: Tensor, n: int) -> Tensor:
    """Tensor.polygamma(n): polygamma(n, self)."""
    return polygamma(n, self)


tensor_member("polygamma", _polygamma_method)
INPLACE["polygamma_"] = ("polygamma", True)  # Tensor.polygamma_(n), as PyTorch


@public("mvlgamma", inplace=True)
def mvlgamma(input: Tensor, p: int) -> Tensor:
    """The log of the multivariate gamma function of dimension ``p``, as torch.mvlgamma
    (torch.special.multigammaln): sum_i lgamma(input - i/2) + p(p-1)/4 log(pi)."""
    if isinstance(p, bool) or not isinstance(p, (int, np.integer)):
        raise TypeError(f"mvlgamma(): argument 'p' must be int, not {type(p).__name__}")
    if p < 1:
        raise ValueError(f"mvlgamma(): p has to be greater than or equal to 1, got {p}")
    x = float_input(input)
    out = x.lgamma()
    for i in range(1, p):
        out = out + (x - i / 2).lgamma()
    return out + p * (p - 1) / 4 * math.log(math.pi)
