"""The runtime's quantized ops (static post-training quantization, gpucore/quantization/static.py).

Activations are uint8, affine, one (scale, zero point) per tensor, held as node attributes;
weights are int8 constants, symmetric, one float32 scale per output channel (a constant input);
biases stay float32. Each op has a numpy reference (``evaluate``: the exact integer and float32
arithmetic of its kernel) and a lowering to ``gpucore._cpu`` node kinds (cpu/qconv.c,
cpu/qgemm.c); the interpreted executor runs the same binding calls, so both executors give the
same bits.

- ``quantize_linear(x; scale, zero_point[, onnx])``: float32 -> uint8, ``clamp(rint(x * (1/scale)
  + zp), 0, 255)`` (quantize_per_tensor's rounding), or with ``onnx=True`` ONNX QuantizeLinear's
  ``clamp(round_half_even(x / scale) + zp, 0, 255)`` (a division, as ONNX Runtime; gpucore.onnx);
- ``dequantize_linear(q[, scales]; scale, zero_point, axis)``: uint8 -> float32 ``(q - zp) *
  scale``; with a scales input, an int8 weight (or an int32 bias, ONNX's quantized bias)
  dequantized per channel along ``axis`` (what the QDQ form holds before fusion);
- ``qlinear(a, w, w_scales[, bias]; a_scale, a_zero_point, relu, out_scale, out_zero_point)``
  (bias float32, or int32: added to the int32 sums first, as ONNX's QLinearConv / QGemm):
  ``a`` uint8 [..., K] times int8 ``w`` [N, K] (int32 sums), then the requantizing epilogue of
  ``_cpu.qgemm``: uint8 out (``out_scale`` given; relu clips at the zero point) or float32 out
  (``out_scale`` None);
- ``qconv2d(x, w, w_scales[, bias]; stride, padding, dilation, ...the same)``: groups = 1, the
  padding read as the activation's zero point;
- ``qmatmul_integer(a, w[, zero_point]; a_zero_point)``: ONNX MatMulInteger's exact int32 sums
  of uint8 ``a`` [..., K] and int8 ``w`` [N, K] (``_cpu.qgemm``'s int32 output), the zero point
  an attribute or a uint8 tensor read when the node runs (``_cpu.qgemm_dynamic``; ONNX dynamic
  quantization's, ir/dynamic_quant.py);
- ``qconv2d_integer(x, w; a_zero_point, stride, padding, dilation)``: ONNX ConvInteger's, of
  uint8 ``x`` [N, C, H, W] and int8 ``w`` [O, C, kh, kw] (``_cpu.qconv2d``'s int32 output);
- ``qmax_pool2d(q; kernel, stride, padding, dilation)``: max pooling of uint8 values (max commutes
  with the monotone quantization, so the parameters pass through unchanged).

The int8 weights are packed once per constant (``_cpu.qgemm_pack``, cached per array).
"""

from __future__ import annotations

import math
import threading
import weakref

import numpy as np

from ... import _cpu
from ... import dtypes as D
from .ops import defruntime, run_calls
from .shapes import FUSED_DTYPES, FUSED_SHAPES

_F32 = np.float32


# ------------------------------------------------------------------------- packed weights
_lock = threading.Lock()
_cache: dict = {}  # id(weight) -> (weakref, QPackedMatrix)


def packed_weight(w: np.ndarray):
    """``w`` (int8 [N, ...], flattened to [N, K]) packed by ``_cpu.qgemm_pack`` (trans=1), once
    per constant array (the runners of an executor share it)."""
    n = w.shape[0]
    flat = np.ascontiguousarray(w.reshape(n, -1), np.int8)
    if w.flags.writeable:  # not a graph constant: pack for this call only
        return _cpu.qgemm_pack(flat, flat.shape[1], n, 1)
    key = id(w)
    with _lock:
        entry = _cache.get(key)
        if entry is not None and entry[0]() is w:
            return entry[1]
    pm = _cpu.qgemm_pack(flat, flat.shape[1], n, 1)
    with _lock:
        _cache[key] = (weakref.ref(w, lambda r, k=key: _drop(k, r)), pm)
    return pm


def _drop(key: int, ref) -> None:
    """The weight died: forget its packed copy (unless the id was reused meanwhile)."""
    with _lock:
        entry = _cache.get(key)
        if entry is not None and entry[0] is ref:
            del _cache[key]


