"""dtype objects exported at the top level (``gpucore.float32`` ...).

Host storage uses numpy arrays. bfloat16 has no numpy type: it is stored as uint16 bit patterns and
converted with round-to-nearest-even, like PyTorch. float16 and bfloat16 tensors compute in float32
and round the result back. int16 is a full integer dtype; uint16, uint32 and uint64 have PyTorch's
limited support (LIMITED_OPS): an op outside it raises, as do promotions with other integers.
A gpucore dtype tells uint16 from bfloat16 (both uint16 arrays). Arrays allocated from
``uint16.np`` carry a tag (numpy dtype metadata, kept by views, slices and copies; ``is_uint16``):
every device array of a uint16 tensor is one, so the Vulkan kernels, which see arrays, read an
untagged uint16 array as bfloat16 and a tagged one as uint16.
"""

from __future__ import annotations

import numpy as np

from .errors import DTypeError


class dtype:
    """A tensor element type. Compare with ``is``; ``str()`` gives ``gpucore.float32``."""

    __slots__ = ("name", "np", "itemsize", "is_floating_point", "is_signed", "_rank")

    def __init__(self, name: str, np_dtype, is_floating_point: bool, is_signed: bool, rank: int):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.itemsize = self.np.itemsize
        self.is_floating_point = is_floating_point
        self.is_signed = is_signed
        self._rank = rank  # position in type promotion within its category

    @property
    def is_complex(self) -> bool:
        """Always False: gpucore has no complex dtypes (PyTorch's attribute, which code checks
        beside ``is_floating_point``)."""
        return False

    def __repr__(self) -> str:
        return f"gpucore.{self.name}"

    def __reduce__(self):
        # Unpickles to the one shared object (``is`` comparisons keep working).
        return (_by_name, (self.name,))


bool_ = dtype("bool", np.bool_, False, False, 0)
uint8 = dtype("uint8", np.uint8, False, False, 1)
int8 = dtype("int8", np.int8, False, True, 2)
int16 = dtype("int16", np.int16, False, True, 3)
int32 = dtype("int32", np.int32, False, True, 4)
int64 = dtype("int64", np.int64, False, True, 5)
# PyTorch's "limited support" unsigned types: creation, casts, comparisons for equality, bitwise
# ops and a few others (LIMITED_OPS); promotion with any other integer or bool dtype raises.
uint16 = dtype("uint16", np.dtype(np.uint16, metadata={"gpucore": "uint16"}), False, False, 6)
uint32 = dtype("uint32", np.uint32, False, False, 7)
uint64 = dtype("uint64", np.uint64, False, False, 8)
float16 = dtype("float16", np.float16, True, True, 10)
bfloat16 = dtype("bfloat16", np.uint16, True, True, 11)
float32 = dtype("float32", np.float32, True, True, 12)
float64 = dtype("float64", np.float64, True, True, 13)

# The order is the C API's gc_dtype codes (gpucore/include/gpucore.h): new dtypes go at the end.
ALL = (
    bool_, uint8, int8, int32, int64, float16, bfloat16, float32, float64,
    int16, uint16, uint32, uint64,
)  # fmt: skip
LIMITED = (uint16, uint32, uint64)
# The registry ops that take LIMITED inputs, as PyTorch's CPU kernels do (the others raise,
# ops/registry.py: apply_general); view ops always do.
LIMITED_OPS = frozenset(
    "to_dtype clone to_device copy_slices cat mul div eq ne where sum cumsum sort unique index "
    "index_put "
    "floor ceil round trunc all any bitwise_and bitwise_or bitwise_xor".split()
)
BY_NAME = {d.name: d for d in ALL}
BY_NAME.update(
    {"float": float32, "double": float64, "half": float16, "long": int64, "int": int32}
    | {"short": int16}
)

# The element types of quantized tensors (gpucore.quantization), stored as their integer type.
# Not in ALL: no plain tensor has them, and as_dtype refuses them.
qint8 = dtype("qint8", np.int8, False, True, 20)
quint8 = dtype("quint8", np.uint8, False, False, 21)
qint32 = dtype("qint32", np.int32, False, True, 22)
QUANTIZED = (qint8, quint8, qint32)


# The default floating dtype (torch.get_default_dtype): the dtype of tensors made from Python
# floats, of the float creation functions called without dtype= (and so of new nn parameters), and
# of the float results of integer inputs (``int_tensor / 2``, ``int_tensor.exp()``).
# Process-global, as PyTorch's; gpucore.set_default_dtype changes it.
_DEFAULT_FLOAT = [float32]


def default_float() -> dtype:
    """The current default floating dtype (float32 unless ``gpucore.set_default_dtype`` changed
    it). Every "float unless told otherwise" in gpucore reads this one value."""
    return _DEFAULT_FLOAT[0]


def set_default_float(d: dtype) -> None:
    """Make ``d`` (one of float16, bfloat16, float32, float64) the default floating dtype; the
    public, checking entry point is ``gpucore.set_default_dtype``."""
    if d not in (float16, bfloat16, float32, float64):
        raise DTypeError(f"the default floating dtype must be a floating dtype, got {d}")
    _DEFAULT_FLOAT[0] = d


