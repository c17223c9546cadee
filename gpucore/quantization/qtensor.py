"""Quantized tensors: ``quantize_per_tensor``, ``quantize_per_channel`` and ``QuantizedTensor``.

A quantized tensor holds integers ``q`` (its ``int_repr()``, an int8, uint8 or int32 gpucore
tensor) and the affine map back to real numbers, ``x = (q - zero_point) * scale``: one scale and
zero point for the whole tensor (``per_tensor_affine``) or one per slice along ``axis``
(``per_channel_affine``). Its dtype is ``gpucore.qint8`` (int8, [-128, 127]), ``gpucore.quint8``
(uint8, [0, 255]) or ``gpucore.qint32``.

The arithmetic is PyTorch's (checked bit for bit against torch 2.13's CPU kernels):

- quantize: ``q = clamp(round_half_even(fl32(x * fl32(1 / fl32(scale)) + zero_point)), qmin,
  qmax)``; per tensor for qint8/quint8 the product and the sum are rounded once to float32 (a
  fused multiply-add, as fbgemm), otherwise each on its own (as PyTorch's qint32 and per-channel
  paths); out-of-range values saturate, NaN goes to ``qmax`` (as PyTorch's int8 kernels);
- dequantize, per tensor: ``fl32((q - zero_point) * fl32(scale))``; per channel:
  ``fl32((q - zero_point) * scale)`` with the float64 scales.

Unlike PyTorch, a scale must be positive and finite (PyTorch accepts 0, negative and NaN scales
and produces garbage), and a float64/float16/bfloat16 input is accepted (converted to float32
first). A quantized tensor is not a ``gpucore.Tensor``: gpucore's ops do not take it (PyTorch
raises for most of them too); ``dequantize()`` gives the float tensor to compute with. It lives in
host memory.
"""

from __future__ import annotations

import numbers

import numpy as np

from .. import dtypes as D
from ..creation import from_numpy
from ..errors import ArgumentTypeError, DTypeError, GpucoreIndexError, ShapeError
from ..tensor import Size, Tensor, device

__all__ = [
    "QuantizedTensor",
    "qscheme",
    "per_tensor_affine",
    "per_channel_affine",
    "per_tensor_symmetric",
    "per_channel_symmetric",
    "quantize_per_tensor",
    "quantize_per_channel",
    "dequantize",
    "qrange",
]


