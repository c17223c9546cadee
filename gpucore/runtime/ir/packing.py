"""Pre-packed constant GEMM operands for the compiled executor's lowerings.

``gpucore._cpu.gemm_pack`` packs a GEMM operand once into the panels the blocked GEMM's
micro-kernel reads (cpu/README.md, *Pre-packed operands*); ``gemm_ex`` and ``conv2d_forward``
take the resulting ``PackedMatrix`` in place of the array and give the same bits without packing
it on every call. The lowerings of ``gemm`` (fused.py), ``linear`` and ``conv2d`` (lowering.py)
ask ``gemm_operand`` / ``conv_weight`` here for a packed operand when it is a graph constant
(``Graph.add_constant`` marks those read-only) and packing pays; the interpreted executor keeps
the unpacked calls.

Packed copies are cached per constant array (keyed by ``id``, with a weak reference that drops
the entry when the array dies, and weak references to the copies, which live as long as a
program reads them), so that the runners of one executor (one per concurrent run) share one
copy. ``ENABLED`` (environment ``GPUCORE_PACK=0`` turns it off) only serves
benchmarks: packed and unpacked calls give the same results.
"""

from __future__ import annotations

import os
import threading
import weakref

import numpy as np

from ... import _cpu

ENABLED = os.environ.get("GPUCORE_PACK", "1").strip() != "0"  # gpucore.config checked the value

# Packing saves the per-call packing of the operand (and where gemm reads a small row-major
# operand in place, the strided reads: ResNet-18's first convolution, a 37 KiB weight, ~9 %
# faster packed); below this size there is little to save.
MIN_BYTES = 16 * 1024
# gemm.c's small-m path (m <= 16 with trans_b, 24 without) streams B where it lies: a packed
# operand would be unpacked there on every call.
SMALL_M = {True: 16, False: 24}
# ... and few columns of C through the same kernels (C^T = op(B)^T op(A)^T, A not transposed:
# n <= 8 with k >= 64 (32 for one column), or n <= 16 with k >= 256 and op(A) within 256 KiB; C
# within 4 MiB; gemm_dispatch.h's GC_NARROW_*), where a packed operand keeps the blocked path
# instead
NARROW_N, NARROW_N_A, NARROW_A_BYTES, NARROW_MIN_K, NARROW_MID_K = 8, 16, 256 * 1024, 32, 256
NARROW_C_BYTES = 4 * 1024 * 1024


def _narrow(m: int, n: int, k: int, trans_a: int, trans_b: int, itemsize: int) -> bool:
    """Whether gemm.c takes its narrow-N path (C^T and B^T copy bounds included)."""
    if trans_a or k < (NARROW_MIN_K if n == 1 else 2 * NARROW_MIN_K):
        return False
    if m * n * itemsize > NARROW_C_BYTES or (not trans_b and n * k * itemsize > NARROW_C_BYTES):
        return False
    return n <= NARROW_N or (
        n <= NARROW_N_A and k >= NARROW_MID_K and m * k * itemsize <= NARROW_A_BYTES
    )


# The transposed layout (swap) when it uses the register tile this much better and K is long
# enough to pay for writing C^T through a buffer (measured on AVX-512, 14 x 32 tiles, one thread:
# ResNet-18's 3x3 convolutions with 49, 196 and 784 output pixels gain 14 %, 15 % and 5 %, 3136
# pixels lose 2 %, 1x1 ones with k <= 256 lose up to 10 %; a 32 x 2048 x 2048 Linear gains 40 %,
# 64 rows lose 9 %).
SWAP_GAIN = 1.10
SWAP_MIN_K = 257
CT_BUF_BYTES = 4 * 1024 * 1024  # gemm_dispatch.h's GC_CT_BUF_BYTES

_lock = threading.Lock()
# id(array) -> (weakref to it, {layout key: weakref to its PackedMatrix}): the packed copies are
# held by the programs that read them, not here, since a Winograd weight holds its read-only
# source (cpu/python/pack.c): held here too, the pair would never die
_cache: dict = {}
_blocking: dict = {}


_sealed: dict = {}  # id(array) -> weak reference to it: seal()ed arrays


def seal(arr: np.ndarray) -> np.ndarray:
    """``arr`` (a read-only array over memory that nothing else references, e.g. a block of the
    host cache that only it holds: gpucore/onnx/proto.py's weights) made read-only for good:
    ``is_constant`` then holds for it and its read-only views, as for an array owning its
    memory."""
    if arr.flags.writeable:
        raise ValueError("packing.seal: the array must be read-only")
    key = id(arr)

    def drop(ref, key=key):
        with _lock:
            if _sealed.get(key) is ref:
                del _sealed[key]

    with _lock:
        _sealed[key] = weakref.ref(arr, drop)
    return arr


def is_constant(arr) -> bool:
    """Whether ``arr``'s memory cannot change: read-only down to an array owning its memory, a
    ``seal``ed array or a ``bytes`` object (an ONNX file's weights, read in place:
    gpucore/onnx/proto.py)."""
    while isinstance(arr, np.ndarray):
        if arr.flags.writeable:
            return False
        ref = _sealed.get(id(arr))
        if ref is not None and ref() is arr:
            return True
        if arr.base is None:
            return bool(arr.flags.owndata)
        arr = arr.base
    return type(arr) is bytes  # else a view of another buffer (the arena, a HostBuffer, ...)


