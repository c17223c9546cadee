"""Int8 GEMM on the device (shaders/qgemm.comp): the Vulkan form of ``_cpu.qgemm``, bit for bit.

``qgemm(be, a, weight, out, a_scale, a_zero_point, w_scales, bias, relu, out_scale,
out_zero_point)`` takes the arguments of ``_cpu.qgemm`` (cpu/python/qgemm.c) with device arrays:
``a`` uint8 or int8 activations [M, K], ``weight`` a ``QWeight`` (``pack_weight``: int8 B
[N, K] as columns of 32-bit words, with its column sums), ``out`` [M, N] whose dtype picks the
epilogue (int32: the sums; float32: dequantized, + bias, relu; uint8 / int8: requantized). The
per-column factors are combined on the host in float32 exactly as gc_qgemm does (the division by
out_scale included: a shader division is not correctly rounded), the shader then runs the C
epilogue's operations in the same order, each rounded on its own.

``qgemm_dynamic(be, a, weight, out, a_scale, a_zero_point, w_scales, bias, relu)`` is
``_cpu.qgemm_dynamic``: the activations' scale and zero point are device arrays the shader reads
when it runs (what a DynamicQuantizeLinear wrote, kernels/qdynamic.py), and it forms
``a_scale * w_scales[j]`` itself, one float32 product as gc_qgemm's.

``quantize_rows(be, x, inv, zero_point)`` quantizes float32 rows to uint8 on the device (the
per-tensor rounding of qtensor.quantize_array), into the padded word rows ``qgemm`` reads.

Modules (tools/build_shaders.py's VARIANTS): ``qgemm_dot`` uses the packed 4x8 integer dot
product (VK_KHR_shader_integer_dot_product, enabled by context.py when the device has
shaderIntegerDotProduct) and ``qgemm`` plain int32 multiply-adds. ``dot=None`` picks the first
where the device has it; GPUCORE_VULKAN_QGEMM=dot|plain forces one (tests, benchmarks). Each
has an ``_sg`` form for CPU-type devices (lavapipe), where a storage load costs a loop over the
lanes: a subgroup's lanes each load one activation word and pass them round with
subgroupShuffle (2-4x there); ``shuffle=None`` picks it on CPU-type devices only.
"""

from __future__ import annotations

import os

import numpy as np

from ....errors import DeviceError, DTypeError, ShapeError
from . import gemm
from .common import _push, contiguous, copy_array, flat_local_size, groups_1d

MAX_K = 65536  # int32 sums stay exact (cpu/kernels.h's GC_QGEMM_MAX_K)
# qgemm.comp's MODE and OUT codes (OUT: cpu/kernels.h's GC_QOUT_*), flags
_GEMM, _QUANTIZE = 0, 1
OUT_MODES = {np.dtype(np.int32): 0, np.dtype(np.float32): 1, np.dtype(np.uint8): 2,
             np.dtype(np.int8): 3}  # fmt: skip
_I32, _F32, _U8, _S8 = 0, 1, 2, 3
_F_BIAS, _F_RELU, _F_IBIAS, _F_DZP, _F_DSCALE = 1, 2, 4, 8, 16
_FLIP = 0x80808080
TILE_ROWS = (1, 2, 4, 8, 16, 32)
TN = 4  # columns per invocation (a multiple of 4: byte outputs store whole words)


def has_integer_dot(ctx) -> bool:
    """Whether the device runs ``qgemm_dot`` (its shaderIntegerDotProduct feature is on)."""
    return bool(getattr(ctx, "integer_dot", False))


def choose_dot(ctx, dot: bool | None = None) -> bool:
    """True for the integer-dot module: ``dot`` if given, else GPUCORE_VULKAN_QGEMM (dot, plain
    or auto), else whether the device has the instruction."""
    if dot is None:
        env = os.environ.get("GPUCORE_VULKAN_QGEMM", "").strip().lower()
        if env not in ("", "auto", "dot", "plain"):
            raise ValueError(f"GPUCORE_VULKAN_QGEMM={env!r}: expected 'dot', 'plain' or 'auto'")
        dot = has_integer_dot(ctx) if env in ("", "auto") else env == "dot"
    if dot and not has_integer_dot(ctx):
        raise DeviceError(
            f"qgemm: the integer dot product module needs the shaderIntegerDotProduct feature "
            f"(VK_KHR_shader_integer_dot_product), which {ctx.info.name} does not have; use the "
            "plain module (dot=False, GPUCORE_VULKAN_QGEMM=plain)"
        )
    return bool(dot)


