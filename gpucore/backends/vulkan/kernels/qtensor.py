"""The byte-tensor kernels of the runtime's quantized ops on the device (shaders/qtensor.comp),
bit for bit with their C kernels: ``dequantize_u8``, ``im2col_rows`` (a uint8 convolution's
activation rows for ``qgemm.qgemm``, padded with the activation zero point), ``rows_to_nchw``
(the GEMM's uint8 result into the convolution's layout), ``max_pool2d_u8`` and
``quantize_onnx_u8`` (ONNX's QuantizeLinear, shaders/quantize_onnx.comp). uint8 inputs may
start at any byte; uint8 outputs start on a 32-bit word and are written in whole words (the bytes
up to the next word: the allocation's padding)."""

from __future__ import annotations

import numpy as np

from ....errors import DeviceError, DTypeError, ShapeError
from .common import _push, flat_local_size, groups_1d

_DEQUANT, _IM2COL, _MAXPOOL, _NCHW = 0, 1, 2, 3
_CHUNK = 8  # IM2COL: words of a row per invocation (qtensor.comp's CHUNK)


def _geometry_push(total, x_off, o_off, c, h, w, k, s, pad, d, oh, ow, kk, kwords, scale, zp):
    return _push(total, x_off, o_off, c, h, w, *k, *s, *pad, *d, oh, ow, kk, kwords,
                 float(scale), float(zp))  # fmt: skip


def _dispatch(be, mode: int, x: np.ndarray, out: np.ndarray, push, total: int, label: str):
    local = flat_local_size(be)
    ox, oo = be.operand(x), be.operand(out)
    pipe = be.ctx.pipelines.get("qtensor", 2, (mode,), local)
    be.ctx.stream.dispatch(
        pipe, [ox.binding(False), oo.binding(True)], push, groups_1d(total, local),
        label=label, keep=[x, out],
    )  # fmt: skip


def _byte_input(be, x: np.ndarray, fn: str) -> int:
    if x.dtype != np.uint8 or not x.flags.c_contiguous:
        raise DTypeError(f"{fn}: x must be contiguous uint8, got {x.dtype} {x.shape}")
    return be.operand(x).offset


def _word_output(be, out: np.ndarray, dtype, fn: str) -> int:
    if out.dtype != dtype or not out.flags.c_contiguous:
        raise DTypeError(f"{fn}: out must be contiguous {np.dtype(dtype)}, got {out.dtype}")
    op = be.operand(out)
    if out.itemsize == 1:
        if op.offset % 4:
            raise ShapeError(f"{fn}: a uint8 out must start on a 32-bit word")
        return op.offset // 4
    return op.offset


def dequantize_u8(be, out: np.ndarray, q: np.ndarray, scale: float, zero_point: int) -> None:
    """Record float32 ``out = (q - zero_point) * scale`` (``_cpu.dequantize_u8``)."""
    if out.shape != q.shape:
        raise ShapeError(f"dequantize_u8: out {out.shape} and q {q.shape} differ")
    x_off = _byte_input(be, q, "dequantize_u8")
    o_off = _word_output(be, out, np.float32, "dequantize_u8")
    if not q.size:
        return
    push = _geometry_push(q.size, x_off, o_off, 0, 0, 0, (0, 0), (0, 0), (0, 0), (0, 0), 0, 0,
                          0, 0, np.float32(scale), zero_point)  # fmt: skip
    _dispatch(be, _DEQUANT, q, out, push, q.size, "dequantize_u8")


