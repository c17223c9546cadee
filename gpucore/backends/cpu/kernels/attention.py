"""Attention kernels (gpucore/ops/attention.py): the fused forward with each row's logsumexp and
the FlashAttention-2 backward, one C call each (cpu/attention.c, cpu/attention_backward.c)."""

from __future__ import annotations

import numpy as np

from .... import _cpu
from .common import _c, kernel


def _rows(a: np.ndarray) -> np.ndarray:
    """a itself when its last dim has unit stride (what the backward kernel reads), else a
    contiguous copy."""
    if a.shape[-1] <= 1 or a.strides[-1] == a.itemsize:
        return a
    return np.ascontiguousarray(a)


@kernel("scaled_dot_product_attention")
def _sdpa(outs, q, k, v, mask=None, *, scale, causal, with_lse):
    """Tiled online-softmax attention over the strided views in one call; with with_lse also
    the rows' logsumexp, which the backward recomputes the probabilities from."""
    out, lse = outs
    hg = q.shape[1] // k.shape[1]
    if with_lse:
        _cpu.attention_forward(q, k, v, mask, out, lse, scale, int(causal), hg)
    elif hg == 1:
        _cpu.attention(q, k, v, mask, out, scale, int(causal), 0)
    else:
        _cpu.attention_forward(
            q, k, v, mask, out, np.empty(q.shape[:3], q.dtype), scale, int(causal), hg
        )


@kernel("scaled_dot_product_attention_backward")
def _sdpa_backward(outs, q, k, v, out, g, lse, mask=None, *, scale, causal):
    """dq, dk, dv in one call, the probabilities recomputed per tile from q, k and lse."""
    dq, dk, dv = outs
    hg = q.shape[1] // k.shape[1]
    _cpu.attention_backward(
        _rows(q),
        _rows(k),
        _rows(v),
        mask,
        _rows(out),
        _rows(g),
        _c(lse),
        dq,
        dk,
        dv,
        scale,
        int(causal),
        hg,
    )
