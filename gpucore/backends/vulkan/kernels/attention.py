"""Attention kernels (gpucore/ops/attention.py): the forward of scaled_dot_product_attention
through shaders/attention.comp (fused.attention, the runtime's shader: one dispatch, online
softmax, any strides, grouped-query heads, bool or float masks, each row's logsumexp when
with_lse) and its FlashAttention-2 backward through shaders/attention_backward.comp (three
dispatches: each query row's (lse, D = dO . O), dq per query row, then dk, dv per key row; no
atomics, no Sq x Skv matrix). float32 only; the backward takes D, Dv <= 128 (its register
rows), the rest goes to the C extension. On lavapipe, B 2, H 4, S 256, D 64, causal: backward
206 ms (subgroup shuffles; 1364 ms without), the composition of matmuls and softmax 448 ms."""

from __future__ import annotations

import numpy as np

from .... import dtypes as D
from .common import _push, contiguous, groups_1d, kernel, launch, local_size
from .fused import attention as _attention
from .gemm import subgroup_shuffle_size

# attention_backward.comp's register row lengths (DMAX): each its own pipeline.
_DMAX = (16, 64, 128)
# attention_backward.comp's way of reading the walked rows: None picks per device (SHUFFLE on
# CPU devices with subgroup shuffles, as attention.comp); True / False force it (tests).
SHUFFLE: bool | None = None
# Rows per workgroup of its passes 1 and 2: the smaller one for short sequences.
_WG = (16, 64)


def _float32_or_bool_mask(inputs, mask_at: int) -> bool:
    for i, t in enumerate(inputs):
        if t._dtype is not D.float32 and not (i == mask_at and t._dtype is D.bool_):
            return False
    return True


def _accepts(inputs, specs) -> bool:
    # D and Dv share one push-constant word (16 bits each)
    small = inputs[0].shape[3] <= 0xFFFF and inputs[2].shape[3] <= 0xFFFF
    return small and _float32_or_bool_mask(inputs, 3) and specs[0][1] is D.float32


@kernel("scaled_dot_product_attention", accepts=_accepts)
def _sdpa(be, outs, q, k, v, mask=None, *, scale, causal, with_lse):
    _attention(
        be, outs[0], q, k, v, mask, float(scale), bool(causal), outs[1] if with_lse else None
    )


def _accepts_backward(inputs, specs) -> bool:
    q, v = inputs[0], inputs[2]
    return _float32_or_bool_mask(inputs, 6) and max(q.shape[3], v.shape[3]) <= _DMAX[-1]


@kernel("scaled_dot_product_attention_backward", accepts=_accepts_backward)
def _sdpa_backward(be, outs, q, k, v, out, g, lse, mask=None, *, scale, causal):
    """dq, dk, dv in three dispatches: per query row (lse_i, D_i = dO_i . O_i) into a scratch
    array, per query row dq, per key row dk and dv (summed over the query heads sharing it)."""
    dq, dk, dv = outs
    nb, nh, sq, d = q.shape
    hk, skv, dvn = k.shape[1], k.shape[2], v.shape[3]
    q, k, v, out, g, lse = (contiguous(be, a) for a in (q, k, v, out, g, lse))
    t = be.empty_array((nb, nh, sq, 2), np.float32)
    if mask is not None:
        mask = np.broadcast_to(mask, (nb, nh, sq, skv))
        mop = be.operand(mask)
        lm = (mop.offset, *mop.strides)
    else:
        lm = (0,) * 5
    dmax = next(m for m in _DMAX if max(d, dvn) <= m)
    sg = 0
    if SHUFFLE or (SHUFFLE is None and be.ctx.is_cpu):
        sg = subgroup_shuffle_size(be.ctx)
    vec4 = d % 4 == 0 and dvn % 4 == 0
    vec4 = vec4 and all(be.operand(a).offset % 4 == 0 for a in (q, k, v, g))
    spec = (dmax, int(bool(causal)), int(mask is not None))
    spec += (int(mask is not None and mask.dtype == bool), nh // hk)
    head = [(q, False), (k, False), (v, False), (g, False), (t, True), (mask, False)]
    if mask is None:
        head[5] = (q, False)
    passes = (  # (rows, groups, bindings 6 and 7)
        (nb * nh * sq, None, (out, False), (lse, False)),
        (sq, nb * nh, (dq, True), (t, False)),
        (skv, nb * hk, (dk, True), (dv, True)),
    )
    for i, (rows, heads, a6, a7) in enumerate(passes):
        if not rows:
            continue
        ops = head[:4] + [(t, i == 0), head[5], a6, a7]
        offs = [be.operand(a).offset for a, _ in ops[:5] + ops[6:]]
        push = _push(nb * nh, nh, sq, skv, d, dvn, float(scale), *offs, *lm)
        if heads is None:  # row statistics: one invocation per row
            wg = local_size(be)
            groups = groups_1d(rows, wg)
        else:  # a workgroup per (head, tile of rows)
            wg = max(_WG[0] if rows <= _WG[0] else _WG[1], sg)
            groups = groups_1d(heads * -(-rows // wg), 1)
        full = spec + (i, int(sg > 0), sg or 8, int(vec4))
        launch(be, "attention_backward", full, ops, push, groups, local=wg)