class qscheme:  # noqa: N801 - PyTorch's name (torch.qscheme)
    """A quantization scheme, compared with ``is``; ``str()``: ``gpucore.per_tensor_affine``."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"gpucore.{self.name}"

    def __reduce__(self):
        return (_scheme_by_name, (self.name,))


per_tensor_affine = qscheme("per_tensor_affine")
per_channel_affine = qscheme("per_channel_affine")
per_tensor_symmetric = qscheme("per_tensor_symmetric")
per_channel_symmetric = qscheme("per_channel_symmetric")
SCHEMES = (per_tensor_affine, per_channel_affine, per_tensor_symmetric, per_channel_symmetric)


def _scheme_by_name(name: str) -> qscheme:
    return next(s for s in SCHEMES if s.name == name)


_RANGES = {
    D.qint8: (-128, 127),
    D.quint8: (0, 255),
    D.qint32: (-(2**31), 2**31 - 1),
}
# the plain dtype of each quantized dtype's int_repr, and back
STORAGE = {D.qint8: D.int8, D.quint8: D.uint8, D.qint32: D.int32}
FROM_STORAGE = {v: k for k, v in STORAGE.items()}


def qrange(dtype) -> tuple[int, int]:
    """(qmin, qmax) of a quantized dtype: qint8 (-128, 127), quint8 (0, 255), qint32 (int32's)."""
    return _RANGES[dtype]


# ----------------------------------------------------------------------------- checks
def check_qdtype(fn: str, dtype) -> None:
    """Raise unless ``dtype`` is gpucore.qint8, quint8 or qint32."""
    if dtype not in _RANGES:
        raise DTypeError(
            f"{fn}(): dtype must be gpucore.qint8, gpucore.quint8 or gpucore.qint32, got {dtype!r}"
        )


def check_float_input(fn: str, input) -> np.ndarray:
    """The float32 host values of ``input``, a floating gpucore tensor."""
    if not isinstance(input, Tensor):
        raise ArgumentTypeError(
            f"{fn}(): argument 'input' must be a float Tensor, not {type(input).__name__}"
        )
    if not input.dtype.is_floating_point:
        raise DTypeError(
            f"{fn}(): input must be a floating point tensor (float32, or float64/float16/"
            f"bfloat16, converted to float32), got {input.dtype}; convert it with .float()"
        )
    return np.asarray(input.detach().float().numpy(), dtype=np.float32)


def check_scale(fn: str, scale, name: str = "scale") -> float:
    """``scale`` as a Python float: a positive, finite number (or a one-element float tensor)."""
    if isinstance(scale, Tensor):
        if scale.numel() != 1:
            raise ShapeError(f"{fn}(): {name} must be one number, got a tensor of {scale.shape}")
        scale = scale.item()
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
        raise ArgumentTypeError(f"{fn}(): {name} must be a float, not {type(scale).__name__}")
    scale = float(scale)
    with np.errstate(over="ignore"):
        s32 = np.float32(scale)
    if not (np.isfinite(s32) and s32 > 0 and scale > 0):
        raise ValueError(
            f"{fn}(): {name} must be positive and finite (also as float32), got "
            f"{scale!r}; an observer's calculate_qparams() gives a valid one"
        )
    return scale


def check_zero_point(fn: str, zero_point, dtype, name: str = "zero_point") -> int:
    """``zero_point`` as a Python int within the range of ``dtype``."""
    if isinstance(zero_point, Tensor):
        if zero_point.numel() != 1 or zero_point.dtype.is_floating_point:
            raise ShapeError(
                f"{fn}(): {name} must be one integer, got a {zero_point.dtype} tensor of "
                f"shape {tuple(zero_point.shape)}"
            )
        zero_point = zero_point.item()
    if isinstance(zero_point, bool) or not isinstance(zero_point, numbers.Integral):
        raise ArgumentTypeError(f"{fn}(): {name} must be an int, not {type(zero_point).__name__}")
    lo, hi = _RANGES[dtype]
    if not lo <= int(zero_point) <= hi:
        raise ValueError(
            f"{fn}(): {name} {int(zero_point)} is outside the range [{lo}, {hi}] of {dtype}"
        )
    return int(zero_point)


def _axis(fn: str, axis, ndim: int) -> int:
    if isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
        raise ArgumentTypeError(f"{fn}(): axis must be an int, not {type(axis).__name__}")
    if not -ndim <= axis < ndim:
        raise GpucoreIndexError(
            f"{fn}(): axis {axis} is out of range for a tensor of {ndim} dims; expected a value "
            f"in [{-ndim}, {ndim - 1}]"
        )
    return int(axis) % ndim


def _channel_params(fn: str, scales, zero_points, n: int, dtype):
    """The per-channel scales (float64) and zero points (int64) as numpy arrays of length n."""
    for name, v in (("scales", scales), ("zero_points", zero_points)):
        if not isinstance(v, Tensor):
            raise ArgumentTypeError(
                f"{fn}(): argument '{name}' must be a 1-d Tensor, not {type(v).__name__}"
            )
        if v.dim() != 1 or v.shape[0] != n:
            raise ShapeError(
                f"{fn}(): {name} must be a 1-d tensor with one entry per channel ({n} along "
                f"axis), got shape {tuple(v.shape)}"
            )
    if not scales.dtype.is_floating_point:
        raise DTypeError(f"{fn}(): scales must be a float tensor, got {scales.dtype}")
    if zero_points.dtype.is_floating_point or zero_points.dtype is D.bool_:
        raise DTypeError(f"{fn}(): zero_points must be an integer tensor, got {zero_points.dtype}")
    s = np.asarray(scales.detach().double().numpy(), dtype=np.float64).copy()
    z = np.asarray(zero_points.detach().numpy()).astype(np.int64)
    with np.errstate(over="ignore"):
        s32 = s.astype(np.float32)
    bad = ~(np.isfinite(s32) & (s32 > 0) & (s > 0))
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(
            f"{fn}(): every scale must be positive and finite, scales[{i}] is {s[i]!r}"
        )
    lo, hi = _RANGES[dtype]
    if n and (z.min() < lo or z.max() > hi):
        raise ValueError(
            f"{fn}(): zero_points must lie in [{lo}, {hi}] for {dtype}, got values in "
            f"[{z.min()}, {z.max()}]"
        )
    return s, z


# ----------------------------------------------------------------------------- arithmetic
def quantize_array(x: np.ndarray, scale, zero_point, dtype, fused: bool = False) -> np.ndarray:
    """Quantize float32 ``x`` (PyTorch's rounding, see the module docstring). ``scale`` and
    ``zero_point`` are numbers or arrays broadcasting against ``x``; ``fused``: round
    ``x * inv + zero_point`` once (PyTorch's per-tensor qint8/quint8) instead of twice."""
    with np.errstate(over="ignore", invalid="ignore"):  # inf and NaN saturate (docstring)
        return _quantize(x, scale, zero_point, dtype, fused)


def _quantize(x: np.ndarray, scale, zero_point, dtype, fused: bool) -> np.ndarray:
    lo, hi = _RANGES[dtype]
    inv = np.float32(1) / np.asarray(scale, dtype=np.float32)
    y = np.asarray(np.multiply(x, inv, dtype=np.float32))
    y += np.asarray(zero_point, dtype=np.float32)
    r = np.asarray(np.rint(y))
    if dtype is D.qint32:
        r = np.asarray(r.astype(np.float64))  # the clip bounds need float64
    if fused:
        # the sum rounded twice can differ from the fused one only within a few float32 ulps
        # of a .5 tie: redo those (a few ulps of 512: larger values saturate either way)
        d = np.asarray(y - r)
        np.abs(d, out=d)
        near = d >= np.float32(0.5 - 2.0**-11)
        if near.any():
            xs = np.broadcast_to(x, y.shape)[near].astype(np.float64)
            invs = np.broadcast_to(inv, y.shape)[near].astype(np.float64)
            zps = np.broadcast_to(np.asarray(zero_point), y.shape)[near]
            # x * inv is exact in float64 (24 x 24 bits): one rounding to float32
            r[near] = np.rint((xs * invs + zps).astype(np.float32))
    np.clip(r, lo, hi, out=r)
    nan = np.isnan(r)
    if nan.any():
        r[nan] = hi
    return np.asarray(r.astype(STORAGE[dtype].np))


def dequantize_array(q: np.ndarray, scale, zero_point, per_channel: bool) -> np.ndarray:
    """float32 values of integers ``q`` (PyTorch's rounding, see the module docstring)."""
    if not per_channel and q.dtype != np.int32:
        # (q - zero_point) is exact in float32 for 8-bit values: one rounding, as float64 gives
        d = q.astype(np.float32) - np.float32(zero_point)
        return np.asarray(d * np.float32(scale), dtype=np.float32)
    s = np.asarray(scale, dtype=np.float64)
    if not per_channel:
        s = s.astype(np.float32).astype(np.float64)
    d = q.astype(np.int64) - np.asarray(zero_point, dtype=np.int64)
    return np.asarray(d.astype(np.float64) * s).astype(np.float32)


# ----------------------------------------------------------------------------- the tensor
class QuantizedTensor:
    """An integer tensor with the scale(s) and zero point(s) that map it to real numbers.

    Made by ``gpucore.quantize_per_tensor`` / ``gpucore.quantize_per_channel``; PyTorch's
    accessors: ``dequantize()``, ``int_repr()``, ``q_scale()``, ``q_zero_point()``,
    ``q_per_channel_scales()``, ``q_per_channel_zero_points()``, ``q_per_channel_axis()``,
    ``qscheme()``, ``is_quantized``. ``gpucore.save`` stores it as its integers plus its
    parameters (a quarter of the float32 size for int8).
    """

    __slots__ = ("_int", "_dtype", "_scheme", "_scale", "_zero_point", "_axis")
    is_quantized = True
    requires_grad = False

    def __init__(self, int_repr: Tensor, dtype, scheme: qscheme, scale, zero_point, axis=None):
        # no checks: the public functions (and the checkpoint decoder) check their arguments
        self._int = int_repr
        self._dtype = dtype
        self._scheme = scheme
        self._scale = scale  # float, or float64 Tensor [C] per channel
        self._zero_point = zero_point  # int, or int64 Tensor [C] per channel
        self._axis = axis

    # --------------------------------------------------------------- metadata
    @property
    def shape(self) -> Size:
        """The shape, as ``Tensor.shape``."""
        return self._int.shape

    @property
    def dtype(self) -> D.dtype:
        """gpucore.qint8, gpucore.quint8 or gpucore.qint32."""
        return self._dtype

    @property
    def device(self) -> device:
        """Always the CPU."""
        return self._int.device

    @property
    def ndim(self) -> int:
        """The number of dims."""
        return self._int.ndim

    def size(self, dim: int | None = None) -> Size | int:
        """The shape, or the size of one dim."""
        return self._int.size(dim)

    def dim(self) -> int:
        """The number of dims."""
        return self._int.dim()

    def numel(self) -> int:
        """The number of elements."""
        return self._int.numel()

    def element_size(self) -> int:
        """Bytes per element (1 for qint8/quint8, 4 for qint32)."""
        return self._dtype.itemsize

    def stride(self, dim: int | None = None) -> tuple | int:
        """The strides, in elements."""
        return self._int.stride(dim)

    def is_contiguous(self) -> bool:
        """Whether the integers are stored row-major without gaps."""
        return self._int.is_contiguous()

    def __len__(self) -> int:
        return len(self._int)

    # --------------------------------------------------------------- PyTorch's accessors
    def qscheme(self) -> qscheme:
        """gpucore.per_tensor_affine or gpucore.per_channel_affine."""
        return self._scheme

    def _per_tensor(self, fn: str) -> None:
        if self._scheme is not per_tensor_affine:
            raise ValueError(
                f"{fn}(): only per-tensor quantized tensors have one; this one is "
                f"{self._scheme.name}: use q_per_channel_scales() / q_per_channel_zero_points()"
            )

    def _per_channel(self, fn: str) -> None:
        if self._scheme is not per_channel_affine:
            raise ValueError(
                f"{fn}(): only per-channel quantized tensors have these; this one is "
                f"{self._scheme.name}: use q_scale() / q_zero_point()"
            )

    def q_scale(self) -> float:
        """The scale of a per-tensor quantized tensor."""
        self._per_tensor("q_scale")
        return self._scale

    def q_zero_point(self) -> int:
        """The zero point of a per-tensor quantized tensor."""
        self._per_tensor("q_zero_point")
        return self._zero_point

    def q_per_channel_scales(self) -> Tensor:
        """The scales of a per-channel quantized tensor (float64, one per channel)."""
        self._per_channel("q_per_channel_scales")
        return self._scale.clone()

    def q_per_channel_zero_points(self) -> Tensor:
        """The zero points of a per-channel quantized tensor (int64, one per channel)."""
        self._per_channel("q_per_channel_zero_points")
        return self._zero_point.clone()

    def q_per_channel_axis(self) -> int:
        """The dim the per-channel parameters run along."""
        self._per_channel("q_per_channel_axis")
        return self._axis

    def int_repr(self) -> Tensor:
        """The integers, a new int8 (qint8), uint8 (quint8) or int32 (qint32) tensor, in host
        memory as the quantized tensor (a copy made on the host, whatever the device policy)."""
        return from_numpy(self._int.numpy().copy())

    def _params(self):
        """(scale, zero_point) as numbers or arrays broadcasting against the integers."""
        if self._scheme is per_tensor_affine:
            return self._scale, self._zero_point
        shape = [1] * self._int.ndim
        shape[self._axis] = -1
        s = self._scale.numpy().reshape(shape)
        return s, self._zero_point.numpy().reshape(shape)

    def dequantize(self) -> Tensor:
        """The float32 tensor ``(int_repr - zero_point) * scale``."""
        s, z = self._params()
        per_channel = self._scheme is per_channel_affine
        return from_numpy(dequantize_array(self._int.numpy(), s, z, per_channel))

    def clone(self) -> QuantizedTensor:
        """A copy with its own integers."""
        extra = (self._scale, self._zero_point)
        if self._scheme is per_channel_affine:
            extra = (self._scale.clone(), self._zero_point.clone())
        return QuantizedTensor(self._int.clone(), self._dtype, self._scheme, *extra, self._axis)

    def detach(self) -> QuantizedTensor:
        """Itself: a quantized tensor has no autograd history."""
        return self

    def contiguous(self) -> QuantizedTensor:
        """Itself when contiguous, else a contiguous copy."""
        if self.is_contiguous():
            return self
        t = self.clone()
        t._int = self._int.contiguous()
        return t

    def cpu(self) -> QuantizedTensor:
        """Itself (quantized tensors live in host memory)."""
        return self

    def to(self, device) -> QuantizedTensor:
        """Itself for the CPU; quantized tensors have no Vulkan form (dequantize() first)."""
        if device != "cpu":
            raise ValueError(
                f"QuantizedTensor.to({device!r}): quantized tensors live on the CPU only; "
                "move q.dequantize() (a float tensor) instead"
            )
        return self

    def _checkpoint_parts(self) -> tuple[dict, dict]:
        """What ``gpucore.save`` stores (``checkpoint.from_checkpoint`` rebuilds it): the fields and
        the tensors (the integers, and per channel the scales and zero points)."""
        meta = {"dtype": self._dtype.name, "qscheme": self._scheme.name}
        tensors = {"int_repr": self._int}
        if self._scheme is per_tensor_affine:
            meta.update(scale=self._scale, zero_point=self._zero_point)
        else:
            meta["axis"] = self._axis
            tensors.update(scales=self._scale, zero_points=self._zero_point)
        return meta, tensors

    def __deepcopy__(self, memo):
        t = self.clone()
        memo[id(self)] = t
        return t

    def __repr__(self) -> str:
        body = repr(self.dequantize())[len("tensor(") : -1]
        suffixes = [
            f"size={tuple(self.shape)}",
            f"dtype={self._dtype}",
            f"quantization_scheme={self._scheme}",
        ]
        if self._scheme is per_tensor_affine:
            suffixes += [f"scale={self._scale}", f"zero_point={self._zero_point}"]
        else:
            suffixes += [
                f"scale={self._scale!r}",
                f"zero_point={self._zero_point!r}",
                f"axis={self._axis}",
            ]
        return "tensor(" + _add_suffixes(body, suffixes, len("tensor(")) + ")"


def _add_suffixes(body: str, suffixes: list, indent: int, width: int = 80) -> str:
    """PyTorch's layout of ``size=..., dtype=...`` after a tensor's values: on the last line
    while it stays within ``width`` columns, else on a new line indented under the values."""
    out = [body]
    last = len(body) - body.rfind("\n") + 1 if "\n" in body else indent + len(body) + 2
    for s in suffixes:
        if last + len(s) + 2 > width:
            out.append(",\n" + " " * indent + s)
            last = indent + len(s)
        else:
            out.append(", " + s)
            last += len(s) + 2
    return "".join(out)


# ----------------------------------------------------------------------------- public API
def quantize_per_tensor(input: Tensor, scale: float, zero_point: int, dtype) -> QuantizedTensor:
    """Quantize ``input`` with one ``scale`` and ``zero_point``: a ``QuantizedTensor`` of
    ``dtype`` (gpucore.qint8, quint8 or qint32), as ``torch.quantize_per_tensor``.

    ``q = clamp(round_half_even(input / scale) + zero_point, qmin, qmax)`` (PyTorch's float32
    rounding: see ``gpucore.quantization.qtensor``)."""
    fn = "quantize_per_tensor"
    check_qdtype(fn, dtype)
    x = check_float_input(fn, input)
    scale = check_scale(fn, scale)
    zero_point = check_zero_point(fn, zero_point, dtype)
    q = from_numpy(quantize_array(x, scale, zero_point, dtype, fused=dtype is not D.qint32))
    return QuantizedTensor(q, dtype, per_tensor_affine, scale, zero_point)


def quantize_per_channel(
    input: Tensor, scales: Tensor, zero_points: Tensor, axis: int, dtype
) -> QuantizedTensor:
    """Quantize ``input`` with one scale and zero point per slice along ``axis``
    (``scales``: float tensor [C], ``zero_points``: integer tensor [C], C = input.shape[axis]),
    as ``torch.quantize_per_channel``."""
    fn = "quantize_per_channel"
    check_qdtype(fn, dtype)
    x = check_float_input(fn, input)
    if x.ndim == 0:
        raise ShapeError(f"{fn}(): input must have at least one dim (the channel axis)")
    ax = _axis(fn, axis, x.ndim)
    s, z = _channel_params(fn, scales, zero_points, x.shape[ax], dtype)
    shape = [1] * x.ndim
    shape[ax] = -1
    q = from_numpy(quantize_array(x, s.reshape(shape), z.reshape(shape), dtype))
    return QuantizedTensor(q, dtype, per_channel_affine, from_numpy(s), from_numpy(z), ax)


def dequantize(tensor: QuantizedTensor | Tensor) -> Tensor:
    """``tensor.dequantize()`` for a QuantizedTensor; a float Tensor is returned as it is
    (as ``torch.dequantize``)."""
    if isinstance(tensor, QuantizedTensor):
        return tensor.dequantize()
    if isinstance(tensor, Tensor) and tensor.dtype.is_floating_point:
        return tensor
    raise ArgumentTypeError(
        f"dequantize(): expected a quantized tensor (or a float Tensor), got "
        f"{tensor.dtype if isinstance(tensor, Tensor) else type(tensor).__name__}"
    )


def make_per_tensor(int_repr: Tensor, scale: float, zero_point: int) -> QuantizedTensor:
    """A per-tensor quantized tensor over existing integers (int8 -> qint8, uint8 -> quint8,
    int32 -> qint32), as ``torch._make_per_tensor_quantized_tensor``."""
    fn = "make_per_tensor"
    dtype = _storage_dtype(fn, int_repr)
    scale = check_scale(fn, scale)
    zero_point = check_zero_point(fn, zero_point, dtype)
    return QuantizedTensor(int_repr.detach(), dtype, per_tensor_affine, scale, zero_point)


def make_per_channel(
    int_repr: Tensor, scales: Tensor, zero_points: Tensor, axis: int
) -> QuantizedTensor:
    """A per-channel quantized tensor over existing integers, as
    ``torch._make_per_channel_quantized_tensor``."""
    fn = "make_per_channel"
    dtype = _storage_dtype(fn, int_repr)
    if int_repr.dim() == 0:
        raise ShapeError(f"{fn}(): int_repr must have at least one dim (the channel axis)")
    ax = _axis(fn, axis, int_repr.dim())
    s, z = _channel_params(fn, scales, zero_points, int_repr.shape[ax], dtype)
    return QuantizedTensor(
        int_repr.detach(), dtype, per_channel_affine, from_numpy(s), from_numpy(z), ax
    )


def _storage_dtype(fn: str, int_repr):
    if not isinstance(int_repr, Tensor):
        raise ArgumentTypeError(
            f"{fn}(): int_repr must be an int8, uint8 or int32 Tensor, not "
            f"{type(int_repr).__name__}"
        )
    if int_repr.dtype not in FROM_STORAGE or int_repr.is_vulkan:
        raise DTypeError(
            f"{fn}(): int_repr must be a CPU int8, uint8 or int32 tensor, got {int_repr.dtype}"
            f"{' on vulkan' if int_repr.is_vulkan else ''}"
        )
    return FROM_STORAGE[int_repr.dtype]
