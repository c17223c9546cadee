"""Elementwise ops whose composition of other ops would be wrong at the edges, run by numpy on
the CPU (Vulkan tensors go through the host): fmod and remainder (exact, as C's fmod; a
composition ``a - trunc(a / b) * b`` is off by a whole ``b`` where ``a / b`` rounds to an
integer), rounded division ``div_rounded`` (floor_divide, ``//``, ``div(rounding_mode=)``: exact
for int64 and Python's floor for floats, 1 // 0.1 is 9), atan2, hypot (no overflow of ``a * a``)
and signbit (the sign of -0.0 and of NaN). Their gradients are written in gpucore ops.

kernels: backends/cpu/kernels/special.py (numpy) · Vulkan: integer fmod, remainder and div_rounded
(backends/vulkan/kernels/elementwise.py; a device divisor of 0 gives numpy's 0 there, a host one
raises as on the CPU).
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..creation import zeros_like
from ..errors import DTypeError
from ..tensor import Tensor
from .api import public, tensor_member
from .common import as_operands, broadcast_shapes, float_input
from .registry import apply, defop
from .samples import Sample, binary, integers, unary, uniform


def _binfer(name, float_out=False):
    def infer(a, b, **_attrs):
        dt = a.dtype
        if float_out and not dt.is_floating_point:
            dt = D.default_float()
        return (broadcast_shapes(name, a.shape, b.shape), dt)

    return infer


def _quotient_samples(ref, **attrs):
    """a = (q + f) * b with f in [0.2, 0.8]: a / b stays away from the integers, where fmod and
    remainder jump (finite differences would cross the jump). The float samples run on the host
    (the Vulkan kernels are integer ones: on_vulkan=False); the int32 one, of both signs and
    never 0 as a divisor, on the device."""

    def samples():
        out = []
        for i, (sa, sb) in enumerate((((3, 5), (3, 5)), ((2, 3, 4), (3, 1)), ((4,), ()))):
            b = uniform(*sb, low=0.5, high=2.0, seed=i) * np.where(
                uniform(*sb, seed=10 + i) < 0, -1.0, 1.0
            )
            q = integers(4, *sa, low=-3, seed=20 + i).astype(np.float64)
            a = (q + uniform(*sa, low=0.2, high=0.8, seed=30 + i)) * b
            out.append(Sample(a, b, ref=ref, on_vulkan=False, **attrs))
        big = uniform(4100, seed=5), uniform(4100, low=0.5, seed=6)
        out.append(Sample(*big, ref=ref, grad=False, on_vulkan=False, **attrs))
        a = integers(1000, 5, 7, low=-1000, seed=7).astype(np.int32)
        b = integers(9, 7, low=1, seed=8).astype(np.int32) * np.where(np.arange(7) % 2, -1, 1)
        out.append(Sample(a, b.astype(np.int32), ref=ref, grad=False, **attrs))
        return out

    return samples


def _trunc_div(a, b):
    return (a / b).trunc()


def _floor_div(a, b):
    return (a / b).floor()


def _mod_bwd(quotient):
    def bwd(ctx, g):
        a, b = ctx.saved
        need_a, need_b = ctx.needs_input_grad
        return (g if need_a else None), (-g * quotient(a, b) if need_b else None)

    return bwd


FMOD = defop(
    "fmod",
    infer=_binfer("fmod"),
    save_inputs=(0, 1),
    backward=_mod_bwd(_trunc_div),
    samples=_quotient_samples(np.fmod),
)
REMAINDER = defop(
    "remainder",
    infer=_binfer("remainder"),
    save_inputs=(0, 1),
    backward=_mod_bwd(_floor_div),
    samples=_quotient_samples(np.remainder),
)


def _zero_grads(ctx, g):
    """Rounded quotients are step functions: zero gradients, as PyTorch's div(rounding_mode=)."""
    zero = zeros_like(g)  # also where g is inf or NaN
    return zero, zero


def _np_div_rounded(a, b, rounding_mode):
    return np.floor_divide(a, b) if rounding_mode == "floor" else np.trunc(a / b)


DIV_ROUNDED = defop(
    "div_rounded",
    infer=_binfer("div_rounded"),
    backward=_zero_grads,
    samples=lambda: [
        s
        for mode in ("floor", "trunc")
        for s in _quotient_samples(_np_div_rounded, rounding_mode=mode)()
    ],
)