def _tile(dtype) -> tuple:
    key = np.dtype(dtype).name
    if key not in _blocking:
        g = _cpu.info()["gemm"][key]
        _blocking[key] = (g["mr"], g["nr"])
    return _blocking[key]


def _use(v: int, r: int) -> float:
    return v / (-(-v // r) * r)


def _swap(m: int, n: int, k: int, dtype) -> int:
    """1 when the product tiles much better transposed (rows of the register tile along n) and
    C^T fits gemm's row-major buffer for that mode (4 MiB; beyond, tiles go through a
    transposed stack tile)."""
    mr, nr = _tile(dtype)
    if m * n * np.dtype(dtype).itemsize > CT_BUF_BYTES or k < SWAP_MIN_K:
        return 0
    return int(_use(n, mr) * _use(m, nr) > SWAP_GAIN * _use(m, mr) * _use(n, nr))


def _drop(key: int, ref) -> None:
    with _lock:
        entry = _cache.get(key)
        if entry is not None and entry[0] is ref:
            del _cache[key]


def packed(
    owner: np.ndarray, flat: np.ndarray, side: str, rows: int, cols: int, trans: int, swap: int
):
    """The PackedMatrix of ``flat`` (a view of the constant ``owner``), cached per owner."""
    layout = (flat.__array_interface__["data"][0] - owner.__array_interface__["data"][0],
              flat.dtype.str, side, rows, cols, trans, swap)  # fmt: skip
    key = id(owner)
    with _lock:
        entry = _cache.get(key)
        if entry is None or entry[0]() is not owner:
            entry = _cache[key] = (weakref.ref(owner, lambda r, k=key: _drop(k, r)), {})
        ref = entry[1].get(layout)
        pm = None if ref is None else ref()
        if pm is None:
            pm = _cpu.gemm_pack(flat, side, rows, cols, trans, swap)
            entry[1][layout] = weakref.ref(pm)
    return pm


def gemm_operand(
    owner, flat, side: str, m: int, n: int, k: int, trans: int, stride: int, trans_b: int
):
    """``flat`` packed for ``side`` of gemm_ex(m, n, k) when that pays, else ``flat``."""
    if not ENABLED or stride != 0 or flat.dtype not in _FLOATS or not is_constant(owner):
        return flat
    if m <= SMALL_M[bool(trans_b)] or n <= 0 or k <= 0:
        return flat
    if _narrow(m, n, k, trans if side == "a" else 0, trans_b, flat.dtype.itemsize):
        return flat  # (side b: trans_a not known here, taken as 0, the Linear's)
    rows, cols = (m, k) if side == "a" else (k, n)
    if rows * cols * flat.dtype.itemsize < MIN_BYTES:
        return flat
    return packed(owner, flat, side, rows, cols, trans, _swap(m, n, k, flat.dtype))


def conv_weight(w: np.ndarray, pixels: int, geometry: tuple | None = None):
    """conv2d_forward's weight w [o, c, kh, kw] packed (side a: o x c*kh*kw, trans 0) for
    ``pixels`` output pixels per image when that pays, else ``w``.  ``geometry`` (conv2d_forward's
    13 ints): a float32 convolution that runs Winograd (``_cpu.conv2d_winograd``) gets its
    transformed weight (swap 2: the per-call transform's bits); one that runs the direct
    kernel (``_cpu.conv2d_direct``) the layout that kernel reads (swap 1, output channels along
    the tile's columns); a 1x1 one that runs the pointwise path (``_cpu.conv2d_pointwise``) the
    GEMM's unswapped layout (swap 0, output channels along the tile's rows), or swapped (swap 1)
    where that path runs its pixels x channels tiles; one that runs the few-input-channels
    kernel (``_cpu.conv2d_c1``, which reads the weight unpacked and leaves a packed one to the
    other paths: 4 -> 128 3x3 at 28 x 28 4.66 ms there against 6.89 on conv_direct.c) ``w``."""
    if w.ndim != 4 or not w.flags.c_contiguous or w.size == 0:
        return w
    o = w.shape[0]
    if geometry is not None and w.dtype == np.float32 and _cpu.conv2d_winograd(*geometry):
        # the Winograd F(4x4, 3x3) weight, transformed once (cpu/conv_winograd.c)
        if not ENABLED or not is_constant(w):
            return w
        return packed(w, w.reshape(-1), "a", o, w.size // o, 0, 2)
    f32 = geometry is not None and w.dtype == np.float32
    if f32 and _cpu.conv2d_c1(*geometry):
        return w  # (cpu/conv_c1.c lays out the few taps' weights itself on each call)
    pointwise = _cpu.conv2d_pointwise(*geometry) if f32 else 0
    if pointwise:
        # the 1x1 pointwise path (cpu/conv_pw.c) reads the GEMM's own layout: unswapped for its
        # channels x pixels tiles (1), swapped (output channels along the columns) for its
        # pixels x channels tiles (2)
        if not ENABLED or not is_constant(w) or w.nbytes < MIN_BYTES:
            return w
        return packed(w, w.reshape(-1), "a", o, w.size // o, 0, 0 if pointwise == 1 else 1)
    if geometry is not None and w.dtype == np.float32 and _cpu.conv2d_direct(*geometry):
        if not ENABLED or not is_constant(w) or w.nbytes < MIN_BYTES:
            return w
        return packed(w, w.reshape(-1), "a", o, w.size // o, 0, 1)
    got = gemm_operand(w, w.reshape(-1), "a", o, pixels, w.size // o, 0, 0, 0)
    return got if isinstance(got, _cpu.PackedMatrix) else w


_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