# ------------------------------------------------------------------------------- checks
def _scale(attrs: dict, key: str) -> float:
    v = attrs.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"{key} must be a number, got {v!r}")
    f = float(np.float32(v))
    if not (math.isfinite(f) and f > 0):
        raise ValueError(f"{key} must be finite and > 0 as float32, got {v!r}")
    return f


def _zp(attrs: dict, key: str) -> int:
    v = attrs.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 255:
        raise ValueError(f"{key} must be an int in [0, 255], got {v!r}")
    return v


def _epilogue(attrs: dict) -> tuple:
    """(a_scale, a_zp, out_scale or None, out_zp, relu), checked."""
    a_scale, a_zp = _scale(attrs, "a_scale"), _zp(attrs, "a_zero_point")
    relu = attrs.get("relu")
    if not isinstance(relu, bool):
        raise ValueError(f"relu must be a bool, got {relu!r}")
    if attrs.get("out_scale") is None:
        return a_scale, a_zp, None, 0, relu
    return a_scale, a_zp, _scale(attrs, "out_scale"), _zp(attrs, "out_zero_point"), relu


def _pair(attrs: dict, key: str, lo: int) -> tuple:
    v = attrs.get(key)
    if not (isinstance(v, (tuple, list)) and len(v) == 2) or not all(
        isinstance(x, int) and not isinstance(x, bool) and x >= lo for x in v
    ):
        raise ValueError(f"{key} must be two ints >= {lo}, got {v!r}")
    return tuple(v)


def _vectors(shapes: list) -> None:
    """The scales [N] (and bias [N]) after the weight shapes[1] (N = its dim 0)."""
    if len(shapes) not in (3, 4):
        raise ValueError("expects input, weight, scales[, bias]")
    n = shapes[1][0] if shapes[1] else None
    for s in shapes[2:]:
        if s != (n,):
            raise ValueError(f"scales and bias must be [{n}], got {list(s)}")


def _conv_out(h: int, k: int, s: int, p: int, d: int) -> int:
    span = d * (k - 1) + 1
    if h + 2 * p < span:
        raise ValueError(f"the dilated kernel {span} exceeds the padded input {h + 2 * p}")
    return (h + 2 * p - span) // s + 1


# -------------------------------------------------------------------- quantize / dequantize
def quantize_ref(x: np.ndarray, scale: float, zp: int) -> np.ndarray:
    """float32 -> uint8 as ``_cpu.quantize_u8`` (each operation rounded to float32)."""
    inv = _F32(1) / _F32(scale)
    with np.errstate(invalid="ignore", over="ignore"):
        y = np.multiply(x.astype(_F32), inv, dtype=_F32) + _F32(zp)
        r = np.clip(np.rint(y), 0, 255)
    r[np.isnan(r)] = 255
    return r.astype(np.uint8)


def dequantize_ref(q: np.ndarray, scale, zp) -> np.ndarray:
    return ((q.astype(_F32) - _F32(zp)) * np.asarray(scale, _F32)).astype(_F32)


def quantize_onnx_ref(x: np.ndarray, scale: float, zp: int) -> np.ndarray:
    """float32 -> uint8 as ``_cpu.quantize_linear_u8``: ONNX's formula with a float32 division,
    clamped before rounding (NaN -> 0, as ONNX Runtime)."""
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        y = np.divide(x.astype(_F32), _F32(scale), dtype=_F32)
    y = np.where(np.isnan(y), _F32(-zp), y)
    return (np.rint(np.clip(y, _F32(-zp), _F32(255 - zp))) + zp).astype(np.uint8)


def _q_shape(shapes, attrs):
    _scale(attrs, "scale"), _zp(attrs, "zero_point")
    if not isinstance(attrs.get("onnx", False), bool):
        raise ValueError(f"onnx must be a bool, got {attrs['onnx']!r}")
    return shapes[0]


def _dq_shape(shapes, attrs):
    if len(shapes) == 2:  # per-channel int8 weight
        axis = attrs.get("axis")
        if not isinstance(axis, int) or not 0 <= axis < len(shapes[0]):
            raise ValueError(f"axis {axis!r} outside the weight's {len(shapes[0])} dims")
        if shapes[1] != (shapes[0][axis],):
            raise ValueError(f"scales {shapes[1]} do not match the weight {shapes[0]}")
        return shapes[0]
    return _q_shape(shapes, attrs)