def im2col_rows(be, x: np.ndarray, kernel, stride, padding, dilation, zero_point: int):
    """uint8 [N * oh * ow, 4 * KW] on the device (K = C * kh * kw, KW = ceil(K / 4)): the
    activation rows of the convolution of uint8 NCHW ``x`` (module docstring); ``qgemm`` takes
    its ``[:, :K]`` view without a copy. Returns (rows, oh, ow)."""
    if x.ndim != 4:
        raise ShapeError(f"im2col_rows: x must be [N, C, H, W], got {x.shape}")
    x_off = _byte_input(be, x, "im2col_rows")
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    if oh < 1 or ow < 1:
        raise ShapeError(f"im2col_rows: the kernel {kernel} exceeds the padded input {x.shape}")
    k = c * kh * kw
    kwords = -(-k // 4)
    rows = be.empty_array((n * oh * ow, 4 * kwords), np.uint8)
    total = rows.shape[0] * -(-kwords // _CHUNK)  # qtensor.comp's invocations
    if total:
        push = _geometry_push(total, x_off, be.operand(rows).offset // 4, c, h, w, kernel, stride,
                              padding, dilation, oh, ow, k, kwords, 1.0, zero_point)  # fmt: skip
        _dispatch(be, _IM2COL, x, rows, push, total, "im2col_u8")
    return rows, oh, ow


def max_pool2d_u8(be, out: np.ndarray, x: np.ndarray, kernel, stride, padding, dilation) -> None:
    """Record uint8 NCHW max pooling (``_cpu.max_pool2d_u8``) of ``x`` into ``out`` [N, C, oh,
    ow] (the padding never wins: it must not exceed half the kernel)."""
    x_off = _byte_input(be, x, "max_pool2d_u8")
    o_off = _word_output(be, out, np.uint8, "max_pool2d_u8")
    n, c, h, w = x.shape
    if out.ndim != 4 or out.shape[:2] != (n, c):
        raise ShapeError(f"max_pool2d_u8: out {out.shape} does not fit x {x.shape}")
    oh, ow = out.shape[2:]
    total = -(-out.size // 4)
    if not total:
        return
    push = _geometry_push(total, x_off, o_off, c, h, w, kernel, stride, padding, dilation, oh, ow,
                          out.size, 0, 1.0, 0)  # fmt: skip
    _dispatch(be, _MAXPOOL, x, out, push, total, "max_pool2d_u8")


def rows_to_nchw(be, out: np.ndarray, rows: np.ndarray) -> None:
    """Record uint8 ``out`` [N, O, oh, ow] = ``rows`` [N * oh * ow, R] (O <= R, R a multiple of 4,
    contiguous: the int8 GEMM's result rows) transposed per image."""
    x_off = _byte_input(be, rows, "rows_to_nchw")
    o_off = _word_output(be, out, np.uint8, "rows_to_nchw")
    n, o = out.shape[:2]
    pix = out.size // max(n * o, 1)
    if rows.ndim != 2 or rows.shape[0] != n * pix or rows.shape[1] % 4 or rows.shape[1] < o:
        raise ShapeError(f"rows_to_nchw: rows {rows.shape} do not fit out {out.shape}")
    total = -(-out.size // 4)
    if not total:
        return
    push = _geometry_push(total, x_off, o_off, o, pix, 0, (0, 0), (0, 0), (0, 0), (0, 0), 0, 0,
                          out.size, rows.shape[1] // 4, 1.0, 0)  # fmt: skip
    _dispatch(be, _NCHW, rows, out, push, total, "rows_to_nchw")


def quantize_onnx_u8(be, out: np.ndarray, x: np.ndarray, scale: float, zero_point: int) -> None:
    """Record uint8 ``out`` = ONNX's QuantizeLinear of float32 ``x`` (``_cpu.quantize_linear_u8``:
    the correctly rounded x / scale clamped to [-zp, 255 - zp], NaN to -zp, rounded half to
    even, + zp; shaders/quantize_onnx.comp, devices with shaderFloat64)."""
    if x.dtype != np.float32 or not x.flags.c_contiguous or out.shape != x.shape:
        raise DTypeError(
            f"quantize_onnx_u8: x must be contiguous float32 of out's shape {out.shape}"
        )
    if not be.ctx.float64:
        raise DeviceError(
            f"quantize_onnx_u8: {be.ctx.info.name} has no shaderFloat64 (the exact residuals of "
            "the rounded division); run ONNX's QuantizeLinear on the CPU"
        )
    o_off = _word_output(be, out, np.uint8, "quantize_onnx_u8")
    total = -(-x.size // 4)
    if not total:
        return
    s = np.float32(scale)
    inv = np.float32(1) / s
    push = _push(total, x.size, be.operand(x).offset, o_off, float(s), float(inv),
                 float(zero_point))  # fmt: skip
    local = flat_local_size(be)
    ox, oo = be.operand(x), be.operand(out)
    pipe = be.ctx.pipelines.get("quantize_onnx", 2, (), local)
    be.ctx.stream.dispatch(
        pipe, [ox.binding(False), oo.binding(True)], push, groups_1d(total, local),
        label="quantize_onnx_u8", keep=[x, out],
    )  # fmt: skip
