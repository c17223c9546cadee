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
- ``qlinear_dynamic(a, w, a_scale, a_zero_point, w_scales[, bias]; relu=False)``: ONNX
  Runtime's MatMulIntegerToFloat, float32 ``float32(sum (a - a_zero_point) * w) * (a_scale *
  w_scales[j]) + bias[j]`` for uint8 ``a`` [..., K] and int8 ``w`` [N, K], with the activations'
  scale and zero point the tensors a ``dynamic_quantize_linear`` computed (read when the node
  runs: ``_cpu.qgemm_dynamic``, the int8 GEMM with qgemm's float32 epilogue, each operation
  rounded on its own, so the same bits as the unfused MatMulInteger -> Cast -> Mul -> Add);
  ``relu``: then ``max(v, 0)`` in the epilogue, as gpucore's relu (-0.0 -> +0.0, NaN kept).
  passes/quantize.py's ``fuse_dynamic_quantized`` makes it;
- ``qlinear_dynamic(x, w, w_scales[, bias]; relu=False)`` with float32 ``x`` [..., K]: PyTorch's
  ``quantize_dynamic`` Linear in one node, ``x`` quantized per call with PyTorch's parameters
  and rounding (``gpucore.quantization.kernels.quantize_activation``: scale = max((hi - lo) /
  255, eps), zero point clamp(-round(lo / scale), 0, 255), q = round(x * (1 / scale) + zp)),
  then the product above: the eager layer's bits. Lowered to ``_cpu.dynamic_quantize_torch_u8``
  into scratch (uint8 [M, K], the scale, the zero point) and ``_cpu.qgemm_dynamic``; an ``x``
  the eager layer refuses (inf or NaN in it, or a range max - min that overflows float32) gives
  NaN everywhere.
  passes/quantize_dynamic.py's ``fuse_traced_dynamic_linear`` makes it from the traced layer.

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
MAX_K = 65536  # the int8 GEMM's reduction limit (int32 sums); longer: the numpy reference


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


def _float_form(n_inputs: int) -> bool:
    """Whether a qlinear_dynamic of ``n_inputs`` inputs is the float32-input form."""
    if n_inputs not in (3, 4, 5, 6):
        raise ValueError(
            "expects a, w, a_scale, a_zero_point, w_scales[, bias] or x, w, w_scales[, bias]"
        )
    return n_inputs < 5


def _relu(attrs: dict) -> bool:
    relu = attrs.get("relu", False)
    if not isinstance(relu, bool):
        raise ValueError(f"relu must be a bool, got {relu!r}")
    return relu


def _qld_shape(shapes, attrs):
    _relu(attrs)
    floating = _float_form(len(shapes))
    a, w = shapes[0], shapes[1]
    if len(a) < 1 or len(w) != 2 or a[-1] != w[1]:
        raise ValueError(f"input {a} and weight {w} do not fit")
    if not floating:
        _one_value(shapes[2], "a_scale")
        _one_value(shapes[3], "a_zero_point")
    for s in shapes[2 if floating else 4 :]:
        if s != (w[0],):
            raise ValueError(f"w_scales and bias must be [{w[0]}], got {list(s)}")
    return tuple(a[:-1]) + (w[0],)


def _qld_dtype(dtypes, attrs):
    if _float_form(len(dtypes)):
        want = [D.float32, D.int8, D.float32, D.float32][: len(dtypes)]
    else:
        want = [D.uint8, D.int8, D.float32, D.uint8, D.float32, D.float32][: len(dtypes)]
    if list(dtypes) != want:
        names = ", ".join(d.name for d in want)
        raise ValueError(f"expects {names}, got {', '.join(d.name for d in dtypes)}")
    return D.float32


