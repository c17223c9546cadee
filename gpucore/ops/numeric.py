"""Exact number functions run by numpy on the CPU (device tensors go through the host): the
integer gcd and lcm, the float decomposition frexp (mantissa and int32 exponent) and nextafter
(the next representable float); ldexp as a composition. gcd, lcm and nextafter have no gradient
(as PyTorch); frexp's mantissa has PyTorch's ``grad / 2**exponent``.

kernels: backends/cpu/kernels/numeric.py (numpy; bfloat16 by its bit patterns); none on Vulkan.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from .. import dtypes as D
from ..errors import DTypeError
from ..tensor import Tensor
from .api import public
from .common import as_operands, broadcast_shapes
from .registry import REGISTRY, apply, defop
from .samples import Sample, integers, uniform


def exp2(x: Tensor) -> Tensor:
    return apply(REGISTRY["exp2"], x)


_FREXP = namedtuple("frexp", ["mantissa", "exponent"])


def _int_infer(name):
    def infer(a, b):
        return (broadcast_shapes(name, a.shape, b.shape), a.dtype)

    return infer


def _int_samples(ref):
    def samples():
        a = integers(40, 3, 5, low=-40, seed=1)
        b = integers(40, 3, 5, low=-40, seed=2)
        a[0, :2] = 0
        b[0, 1:3] = 0
        return [
            Sample(a, b, ref=ref),
            Sample(integers(99, 2, 3, 4, seed=3), integers(99, 3, 1, low=1, seed=4), ref=ref),
            Sample(integers(9, 0, 3, seed=5), integers(9, 3, seed=6), ref=ref),
        ]

    return samples


GCD = defop("gcd", infer=_int_infer("gcd"), samples=_int_samples(np.gcd))
LCM = defop("lcm", infer=_int_infer("lcm"), samples=_int_samples(np.lcm))


def _np_frexp(x):
    m, e = np.frexp(x)
    return m, e.astype(np.int32)


def _frexp_samples():
    x = uniform(3, 5, low=-40.0, high=40.0, seed=1)
    x[0, :3] = (0.0, 8.0, -0.375)
    return [
        Sample(x, ref=_np_frexp, grad=False),  # 8.0: the mantissa jumps at powers of 2
        Sample(uniform(2, 3, 4, low=1e-3, high=1e3, seed=2), ref=_np_frexp),
        Sample(np.zeros((0, 3)), ref=_np_frexp),
    ]


def _frexp_bwd(ctx, g):
    (e,) = ctx.saved
    return g / exp2(e.to(g.dtype))  # PyTorch's: grad / exponent.exp2()


FREXP = defop(
    "frexp",
    infer=lambda x: [(x.shape, x.dtype), (x.shape, D.int32)],
    save_outputs=(1,),
    backward=_frexp_bwd,
    samples=_frexp_samples,
)


def _nextafter_samples():
    a = uniform(3, 5, seed=1)
    b = uniform(3, 5, seed=2)
    b[0, :2] = a[0, :2]
    a[1, :2] = 0.0
    return [
        Sample(a, b, ref=np.nextafter, grad=False, tol64=(0.0, 0.0)),
        Sample(uniform(2, 3, 4, seed=3), uniform(3, 1, seed=4), ref=np.nextafter, grad=False),
    ]


NEXTAFTER = defop(
    "nextafter",
    infer=lambda a, b, fmt=None: (broadcast_shapes("nextafter", a.shape, b.shape), a.dtype),
    samples=_nextafter_samples,
)


def _integers_only(name: str, a: Tensor, b: Tensor) -> None:
    for t in (a, b):
        if t.dtype.is_floating_point or t.dtype is D.bool_:
            raise DTypeError(
                f"{name}(): expected integer tensors, got {a.dtype} and {b.dtype} (as in "
                f"PyTorch, {name} is not implemented for float or bool tensors)"
            )


@public("gcd", inplace=True, saves_self=False)
def gcd(input: Tensor, other: Tensor) -> Tensor:
    """The elementwise greatest common divisor of integer tensors (non-negative; gcd(0, 0) = 0),
    broadcast and promoted, as torch.gcd."""
    a, b = as_operands("gcd", input, other)
    _integers_only("gcd", a, b)
    return apply(GCD, a, b)


@public("lcm", inplace=True, saves_self=False)
def lcm(input: Tensor, other: Tensor) -> Tensor:
    """The elementwise least common multiple of integer tensors (non-negative; 0 where either is
    0; wraps on overflow), broadcast and promoted, as torch.lcm."""
    a, b = as_operands("lcm", input, other)
    _integers_only("lcm", a, b)
    return apply(LCM, a, b)


@public("frexp")
def frexp(input: Tensor) -> tuple:
    """(mantissa, exponent) with ``input = mantissa * 2**exponent`` and ``0.5 <= |mantissa| < 1``
    (0, inf and NaN keep exponent 0), exponent int32, as torch.frexp (float tensors only; the
    mantissa's gradient is ``grad / 2**exponent``)."""
    if not input.dtype.is_floating_point:
        raise DTypeError(
            f"frexp(): only supports floating-point dtypes, got {input.dtype} (as torch.frexp)"
        )
    m, e = apply(FREXP, input)
    return _FREXP(m, e)


@public("ldexp", inplace=True, saves_self=False)
def ldexp(input: Tensor, other: Tensor) -> Tensor:
    """``input * 2**other``, as torch.ldexp (integer inputs give the default floating dtype;
    differentiable in both, through the composition)."""
    a, b = as_operands("ldexp", input, other)
    if not a.dtype.is_floating_point:
        a, b = a.to(D.default_float()), b.to(D.default_float())
    return a * exp2(b)


@public("nextafter", inplace=True, saves_self=False)
def nextafter(input: Tensor, other: Tensor) -> Tensor:
    """The next float after ``input`` toward ``other`` (``other`` itself where they are equal),
    broadcast and promoted, as torch.nextafter (float tensors only; no gradient)."""
    a, b = as_operands("nextafter", input, other)
    if not a.dtype.is_floating_point:
        raise DTypeError(
            f"nextafter(): expected float tensors, got {input.dtype} and {other.dtype}"
        )
    fmt = a.dtype.name if a.dtype in (D.float16, D.bfloat16) else None
    return apply(NEXTAFTER, a, b, fmt=fmt)
