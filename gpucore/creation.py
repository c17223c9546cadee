"""Tensor creation: tensor, from_numpy, zeros, ones, full, empty, arange, linspace, eye, random.

Shapes are accepted as varargs or one tuple (``zeros(2, 3)`` == ``zeros((2, 3))``), as PyTorch.
``device='vulkan'`` gives a tensor on the Vulkan device (DeviceError when there is none): values
are made on the host and uploaded, except random floats, which the device draws itself from the
same Philox stream. ``*_like`` functions default to the device of the tensor they copy.
"""

from __future__ import annotations

import math

import numpy as np

from . import _cpu
from . import dtypes as D
from .backends.cpu import empty_array
from .errors import DeviceError, DTypeError, ShapeError
from .random import default_generator
from .tensor import MAX_DIMS, Tensor

_MAX_ELEMENTS = 1 << 40


def _check_device(device, op: str):
    """None for the host, else the Vulkan backend the tensor is made on (DeviceError for unknown
    names, or naming the fix when no Vulkan device is usable)."""
    try:
        return _random_device(device)
    except DeviceError as e:
        raise DeviceError(f"{op}(): {e}") from None


def _sizes(args, size, op: str) -> tuple:
    """Shape from varargs or the ``size=`` keyword (PyTorch accepts both)."""
    if size is not None:
        if args:
            raise TypeError(f"{op}(): give the shape either positionally or as size=, not both")
        args = (size,)
    return _shape_arg(args, op)


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


def _finish(data: np.ndarray, dtype, requires_grad: bool, be=None) -> Tensor:
    """A leaf over host array ``data``, uploaded to backend ``be`` when one is given."""
    return _to_backend(Tensor._wrap(data, dtype), be, requires_grad)


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
    be = _check_device(device, "tensor")
    if isinstance(data, Tensor):
        arr = data.detach().numpy(force=True)
        src = data.dtype
    else:
        if isinstance(data, (np.ndarray, np.generic)):
            arr = np.asarray(data)  # numpy arrays and scalars keep their dtype
            if not arr.dtype.isnative:
                arr = arr.astype(arr.dtype.newbyteorder("="))
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
        out[...] = data._host()
        return _finish(out, dt, requires_grad, be)
    return _finish(_store(arr, dt), dt, requires_grad, be)


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
        raise DTypeError(
            "from_numpy(): non-native byte order; use arr.astype(arr.dtype.newbyteorder('='))"
        )
    dt = D.from_numpy_dtype(arr.dtype)
    if arr.ndim > MAX_DIMS:
        raise ShapeError(f"from_numpy(): at most {MAX_DIMS} dims, got shape {arr.shape}")
    return Tensor._wrap(arr, dt)