def qlinear_dynamic_ref(a, w, a_scale, a_zp, w_scales, bias, relu: bool = False) -> np.ndarray:
    """The unfused ops' float32 arithmetic: the exact int32 sums, Cast, Mul by the scale
    product (float32), Add, each rounded on its own, then ``max(v, 0)`` with ``relu``."""
    zp = int(np.asarray(a_zp).reshape(-1)[0])
    acc = (a.astype(np.int64) - zp) @ w.astype(np.int64).T  # exact
    s = np.asarray(a_scale, _F32).reshape(-1)[0] * w_scales.astype(_F32)
    with np.errstate(all="ignore"):
        v = acc.astype(np.int32).astype(_F32) * s
        if bias is not None:
            v = v + bias.astype(_F32)
    return np.maximum(v, _F32(0)) if relu else v  # (numpy's maximum: -0.0 -> +0.0, NaN kept)


_EPS = _F32(np.finfo(_F32).eps)


def torch_quantize_ref(x: np.ndarray) -> tuple:
    """(uint8 q, float32 scale, uint8 zero point) of float32 ``x`` with PyTorch's dynamic
    quantization parameters and rounding (``_cpu.dynamic_quantize_torch_u8``'s float32
    arithmetic); a range that is not finite (inf or NaN in x, or hi - lo overflowing float32)
    gives scale NaN, zero point 0 and q all 255."""
    x = np.asarray(x, _F32)
    lo = min(_F32(0), x.min()) if x.size else _F32(0)
    hi = max(_F32(0), x.max()) if x.size else _F32(0)
    with np.errstate(over="ignore", invalid="ignore"):
        span = _F32(hi - lo)
    if not np.isfinite(x).all() or not np.isfinite(span):
        return np.full(x.shape, 255, np.uint8), _F32(np.nan), np.uint8(0)
    scale = max(_F32(span / _F32(255)), _EPS)
    zp = np.uint8(np.clip(-np.rint(_F32(lo / scale)), 0, 255))
    y = x * (_F32(1) / scale) + _F32(zp)  # each rounded to float32, as _cpu.quantize_u8
    return np.clip(np.rint(y), 0, 255).astype(np.uint8), scale, zp


def _qld_eval(arrays, attrs, dtypes=None):
    relu = _relu(attrs)
    if _float_form(len(arrays)):
        x, w, ws = arrays[:3]
        q, sc, zp = torch_quantize_ref(x)
        bias = arrays[3] if len(arrays) > 3 else None
        return qlinear_dynamic_ref(q, w, sc, zp, ws, bias, relu)
    a, w, sc, zp, ws = arrays[:5]
    bias = arrays[5] if len(arrays) > 5 else None
    return qlinear_dynamic_ref(a, w, sc, zp, ws, bias, relu)


def _qld_scratch(attrs, in_specs, out_spec):
    if not _float_form(len(in_specs)):
        return []
    # the quantized activations, their scale and zero point
    return [((math.prod(in_specs[0][0]),), np.uint8), ((1,), _F32), ((1,), np.uint8)]


def _qld_lower(out, arrays, attrs, scratch):
    relu = _relu(attrs)
    floating = _float_form(len(arrays))
    a, w = arrays[:2]
    k = w.shape[1]
    if not a.flags.c_contiguous or k > MAX_K:
        return None
    m = a.size // k if k else math.prod(a.shape[:-1])
    calls = []
    if floating:
        ws, bias = arrays[2], arrays[3] if len(arrays) > 3 else None
        q, sc, zp = scratch
        calls.append(("dynamic_quantize_torch_u8", (a.reshape(-1), q, sc, zp, a.size)))
        a = q
    else:
        sc, zp, ws = (v.reshape(-1) for v in arrays[2:5])
        bias = arrays[5] if len(arrays) > 5 else None
    args = (a.reshape(-1), packed_weight(w), out.reshape(-1), m, sc, zp, ws, bias, relu)
    return calls + [("qgemm_dynamic", args)]


defruntime(
    "qlinear_dynamic",
    evaluate=_qld_eval,
    run=_run(_qld_lower, _qld_eval),
    lower=_qld_lower,
    scratch=_qld_scratch,
)
FUSED_SHAPES["qlinear_dynamic"] = _qld_shape
FUSED_DTYPES["qlinear_dynamic"] = _qld_dtype
