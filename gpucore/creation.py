"""Tensor creation: tensor, from_numpy, zeros, ones, full, empty, arange, linspace, eye, random.

Shapes are accepted as varargs or one tuple (``zeros(2, 3)`` == ``zeros((2, 3))``), as PyTorch.
"""

from __future__ import annotations

import math

import numpy as np

from . import _cpu
from . import dtypes as D
from .backends.cpu import empty_array
from .errors import DTypeError, ShapeError
from .random import default_generator
from .tensor import MAX_DIMS, Tensor

_MAX_ELEMENTS = 1 << 40


def _shape_arg(args, op: str) -> tuple:
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    shape = []
    for s in args:
        if isinstance(s, Tensor):
            s = int(s)
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool):
            raise TypeError(f"{op}(): shape entries must be ints, got {s!r}")
        if s < 0:
            raise ShapeError(f"{op}(): negative dimension {s} in shape {tuple(args)}")
        shape.append(int(s))
    if len(shape) > MAX_DIMS:
        raise ShapeError(f"{op}(): tensors have at most {MAX_DIMS} dims, got shape {tuple(shape)}")
    if math.prod(shape) > _MAX_ELEMENTS:
        raise ShapeError(f"{op}(): shape {tuple(shape)} is too large to allocate")
    return tuple(shape)


def _finish(data: np.ndarray, dtype, requires_grad: bool) -> Tensor:
    t = Tensor._wrap(data, dtype)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _store(arr: np.ndarray, dtype) -> np.ndarray:
    """Copy values into fresh aligned storage of ``dtype``."""
    out = empty_array(arr.shape, dtype.np)
    if dtype is D.bfloat16:
        out[...] = D.f32_to_bf16(np.asarray(arr, np.float32)).reshape(arr.shape)
    else:
        np.copyto(out, arr, casting="unsafe")
    return out


def _infer_dtype(arr: np.ndarray):
    k = arr.dtype.kind
    if k == "b":
        return D.bool_
    if k in "iu":
        try:
            return D.from_numpy_dtype(arr.dtype)
        except DTypeError:
            return D.int64  # int16, uint16, uint32, uint64 widen to int64
    if k == "f":
        return D.from_numpy_dtype(arr.dtype)
    raise DTypeError(f"tensor(): cannot make a tensor from data of numpy dtype {arr.dtype}")


def tensor(data, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A new tensor holding a copy of ``data`` (nested lists, numbers, numpy arrays, tensors).

    Python floats give float32, ints int64, bools bool; numpy arrays keep their dtype.
    """
    if isinstance(data, Tensor):
        arr = data.detach().numpy(force=True)
        src = data.dtype
    else:
        if isinstance(data, np.ndarray):
            arr = data
        else:
            try:
                arr = np.asarray(data)
            except ValueError as e:
                raise ShapeError(f"tensor(): data has an irregular shape ({e})") from None
            if arr.dtype == np.float64:
                arr = arr.astype(np.float32)  # Python floats default to float32, as PyTorch
        if arr.dtype.kind not in "biuf":
            raise DTypeError(
                f"tensor(): cannot make a tensor from {type(data).__name__} holding "
                f"{arr.dtype}; give numbers, bools, nested lists of them or a numpy array"
            )
        if arr.ndim > MAX_DIMS:
            raise ShapeError(f"tensor(): at most {MAX_DIMS} dims, got shape {arr.shape}")
        src = _infer_dtype(arr)
    dt = D.as_dtype(dtype) if dtype is not None else src
    if isinstance(data, Tensor) and src is D.bfloat16 and dt is D.bfloat16:
        out = empty_array(data.shape, np.uint16)
        out[...] = data._data
        return _finish(out, dt, requires_grad)
    return _finish(_store(arr, dt), dt, requires_grad)


def as_tensor(data, dtype=None) -> Tensor:
    """``data`` itself when it is already a tensor of ``dtype``, else ``tensor(data, dtype)``."""
    if isinstance(data, Tensor) and (dtype is None or D.as_dtype(dtype) is data.dtype):
        return data
    if isinstance(data, np.ndarray) and dtype is None and data.dtype.kind in "biuf":
        return from_numpy(data)
    return tensor(data, dtype=dtype)


def from_numpy(arr: np.ndarray) -> Tensor:
    """A tensor sharing ``arr``'s memory (zero copy); writes to one show in the other."""
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"from_numpy() expects a numpy.ndarray, got {type(arr).__name__}")
    if not arr.dtype.isnative:
        raise DTypeError("from_numpy(): non-native byte order; use arr.astype(arr.dtype.newbyteorder('='))")
    dt = D.from_numpy_dtype(arr.dtype)
    if arr.ndim > MAX_DIMS:
        raise ShapeError(f"from_numpy(): at most {MAX_DIMS} dims, got shape {arr.shape}")
    return Tensor._wrap(arr, dt)


