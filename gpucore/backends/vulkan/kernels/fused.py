"""Vulkan kernels of the runtime's fused ops (gpucore/runtime/ir/fused.py): layer norm
(shaders/layer_norm.comp) and attention (shaders/attention.comp), one dispatch each.

Not registry ops: the Vulkan executor of gpucore.runtime calls ``layer_norm`` and ``attention``
directly, with device arrays, as it calls ``gemm``; ``attention`` also serves eager gpucore's
fused scaled_dot_product_attention op (kernels/attention.py: grouped-query heads, bool masks
and each row's logsumexp for the backward).

Attention reads q, k, v, the mask and writes out through their own element strides: the
shader's push constants hold a full 4-D layout (offset and b, h, row, column strides) for all
five operands in exactly 128 bytes, so permuted views of a [B, S, 3 * H * D] qkv projection, a
[B, S, H, D] output (merged heads) and a mask broadcast with zero strides are used where they
lie: no layout needs a contiguous copy. Rows that are 16-byte aligned with unit stride along D
are read as vec4. On CPU devices (lavapipe) the invocations of a subgroup share the k / v loads
through subgroup shuffles (see attention.comp): B 4, H 4, S 128, D 64 took 26 ms with every
invocation loading every key, 6 ms shuffled. Skv = 0 gives NaN rows (no key to attend to, as a
fully masked row).

Layer norm needs contiguous rows (the runtime's layer_norm input is always a whole tensor): a
strided x is copied first; aligned rows whose length is a multiple of 4 are read as vec4.
"""

from __future__ import annotations

import numpy as np

from ....errors import DTypeError, ShapeError
from .common import _push, contiguous, groups_1d, launch, local_size
from .gemm import subgroup_shuffle_size

# attention.comp's way of reading k and v: None picks per device (SHUFFLE on CPU devices with
# subgroup shuffles); True / False force it where the device allows (tests).
SHUFFLE: bool | None = None
# attention.comp's register row length (DMAX): a few sizes only, each its own pipeline.
_DMAX = (16, 64, 128)
# Query rows per attention workgroup (its size): the smaller one for short queries (a decoding
# step, a small batch), where most of a larger group would idle; each invocation carries two
# DMAX-float register rows, so a GPU wants no more than 64 either.
_ATT_WG = (16, 64)
# Accesses (floats, or vec4s where aligned) each layer-norm lane should own on a GPU before a
# row gets another lane: below this the shared-memory combine costs more than the loop it splits.
_LN_PER_LANE = 32
# Lanes per layer-norm row: None picks per device; a power of two forces it (tests).
LN_LANES: int | None = None


def _float32(name: str, *arrays) -> None:
    bad = [a.dtype.name for a in arrays if a is not None and a.dtype != np.float32]
    if bad:
        raise DTypeError(f"{name}: the Vulkan kernel takes float32 operands only, got {bad}")


def _ln_lanes(be, accesses: int, wg: int) -> int:
    if LN_LANES is not None:
        return min(LN_LANES, wg)
    if be.ctx.is_cpu:
        # lavapipe runs a load as a loop over the 8 lanes whether they share a row or not, so
        # splitting a row saves nothing and its barriers cost: 512 x 256 took 0.5 ms with one
        # lane per row, 0.8 ms with 2 to 16.
        return 1
    lanes = 1
    while lanes * 2 <= wg and lanes * 2 * _LN_PER_LANE <= accesses:
        lanes *= 2
    return lanes


_HALF_KIND = {np.dtype(np.float32): 0, np.dtype(np.float16): 1, np.dtype(np.uint16): 2}


