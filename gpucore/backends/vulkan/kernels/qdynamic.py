"""ONNX DynamicQuantizeLinear on the device (shaders/dynamic_quantize.comp): the bits of
``_cpu.dynamic_quantize_u8`` (cpu/qdynamic.c, onnx.reference's float32 arithmetic).

``dynamic_qparams(be, x)`` records the range of float32 ``x`` and its scale and zero point into
a fresh workspace, which it returns as ``QParams`` (the device array ``.ws`` and, on the host,
which parameters it holds: ``.torch``): uint32 words, word 0 the scale's float32 bits, word 1
the zero point, then the workgroups' partial ranges. ``scale_of(qp)`` / ``zero_point_of(qp)``
are its float32 and uint8 views of one value (what ``qgemm.qgemm_dynamic`` reads, or a copy
source). ``dynamic_quantize_u8(be, y, x, qp)`` records the uint8 ``y`` of ``x`` with them. The
divisions are correctly rounded through float64 residuals: devices with shaderFloat64 only.

PyTorch's ``quantize_dynamic`` parameters (``_cpu.dynamic_quantize_torch_u8``, cpu/qdynamic.c's
last function; the shader's TORCH constant): ``dynamic_qparams(be, x, torch=True)`` records
``scale = max((hi - lo) / 255, eps)``, ``zp = clamp(-rint(lo / scale), 0, 255)`` and ``1 /
scale`` (word 2) over the same range, scale NaN and zero point 0 when hi - lo is not finite in
float32; ``torch_quantize_rows(be, x, qp)`` records uint8 ``rint(fl32(x * (1 / scale)) + zp)``
clamped to [0, 255] (NaN -> 255) of float32 rows [M, K] into rows padded to whole words, the
``[:, :K]`` view of which ``qgemm.qgemm_dynamic`` reads with ``scale_of(qp)`` and
``zero_point_of(qp)``. Each consumer checks the kind of parameters it is given (DTypeError on
a mismatch: ONNX's workspace has no 1 / scale in word 2, PyTorch's rounds otherwise).
"""

from __future__ import annotations

import numpy as np

from ....errors import DeviceError, DTypeError, ShapeError
from .common import _push, flat_local_size, groups_1d
from .qtensor import _word_output

_RANGE, _FINISH, _QUANTIZE = 0, 1, 2  # dynamic_quantize.comp's MODE
WG = 64  # the range's workgroup (shared-memory reduction)
MAX_PARTS = 256  # workgroups of the range pass: partial ranges FINISH reduces
PER_LANE = 16  # elements each lane of the range pass reads at least
_HEAD = 4  # workspace words before the partial ranges


def _float64(be, fn: str) -> None:
    if not be.ctx.float64:
        raise DeviceError(
            f"{fn}: {be.ctx.info.name} has no shaderFloat64 (the exact residuals of "
            "DynamicQuantizeLinear's rounded divisions); run it on the CPU"
        )


def _float32_input(x: np.ndarray, fn: str) -> None:
    if x.dtype != np.float32 or not x.flags.c_contiguous:
        raise DTypeError(f"{fn}: x must be contiguous float32, got {x.dtype} {list(x.shape)}")