def is_uint16(arr: np.ndarray) -> bool:
    """Whether ``arr`` holds uint16 values (its dtype carries ``uint16.np``'s tag), not bfloat16
    bit patterns. Some numpy operations keep the tag (arithmetic, ``empty_like``, views) and some
    drop it (``astype(np.uint16)``, ``concatenate``, ``where``, ``stack``, ``np.save``): ask only
    of arrays allocated from a gpucore dtype (device arrays are)."""
    md = arr.dtype.metadata
    return md is not None and md.get("gpucore") == "uint16"


def _by_name(name: str) -> dtype:
    return BY_NAME.get(name) or next(d for d in QUANTIZED if d.name == name)


_FROM_NP = {d.np: d for d in ALL if d is not bfloat16}  # a numpy uint16 array is uint16


def from_numpy_dtype(npd) -> dtype:
    """The gpucore dtype of a numpy dtype, or DTypeError if there is none."""
    d = _FROM_NP.get(np.dtype(npd))
    if d is None:
        raise DTypeError(
            f"numpy dtype {np.dtype(npd)} has no gpucore equivalent; "
            f"supported: {', '.join(x.name for x in ALL)}"
        )
    return d


def as_dtype(d) -> dtype:
    """Accept a gpucore dtype, a name ('float32'), a numpy dtype or a Python type."""
    if isinstance(d, dtype):
        if d in QUANTIZED:
            raise DTypeError(
                f"{d} is the dtype of quantized tensors, which only gpucore.quantize_per_tensor "
                "and gpucore.quantize_per_channel make; use gpucore.int8/uint8/int32 for plain "
                "integer tensors"
            )
        return d
    if d is float:
        return float64  # PyTorch's: dtype=float is float64, whatever the default dtype
    if d is int:
        return int64
    if d is bool:
        return bool_
    if isinstance(d, str) and d in BY_NAME:
        return BY_NAME[d]
    try:
        return from_numpy_dtype(d)
    except TypeError:
        raise DTypeError(f"unknown dtype {d!r}; use e.g. gpucore.float32") from None


def promote(a: dtype, b: dtype) -> dtype:
    """Result dtype of a binary op between two tensors (PyTorch's category-then-size rule)."""
    if a is b:
        return a
    if a.is_floating_point != b.is_floating_point:
        return a if a.is_floating_point else b
    if {a, b} == {float16, bfloat16}:
        return float32
    if a in LIMITED or b in LIMITED:
        raise DTypeError(
            f"Promotion for uint16, uint32, uint64 types is not supported (as in PyTorch), "
            f"attempted to promote {a.name} and {b.name}; convert one operand with .to() first"
        )
    if {a, b} == {uint8, int8}:
        return int16  # the smallest signed type holding both ranges, as PyTorch
    return a if a._rank > b._rank else b


def scalar_result(t: dtype, value) -> dtype:
    """Result dtype of a tensor op with a Python (or numpy) scalar: the scalar only lifts the
    category (bool < integer < floating), never the size within one; a float lifts an integer or
    bool tensor to the default floating dtype (``default_float()``), as PyTorch."""
    if isinstance(value, (bool, np.bool_)):
        return t
    if isinstance(value, (int, np.integer)):
        return int64 if t is bool_ else t
    if isinstance(value, (float, np.floating)):
        return t if t.is_floating_point else _DEFAULT_FLOAT[0]
    raise DTypeError(
        f"scalar {value!r} of type {type(value).__name__} cannot be combined with a {t} tensor; "
        "gpucore has no complex dtypes"
    )


def int_scalar(value, d: dtype, checked: bool = False) -> int:
    """Python int ``value`` as integer dtype ``d`` stores it, as PyTorch: two's complement modulo
    2**bits (uint8: -2 -> 254, 300 -> 44), the rule for a number operand (``u8 - 2``, ``u8 == -1``).
    ``checked`` is PyTorch's rule for fill values (``full``, ``fill_``, ``masked_fill``): a value
    outside d's range raises OverflowError, except that unsigned dtypes take negatives down to
    -max (uint8: -1 -> 255). Values outside [-2**63, 2**64) always raise, as in PyTorch."""
    v = int(value)
    bits = 8 * d.itemsize
    if checked:
        top = (1 << (bits - 1)) - 1 if d.is_signed else (1 << bits) - 1
        if not (-top - 1 if d.is_signed else -top) <= v <= top:
            raise OverflowError(f"value {v} cannot be converted to {d} without overflow")
    elif not -(1 << 63) <= v < 1 << 64:
        raise OverflowError(f"Python int {v} is too big to convert to {d} (beyond 64 bits)")
    v &= (1 << bits) - 1
    return v - (1 << bits) if d.is_signed and v >> (bits - 1) else v


def f32_to_bf16(a: np.ndarray) -> np.ndarray:
    """float32 array -> uint16 bfloat16 bit patterns, round to nearest even, NaN kept quiet."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    bits = a.view(np.uint32)
    rounding = ((bits >> 16) & 1) + np.uint32(0x7FFF)
    out = ((bits + rounding) >> 16).astype(np.uint16)
    nan = np.isnan(a)
    if nan.any():
        out[nan] = ((bits[nan] >> 16) | 0x0040).astype(np.uint16)
    return out


def bf16_to_f32(a: np.ndarray) -> np.ndarray:
    """uint16 bfloat16 bit patterns -> float32 (exact)."""
    return (np.ascontiguousarray(a, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