def _q_eval(arrays, attrs, dtypes=None):
    ref = quantize_onnx_ref if attrs.get("onnx") else quantize_ref
    return ref(arrays[0], attrs["scale"], attrs["zero_point"])


def _dq_eval(arrays, attrs, dtypes=None):
    if len(arrays) == 2:
        q, s = arrays
        shape = [1] * q.ndim
        shape[attrs["axis"]] = -1
        return dequantize_ref(q, s.reshape(shape), 0)
    return dequantize_ref(arrays[0], attrs["scale"], attrs["zero_point"])


def _q_lower(out, arrays, attrs, scratch):
    (x,) = arrays
    if x.dtype != _F32 or not x.flags.c_contiguous:
        return None
    args = (x.reshape(-1), out.reshape(-1), x.size, attrs["scale"], attrs["zero_point"])
    return [("quantize_linear_u8" if attrs.get("onnx") else "quantize_u8", args)]


def _dq_lower(out, arrays, attrs, scratch):
    if len(arrays) != 1 or arrays[0].dtype != np.uint8 or not arrays[0].flags.c_contiguous:
        return None  # a per-channel weight (fused away before it ever runs): Python
    q = arrays[0]
    args = (q.reshape(-1), out.reshape(-1), q.size, attrs["scale"], attrs["zero_point"])
    return [("dequantize_u8", args)]


def _run(lower, evaluate):
    def run(out, arrays, attrs, scratch, dtypes):
        arrays = [np.ascontiguousarray(a) for a in arrays]
        calls = lower(out, arrays, attrs, scratch)
        if calls is None:
            np.copyto(out, evaluate(arrays, attrs, dtypes), casting="unsafe")
        else:
            run_calls(calls)

    return run


defruntime("quantize_linear", evaluate=_q_eval, run=_run(_q_lower, _q_eval), lower=_q_lower)
defruntime("dequantize_linear", evaluate=_dq_eval, run=_run(_dq_lower, _dq_eval), lower=_dq_lower)
FUSED_SHAPES["quantize_linear"] = _q_shape
FUSED_SHAPES["dequantize_linear"] = _dq_shape
FUSED_DTYPES["quantize_linear"] = lambda dtypes, attrs: _need(dtypes, D.float32, D.uint8)
FUSED_DTYPES["dequantize_linear"] = lambda dtypes, attrs: (
    _need(dtypes, D.int32 if dtypes[0] is D.int32 else D.int8, D.float32)
    if len(dtypes) == 2
    else _need(dtypes, D.uint8, D.float32)
)


def _need(dtypes, want, result):
    if dtypes[0] is not want:
        raise ValueError(f"expects {want.name} input, got {dtypes[0].name}")
    return result


# ------------------------------------------------------------------------ qlinear / qconv
def requantize_ref(acc: np.ndarray, attrs: dict, w_scales: np.ndarray, bias) -> np.ndarray:
    """The epilogue of ``_cpu.qgemm`` on exact int32 sums ``acc`` [..., N] (numpy float32, each
    operation rounded on its own, as the kernel)."""
    a_scale, _, out_scale, out_zp, relu = _epilogue(attrs)
    s = _F32(a_scale) * w_scales.astype(_F32)
    if bias is not None and bias.dtype == np.int32:  # ONNX's int32 bias: into the sums
        acc = (acc.astype(np.int64) + bias).astype(np.int32)  # (wrapping, as the kernel)
        bias = None
    c = acc.astype(_F32)
    if out_scale is None:
        v = c * s
        if bias is not None:
            v = v + bias.astype(_F32)
        return np.maximum(v, _F32(0)) if relu else v
    v = c * (s / _F32(out_scale))
    if bias is not None:
        v = v + bias.astype(_F32) / _F32(out_scale)
    lo = _F32(out_zp) if relu else _F32(0)
    return np.clip(np.rint(v) + _F32(out_zp), lo, _F32(255)).astype(np.uint8)


def _mode(attrs) -> tuple:
    """(out_scale, out_zp) arguments of the binding: 1.0, 0 for float32 out."""
    if attrs.get("out_scale") is None:
        return 1.0, 0
    return float(attrs["out_scale"]), int(attrs["out_zero_point"])


