"""The runtime's ops of ONNX dynamic quantization (ONNX Runtime's ``quantize_dynamic``: the
activations quantized per call, DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul).

- ``dynamic_quantize_linear(x; output_index)``: ONNX DynamicQuantizeLinear of float32 ``x``, one
  node per output as the runtime's graphs hold multi-output ops: 0 the uint8 ``y`` (x's shape),
  1 ``y_scale`` (float32 scalar), 2 ``y_zero_point`` (uint8 scalar). onnx.reference's float32
  arithmetic: the range [lo, hi] of x with 0 in it, ``scale = (hi - lo) / 255`` (1/255 when
  hi == lo, also for an empty x, where onnx.reference raises), ``zp =
  round_half_even(clamp(-lo / scale, 0, 255))``, ``y = clamp(round_half_even(x / scale) + zp, 0,
  255)``; a NaN in x gives scale NaN, zero point 255 and y all 0, as onnx.reference. Lowered to
  ``_cpu.dynamic_quantize_u8`` (cpu/qdynamic.c: one vector pass for the range, one quantizing),
  which writes the node's output and skips the others (node 0 writes y; nodes 1 and 2 read x's
  range alone);
- ``qlinear_dynamic(a, w, a_scale, a_zero_point, w_scales[, bias])``: ONNX Runtime's
  MatMulIntegerToFloat, float32 ``float32(sum (a - a_zero_point) * w) * (a_scale * w_scales[j])
  + bias[j]`` for uint8 ``a`` [..., K] and int8 ``w`` [N, K], with the activations'
  scale and zero point the tensors a ``dynamic_quantize_linear`` computed (read when the node
  runs: ``_cpu.qgemm_dynamic``, the int8 GEMM with qgemm's float32 epilogue, each operation
  rounded on its own, so the same bits as the unfused MatMulInteger -> Cast -> Mul -> Add; a
  ReLU after it stays its own node: the epilogue's keeps -0.0 where gpucore's relu gives +0.0).
  passes/quantize.py's ``fuse_dynamic_quantized`` makes it.

``qmatmul_integer`` with a zero point input (ir/quantized.py) is MatMulInteger with the zero
point read at run time (``_cpu.qgemm_dynamic``'s int32 output).
"""

from __future__ import annotations

import math

import numpy as np

from ... import dtypes as D
from .ops import defruntime
from .quantized import _run, packed_weight, quantize_onnx_ref
from .shapes import FUSED_DTYPES, FUSED_SHAPES

_F32 = np.float32


# ------------------------------------------------------------------ dynamic_quantize_linear
def dynamic_qparams_ref(x: np.ndarray) -> tuple:
    """(scale float32, zero point uint8) of DynamicQuantizeLinear of float32 ``x``, in
    onnx.reference's float32 arithmetic (see the module docstring for NaN and empty ``x``)."""
    x = np.asarray(x, _F32).reshape(-1)
    if x.size and np.isnan(x).any():
        lo = hi = _F32(np.nan)
    else:
        hi = max(_F32(0), x.max()) if x.size else _F32(0)
        lo = min(_F32(0), x.min()) if x.size else _F32(0)
    with np.errstate(all="ignore"):
        scale = _F32(_F32(1) if hi == lo else _F32(hi - lo)) / _F32(255)
        z = _F32(0) - _F32(lo / scale)
    z = z if z < 255 else _F32(255)  # NaN -> 255 (onnx.reference's min(qmax, nan))
    z = z if z > 0 else _F32(0)
    return _F32(scale), np.uint8(np.rint(z))


def _dq_index(attrs: dict) -> int:
    i = attrs.get("output_index")
    if isinstance(i, bool) or i not in (0, 1, 2):
        raise ValueError(f"output_index must be 0 (y), 1 (y_scale) or 2 (y_zero_point), got {i!r}")
    return i


def _dql_shape(shapes, attrs):
    if len(shapes) != 1:
        raise ValueError("expects one input")
    return shapes[0] if _dq_index(attrs) == 0 else ()


def _dql_dtype(dtypes, attrs):
    if dtypes[0] is not D.float32:
        raise ValueError(f"expects a float32 input, got {dtypes[0].name}")
    return D.float32 if _dq_index(attrs) == 1 else D.uint8


