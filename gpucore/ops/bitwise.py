"""Bitwise ops on integer and bool tensors, as PyTorch's: bitwise_and / or / xor / not and the
shifts bitwise_left_shift / bitwise_right_shift, with their operators (``&``, ``|``, ``^``,
``~``, ``<<``, ``>>`` and the reflected and in-place forms). Float operands raise, as in
PyTorch. A shift by a negative amount or by the type's width or more gives what PyTorch's CPU
gives: 0 to the left, the sign fill (0 or -1) to the right. No gradients (integer results).

kernels: backends/cpu/kernels/bitwise.py (numpy) · backends/vulkan/kernels/elementwise.py
(shaders/binary.comp, binary64.comp for int64 / uint64; every integer dtype, bit-exact).
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..errors import DTypeError
from ..tensor import Tensor
from .api import public, tensor_member
from .common import as_operands, broadcast_shapes
from .elementwise import logical_and, logical_not, logical_or, logical_xor
from .registry import apply, defop
from .samples import Sample, integers


def _ints(seed: int) -> np.ndarray:
    return integers(200, 3, 5, low=-100, seed=seed)


def _binary_samples(ref):
    return lambda: [
        Sample(_ints(1), _ints(2), ref=ref, grad=False),
        Sample(_ints(3), integers(200, 5, low=-100, seed=4), ref=ref, grad=False),
    ]


def _shift_samples(ref):
    return lambda: [Sample(_ints(5), integers(8, 3, 5, seed=6), ref=ref, grad=False)]


def _infer(name):
    def infer(a, b):
        return broadcast_shapes(name, a.shape, b.shape), a.dtype

    return infer


BITWISE_AND = defop(
    "bitwise_and", infer=_infer("bitwise_and"), samples=_binary_samples(np.bitwise_and)
)
BITWISE_OR = defop("bitwise_or", infer=_infer("bitwise_or"), samples=_binary_samples(np.bitwise_or))
BITWISE_XOR = defop(
    "bitwise_xor", infer=_infer("bitwise_xor"), samples=_binary_samples(np.bitwise_xor)
)
BITWISE_NOT = defop(
    "bitwise_not",
    infer=lambda x: (x.shape, x.dtype),
    samples=lambda: [Sample(_ints(7), ref=np.invert, grad=False)],
)
BITWISE_LEFT_SHIFT = defop(
    "bitwise_left_shift",
    infer=_infer("bitwise_left_shift"),
    samples=_shift_samples(np.left_shift),
)
BITWISE_RIGHT_SHIFT = defop(
    "bitwise_right_shift",
    infer=_infer("bitwise_right_shift"),
    samples=_shift_samples(np.right_shift),
)


def _no_float(name: str, *dts) -> None:
    for dt in dts:
        if dt.is_floating_point:
            raise DTypeError(
                f"{name}(): not implemented for {dt} tensors (as in PyTorch): bitwise ops take "
                "integer and bool tensors; convert with .int() / .long() first"
            )


def _binary(name: str, op, shift: bool = False, logical=None):
    def fn(input, other) -> Tensor:
        a, b = as_operands(name, input, other)
        _no_float(name, a.dtype)
        if a.dtype is D.bool_:
            if shift:
                raise DTypeError(f"{name}(): not implemented for bool tensors (as in PyTorch)")
            return logical(a, b)  # the same values, and the logical ops have shaders
        return apply(op, a, b)

    fn.__name__ = name
    return fn


bitwise_and = public("bitwise_and", inplace=True)(
    _binary("bitwise_and", BITWISE_AND, logical=logical_and)
)
bitwise_or = public("bitwise_or", inplace=True)(
    _binary("bitwise_or", BITWISE_OR, logical=logical_or)
)
bitwise_xor = public("bitwise_xor", inplace=True)(
    _binary("bitwise_xor", BITWISE_XOR, logical=logical_xor)
)
bitwise_left_shift = public("bitwise_left_shift", inplace=True)(
    _binary("bitwise_left_shift", BITWISE_LEFT_SHIFT, shift=True)
)
bitwise_right_shift = public("bitwise_right_shift", inplace=True)(
    _binary("bitwise_right_shift", BITWISE_RIGHT_SHIFT, shift=True)
)
bitwise_and.__doc__ = "Elementwise AND of the bits of integer or bool tensors, as torch."
bitwise_or.__doc__ = "Elementwise OR of the bits of integer or bool tensors, as torch."
bitwise_xor.__doc__ = "Elementwise XOR of the bits of integer or bool tensors, as torch."
bitwise_left_shift.__doc__ = (
    "``input << other`` of integer tensors, as torch (shifts outside [0, bits) give 0)."
)
bitwise_right_shift.__doc__ = (
    "``input >> other`` of integer tensors (arithmetic for signed dtypes), as torch."
)


@public("bitwise_not", inplace=True)
def bitwise_not(input: Tensor) -> Tensor:
    """Elementwise NOT of the bits of an integer tensor (logical NOT of a bool one), as torch."""
    _no_float("bitwise_not", input.dtype)
    return logical_not(input) if input.dtype is D.bool_ else apply(BITWISE_NOT, input)


def _reflected(fn):
    return lambda self, other: fn(other, self)


for _dunder, _fn in (
    ("and", bitwise_and),
    ("or", bitwise_or),
    ("xor", bitwise_xor),
    ("lshift", bitwise_left_shift),
    ("rshift", bitwise_right_shift),
):
    tensor_member(f"__{_dunder}__", _fn)
    tensor_member(f"__r{_dunder}__", _reflected(_fn))
tensor_member("__invert__", bitwise_not)