def _atan2_bwd(ctx, g):
    a, b = ctx.saved
    r2 = a * a + b * b
    return g * b / r2, -g * a / r2


def _hypot_bwd(ctx, g):
    a, b, h = ctx.saved
    return g * a / h, g * b / h


def _atan2_samples():
    upper = binary(np.arctan2, low=0.2, high=2.0)()  # a > 0: away from the branch cut
    return upper + [Sample(uniform(3, 4, seed=7), uniform(3, 4, low=0.2, seed=8), ref=np.arctan2)]


ATAN2 = defop(
    "atan2",
    infer=_binfer("atan2", float_out=True),
    save_inputs=(0, 1),
    backward=_atan2_bwd,
    samples=_atan2_samples,
)
HYPOT = defop(
    "hypot",
    infer=_binfer("hypot", float_out=True),
    save_inputs=(0, 1),
    save_outputs=(0,),
    backward=_hypot_bwd,
    samples=binary(np.hypot, low=0.2, high=2.0),
)


def _signbit_samples():
    x = np.array([-0.0, 0.0, -1.5, 2.0, np.inf, -np.inf])
    return [Sample(x, ref=np.signbit, grad=False)] + [
        Sample(s.inputs[0], ref=np.signbit, grad=False) for s in unary(np.signbit)()
    ]


SIGNBIT = defop("signbit", infer=lambda x: (x.shape, D.bool_), samples=_signbit_samples)


@public("fmod", inplace=True)
def fmod(input: Tensor, other) -> Tensor:
    """The remainder of ``input / other`` with the sign of ``input`` (C's fmod), as torch.fmod;
    integer division by zero raises."""
    a, b = as_operands("fmod", input, other)
    return apply(FMOD, a, b)


@public("remainder", inplace=True)
def remainder(input, other) -> Tensor:
    """The remainder of ``input / other`` with the sign of ``other`` (Python's ``%``), as
    torch.remainder; integer division by zero raises."""
    a, b = as_operands("remainder", input, other)
    return apply(REMAINDER, a, b)


def div_rounded(input, other, rounding_mode: str) -> Tensor:
    """torch.div with ``rounding_mode`` "trunc" (toward zero) or "floor" (toward -inf): the
    operands' promoted dtype (integers stay integers), zero gradient."""
    if rounding_mode not in ("trunc", "floor"):
        raise ValueError(
            f"div(): rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}"
        )
    a, b = as_operands("div", input, other)
    if rounding_mode == "trunc" and a.dtype.is_floating_point:
        # PyTorch's trunc(a / b) with the quotient rounded to the dtype first (bfloat16's
        # 1 / 0.1 is 10, not 9.99 truncated)
        return (a / b).trunc()
    return apply(DIV_ROUNDED, a, b, rounding_mode=rounding_mode)


@public("floor_divide", inplace=True)
def floor_divide(input, other) -> Tensor:
    """``input // other`` rounded toward -inf (Python's ``//``), as torch.floor_divide: integers
    stay integers (division by zero raises), floats as Python's float ``//``."""
    return div_rounded(input, other, "floor")


# Python's operators: ``//`` and ``%`` (and reflected: ``7 // t``, ``7 % t``), as PyTorch's.
tensor_member("__floordiv__", floor_divide)
tensor_member("__rfloordiv__", lambda self, other: floor_divide(other, self))
tensor_member("__mod__", remainder)
tensor_member("__rmod__", lambda self, other: remainder(other, self))


@public("atan2", "arctan2", inplace=True)
def atan2(input: Tensor, other: Tensor) -> Tensor:
    """The angle of the point (other, input) in (-pi, pi], as torch.atan2 (integers give
    the default floating dtype)."""
    a, b = as_operands("atan2", float_input(input), float_input(other))
    return apply(ATAN2, a, b)


@public("hypot", inplace=True)
def hypot(input: Tensor, other: Tensor) -> Tensor:
    """sqrt(input**2 + other**2) without overflow or underflow, as torch.hypot (float tensors
    promoted; integers only are refused, as PyTorch)."""
    a, b = as_operands("hypot", input, other)
    if not a.dtype.is_floating_point:
        raise DTypeError(f"hypot(): expected float tensors, got {input.dtype} and {other.dtype}")
    return apply(HYPOT, a, b)


@public("signbit")
def signbit(input: Tensor) -> Tensor:
    """True where the sign bit is set (-0.0 and negative NaN included), as torch.signbit."""
    return apply(SIGNBIT, input)
