"""Tensor creation: tensor, asarray, from_numpy, zeros, ones, full, empty, arange, linspace, eye
(random sampling is in gpucore/ops/random.py: it is registry ops).

Shapes are accepted as varargs or one tuple (``zeros(2, 3)`` == ``zeros((2, 3))``), as PyTorch.
``device='vulkan'`` gives a tensor on the Vulkan device (DeviceError when there is none): values
are made on the host and uploaded. ``*_like`` functions default to the device of the tensor they
copy.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from . import dispatch
from . import dtypes as D
from .backends.cpu import empty_array
from .default_device import _DEFAULT
from .errors import DeviceError, DTypeError, ShapeError
from .memory_formats import like, preserve_format, preserved
from .tensor import MAX_DIMS, Tensor, leaf_requires_grad
from .tensor import device as _device

_MAX_ELEMENTS = 1 << 40


def _check_device(device, op: str):
    """None for the host, else the Vulkan backend the tensor is made on (DeviceError for unknown
    names, or naming the fix when no Vulkan device is usable)."""
    try:
        return _device_backend(device)
    except DeviceError as e:
        raise DeviceError(f"{op}(): {e}") from None


def _sizes(args, size, op: str) -> tuple:
    """Shape from varargs or the ``size=`` keyword (PyTorch accepts both)."""
    if size is not None:
        if args:
            raise TypeError(f"{op}(): give the shape either positionally or as size=, not both")
        if not isinstance(size, (tuple, list)):  # as PyTorch: the keyword takes a sequence
            raise TypeError(
                f"{op}(): argument 'size' must be a tuple of ints, not {type(size).__name__}"
            )
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


def _is_int(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _infer_dtype(arr: np.ndarray):
    k = arr.dtype.kind
    if k == "b":
        return D.bool_
    if k in "iuf":  # every numpy integer width has its dtype (uint16 ... uint64 too, as PyTorch)
        return D.from_numpy_dtype(arr.dtype)
    raise DTypeError(f"tensor(): cannot make a tensor from data of numpy dtype {arr.dtype}")


def tensor(data, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A new tensor holding a copy of ``data`` (nested lists, numbers, numpy arrays, tensors).

    Python floats give the default floating dtype (``get_default_dtype()``, float32 unless
    changed), ints int64, bools bool; numpy arrays keep their dtype.
    """
    be = _check_device(device, "tensor")
    if isinstance(data, Tensor):
        arr = data._readable()  # read at once: no exported array to watch
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
            if arr.dtype == np.float64 and dtype is not None and D.as_dtype(dtype) is D.uint64:
                # ints above int64's range beside smaller ones: numpy made floats of them
                arr = np.asarray(data, np.uint64)
            if arr.dtype == np.float64 and dtype is None:
                # Python floats get the default floating dtype, as PyTorch: converted once,
                # straight from their float64 values (no float32 rounding first)
                dtype = D.default_float()
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


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """``data`` itself when it is already a tensor of ``dtype`` on ``device``, else a converted
    one (a tensor cast or moved, an array shared where it can be, as torch.as_tensor)."""
    if isinstance(data, Tensor):
        out = data if dtype is None else data.to(D.as_dtype(dtype))
        return out if device is None else out.to(device)
    if isinstance(data, np.ndarray) and dtype is None and data.dtype.kind in "biuf":
        out = from_numpy(data)
        return out if device is None else out.to(device)
    return tensor(data, dtype=dtype, device=device)


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad: bool = False) -> Tensor:
    """``obj`` (a tensor, numpy array, number or nested sequence) as a tensor, as torch.asarray:
    a tensor or a host numpy array is shared, not copied, when its dtype and device already fit
    (``copy=True`` always copies; ``copy=False`` raises ValueError where sharing is impossible).
    Python sequences and numbers are copied (their dtype inferred as ``tensor``'s)."""
    dt = D.as_dtype(dtype) if dtype is not None else None
    if isinstance(obj, Tensor):
        want_dev = obj.device if device is None else _device(device)
        fits = (dt is None or dt is obj.dtype) and want_dev == obj.device
        if fits and not copy:
            out = obj
        elif copy is False:
            raise ValueError(
                f"asarray(): can't alias a {obj.dtype} tensor on {obj.device} into "
                f"{dt or obj.dtype} on {want_dev} (copy=False); allow a copy"
            )
        else:
            out = obj.detach().to(device=want_dev, dtype=dt or obj.dtype)
            if out is obj or (copy and out._data is obj._data):
                out = out.clone()
    elif isinstance(obj, np.ndarray) and obj.dtype.kind in "biuf" and obj.dtype.isnative:
        if not copy and (dt is None or dt.np == obj.dtype) and _device_backend(device) is None:
            out = from_numpy(obj)
        elif copy is False:
            raise ValueError(
                f"asarray(): can't alias a numpy array of {obj.dtype} into {dt} on {device} "
                "(copy=False); allow a copy"
            )
        else:
            out = tensor(obj, dtype=dt, device=device)
    else:
        if copy is False:
            raise ValueError("asarray(): can't alias an arbitrary sequence into a tensor")
        out = tensor(obj, dtype=dt, device=device)
    if requires_grad is not False and out is obj:
        out = obj.detach()
    return leaf_requires_grad(out, requires_grad, "asarray()")


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
    """An uninitialised tensor (of the default floating dtype unless ``dtype`` is given)."""
    be = _check_device(device, "empty")
    dt = D.as_dtype(dtype) if dtype is not None else D.default_float()
    shape = _sizes(args, size, "empty")
    if be is not None:  # nothing to upload
        return _to_backend(
            Tensor._wrap(be.empty_array(shape, dt.np), dt, dev=be), be, requires_grad
        )
    return _finish(empty_array(shape, dt.np), dt, requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of ``size`` filled with ``fill_value`` (dtype inferred from the value: bool,
    int64, or the default floating dtype for a float)."""
    be = _check_device(device, "full")
    if dtype is None:
        dt = (
            D.bool_
            if isinstance(fill_value, bool)
            else (D.int64 if isinstance(fill_value, int) else D.default_float())
        )
    else:
        dt = D.as_dtype(dtype)
    shape = _shape_arg((size,) if isinstance(size, (tuple, list)) else (size,), "full")
    out = empty_array(shape, dt.np)
    if dt is D.bfloat16:
        out.fill(int(D.f32_to_bf16(np.array([fill_value], np.float32))[0]))
    else:
        try:
            if _is_int(fill_value) and not dt.is_floating_point and dt is not D.bool_:
                fill_value = D.int_scalar(fill_value, dt, checked=True)  # uint8: -1 is 255
            with np.errstate(over="ignore"):  # floats overflow to inf, as IEEE
                out.fill(fill_value)
        except (OverflowError, ValueError, TypeError):
            raise DTypeError(
                f"full(): fill value {fill_value!r} cannot be represented in {dt}"
            ) from None
    return _finish(out, dt, requires_grad, be)


def zeros(*args, size=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of zeros (of the default floating dtype unless ``dtype`` is given)."""
    return full(
        _sizes(args, size, "zeros"),
        0,
        dtype=dtype or D.default_float(),
        device=device,
        requires_grad=requires_grad,
    )


def ones(*args, size=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of ones (of the default floating dtype unless ``dtype`` is given)."""
    return full(
        _sizes(args, size, "ones"),
        1,
        dtype=dtype or D.default_float(),
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


def _in_format(make, t: Tensor, memory_format, requires_grad: bool, op: str) -> Tensor:
    """``make(requires_grad)``, the new tensor, laid out in ``memory_format`` (preserve_format,
    the default: t's channels-last format if it has one, see gpucore/memory_format.py)."""
    fmt = preserve_format if memory_format is None else memory_format
    if fmt is preserve_format and preserved(t) is None:
        return make(requires_grad)
    out = like(make(False), t, fmt, op)
    return out.requires_grad_() if requires_grad else out


def empty_like(
    t: Tensor, dtype=None, device=None, requires_grad: bool = False, *, memory_format=None
) -> Tensor:
    """An uninitialised tensor with t's shape, dtype and device (unless given)."""
    shape, dt, dev = _like(t, dtype, device)
    return _in_format(
        lambda rg: empty(shape, dtype=dt, device=dev, requires_grad=rg),
        t,
        memory_format,
        requires_grad,
        "empty_like",
    )


def zeros_like(
    t: Tensor, dtype=None, device=None, requires_grad: bool = False, *, memory_format=None
) -> Tensor:
    """Zeros with t's shape, dtype and device (unless given)."""
    shape, dt, dev = _like(t, dtype, device)
    return _in_format(
        lambda rg: zeros(shape, dtype=dt, device=dev, requires_grad=rg),
        t,
        memory_format,
        requires_grad,
        "zeros_like",
    )


def ones_like(
    t: Tensor, dtype=None, device=None, requires_grad: bool = False, *, memory_format=None
) -> Tensor:
    """Ones with t's shape, dtype and device (unless given)."""
    shape, dt, dev = _like(t, dtype, device)
    return _in_format(
        lambda rg: ones(shape, dtype=dt, device=dev, requires_grad=rg),
        t,
        memory_format,
        requires_grad,
        "ones_like",
    )


def full_like(
    t: Tensor,
    fill_value,
    dtype=None,
    device=None,
    requires_grad: bool = False,
    *,
    memory_format=None,
):
    """``fill_value`` with t's shape, dtype and device (unless given)."""
    shape, dt, dev = _like(t, dtype, device)
    return _in_format(
        lambda rg: full(shape, fill_value, dtype=dt, device=dev, requires_grad=rg),
        t,
        memory_format,
        requires_grad,
        "full_like",
    )


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad: bool = False):
    """Values from ``start`` (default 0) up to, not including, ``end`` by ``step``.

    ``start + i * step`` for i in [0, ceil((end - start) / step)), computed in int64 when all three
    are ints and in float64 otherwise, then cast to ``dtype`` (the default floating dtype when any
    bound is a float, else int64), as PyTorch.
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
        dtype = D.int64 if all_int else D.default_float()
    dt = D.as_dtype(dtype)
    n = max(0, -((start - end) // step)) if all_int else max(0, math.ceil((end - start) / step))
    _shape_arg((n,), "arange")
    if all_int:
        arr = np.arange(n, dtype=np.int64) * step + start
    else:
        arr = np.arange(n, dtype=np.float64) * step + start
    return _finish(_store(arr, dt), dt, requires_grad, be)


def linspace(start, end, steps: int, dtype=None, device=None, requires_grad: bool = False):
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive (of the default floating
    dtype unless ``dtype`` is given)."""
    be = _check_device(device, "linspace")
    if steps < 0:
        raise ValueError(f"linspace(): number of steps must be non-negative, got {steps}")
    dt = D.as_dtype(dtype) if dtype is not None else D.default_float()
    if steps > 1 and (dt is D.float32 or dt is D.float64):
        lo, hi = float(start), float(end)
        if math.isfinite(lo) and math.isfinite(hi):
            arr = fused_linspace(lo, hi, steps, dt)
            return _finish(_store(arr, dt), dt, requires_grad, be)
    return _finish(_store(np.linspace(start, end, steps), dt), dt, requires_grad, be)


def fused_linspace(lo: float, hi: float, steps: int, dt) -> np.ndarray:
    """linspace(lo, hi, steps) in float32 / float64 as PyTorch's CPU kernel makes it: the step
    rounded to dt, the first half ``lo + step * i``, the second ``hi - step * (n - 1 - i)``,
    each a fused multiply-add (one rounding: float32's computed in float64, where the product
    is exact; float64's as an error-free product and sum, Dekker's, added once: x87's 64-bit
    mantissa rounded twice, a few ulps in 10^3). numpy's linspace, rounded from float64,
    differs from it by an ulp here and there."""
    i = np.arange(steps, dtype=np.float64)
    first = i < steps // 2
    if dt is not D.float64:
        lo_, hi_ = np.float32(lo), np.float32(hi)
        step = np.float64((hi_ - lo_) / np.float32(steps - 1))
        e = np.where(first, np.float64(lo_) + step * i, np.float64(hi_) - step * (steps - 1 - i))
        return e.astype(np.float32)
    step = (hi - lo) / (steps - 1)
    return np.where(first, _fma64(step, i, lo), _fma64(-step, steps - 1 - i, hi))


def _fma64(a: float, b: np.ndarray, c: float) -> np.ndarray:
    """a * b + c, rounded once in all but vanishingly rare ties: the product and the sum split
    into their rounded values and exact errors (Veltkamp / Dekker, Knuth's two-sum)."""

    def halves(x):
        big = 134217729.0 * x  # 2^27 + 1
        hi = big - (big - x)
        return hi, x - hi

    with np.errstate(over="ignore", invalid="ignore"):
        p = a * b
        ah, al = halves(np.float64(a))
        bh, bl = halves(b)
        p_err = ((ah * bh - p) + ah * bl + al * bh) + al * bl  # p + p_err == a * b exactly
        s = p + c
        bb = s - p
        s_err = (p - (s - bb)) + (c - bb)  # s + s_err == p + c exactly
        out = s + (s_err + p_err)
    # the splitting overflows for values near float64's largest: rounded twice there
    return np.where(np.isfinite(out), out, s)


def logspace(
    start,
    end,
    steps: int,
    base: float = 10.0,
    dtype=None,
    device=None,
    requires_grad: bool = False,
):
    """``steps`` values from ``base ** start`` to ``base ** end`` inclusive, their exponents
    evenly spaced (torch.logspace; the default floating dtype unless ``dtype`` is given,
    computed in float64 and rounded once, integer dtypes truncated)."""
    be = _check_device(device, "logspace")
    if steps < 0:
        raise ValueError(f"logspace(): number of steps must be non-negative, got {steps}")
    start, end = (float(v.item()) if isinstance(v, Tensor) else v for v in (start, end))
    dt = D.as_dtype(dtype) if dtype is not None else D.default_float()
    with np.errstate(over="ignore"):
        arr = np.power(float(base), np.linspace(start, end, steps))
    return _finish(_store(arr, dt), dt, requires_grad, be)


def eye(n: int, m: int | None = None, dtype=None, device=None, requires_grad: bool = False):
    """A 2-D tensor with ones on the diagonal (of the default floating dtype unless ``dtype`` is
    given)."""
    be = _check_device(device, "eye")
    dt = D.as_dtype(dtype) if dtype is not None else D.default_float()
    _shape_arg((n, n if m is None else m), "eye")
    return _finish(_store(np.eye(n, m), dt), dt, requires_grad, be)


# ------------------------------------------------------------------------------- devices
def _device_backend(device):
    """None for the host, else the Vulkan backend (DeviceError for unknown names)."""
    if device is None:
        device = _DEFAULT[0]  # set_default_device's (None: the host)
        if device is None:
            return None
    if _device(device).type == "cpu":  # DeviceError for unknown names
        return None
    return dispatch.vulkan_backend(required=True)


def _to_backend(t: Tensor, be, requires_grad: bool) -> Tensor:
    """t (made without requires_grad) on backend ``be`` (None: the host) as a leaf."""
    if be is not None and t._dev is not be:
        t = Tensor._wrap(
            be.upload(np.require(t._data, requirements="C"), t._dtype), t._dtype, dev=be
        )
    return leaf_requires_grad(t, requires_grad, "a tensor factory")


def frombuffer(
    buffer, *, dtype, count: int = -1, offset: int = 0, requires_grad: bool = False
) -> Tensor:
    """A 1-D tensor over the bytes of an object with the buffer protocol, from ``offset`` bytes
    on, ``count`` elements of ``dtype`` (all that fit when negative), sharing its memory as
    torch.frombuffer; a read-only buffer (bytes) is copied, with a warning, as writes to it
    could not land."""
    dt = D.as_dtype(dtype)
    try:
        nbytes = memoryview(buffer).nbytes
    except TypeError:
        nbytes = None  # not a buffer: np.frombuffer below says so
    if nbytes is not None and (nbytes == 0 or int(count) == 0):
        raise ValueError(
            f"frombuffer(): both buffer length ({nbytes}) and count ({count}) must not be 0 "
            "(PyTorch's rule: an empty tensor cannot share a buffer)"
        )
    if nbytes is not None and not 0 <= int(offset) < nbytes:
        raise ValueError(
            f"frombuffer(): offset ({offset} bytes) must be non-negative and no greater than "
            f"buffer length ({nbytes} bytes) minus 1"
        )
    try:
        arr = np.frombuffer(buffer, dtype=dt.np, count=int(count), offset=int(offset))
    except (TypeError, ValueError) as e:
        raise ValueError(
            f"frombuffer(): {e} (buffer, dtype {dt}, count {count}, offset {offset})"
        ) from None
    if not arr.flags.writeable:
        warnings.warn(
            "frombuffer(): the given buffer is not writable; the tensor holds a copy of it",
            UserWarning,
            stacklevel=2,
        )
        arr = arr.copy()
    t = from_numpy(arr)
    return leaf_requires_grad(t, requires_grad, "a tensor factory")


def range_(start=0, end=None, step=1, *, dtype=None, device=None, requires_grad: bool = False):
    """torch.range (deprecated there in favour of arange): ``start, start + step, ...`` up to and
    including ``end``, floor((end - start) / step) + 1 values computed in float64, of the
    default floating dtype unless ``dtype`` is given."""
    warnings.warn(
        "torch.range is deprecated and will be removed in a future release because its behavior "
        "is inconsistent with Python's range builtin. Instead, use torch.arange, which produces "
        "values in [start, end).",
        UserWarning,
        stacklevel=2,
    )
    if end is None:
        raise TypeError("range(): end is required (range(start, end, step))")
    vals = []
    for v in (start, end, step):
        if isinstance(v, Tensor):
            v = v.item()
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.number)):
            raise TypeError(f"range(): start, end and step must be numbers, got {v!r}")
        vals.append(float(v))
    start, end, step = vals
    if step == 0 or not all(math.isfinite(v) for v in vals):
        raise ValueError(f"range(): step must be nonzero and the bounds finite, got {vals}")
    if (end - start) * step < 0:
        raise ValueError(
            f"range(): upper bound and larger bound inconsistent with step sign ({start}, {end}, "
            f"{step})"
        )
    n = int(math.floor((end - start) / step)) + 1
    values = start + np.arange(n, dtype=np.float64) * step
    dt = D.default_float() if dtype is None else D.as_dtype(dtype)
    return tensor(values, dtype=dt, device=device, requires_grad=requires_grad)


range_.__name__ = range_.__qualname__ = "range"