def _qlinear_shape(shapes, attrs):
    _epilogue(attrs)
    _vectors(shapes)
    a, w = shapes[0], shapes[1]
    if len(a) < 1 or len(w) != 2 or a[-1] != w[1]:
        raise ValueError(f"input {a} and weight {w} do not fit")
    return tuple(a[:-1]) + (w[0],)


def _qlinear_dtype(dtypes, attrs):
    if dtypes[0] is not D.uint8 or dtypes[1] is not D.int8:
        raise ValueError("expects uint8 input and int8 weight")
    if list(dtypes[2:3]) != [D.float32] or len(dtypes) not in (3, 4):
        raise ValueError("expects float32 scales[, bias]")
    if len(dtypes) == 4 and dtypes[3] not in (D.float32, D.int32):
        raise ValueError(f"expects a float32 or int32 bias, got {dtypes[3].name}")
    return D.float32 if attrs.get("out_scale") is None else D.uint8


def _qlinear_eval(arrays, attrs, dtypes=None):
    a, w, s = arrays[:3]
    bias = arrays[3] if len(arrays) > 3 else None
    acc = (a.astype(np.float64) - attrs["a_zero_point"]) @ w.astype(np.float64).T  # exact
    return requantize_ref(acc, attrs, s, bias)


def _qlinear_lower(out, arrays, attrs, scratch):
    a, w, s = arrays[:3]
    bias = arrays[3] if len(arrays) > 3 else None
    if not a.flags.c_contiguous:
        return None
    k = w.shape[1]
    m = a.size // k if k else math.prod(a.shape[:-1])
    out_scale, out_zp = _mode(attrs)
    args = (a.reshape(-1), packed_weight(w), out.reshape(-1), m, attrs["a_scale"])
    args += (attrs["a_zero_point"], s, bias, attrs["relu"], out_scale, out_zp)
    return [("qgemm", args)]


def _geometry(x_shape, w_shape, attrs) -> tuple:
    n, c, h, wd = x_shape
    o, _, kh, kw = w_shape
    return (n, c, h, wd, kh, kw, *attrs["stride"], *attrs["padding"], *attrs["dilation"])


def _conv_shape(x, w, attrs) -> tuple:
    """[N, O, oh, ow] of the int8 convolution of x [N, C, H, W] by w [O, C, kh, kw]."""
    if len(x) != 4 or len(w) != 4 or x[1] != w[1]:
        raise ValueError(f"input {x} and weight {w} do not fit (groups = 1)")
    (sh, sw), (ph, pw), (dh, dw) = (
        _pair(attrs, "stride", 1),
        _pair(attrs, "padding", 0),
        _pair(attrs, "dilation", 1),
    )
    return (x[0], w[0], _conv_out(x[2], w[2], sh, ph, dh), _conv_out(x[3], w[3], sw, pw, dw))


def _qconv_shape(shapes, attrs):
    _epilogue(attrs)
    _vectors(shapes)
    return _conv_shape(shapes[0], shapes[1], attrs)


def _conv_sums(x, w, attrs) -> np.ndarray:
    """The exact sums of (x - a_zero_point) * w over each window, [n, oh, ow, o] float64 (the
    padding reads as the zero point, so it adds nothing)."""
    n, c, h, wd, kh, kw, sh, sw, ph, pw, dh, dw = _geometry(x.shape, w.shape, attrs)
    oh, ow = _conv_out(h, kh, sh, ph, dh), _conv_out(wd, kw, sw, pw, dw)
    zp = attrs["a_zero_point"]
    xp = np.full((n, c, h + 2 * ph, wd + 2 * pw), zp, np.float64)
    xp[:, :, ph : ph + h, pw : pw + wd] = x
    cols = np.empty((n, oh, ow, c, kh, kw))
    for i in range(kh):
        for j in range(kw):
            win = xp[
                :,
                :,
                i * dh : i * dh + sh * (oh - 1) + 1 : sh,
                j * dw : j * dw + sw * (ow - 1) + 1 : sw,
            ]
            cols[:, :, :, :, i, j] = win.transpose(0, 2, 3, 1)
    return (cols.reshape(n, oh, ow, -1) - zp) @ w.reshape(w.shape[0], -1).astype(np.float64).T


