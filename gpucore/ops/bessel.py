"""The Bessel-type special functions of torch.special as registry ops: the modified Bessel
functions i0, i0e, i1, i1e (differentiable, as PyTorch) and modified_bessel_k0/k1 with their
scaled forms, the Bessel functions bessel_j0/j1/y0/y1, spherical_bessel_j0 and airy_ai
(no gradient in PyTorch: their outputs do not require grad).

All take a float tensor (integers and bools give the default floating dtype) and give one of the
same shape. Computed in C in double on the CPU (float32 rounded once; series, recurrences,
quadrature of integral representations and Hankel's expansions: see cpu/special_bessel.c);
Vulkan tensors go through the host.

kernels: backends/cpu/kernels/bessel.py (cpu/special.c: i0/i0e/i1/i1e; cpu/special_bessel.c: the
others) · none on Vulkan.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..errors import DTypeError
from .common import float_result
from .registry import apply, defop
from .samples import Sample, uniform

# ------------------------------------------------------------------ float64 references (mpmath)


def _mp(fn):
    """An elementwise float64 reference from an mpmath function (30 digits), for the samples."""

    def ref(x):
        import mpmath  # noqa: PLC0415 - a test-time dependency, not gpucore's

        with mpmath.workdps(30):
            f = np.vectorize(lambda v: float(fn(mpmath, mpmath.mpf(float(v)))), otypes=[np.float64])
            return f(x) if np.size(x) else np.zeros(np.shape(x))

    return ref


def _samples(ref, low, high, grad=True, extra=()):
    """A 3x5 block, a 0-d value, an empty tensor (values in [low, high)) and
    ``extra`` points (across the methods' switch-over arguments)."""

    def samples():
        out = [
            Sample(uniform(3, 5, low=low, high=high, seed=1), ref=ref, grad=grad),
            Sample(uniform(low=low, high=high, seed=2), ref=ref, grad=grad),
            Sample(np.zeros((0, 3)), ref=ref, grad=False),
        ]
        if extra:
            out.append(Sample(np.array(extra, np.float64), ref=ref, grad=False))
        return out

    return samples


_SWITCH = (0.5, 1.9, 2.1, 24.9, 25.1, 29.9, 30.1, 40.0)


def _pm(points):
    return tuple(points) + tuple(-p for p in points)


# ------------------------------------------------------------------ differentiable: i0, i1, ...
def _i0_bwd(ctx, g):
    return (g * apply(I1, ctx.saved[0]),)


def _i0e_bwd(ctx, g):
    x, y = ctx.saved
    return (g * (apply(I1E, x) - x.sign() * y),)


def _i1_bwd(ctx, g):
    x, y = ctx.saved
    zero = x == 0
    safe = x.masked_fill(zero, 1.0)
    return (g * (apply(I0, x) - y / safe).masked_fill(zero, 0.5),)


def _i1e_bwd(ctx, g):
    x, y = ctx.saved
    zero = x == 0
    safe = x.masked_fill(zero, 1.0)
    return (g * (apply(I0E, x) - y * (x.sign() + 1 / safe)).masked_fill(zero, 0.5),)


def full_precision_only(name: str, infer):
    """infer refusing float16 and bfloat16 inputs, as PyTorch's kernels of ``name`` do."""

    def checked(*inputs, **attrs):
        for t in inputs:
            if t.dtype is D.float16 or t.dtype is D.bfloat16:
                raise DTypeError(
                    f"{name}(): not implemented for {t.dtype} (as PyTorch); convert the input "
                    "with .float() first"
                )
        return infer(*inputs, **attrs)

    return checked


def _unary_op(name, ref, low, high, backward=None, extra=(), save_outputs=(), variants=()):
    half = name in ("i0", "i0e", "i1", "i1e")  # PyTorch computes these in half precision too
    return defop(
        name,
        variants=variants,
        infer=float_result if half else full_precision_only(name, float_result),
        save_inputs=(0,) if backward else (),
        save_outputs=save_outputs,
        backward=backward,
        samples=_samples(ref, low, high, grad=backward is not None, extra=extra),
    )


I0 = _unary_op(
    "i0",
    _mp(lambda m, x: m.besseli(0, x)),
    -5,
    5,
    _i0_bwd,
    _pm(_SWITCH),
    variants=("function", "method", "inplace"),
)
I1 = _unary_op("i1", _mp(lambda m, x: m.besseli(1, x)), -5, 5, _i1_bwd, _pm(_SWITCH), (0,))
I0E = _unary_op(
    "i0e", _mp(lambda m, x: m.besseli(0, x) * m.exp(-abs(x))), -5, 5, _i0e_bwd, _pm(_SWITCH), (0,)
)
I1E = _unary_op(
    "i1e", _mp(lambda m, x: m.besseli(1, x) * m.exp(-abs(x))), -5, 5, _i1e_bwd, _pm(_SWITCH), (0,)
)

# ------------------------------------------------------------------ no gradient (as PyTorch)
K0 = _unary_op("modified_bessel_k0", _mp(lambda m, x: m.besselk(0, x)), 0.05, 8, extra=_SWITCH)
K1 = _unary_op("modified_bessel_k1", _mp(lambda m, x: m.besselk(1, x)), 0.05, 8, extra=_SWITCH)
K0E = _unary_op(
    "scaled_modified_bessel_k0",
    _mp(lambda m, x: m.besselk(0, x) * m.exp(x)),
    0.05,
    8,
    extra=_SWITCH,
)
K1E = _unary_op(
    "scaled_modified_bessel_k1",
    _mp(lambda m, x: m.besselk(1, x) * m.exp(x)),
    0.05,
    8,
    extra=_SWITCH,
)
J0 = _unary_op("bessel_j0", _mp(lambda m, x: m.besselj(0, x)), -30, 30, extra=_pm(_SWITCH))
J1 = _unary_op("bessel_j1", _mp(lambda m, x: m.besselj(1, x)), -30, 30, extra=_pm(_SWITCH))
Y0 = _unary_op("bessel_y0", _mp(lambda m, x: m.bessely(0, x)), 0.05, 30, extra=_SWITCH)
Y1 = _unary_op("bessel_y1", _mp(lambda m, x: m.bessely(1, x)), 0.05, 30, extra=_SWITCH)
SPHERICAL_J0 = _unary_op(
    "spherical_bessel_j0",
    _mp(lambda m, x: m.sin(x) / x if x else m.mpf(1)),
    -20,
    20,
    extra=(0.0, 0.49, 0.51, -0.51, 1e-3),
)
AIRY_AI = _unary_op(
    "airy_ai",
    _mp(lambda m, x: m.airyai(x)),
    -8,
    6,
    extra=(-30.0, -12.0, -1.01, -0.99, 0.99, 1.01, 20.0),
)