def empty(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """An uninitialised tensor."""
    dt = D.as_dtype(dtype) if dtype is not None else D.float32
    return _finish(empty_array(_shape_arg(size, "empty"), dt.np), dt, requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of ``size`` filled with ``fill_value`` (dtype inferred from the value)."""
    if dtype is None:
        dt = D.bool_ if isinstance(fill_value, bool) else (
            D.int64 if isinstance(fill_value, int) else D.float32
        )
    else:
        dt = D.as_dtype(dtype)
    shape = _shape_arg((size,) if isinstance(size, (tuple, list)) else (size,), "full")
    out = empty_array(shape, dt.np)
    if dt is D.bfloat16:
        out.fill(int(D.f32_to_bf16(np.array([fill_value], np.float32))[0]))
    else:
        out.fill(fill_value)
    return _finish(out, dt, requires_grad)


def zeros(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of zeros."""
    return full(_shape_arg(size, "zeros"), 0, dtype=dtype or D.float32, requires_grad=requires_grad)


def ones(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of ones."""
    return full(_shape_arg(size, "ones"), 1, dtype=dtype or D.float32, requires_grad=requires_grad)


def _like(t: Tensor, dtype):
    return t.shape, (D.as_dtype(dtype) if dtype is not None else t.dtype)


def empty_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    shape, dt = _like(t, dtype)
    return empty(shape, dtype=dt, requires_grad=requires_grad)


def zeros_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    shape, dt = _like(t, dtype)
    return zeros(shape, dtype=dt, requires_grad=requires_grad)


def ones_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    shape, dt = _like(t, dtype)
    return ones(shape, dtype=dt, requires_grad=requires_grad)


def full_like(t: Tensor, fill_value, dtype=None, device=None, requires_grad: bool = False):
    shape, dt = _like(t, dtype)
    return full(shape, fill_value, dtype=dt, requires_grad=requires_grad)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad: bool = False):
    """Values from ``start`` (default 0) up to, not including, ``end`` by ``step``."""
    if end is None:
        start, end = 0, start
    if step == 0:
        raise ValueError("arange(): step must be nonzero")
    vals = (start, end, step)
    if dtype is None:
        dtype = D.float32 if any(isinstance(v, float) for v in vals) else D.int64
    dt = D.as_dtype(dtype)
    n = max(0, math.ceil((end - start) / step))
    arr = (np.arange(n, dtype=np.float64) * step + start) if dt.is_floating_point else (
        np.arange(n, dtype=np.int64) * int(step) + int(start)
    )
    return _finish(_store(arr, dt), dt, requires_grad)


def linspace(start, end, steps: int, dtype=None, device=None, requires_grad: bool = False):
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive."""
    if steps < 0:
        raise ValueError(f"linspace(): number of steps must be non-negative, got {steps}")
    dt = D.as_dtype(dtype) if dtype is not None else D.float32
    return _finish(_store(np.linspace(start, end, steps), dt), dt, requires_grad)


def eye(n: int, m: int | None = None, dtype=None, device=None, requires_grad: bool = False):
    """A 2-D tensor with ones on the diagonal."""
    dt = D.as_dtype(dtype) if dtype is not None else D.float32
    _shape_arg((n, n if m is None else m), "eye")
    return _finish(_store(np.eye(n, m), dt), dt, requires_grad)


# ------------------------------------------------------------------------------- random
def _uniform_f32(shape, low: float, high: float, generator=None) -> np.ndarray:
    gen = generator or default_generator
    out = empty_array(shape, np.float32)
    seed, off = gen.take(out.size)
    _cpu.uniform(seed, off, out.reshape(-1), float(low), float(high))
    return out


def _normal_f32(shape, mean: float, std: float, generator=None) -> np.ndarray:
    gen = generator or default_generator
    out = empty_array(shape, np.float32)
    seed, off = gen.take(2 * ((out.size + 1) // 2))
    _cpu.normal(seed, off, out.reshape(-1), float(mean), float(std))
    return out


def _random_result(arr32: np.ndarray, dtype, requires_grad: bool) -> Tensor:
    dt = D.as_dtype(dtype) if dtype is not None else D.float32
    if not dt.is_floating_point:
        raise DTypeError(f"random floats need a floating dtype, got {dt}")
    data = arr32 if dt is D.float32 else _store(arr32, dt)
    return _finish(data, dt, requires_grad)


def rand(*size, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Uniform samples in [0, 1) from the Philox stream (24-bit resolution)."""
    shape = _shape_arg(size, "rand")
    return _random_result(_uniform_f32(shape, 0.0, 1.0, generator), dtype, requires_grad)


def randn(*size, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Standard normal samples (Box-Muller over the Philox stream)."""
    shape = _shape_arg(size, "randn")
    return _random_result(_normal_f32(shape, 0.0, 1.0, generator), dtype, requires_grad)


def randint(low, high=None, size=None, generator=None, dtype=None, device=None) -> Tensor:
    """Integers uniform in [low, high) (int64 by default)."""
    if high is None:
        low, high = 0, low
    if size is None:
        raise TypeError("randint(): missing the size argument, e.g. randint(0, 10, (3, 4))")
    if high <= low:
        raise ValueError(f"randint(): empty range [{low}, {high})")
    shape = _shape_arg((size,) if isinstance(size, (tuple, list)) else (size,), "randint")
    gen = generator or default_generator
    n = math.prod(shape)
    words = np.empty(2 * n, np.uint32)
    seed, off = gen.take(2 * n)
    _cpu.philox(seed, off, words)
    w64 = words[0::2].astype(np.uint64) | (words[1::2].astype(np.uint64) << np.uint64(32))
    vals = (w64 % np.uint64(high - low)).astype(np.int64) + int(low)
    dt = D.as_dtype(dtype) if dtype is not None else D.int64
    return _finish(_store(vals.reshape(shape), dt), dt, False)


def rand_like(t: Tensor, dtype=None, requires_grad: bool = False) -> Tensor:
    return rand(t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad)


def randn_like(t: Tensor, dtype=None, requires_grad: bool = False) -> Tensor:
    return randn(t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad)


def randint_like(t: Tensor, low, high=None, dtype=None) -> Tensor:
    return randint(low, high, t.shape, dtype=dtype or t.dtype)