def shuffle_size(ctx, shuffle: bool | None = None) -> int:
    """The subgroup size when the ``_sg`` modules run (``shuffle``; None: on CPU-type devices
    with subgroup shuffles, as gemm.py's REGBLOCK), else 0."""
    sg = gemm.subgroup_shuffle_size(ctx)
    if shuffle is None:
        return sg if ctx.is_cpu else 0
    if shuffle and not sg:
        raise DeviceError(
            f"qgemm: the subgroup modules need subgroup shuffles in compute shaders and a "
            f"subgroup size that is a multiple of 4 ({ctx.info.name}: {ctx.subgroup_size})"
        )
    return sg if shuffle else 0


def tile_rows(m: int, shuffle: bool) -> int:
    """Rows per invocation: the power of two that covers ``m`` (a GEMV computes no clamped
    rows), at most 32 with the subgroup modules and 16 without. Each word of W an invocation
    loads (a per-lane gather on lavapipe) feeds that many rows; on lavapipe 16 rows measured ~2x
    over 4 without shuffles, and 32 about 1.3x over 16 with them (a noisy shared machine)."""
    rows = TILE_ROWS if shuffle else TILE_ROWS[:-1]
    return next(t for t in rows if m <= t or t == rows[-1])


class QWeight:
    """Int8 weights B [N, K] on the device for ``qgemm``: ``data`` uint32 [kw, N4], word p of
    column j holding B's bytes [j, 4p, 4p + 4) (K padded with zero bytes to kw words, N with
    zero columns to a multiple of 4: an invocation loads its four columns' words as one uvec4)
    and ``colsum`` int32 [N] (each column's sum)."""

    __slots__ = ("n", "k", "kw", "data", "colsum")

    def __init__(self, n: int, k: int, data: np.ndarray, colsum: np.ndarray):
        self.n, self.k, self.kw = n, k, -(-k // 4)
        self.data, self.colsum = data, colsum


def pack_weight(be, w: np.ndarray) -> QWeight:
    """Upload int8 weights [N, K] (host, nn.Linear's layout) once for ``qgemm``."""
    w = np.asarray(w)
    if w.dtype != np.int8 or w.ndim != 2:
        raise DTypeError(f"qgemm pack_weight: w must be int8 [N, K], got {w.dtype} {w.shape}")
    n, k = w.shape
    if k > MAX_K:
        raise ShapeError(f"qgemm: K={k} exceeds {MAX_K} (int32 sums); run it on the CPU")
    kw, n4 = -(-k // 4), -(-n // 4) * 4
    padded = np.zeros((n4, 4 * kw), np.int8)
    padded[:n, :k] = w
    words = np.ascontiguousarray(padded.view("<u4").T)  # [kw, n4]: word kw of each column
    colsum = w.astype(np.int32).sum(axis=1, dtype=np.int32)
    return QWeight(n, k, be.upload(words, None), be.upload(colsum, None))


def epilogue_factors(mode: int, n: int, a_scale, w_scales, bias, out_scale) -> np.ndarray | None:
    """float32 [2, N]: gc_qgemm's per-column scale and bias (s = a_scale * w_scales[j], divided
    by out_scale when requantizing), with its checks; None for int32 out. An int32 bias (ONNX's,
    added to the int32 sums) goes in as its bits (the shader's F_IBIAS)."""
    if mode == _I32:
        return None
    requant = mode != _F32
    a_scale, out_scale = np.float32(a_scale), np.float32(out_scale)
    ws = np.ascontiguousarray(w_scales, dtype=np.float32).reshape(-1)
    if ws.size != n:
        raise ShapeError(f"qgemm: w_scales holds {ws.size} values, N={n}")
    ibias = bias is not None and np.asarray(bias).dtype == np.int32
    with np.errstate(all="ignore"):
        s = a_scale * ws
        if bias is None or ibias:
            b = np.zeros(n, np.float32)
        else:
            b = np.asarray(bias, np.float32).reshape(-1)
        if bias is not None and np.asarray(bias).size != n:
            raise ShapeError(f"qgemm: bias holds {np.asarray(bias).size} values, N={n}")
        if requant:
            if not (np.isfinite(out_scale) and out_scale > 0):
                raise ValueError(f"qgemm: out_scale must be finite and > 0, got {out_scale}")
            s, b = s / out_scale, b / out_scale
    if not (np.isfinite(a_scale) and a_scale > 0):
        raise ValueError(f"qgemm: a_scale must be finite and > 0, got {a_scale}")
    bad = ~(np.isfinite(s) & (s > 0) & np.isfinite(b))
    if bad.any():
        j = int(np.argmax(bad))
        raise ValueError(
            f"qgemm: column {j}: w_scales[j] ({ws[j]}) times a_scale"
            f"{' / out_scale' if requant else ''} must be finite and > 0 and bias[j] finite in "
            "float32"
        )
    out = np.stack([s, b]).astype(np.float32)
    if ibias:
        out[1] = np.ascontiguousarray(bias, np.int32).reshape(-1).view(np.float32)
    return out


def _words(be, arr: np.ndarray):
    """(word offset, row stride in words) of a byte array [R, C] whose rows start on words, or
    None."""
    op = be.operand(arr)
    if arr.shape[0] > 1 and (op.strides[0] % 4 or op.strides[0] < 0):
        return None
    if (arr.shape[1] > 1 and op.strides[1] != 1) or op.offset % 4:
        return None
    return op, op.offset // 4, (op.strides[0] // 4 if arr.shape[0] > 1 else 0)


def _check_operands(fn: str, a: np.ndarray, weight: QWeight, out: np.ndarray) -> int:
    """out's OUT_MODES code after the checks qgemm and qgemm_dynamic share."""
    if a.dtype not in (np.uint8, np.int8) or a.ndim != 2:
        raise DTypeError(f"{fn}: a must be uint8 or int8 [M, K], got {a.dtype} {a.shape}")
    mode = OUT_MODES.get(out.dtype)
    if mode is None:
        raise DTypeError(f"{fn}: out must be int32, float32, uint8 or int8, got {out.dtype}")
    m, k = a.shape
    if k != weight.k or out.shape != (m, weight.n):
        raise ShapeError(
            f"{fn}: a {a.shape} and weights [N={weight.n}, K={weight.k}] do not make out "
            f"{out.shape} ([M, N])"
        )
    if np.may_share_memory(a, out):
        raise ValueError(f"{fn}: out overlaps a; write the result to a fresh array")
    return mode


def qgemm(
    be,
    a: np.ndarray,
    weight: QWeight,
    out: np.ndarray,
    a_scale: float = 1.0,
    a_zero_point: int = 0,
    w_scales=None,
    bias=None,
    relu: bool = False,
    out_scale: float = 1.0,
    out_zero_point: int = 0,
    *,
    dot: bool | None = None,
    shuffle: bool | None = None,
) -> None:
    """Record ``out = epilogue(sum_k (a[i, k] - a_zero_point) * B[k, j])`` (module docstring;
    ``_cpu.qgemm``'s arguments and results). ``dot``: the integer-dot module, ``shuffle``: the
    subgroup one (None: per device)."""
    mode = _check_operands("qgemm", a, weight, out)
    signed = a.dtype == np.int8
    lo_zp, hi_zp = (-128, 127) if signed else (0, 255)
    if not lo_zp <= int(a_zero_point) <= hi_zp:
        raise ValueError(f"qgemm: a_zero_point must be in [{lo_zp}, {hi_zp}], got {a_zero_point}")
    n = weight.n
    if mode == _I32 and (relu or bias is not None):
        raise ValueError("qgemm: an int32 'out' takes no bias and relu=0")
    fac = epilogue_factors(mode, n, a_scale, w_scales, bias, out_scale)
    lo = hi = zo = 0.0
    if mode in (_U8, _S8):
        o_lo, o_hi = (0, 255) if mode == _U8 else (-128, 127)
        if not o_lo <= int(out_zero_point) <= o_hi:
            raise ValueError(
                f"qgemm: out_zero_point must be in [{o_lo}, {o_hi}], got {out_zero_point}"
            )
        zo, lo, hi = float(out_zero_point), float(o_lo), float(o_hi)
        if relu and lo < zo:
            lo = zo
    ibias = bias is not None and np.asarray(bias).dtype == np.int32
    flags = (_F_IBIAS if ibias else _F_BIAS if bias is not None else 0) | (
        _F_RELU if relu and mode == _F32 else 0
    )
    zp_u8 = int(a_zero_point) + (128 if signed else 0)
    _launch(be, a, weight, out, mode, fac, flags, zp_u8, (zo, lo, hi), None, dot, shuffle)


def qgemm_dynamic(
    be,
    a: np.ndarray,
    weight: QWeight,
    out: np.ndarray,
    a_scale: np.ndarray | None,
    a_zero_point: np.ndarray,
    w_scales=None,
    bias=None,
    relu: bool = False,
    *,
    dot: bool | None = None,
    shuffle: bool | None = None,
) -> None:
    """Record ``_cpu.qgemm_dynamic``: ``qgemm`` of uint8 ``a`` with the activations' zero point
    (``a_zero_point``, uint8) and scale (``a_scale``, float32) device arrays of one value each,
    read when the dispatch runs (what a DynamicQuantizeLinear wrote). ``out`` int32: the sums
    (ONNX MatMulInteger; no scales, bias, relu); float32: ``float32(c) * (a_scale *
    w_scales[j]) + bias[j]``, relu (ONNX Runtime's MatMulIntegerToFloat), each operation
    rounded on its own as the C kernel; any scale value is taken as it is."""
    mode = _check_operands("qgemm_dynamic", a, weight, out)
    if a.dtype != np.uint8 or mode not in (_I32, _F32):
        raise DTypeError(
            f"qgemm_dynamic: a must be uint8 and out int32 or float32, got {a.dtype} -> {out.dtype}"
        )
    vals = [("a_zero_point", a_zero_point, np.uint8)]
    if mode == _F32:
        vals.append(("a_scale", a_scale, np.float32))
    for name, v, dt in vals:
        if not isinstance(v, np.ndarray) or v.dtype != dt or v.size != 1:
            raise DTypeError(
                f"qgemm_dynamic: {name} must be a {np.dtype(dt)} device array of one value, got "
                f"{getattr(v, 'dtype', type(v).__name__)} {getattr(v, 'shape', '')}"
            )
    n = weight.n
    fac = None
    if mode == _I32:
        if relu or a_scale is not None or w_scales is not None or bias is not None:
            raise ValueError(
                "qgemm_dynamic: an int32 'out' takes no a_scale, w_scales or bias and relu=0"
            )
    else:
        cols = [w_scales] + ([bias] if bias is not None else [])
        for name, v in zip(("w_scales", "bias"), cols):
            if v is None or np.asarray(v).size != n:
                raise ShapeError(f"qgemm_dynamic: {name} must hold N={n} float32 values")
        fac = np.zeros((2, n), np.float32)
        for i, v in enumerate(cols):
            fac[i] = np.asarray(v, np.float32).reshape(-1)
    flags = _F_DZP | (_F_DSCALE | (_F_BIAS if bias is not None else 0) if mode == _F32 else 0)
    flags |= _F_RELU if relu and mode == _F32 else 0
    dyn = (a_scale if mode == _F32 else a_zero_point, a_zero_point)
    _launch(be, a, weight, out, mode, fac, flags, 0, (0.0, 0.0, 0.0), dyn, dot, shuffle)


def _launch(be, a, weight, out, mode, fac, flags, zp_u8, requant, dyn, dot, shuffle) -> None:
    """Record the GEMM dispatches: checked operands, the epilogue's factors ``fac`` (host [2,
    N] or None), ``flags``, the zero point, (out_zp, lo, hi) and ``dyn`` (the device arrays of
    the scale and zero point for F_DSCALE / F_DZP, or None)."""
    ctx = be.ctx
    use_dot = choose_dot(ctx, dot)
    sg = shuffle_size(ctx, shuffle)
    m, k = a.shape
    n = weight.n
    signed = a.dtype == np.int8
    if m == 0 or n == 0:
        return
    # a: rows starting on words (else a padded copy; its pad bytes meet zero weights)
    wa = _words(be, a) if k else (be.operand(weight.colsum), 0, 0)  # K = 0: a is not read
    if wa is None:
        pad = be.empty_array((m, 4 * weight.kw), a.dtype)
        copy_array(be, pad[:, :k], a)
        a, wa = pad, _words(be, pad)
    # out: unit column stride; byte outputs need word-aligned rows padded to whole words
    target = out
    if mode in (_U8, _S8):
        ok = n % 4 == 0 and _words(be, out) is not None
        if not ok:
            target = be.empty_array((m, -(-n // 4) * 4), out.dtype)
    elif any(s < 0 for s in out.strides) or (n > 1 and be.operand(out).strides[1] != 1):
        target = be.empty_array((m, n), out.dtype)
    oc = be.operand(target)
    f_arr = be.upload(fac.reshape(-1), None) if fac is not None else None
    oa, a_off, lda = wa
    ow, ocs = be.operand(weight.data), be.operand(weight.colsum)
    if ow.offset % 4:  # the shader reads it as uvec4s (fresh allocations are 16-byte aligned)
        raise DeviceError("qgemm: internal: the packed weights are not 16-byte aligned")
    of = be.operand(f_arr) if f_arr is not None else ocs
    ods, odz = (be.operand(dyn[0]), be.operand(dyn[1])) if dyn is not None else (ocs, ocs)
    tm = tile_rows(m, bool(sg))
    # invocations along N: at most 64, fewer for narrow outputs (a convolution's few channels:
    # 32 columns are 8 invocations, and a 64-wide group would compute 56 clamped ones), whole
    # subgroups with the shuffle modules
    unit = sg or 8
    local = min(64, ctx.limits["maxComputeWorkGroupInvocations"], -(-n // (TN * unit)) * unit)
    name = ("qgemm_dot" if use_dot else "qgemm") + ("_sg" if sg else "")
    pipe = ctx.pipelines.get(name, 7, (_GEMM, tm, TN, mode, sg or 8), local)
    bindings = [oa.binding(False), ow.binding(False), oc.binding(True), ocs.binding(False),
                of.binding(False), ods.binding(False), odz.binding(False)]  # fmt: skip
    keep = [t for t in (a, weight.data, target, weight.colsum, f_arr) if t is not None]
    keep += list(dyn or ())
    gx = -(-n // (TN * local))  # workgroups along N
    maxg = ctx.limits["maxComputeWorkGroupCount"]
    step = tm * maxg[1]  # rows per launch (the grid's y limit)
    zo, lo, hi = requant
    for m0 in range(0, m, step):
        mm = min(step, m - m0)
        push = _push(
            mm, n, k, weight.kw, a_off + m0 * lda, lda, ow.offset, weight.data.shape[1],
            oc.offset + m0 * oc.strides[0], oc.strides[0], ocs.offset, of.offset,
            of.offset + n, _FLIP if signed else 0, zp_u8, flags, zo, lo, hi, ods.offset,
            odz.offset,
        )  # fmt: skip
        ctx.stream.dispatch(pipe, bindings, push, (gx, -(-mm // tm), 1), label="qgemm", keep=keep)
    if target is not out:
        copy_array(be, out, target[:, :n])


def quantize_rows(
    be,
    x: np.ndarray,
    inv: float,
    zero_point: int,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """uint8 [M, 4 * ceil(K / 4)] on the device: float32 ``x`` [M, K] quantized per tensor as
    qtensor.quantize_array (``rint(fl32(x * inv) + zero_point)`` clamped to [0, 255], NaN to
    255: ``_cpu.quantize_u8``), the pad bytes 0; ``qgemm`` takes its ``[:, :K]`` view without a
    copy. ``out``: write into this contiguous uint8 [M, K] array instead (starting on a 32-bit
    word; M = 1 or K a multiple of 4: whole words are written, the last one's pad bytes land in
    the allocation's padding) and return it."""
    if x.dtype != np.float32 or x.ndim != 2:
        raise DTypeError(f"quantize_rows: x must be float32 [M, K], got {x.dtype} {x.shape}")
    m, k = x.shape
    kw = -(-k // 4)
    if out is None:
        out = be.empty_array((m, 4 * kw), np.uint8)
    elif (
        out.dtype != np.uint8
        or out.shape != (m, k)
        or not out.flags.c_contiguous
        or (m > 1 and k % 4)
        or be.operand(out).offset % 4
    ):
        raise ShapeError(
            f"quantize_rows: out must be contiguous uint8 {[m, k]} starting on a word, with M = 1 "
            f"or K a multiple of 4; got {out.dtype} {list(out.shape)}"
        )
    if m * kw == 0:
        return out
    x = contiguous(be, x)
    ox, oo = be.operand(x), be.operand(out)
    local = flat_local_size(be)
    pipe = be.ctx.pipelines.get("qgemm", 7, (_QUANTIZE, 1, TN, _U8), local)
    push = _push(m, 0, k, kw, ox.offset, k, 0, 0, oo.offset // 4, kw, 0, 0, 0, 0, 0, 0,
                 float(zero_point), float(np.float32(inv)), 0.0, 0, 0)  # fmt: skip
    b_in, b_out = ox.binding(False), oo.binding(True)
    be.ctx.stream.dispatch(
        pipe, [b_in, b_in, b_out, b_in, b_in, b_in, b_in], push, groups_1d(m * kw, local),
        label="quantize_rows", keep=[x, out],
    )  # fmt: skip
    return out