def empty(*args, size=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """An uninitialised tensor."""
    be = _check_device(device, "empty")
    dt = D.as_dtype(dtype) if dtype is not None else D.float32
    shape = _sizes(args, size, "empty")
    if be is not None:  # nothing to upload
        return _to_backend(
            Tensor._wrap(be.empty_array(shape, dt.np), dt, dev=be), be, requires_grad
        )
    return _finish(empty_array(shape, dt.np), dt, requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of ``size`` filled with ``fill_value`` (dtype inferred from the value)."""
    be = _check_device(device, "full")
    if dtype is None:
        dt = (
            D.bool_
            if isinstance(fill_value, bool)
            else (D.int64 if isinstance(fill_value, int) else D.float32)
        )
    else:
        dt = D.as_dtype(dtype)
    shape = _shape_arg((size,) if isinstance(size, (tuple, list)) else (size,), "full")
    out = empty_array(shape, dt.np)
    if dt is D.bfloat16:
        out.fill(int(D.f32_to_bf16(np.array([fill_value], np.float32))[0]))
    else:
        try:
            with np.errstate(over="ignore"):  # floats overflow to inf, as IEEE
                out.fill(fill_value)
        except (OverflowError, ValueError, TypeError):
            raise DTypeError(
                f"full(): fill value {fill_value!r} cannot be represented in {dt}"
            ) from None
    return _finish(out, dt, requires_grad, be)


def zeros(*args, size=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of zeros."""
    return full(
        _sizes(args, size, "zeros"),
        0,
        dtype=dtype or D.float32,
        device=device,
        requires_grad=requires_grad,
    )


def ones(*args, size=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of ones."""
    return full(
        _sizes(args, size, "ones"),
        1,
        dtype=dtype or D.float32,
        device=device,
        requires_grad=requires_grad,
    )


def _like(t: Tensor, dtype, device):
    """(shape, dtype, device) of a ``*_like`` result: t's unless given (as PyTorch)."""
    return (
        t.shape,
        (D.as_dtype(dtype) if dtype is not None else t.dtype),
        (device if device is not None else t.device),
    )


def empty_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """An uninitialised tensor with t's shape, dtype and device (unless given)."""
    shape, dt, dev = _like(t, dtype, device)
    return empty(shape, dtype=dt, device=dev, requires_grad=requires_grad)


def zeros_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Zeros with t's shape, dtype and device (unless given)."""
    shape, dt, dev = _like(t, dtype, device)
    return zeros(shape, dtype=dt, device=dev, requires_grad=requires_grad)


def ones_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Ones with t's shape, dtype and device (unless given)."""
    shape, dt, dev = _like(t, dtype, device)
    return ones(shape, dtype=dt, device=dev, requires_grad=requires_grad)


def full_like(t: Tensor, fill_value, dtype=None, device=None, requires_grad: bool = False):
    """``fill_value`` with t's shape, dtype and device (unless given)."""
    shape, dt, dev = _like(t, dtype, device)
    return full(shape, fill_value, dtype=dt, device=dev, requires_grad=requires_grad)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad: bool = False):
    """Values from ``start`` (default 0) up to, not including, ``end`` by ``step``.

    ``start + i * step`` for i in [0, ceil((end - start) / step)), computed in int64 when all three
    are ints and in float64 otherwise, then cast to ``dtype`` (float32 when any bound is a float,
    else int64), as PyTorch.
    """
    be = _check_device(device, "arange")
    if end is None:
        start, end = 0, start
    vals = []
    for v in (start, end, step):
        if isinstance(v, Tensor):
            v = v.item()
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.number)):
            raise TypeError(f"arange(): start, end and step must be numbers, got {v!r}")
        vals.append(v.item() if isinstance(v, np.generic) else v)
    start, end, step = vals
    if step == 0:
        raise ValueError("arange(): step must be nonzero")
    if not all(math.isfinite(v) for v in vals):
        raise ValueError(f"arange(): start, end and step must be finite, got {tuple(vals)}")
    all_int = all(isinstance(v, int) for v in vals)
    if dtype is None:
        dtype = D.int64 if all_int else D.float32
    dt = D.as_dtype(dtype)
    n = max(0, -((start - end) // step)) if all_int else max(0, math.ceil((end - start) / step))
    _shape_arg((n,), "arange")
    if all_int:
        arr = np.arange(n, dtype=np.int64) * step + start
    else:
        arr = np.arange(n, dtype=np.float64) * step + start
    return _finish(_store(arr, dt), dt, requires_grad, be)


def linspace(start, end, steps: int, dtype=None, device=None, requires_grad: bool = False):
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive."""
    be = _check_device(device, "linspace")
    if steps < 0:
        raise ValueError(f"linspace(): number of steps must be non-negative, got {steps}")
    dt = D.as_dtype(dtype) if dtype is not None else D.float32
    return _finish(_store(np.linspace(start, end, steps), dt), dt, requires_grad, be)


def eye(n: int, m: int | None = None, dtype=None, device=None, requires_grad: bool = False):
    """A 2-D tensor with ones on the diagonal."""
    be = _check_device(device, "eye")
    dt = D.as_dtype(dtype) if dtype is not None else D.float32
    _shape_arg((n, n if m is None else m), "eye")
    return _finish(_store(np.eye(n, m), dt), dt, requires_grad, be)


# ------------------------------------------------------------------------------- random
def _random_device(device):
    """None for the host, else the Vulkan backend (random creation runs on both)."""
    if device is None:
        return None
    from .tensor import device as _device

    if _device(device).type == "cpu":  # DeviceError for unknown names
        return None
    from . import dispatch

    return dispatch.vulkan_backend(required=True)


def _uniform_f32(shape, low: float, high: float, generator=None, be=None) -> np.ndarray:
    """float32 uniform samples; with ``be`` (the Vulkan backend) a device array, filled there
    from the same stream (bit for bit the host's values)."""
    gen = generator or default_generator
    out = empty_array(shape, np.float32) if be is None else be.empty_array(shape, np.float32)
    seed, off = gen.take(out.size)
    if be is None:
        _cpu.uniform(seed, off, out.reshape(-1), float(low), float(high))
    else:
        from .backends.vulkan.kernels import random as vk_random

        vk_random.uniform(be, out, seed, off, float(low), float(high))
    return out


def _normal_f32(shape, mean: float, std: float, generator=None, be=None) -> np.ndarray:
    """float32 normal samples; with ``be`` a device array (the host's values up to an ulp or so
    where the host libm's rounding differs; see backends/vulkan/kernels/random.py)."""
    gen = generator or default_generator
    out = empty_array(shape, np.float32) if be is None else be.empty_array(shape, np.float32)
    seed, off = gen.take(2 * ((out.size + 1) // 2))
    if be is None:
        _cpu.normal(seed, off, out.reshape(-1), float(mean), float(std))
    else:
        from .backends.vulkan.kernels import random as vk_random

        vk_random.normal(be, out, seed, off, float(mean), float(std))
    return out


def _dropout_mask(like: Tensor, p: float, generator=None) -> Tensor:
    """``(rand(like.shape) >= p).to(like.dtype) * (1 / (1 - p))`` (no scaling when p == 1) on
    like's device, drawing from the generator as that expression does; one fused kernel on the
    Vulkan device for float32."""
    from .autograd.grad_mode import no_grad

    be = like._dev
    if be is None or like.dtype is not D.float32:
        with no_grad():
            mask = rand(tuple(like.shape), generator=generator, device=like.device) >= p
            mask = mask.to(like.dtype)
            return mask * (1.0 / (1.0 - p)) if p < 1.0 else mask
    from .backends.vulkan.kernels import random as vk_random

    gen = generator or default_generator
    out = be.empty_array(tuple(like.shape), np.float32)
    seed, off = gen.take(out.size)
    vk_random.dropout_mask(be, out, seed, off, float(p))
    return Tensor._wrap(out, D.float32, dev=be)


# Precision (significand bits) of the low-precision floats: rand draws exactly p-bit fractions
# for them, so values stay exact and below 1 (rounding a 24-bit fraction could give 1.0).
_RAND_BITS = {D.float16: 11, D.bfloat16: 8}


def _random_result(arr32: np.ndarray, dtype, requires_grad: bool, be=None) -> Tensor:
    dt = _random_dtype(dtype)
    if be is not None:
        if dt is not D.float32:  # converted on the host, as there
            return _to_backend(
                _finish(_store(be.host_view(arr32), dt), dt, False), be, requires_grad
            )
        return _to_backend(Tensor._wrap(arr32, dt, dev=be), be, requires_grad)
    data = arr32 if dt is D.float32 else _store(arr32, dt)
    return _finish(data, dt, requires_grad)


def _to_backend(t: Tensor, be, requires_grad: bool) -> Tensor:
    """t (made without requires_grad) on backend ``be`` (None: the host) as a leaf."""
    if be is not None and t._dev is not be:
        t = Tensor._wrap(
            be.upload(np.require(t._data, requirements="C"), t._dtype), t._dtype, dev=be
        )
    if requires_grad:
        t.requires_grad_(True)
    return t


def _random_dtype(dtype):
    dt = D.as_dtype(dtype) if dtype is not None else D.float32
    if not dt.is_floating_point:
        raise DTypeError(
            f"random floats need a floating dtype, got {dt}; use randint() for integers"
        )
    return dt


def rand(
    *args, size=None, generator=None, dtype=None, device=None, requires_grad: bool = False
) -> Tensor:
    """Uniform samples in [0, 1) from the Philox stream.

    float32 (and float64) values are ``(word >> 8) * 2**-24``; float16 and bfloat16 values are
    ``(word >> (32 - p)) * 2**-p`` with p their precision (11, 8), one word per element.
    """
    be = _random_device(device)
    shape = _sizes(args, size, "rand")
    dt = _random_dtype(dtype)
    bits = _RAND_BITS.get(dt)
    if bits is None:
        return _random_result(_uniform_f32(shape, 0.0, 1.0, generator, be), dt, requires_grad, be)
    gen = generator or default_generator
    words = np.empty(math.prod(shape), np.uint32)
    seed, off = gen.take(words.size)
    _cpu.philox(seed, off, words)
    vals = (words >> np.uint32(32 - bits)).astype(np.float32) * np.float32(2.0**-bits)
    return _to_backend(_finish(_store(vals.reshape(shape), dt), dt, False), be, requires_grad)


def randn(
    *args, size=None, generator=None, dtype=None, device=None, requires_grad: bool = False
) -> Tensor:
    """Standard normal samples (Box-Muller over the Philox stream, computed in float32)."""
    be = _random_device(device)
    shape = _sizes(args, size, "randn")
    dt = _random_dtype(dtype)
    return _random_result(_normal_f32(shape, 0.0, 1.0, generator, be), dt, requires_grad, be)


def _int_bound(v, what: str) -> int:
    if isinstance(v, Tensor):
        v = v.item()
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"randint(): {what} must be an int, got {v!r}")
    return int(v)


def randint(
    low, high=None, size=None, generator=None, dtype=None, device=None, requires_grad: bool = False
) -> Tensor:
    """Integers uniform in [low, high) (int64 by default): ``randint(high, size)`` or
    ``randint(low, high, size)``.

    Element i is ``low + (w[2i] | w[2i+1] << 32) % (high - low)`` over the Philox words w.
    """
    be = _check_device(device, "randint")
    if size is None and isinstance(high, (tuple, list)):
        high, size = None, high  # randint(high, size), PyTorch's two-argument form
    if high is None:
        low, high = 0, low
    if size is None:
        raise TypeError("randint(): missing the size argument, e.g. randint(0, 10, (3, 4))")
    low, high = _int_bound(low, "low"), _int_bound(high, "high")
    if high <= low:
        raise ValueError(f"randint(): empty range [{low}, {high}); high must be > low")
    dt = D.as_dtype(dtype) if dtype is not None else D.int64
    if not dt.is_floating_point:
        info = (0, 1) if dt is D.bool_ else (int(np.iinfo(dt.np).min), int(np.iinfo(dt.np).max))
        if low < info[0] or high - 1 > info[1]:
            raise ValueError(
                f"randint(): range [{low}, {high}) does not fit dtype {dt} "
                f"(values in [{info[0]}, {info[1]}])"
            )
    elif low < -(2**63) or high - 1 > 2**63 - 1:
        raise ValueError(f"randint(): range [{low}, {high}) exceeds int64")
    shape = _shape_arg((size,) if isinstance(size, (tuple, list)) else (size,), "randint")
    gen = generator or default_generator
    n = math.prod(shape)
    words = np.empty(2 * n, np.uint32)
    seed, off = gen.take(2 * n)
    _cpu.philox(seed, off, words)
    w64 = words[0::2].astype(np.uint64) | (words[1::2].astype(np.uint64) << np.uint64(32))
    span = high - low
    r = w64 if span == 2**64 else w64 % np.uint64(span)
    # low + r lies in int64 range; two's-complement wraparound of the cast makes the sum exact.
    vals = r.view(np.int64) + np.int64(low)
    return _finish(_store(vals.reshape(shape), dt), dt, requires_grad, be)


def rand_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """rand of t's shape, on t's device unless ``device`` says otherwise (as PyTorch)."""
    return rand(
        t.shape, dtype=dtype or t.dtype, device=device or t.device, requires_grad=requires_grad
    )


def randn_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """randn of t's shape, on t's device unless ``device`` says otherwise (as PyTorch)."""
    return randn(
        t.shape, dtype=dtype or t.dtype, device=device or t.device, requires_grad=requires_grad
    )


def randint_like(t: Tensor, low, high=None, dtype=None, device=None) -> Tensor:
    """randint of t's shape and dtype, on t's device unless ``device`` says otherwise."""
    if high is None:
        low, high = 0, low
    return randint(low, high, t.shape, dtype=dtype or t.dtype, device=device or t.device)