def _dql_eval(arrays, attrs, dtypes=None):
    x = np.asarray(arrays[0], _F32)
    scale, zp = dynamic_qparams_ref(x)
    index = _dq_index(attrs)
    if index == 1:
        return np.array(scale, _F32)
    if index == 2:
        return np.array(zp, np.uint8)
    return quantize_onnx_ref(x, float(scale), int(zp)).reshape(x.shape)


def _dql_lower(out, arrays, attrs, scratch):
    (x,) = arrays
    if x.dtype != _F32 or not x.flags.c_contiguous:
        return None
    outs = [None, None, None]
    outs[_dq_index(attrs)] = out.reshape(-1)
    return [("dynamic_quantize_u8", (x.reshape(-1), *outs, x.size))]


defruntime(
    "dynamic_quantize_linear",
    evaluate=_dql_eval,
    run=_run(_dql_lower, _dql_eval),
    lower=_dql_lower,
)
FUSED_SHAPES["dynamic_quantize_linear"] = _dql_shape
FUSED_DTYPES["dynamic_quantize_linear"] = _dql_dtype


# -------------------------------------------------------------------------- qlinear_dynamic
def _one_value(shape, name: str) -> None:
    if math.prod(shape) != 1 or len(shape) > 1:
        raise ValueError(f"{name} must be one value (shape () or [1]), got {list(shape)}")


def _qld_shape(shapes, attrs):
    if len(shapes) not in (5, 6):
        raise ValueError("expects a, w, a_scale, a_zero_point, w_scales[, bias]")
    a, w = shapes[0], shapes[1]
    if len(a) < 1 or len(w) != 2 or a[-1] != w[1]:
        raise ValueError(f"input {a} and weight {w} do not fit")
    _one_value(shapes[2], "a_scale")
    _one_value(shapes[3], "a_zero_point")
    for s in shapes[4:]:
        if s != (w[0],):
            raise ValueError(f"w_scales and bias must be [{w[0]}], got {list(s)}")
    return tuple(a[:-1]) + (w[0],)


def _qld_dtype(dtypes, attrs):
    want = [D.uint8, D.int8, D.float32, D.uint8, D.float32, D.float32][: len(dtypes)]
    if list(dtypes) != want:
        names = ", ".join(d.name for d in want)
        raise ValueError(f"expects {names}, got {', '.join(d.name for d in dtypes)}")
    return D.float32


def qlinear_dynamic_ref(a, w, a_scale, a_zp, w_scales, bias) -> np.ndarray:
    """The unfused ops' float32 arithmetic: the exact int32 sums, Cast, Mul by the scale
    product (float32), Add, each rounded on its own."""
    zp = int(np.asarray(a_zp).reshape(-1)[0])
    acc = (a.astype(np.int64) - zp) @ w.astype(np.int64).T  # exact
    s = np.asarray(a_scale, _F32).reshape(-1)[0] * w_scales.astype(_F32)
    with np.errstate(all="ignore"):
        v = acc.astype(np.int32).astype(_F32) * s
        if bias is not None:
            v = v + bias.astype(_F32)
    return v


def _qld_eval(arrays, attrs, dtypes=None):
    a, w, sc, zp, ws = arrays[:5]
    bias = arrays[5] if len(arrays) > 5 else None
    return qlinear_dynamic_ref(a, w, sc, zp, ws, bias)


def _qld_lower(out, arrays, attrs, scratch):
    a, w, sc, zp, ws = arrays[:5]
    bias = arrays[5] if len(arrays) > 5 else None
    if not a.flags.c_contiguous:
        return None
    k = w.shape[1]
    m = a.size // k if k else math.prod(a.shape[:-1])
    args = (a.reshape(-1), packed_weight(w), out.reshape(-1), m, sc.reshape(-1), zp.reshape(-1))
    return [("qgemm_dynamic", args + (ws, bias, False))]


defruntime("qlinear_dynamic", evaluate=_qld_eval, run=_run(_qld_lower, _qld_eval), lower=_qld_lower)
FUSED_SHAPES["qlinear_dynamic"] = _qld_shape
FUSED_DTYPES["qlinear_dynamic"] = _qld_dtype