def _qconv_eval(arrays, attrs, dtypes=None):
    x, w, s = arrays[:3]
    bias = arrays[3] if len(arrays) > 3 else None
    y = requantize_ref(_conv_sums(x, w, attrs), attrs, s, bias)  # [n, oh, ow, o]
    return np.ascontiguousarray(y.transpose(0, 3, 1, 2))


def _esz(attrs) -> int:
    return 4 if attrs.get("out_scale") is None else 1


def _qconv_scratch(attrs, in_specs, out_spec):
    (x_shape, _), (w_shape, _) = in_specs[:2]
    geo = _geometry(x_shape, w_shape, attrs)
    nbytes = _cpu.qconv2d_work_bytes(*geo, w_shape[0], _esz(attrs))
    return [((nbytes,), np.uint8)]


def _qconv_lower(out, arrays, attrs, scratch):
    x, w, s = arrays[:3]
    bias = arrays[3] if len(arrays) > 3 else None
    if not x.flags.c_contiguous:
        return None
    out_scale, out_zp = _mode(attrs)
    args = (x, packed_weight(w), out, scratch[0], *_geometry(x.shape, w.shape, attrs))
    args += (attrs["a_scale"], attrs["a_zero_point"], s, bias, attrs["relu"], out_scale, out_zp)
    return [("qconv2d", args)]


defruntime(
    "qlinear", evaluate=_qlinear_eval, run=_run(_qlinear_lower, _qlinear_eval), lower=_qlinear_lower
)
defruntime(
    "qconv2d",
    evaluate=_qconv_eval,
    run=_run(_qconv_lower, _qconv_eval),
    lower=_qconv_lower,
    scratch=_qconv_scratch,
)
FUSED_SHAPES["qlinear"] = _qlinear_shape
FUSED_SHAPES["qconv2d"] = _qconv_shape
FUSED_DTYPES["qlinear"] = _qlinear_dtype
FUSED_DTYPES["qconv2d"] = _qlinear_dtype


# ----------------------------------------------------------------------- integer matmul
def _qmm_shape(shapes, attrs):
    _zp(attrs, "a_zero_point")
    if len(shapes) == 3 and (math.prod(shapes[2]) != 1 or len(shapes[2]) > 1):
        raise ValueError(f"the zero point must be one value, got {list(shapes[2])}")
    a, w = shapes[:2]
    if len(a) < 1 or len(w) != 2 or a[-1] != w[1]:
        raise ValueError(f"input {a} and weight {w} do not fit")
    return tuple(a[:-1]) + (w[0],)


def _qmm_dtype(dtypes, attrs):
    if list(dtypes[:2]) != [D.uint8, D.int8] or list(dtypes[2:]) not in ([], [D.uint8]):
        raise ValueError("expects uint8 input, int8 weight[, uint8 zero point]")
    return D.int32


def _qmm_eval(arrays, attrs, dtypes=None):
    a, w = arrays[:2]
    zp = int(arrays[2].reshape(-1)[0]) if len(arrays) > 2 else attrs["a_zero_point"]
    acc = (a.astype(np.int64) - zp) @ w.astype(np.int64).T
    return acc.astype(np.int32)


def _qmm_lower(out, arrays, attrs, scratch):
    a, w = arrays[:2]
    if not a.flags.c_contiguous:
        return None
    k = w.shape[1]
    m = a.size // k if k else math.prod(a.shape[:-1])
    args = (a.reshape(-1), packed_weight(w), out.reshape(-1), m)
    if len(arrays) > 2:  # the zero point read when the node runs
        return [("qgemm_dynamic", args + (None, arrays[2].reshape(-1), None, None, False))]
    return [("qgemm", args + (1.0, attrs["a_zero_point"], None, None, False, 1.0, 0))]


# ``qmatmul_integer(a, w[, zero_point]; a_zero_point)``: ONNX's MatMulInteger on the int8 GEMM:
# uint8 ``a`` [..., K] minus its zero point times int8 ``w`` [N, K], the exact int32 sums
# (``_cpu.qgemm``'s int32 output); with a uint8 zero point tensor (one value: what a
# DynamicQuantizeLinear computed), that one, read when the node runs (``_cpu.qgemm_dynamic``),
# instead of the attribute (then 0)
defruntime("qmatmul_integer", evaluate=_qmm_eval, run=_run(_qmm_lower, _qmm_eval), lower=_qmm_lower)
FUSED_SHAPES["qmatmul_integer"] = _qmm_shape
FUSED_DTYPES["qmatmul_integer"] = _qmm_dtype