def layer_norm(be, out, x, weight, bias, n: int, eps: float, mean=None, rstd=None):
    """out = layer_norm(x) over the last n elements (rows = x.size // n): (x - mean) /
    sqrt(var + eps) [* weight] [+ bias], the biased variance. out is C-contiguous and may be x.
    mean, rstd: None, or contiguous [rows] arrays that receive each row's mean and
    1 / sqrt(var + eps) (native_layer_norm). Every operand float32, or every one float16 or
    every one bfloat16 (uint16 arrays): read and written as such, float32 inside."""
    ops = [a for a in (out, x, weight, bias, mean, rstd) if a is not None]
    if x.dtype not in _HALF_KIND or any(a.dtype != x.dtype for a in ops):
        raise DTypeError(
            "layer_norm: the Vulkan kernel takes operands all float32, all float16 or all "
            f"bfloat16, got {[a.dtype.name for a in ops]}"
        )
    if x.size == 0 or n == 0:
        return
    if x.size % n or out.size != x.size:
        raise ShapeError(f"layer_norm: {x.shape} -> {out.shape} is not whole rows of {n}")
    rows = x.size // n
    for name, t, size in (("weight", weight, n), ("bias", bias, n), ("mean", mean, rows)):
        if t is not None and t.size != size:
            raise ShapeError(f"layer_norm: {name} has {t.size} elements, expected {size}")
    if (mean is None) != (rstd is None) or (rstd is not None and rstd.size != rows):
        raise ShapeError(f"layer_norm: mean and rstd go together, {rows} elements each")
    if not out.flags.c_contiguous or not all(
        t is None or t.flags.c_contiguous for t in (mean, rstd)
    ):
        raise ShapeError("layer_norm: out, mean and rstd must be C-contiguous")
    half = _HALF_KIND[x.dtype]
    x = contiguous(be, x)  # in place, x is out: already contiguous, never copied
    w = contiguous(be, weight.reshape(-1)) if weight is not None else x
    b = contiguous(be, bias.reshape(-1)) if bias is not None else x
    stats = mean is not None
    m, r = (mean, rstd) if stats else (out, out)
    wg = local_size(be)
    ox, ow, ob, oo, om, orr = (be.operand(a) for a in (x, w, b, out, m, r))
    push = _push(
        rows, n, ox.offset, ow.offset, ob.offset, oo.offset, float(eps), om.offset, orr.offset
    )
    vec4 = not half and n % 4 == 0 and all(o.offset % 4 == 0 for o in (ox, ow, ob, oo))
    lanes = _ln_lanes(be, n // 4 if vec4 else n, wg)
    spec = (lanes, int(weight is not None), int(bias is not None), int(vec4), half, int(stats))
    operands = [(x, False), (w, False), (b, False), (out, True), (m, stats), (r, stats)]
    launch(be, "layer_norm", spec, operands, push, groups_1d(rows * lanes, wg), local=wg)


def _layout(op) -> tuple:
    """(offset, b, h, row, column strides) of a 4-D operand."""
    return (op.offset, *op.strides)


def attention(be, out, q, k, v, mask, scale: float, causal: bool, lse=None):
    """out = softmax(q k^T * scale + mask) v for q [B, H, Sq, D], k [B, H / g, Skv, D],
    v [B, H / g, Skv, Dv] and out [B, H, Sq, Dv], any strides (g query heads per key/value
    head); mask None, additive float32 or bool (True keeps), broadcastable to [B, H, Sq, Skv];
    causal: query i sees keys j <= i; lse: None or a contiguous [B, H, Sq] that receives each
    row's logsumexp (+inf for a fully masked row). One dispatch."""
    _float32("attention", out, q, k, v, lse, None if mask is None or mask.dtype == bool else mask)
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4 or out.ndim != 4:
        raise ShapeError("attention: q, k, v and out must be 4-D [B, H, S, D]")
    nb, nh, sq, d = q.shape
    hk, skv, dv = k.shape[1], k.shape[2], v.shape[3]
    if (
        hk < 1
        or nh % hk
        or k.shape != (nb, hk, skv, d)
        or v.shape != (nb, hk, skv, dv)
        or out.shape != (nb, nh, sq, dv)
    ):
        raise ShapeError(
            f"attention: q {q.shape}, k {k.shape}, v {v.shape} -> out {out.shape} do not match"
        )
    if lse is not None and (lse.shape != (nb, nh, sq) or not lse.flags.c_contiguous):
        raise ShapeError(f"attention: lse {lse.shape} must be a contiguous {(nb, nh, sq)}")
    if d > 0xFFFF or dv > 0xFFFF:
        raise ShapeError(f"attention: D {d} and Dv {dv} must be below 65536 (one push word)")
    if out.size == 0:
        return
    if mask is not None:
        try:
            mask = np.broadcast_to(mask, (nb, nh, sq, skv))
        except ValueError:
            raise ShapeError(
                f"attention: mask {mask.shape} does not broadcast to {(nb, nh, sq, skv)}"
            ) from None
    dmax = next((m for m in _DMAX if max(d, dv) <= m), _DMAX[-1])
    ops = [be.operand(a) for a in (q, k, v, out)]
    lq, lk, lv, lo = (_layout(o) for o in ops)
    lm = _layout(be.operand(mask)) if mask is not None else (0,) * 5
    loff = be.operand(lse).offset if lse is not None else 0
    push = _push(nb * nh, nh, sq, skv, d | dv << 16, loff, float(scale), *lq, *lk, *lv, *lo, *lm)
    operands = [(q, False), (k, False), (v, False), (mask if mask is not None else q, False)]
    operands += [(out, True), (lse if lse is not None else out, True)]
    wg = _ATT_WG[0] if sq <= _ATT_WG[0] else _ATT_WG[1]
    sg = _shuffle_size(be, d, dmax)
    wg = max(wg, sg)
    # vec4 rows: unit stride along D and every row start a multiple of 4 floats
    vec4 = d % 4 == 0 and dv % 4 == 0 and lk[4] == lv[4] == 1
    vec4 = vec4 and all(x % 4 == 0 for x in lk[:4] + lv[:4])
    spec = (dmax, int(bool(causal)), int(mask is not None), int(sg > 0), sg or 8, int(vec4))
    spec += (int(lse is not None), nh // hk, int(mask is not None and mask.dtype == bool))
    groups = nb * nh * -(-sq // wg) * -(-dv // dmax)
    launch(be, "attention", spec, operands, push, groups_1d(groups, 1), local=wg)


def _shuffle_size(be, d: int, dmax: int) -> int:
    """The subgroup size attention.comp's SHUFFLE way runs with, or 0 for the other way: CPU
    devices with subgroup shuffles (where a load costs a per-lane loop and a shuffle a register
    permute; the shader must run with the reported subgroup size, as gemm's REGBLOCK), q in
    registers (D <= DMAX)."""
    if SHUFFLE is False or (SHUFFLE is None and not be.ctx.is_cpu) or d > dmax:
        return 0
    return subgroup_shuffle_size(be.ctx)