def parts_for(n: int) -> int:
    """Workgroups of the range pass for ``n`` elements (1: it writes the parameters itself)."""
    return max(1, min(MAX_PARTS, -(-n // (WG * PER_LANE))))


class QParams:
    """``dynamic_qparams``'s result: the device workspace ``ws`` (uint32 words, module
    docstring) and whether it holds PyTorch's parameters (``torch``: with 1 / scale in word 2)
    or ONNX's. The kind is known on the host only (the shader writes no tag): the consumers
    check it."""

    __slots__ = ("ws", "torch")

    def __init__(self, ws: np.ndarray, torch: bool):
        self.ws = ws
        self.torch = bool(torch)

    def __repr__(self) -> str:
        return f"QParams({'PyTorch' if self.torch else 'ONNX'}, {self.ws.size} words)"


def _workspace(qp, fn: str, torch: bool) -> np.ndarray:
    """The workspace of ``qp``, which must be ``dynamic_qparams(torch=torch)``'s."""
    if not isinstance(qp, QParams):
        raise DTypeError(
            f"{fn}: ws must be dynamic_qparams's workspace (a QParams), got {type(qp).__name__}"
        )
    if qp.torch != torch:
        have, want = ("PyTorch's", "ONNX's") if qp.torch else ("ONNX's", "PyTorch's")
        raise DTypeError(
            f"{fn}: ws holds {have} parameters (dynamic_qparams(torch={qp.torch})); {fn} "
            f"quantizes with {want}: record them with dynamic_qparams(torch={torch})"
        )
    ws = qp.ws
    if ws.dtype != np.uint32 or ws.ndim != 1 or ws.size < _HEAD + 3:
        raise DTypeError(f"{fn}: ws must be dynamic_qparams's workspace")
    return ws


def dynamic_qparams(be, x: np.ndarray, torch: bool = False) -> QParams:
    """Record DynamicQuantizeLinear's scale and zero point of ``x`` (``torch``: PyTorch's, and
    1 / scale) into a fresh workspace and return it with its kind (module docstring): one
    dispatch, two for more than WG * PER_LANE elements."""
    _float64(be, "dynamic_qparams")
    _float32_input(x, "dynamic_qparams")
    t = int(bool(torch))
    n = x.size
    parts = parts_for(n)
    ws = be.empty_array((_HEAD + 3 * parts,), np.uint32)
    ox, ow = be.operand(x), be.operand(ws)
    ctx = be.ctx
    bx, bw = ox.binding(False), ow.binding(True)
    push = _push(n, ox.offset, ow.offset, 0, parts)
    pipe = ctx.pipelines.get("dynamic_quantize", 3, (_RANGE, t), WG)
    ctx.stream.dispatch(pipe, [bx, bw, bx], push, (parts, 1, 1), label="dq_range", keep=[x, ws])
    if parts > 1:
        pipe = ctx.pipelines.get("dynamic_quantize", 3, (_FINISH, t), WG)
        ctx.stream.dispatch(pipe, [bw, bw, bw], push, (1, 1, 1), label="dq_params", keep=[ws])
    return QParams(ws, torch)


def scale_of(qp: QParams) -> np.ndarray:
    """The workspace's scale (either kind): a float32 view of one value."""
    return qp.ws[0:1].view(np.float32)


def zero_point_of(qp: QParams) -> np.ndarray:
    """The workspace's zero point (either kind): a uint8 view of one value."""
    return qp.ws[1:2].view(np.uint8)[:1]


def dynamic_quantize_u8(be, y: np.ndarray, x: np.ndarray, qp: QParams) -> None:
    """Record uint8 ``y`` = ONNX's QuantizeLinear of float32 ``x`` with the scale and zero point
    of ``qp`` (``dynamic_qparams``'s, ONNX's: DTypeError for PyTorch's): the correctly
    rounded x / scale clamped to [-zp, 255 - zp] (NaN to -zp), rounded half to even, + zp;
    whole words (``y`` starts on one)."""
    _float64(be, "dynamic_quantize_u8")
    _float32_input(x, "dynamic_quantize_u8")
    if y.shape != x.shape:
        raise ShapeError(f"dynamic_quantize_u8: y {list(y.shape)} and x {list(x.shape)} differ")
    ws = _workspace(qp, "dynamic_quantize_u8", torch=False)
    y_off = _word_output(be, y, np.uint8, "dynamic_quantize_u8")
    total = -(-x.size // 4)
    if not total:
        return
    ox, ow, oy = be.operand(x), be.operand(ws), be.operand(y)
    local = flat_local_size(be)
    pipe = be.ctx.pipelines.get("dynamic_quantize", 3, (_QUANTIZE, 0), local)
    push = _push(x.size, ox.offset, ow.offset, y_off, 0)
    be.ctx.stream.dispatch(
        pipe, [ox.binding(False), ow.binding(False), oy.binding(True)], push,
        groups_1d(total, local), label="dynamic_quantize_u8", keep=[x, ws, y],
    )  # fmt: skip


def torch_quantize_rows(be, x: np.ndarray, qp: QParams) -> np.ndarray:
    """uint8 [M, 4 * ceil(K / 4)] on the device: float32 rows ``x`` [M, K] quantized with the
    PyTorch parameters of ``qp`` (``dynamic_qparams(..., torch=True)``'s: DTypeError for
    ONNX's, whose workspace has no 1 / scale) as
    ``_cpu.quantize_u8`` (module docstring), the pad bytes 0."""
    _float64(be, "torch_quantize_rows")
    _float32_input(x, "torch_quantize_rows")
    if x.ndim != 2:
        raise ShapeError(f"torch_quantize_rows: x must be [M, K], got {list(x.shape)}")
    ws = _workspace(qp, "torch_quantize_rows", torch=True)
    m, k = x.shape
    kw = -(-k // 4)
    out = be.empty_array((m, 4 * kw), np.uint8)
    if not m * kw:
        return out
    y_off = _word_output(be, out, np.uint8, "torch_quantize_rows")
    ox, ow, oy = be.operand(x), be.operand(ws), be.operand(out)
    local = flat_local_size(be)
    pipe = be.ctx.pipelines.get("dynamic_quantize", 3, (_QUANTIZE, 1), local)
    push = _push(x.size, ox.offset, ow.offset, y_off, k)
    be.ctx.stream.dispatch(
        pipe, [ox.binding(False), ow.binding(False), oy.binding(True)], push,
        groups_1d(m * kw, local), label="torch_quantize_rows", keep=[x, ws, out],
    )  # fmt: skip
    return out