def _qconv_int_shape(shapes, attrs):
    _zp(attrs, "a_zero_point")
    x, w = shapes
    return _conv_shape(x, w, attrs)


def _qconv_int_eval(arrays, attrs, dtypes=None):
    x, w = arrays
    return np.ascontiguousarray(_conv_sums(x, w, attrs).transpose(0, 3, 1, 2)).astype(np.int32)


def _qconv_int_scratch(attrs, in_specs, out_spec):
    (x_shape, _), (w_shape, _) = in_specs
    nbytes = _cpu.qconv2d_work_bytes(*_geometry(x_shape, w_shape, attrs), w_shape[0], 4)
    return [((nbytes,), np.uint8)]


def _qconv_int_lower(out, arrays, attrs, scratch):
    x, w = arrays
    if not x.flags.c_contiguous:
        return None
    args = (x, packed_weight(w), out, scratch[0], *_geometry(x.shape, w.shape, attrs))
    return [("qconv2d", args + (1.0, attrs["a_zero_point"], None, None, False, 1.0, 0))]


# ``qconv2d_integer(x, w; a_zero_point, stride, padding, dilation)``: ONNX's ConvInteger on the
# int8 convolution: uint8 ``x`` [N, C, H, W] minus its zero point (the padding reads as it)
# convolved with int8 ``w`` [O, C, kh, kw] (groups = 1), the exact int32 sums [N, O, oh, ow]
defruntime(
    "qconv2d_integer",
    evaluate=_qconv_int_eval,
    run=_run(_qconv_int_lower, _qconv_int_eval),
    lower=_qconv_int_lower,
    scratch=_qconv_int_scratch,
)
FUSED_SHAPES["qconv2d_integer"] = _qconv_int_shape
FUSED_DTYPES["qconv2d_integer"] = _qmm_dtype


# ----------------------------------------------------------------------------- max pool
def _pool_geometry(shape, attrs) -> tuple:
    n, c, h, w = shape
    (kh, kw), (sh, sw) = _pair(attrs, "kernel", 1), _pair(attrs, "stride", 1)
    (ph, pw), (dh, dw) = _pair(attrs, "padding", 0), _pair(attrs, "dilation", 1)
    if 2 * ph > kh or 2 * pw > kw:
        raise ValueError(f"padding {(ph, pw)} exceeds half the kernel {(kh, kw)}")
    return (n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw)


def _pool_shape(shapes, attrs):
    if len(shapes[0]) != 4:
        raise ValueError(f"expects [N, C, H, W], got {shapes[0]}")
    n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw = _pool_geometry(shapes[0], attrs)
    return (n, c, _conv_out(h, kh, sh, ph, dh), _conv_out(w, kw, sw, pw, dw))


def _pool_eval(arrays, attrs, dtypes=None):
    (x,) = arrays
    n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw = _pool_geometry(x.shape, attrs)
    oh, ow = _pool_shape([x.shape], attrs)[2:]
    xp = np.full((n, c, h + 2 * ph, w + 2 * pw), -1, np.int32)  # the padding never wins
    xp[:, :, ph : ph + h, pw : pw + w] = x
    best = np.full((n, c, oh, ow), -1, np.int32)
    for i in range(kh):
        for j in range(kw):
            win = xp[
                :,
                :,
                i * dh : i * dh + sh * (oh - 1) + 1 : sh,
                j * dw : j * dw + sw * (ow - 1) + 1 : sw,
            ]
            best = np.maximum(best, win)
    return np.maximum(best, 0).astype(np.uint8)


def _pool_lower(out, arrays, attrs, scratch):
    (x,) = arrays
    if not x.flags.c_contiguous:
        return None
    return [("max_pool2d_u8", (x, out, *_pool_geometry(x.shape, attrs)))]


defruntime("qmax_pool2d", evaluate=_pool_eval, run=_run(_pool_lower, _pool_eval), lower=_pool_lower)
FUSED_SHAPES["qmax_pool2d"] = _pool_shape
FUSED_DTYPES["qmax_pool2d"] = lambda dtypes, attrs: _need(dtypes, D.uint8, D.uint8)
