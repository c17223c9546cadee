"""Attention (opset 23, with the window and padding inputs of later opsets): a composition of
gpucore ops following ONNX's reference: 3-D inputs split into heads, past key / value
concatenated, the mask (boolean or additive), causal, sliding-window and padding biases summed,
grouped-query heads repeated, softcap, softmax (fully masked rows give 0), and the optional
present key / value and QK outputs.
"""

from __future__ import annotations

import math

import numpy as np

from ...dtypes import bool_, int64
from ...nn import functional as F
from ..proto import GPUCORE_TYPES
from .common import gc, table

HANDLERS, handles = table()


def _heads(t, n: int):
    """[B, S, n * D] -> [B, n, S, D]."""
    b, s, hidden = (int(d) for d in t.shape)
    return t.reshape(b, s, n, hidden // n).permute(0, 2, 1, 3)


def _additive(ctx, mask, dtype, kv: int):
    """The attention mask as an additive bias of ``dtype`` (False -> -inf), padded with -inf
    to ``kv`` keys."""
    m = ctx.tensor(mask)
    if m.dtype is bool_:
        zero = ctx.tensor(np.zeros((), dtype.np))
        m = gc.where(m, zero, ctx.tensor(np.array(-np.inf, dtype.np)))
    elif m.dtype is not dtype:
        m = m.to(dtype)
    short = kv - int(m.shape[-1])
    if short > 0:
        pad = [int(s) for s in m.shape[:-1]] + [short]
        m = gc.cat([m, ctx.tensor(np.full(pad, -np.inf, dtype.np))], -1)
    return m


def _frontier(ctx, q: int, kv: int, offset, left: int, right: int, causal: bool, np_dt):
    """The causal / sliding-window bias: query i sees key j when j <= i + offset (causal) and
    within the window around i + offset. ``offset``: an int, or a [B] tensor (per batch)."""
    i = np.arange(q).reshape(q, 1)
    j = np.arange(kv).reshape(1, kv)
    if isinstance(offset, int):
        diff = i + offset - j
        allowed = np.ones((q, kv), bool)
        if causal:
            allowed &= diff >= 0
        if left >= 0:
            allowed &= diff <= left
        if right >= 0:
            allowed &= -diff <= right
        return ctx.tensor(np.where(allowed, 0.0, -np.inf).astype(np_dt))
    diff = offset.reshape(-1, 1, 1, 1) + ctx.tensor(i - j)  # [B, 1, q, kv]
    allowed = None
    for keep in (
        diff >= 0 if causal else None,
        diff <= left if left >= 0 else None,
        -diff <= right if right >= 0 else None,
    ):
        if keep is not None:
            allowed = keep if allowed is None else gc.logical_and(allowed, keep)
    zero = ctx.tensor(np.zeros((), np_dt))
    return gc.where(allowed, zero, ctx.tensor(np.array(-np.inf, np_dt)))


@handles("Attention")
def attention(ctx, node, ins):
    """Attention(Q, K, V, attn_mask, past_key, past_value, nonpad_kv_seqlen) -> Y,
    present_key, present_value, qk_matmul_output."""
    ins = list(ins) + [None] * (7 - len(ins))
    q, k, v = (ctx.tensor(t) for t in ins[:3])
    mask, past_k, past_v, nonpad = ins[3:7]
    rank = q.ndim
    if rank == 3:
        q = _heads(q, int(ctx.attr("q_num_heads")))
        k = _heads(k, int(ctx.attr("kv_num_heads")))
        v = _heads(v, int(ctx.attr("kv_num_heads")))
    else:
        ctx.attr("q_num_heads", None)
        ctx.attr("kv_num_heads", None)
    dt = q.dtype
    scale = ctx.attr("scale", None)
    scale = 1.0 / math.sqrt(int(q.shape[3])) if scale is None else float(scale)
    s = float(np.sqrt(np.float64(scale)).astype(dt.np))  # on Q and K each, as the reference
    if (past_k is None) != (past_v is None):
        raise ctx.invalid("past_key and past_value must come together")
    if past_k is not None:
        k = gc.cat([ctx.tensor(past_k), k], 2)
        v = gc.cat([ctx.tensor(past_v), v], 2)
    present_k, present_v = k, v
    nq, nkv = int(q.shape[2]), int(k.shape[2])
    causal = bool(ctx.attr("is_causal", 0))
    left, right = int(ctx.attr("left_window_size", -1)), int(ctx.attr("right_window_size", -1))
    bias = None if mask is None else _additive(ctx, mask, dt, nkv)
    if causal or left >= 0 or right >= 0:
        if nonpad is not None and past_k is None:
            offset = ctx.tensor(nonpad).to(int64) - nq
        else:
            offset = int(past_k.shape[2]) if past_k is not None else 0
        frontier = _frontier(ctx, nq, nkv, offset, left, right, causal, dt.np)
        bias = frontier if bias is None else bias + frontier
    if nonpad is not None:
        lengths = ctx.tensor(nonpad).to(int64).reshape(-1, 1, 1, 1)
        keep = ctx.tensor(np.arange(nkv, dtype=np.int64)) < lengths
        zero = ctx.tensor(np.zeros((), dt.np))
        pad = gc.where(keep, zero, ctx.tensor(np.array(-np.inf, dt.np)))
        bias = pad if bias is None else bias + pad
    hq, hk = int(q.shape[1]), int(k.shape[1])
    if hq != hk:
        if hq % hk:
            raise ctx.invalid(f"{hq} query heads for {hk} key / value heads")
        k = gc.repeat_interleave(k, hq // hk, dim=1)
        v = gc.repeat_interleave(v, hq // hk, dim=1)
    qk = (q * s).matmul((k * s).transpose(-1, -2))
    softcap = float(ctx.attr("softcap", 0.0))
    if softcap > 0:
        qk = (qk / softcap).tanh() * softcap
    scores = qk if bias is None else qk + bias
    mode = int(ctx.attr("qk_matmul_output_mode", 0))
    precision = int(ctx.attr("softmax_precision", 0))
    work = scores
    if precision and GPUCORE_TYPES.get(precision) not in (None, dt):
        work = scores.to(GPUCORE_TYPES[precision])
    probs = F.softmax(work, dim=-1)
    if bias is not None:  # rows whose every key is masked attend to nothing
        dead = bias.amax(-1, keepdim=True) == float("-inf")
        probs = gc.where(dead, ctx.tensor(np.zeros((), probs.dtype.np)), probs)
    probs = probs.to(dt) if probs.dtype is not dt else probs
    y = probs.matmul(v)
    if rank == 3:
        b, h, sq, d = (int(x) for x in y.shape)
        y = y.permute(0, 2, 1, 3).reshape(b, sq, h * d)
    qk_out = {2: scores, 3: probs}.get(mode, qk)
    return [y, present_k, present_v, qk_out]


@handles("RotaryEmbedding")
def rotary_embedding(ctx, node, ins):
    """RotaryEmbedding(input, cos_cache, sin_cache, position_ids; interleaved,
    rotary_embedding_dim, num_heads) of a [B, H, S, D] or [B, S, H * D] input."""
    x = ctx.tensor(ins[0])
    cos, sin = ctx.tensor(ins[1]), ctx.tensor(ins[2])
    pos = ins[3] if len(ins) > 3 else None
    interleaved = bool(ctx.attr("interleaved", 0))
    shape = [int(s) for s in x.shape]
    if x.ndim == 4:
        t = x.permute(0, 2, 1, 3)  # [B, S, H, D]
    else:
        heads = int(ctx.attr("num_heads", 0))
        if heads <= 0:
            raise ctx.invalid("a 3-D input needs num_heads")
        t = x.reshape(shape[0], shape[1], heads, shape[2] // heads)
    d = int(t.shape[3])
    rot = int(ctx.attr("rotary_embedding_dim", 0)) or d
    if pos is not None:  # caches [max positions, rot / 2] read at the positions: [B, S, rot / 2]
        idx = ctx.tensor(pos).to(int64)
        b, s = (int(n) for n in idx.shape)
        cos = gc.index_select(cos, 0, idx.reshape(-1)).reshape(b, s, rot // 2)
        sin = gc.index_select(sin, 0, idx.reshape(-1)).reshape(b, s, rot // 2)
    cos, sin = cos.unsqueeze(2), sin.unsqueeze(2)
    x_rot = t.narrow(3, 0, rot)
    if interleaved:
        pairs = x_rot.reshape(*[int(n) for n in x_rot.shape[:3]], rot // 2, 2)
        x1, x2 = pairs[..., 0], pairs[..., 1]
    else:
        x1, x2 = x_rot.narrow(3, 0, rot // 2), x_rot.narrow(3, rot // 2, rot // 2)
    real = cos * x1 - sin * x2
    imag = sin * x1 + cos * x2
    if interleaved:
        rotated = gc.stack([real, imag], -1).reshape(*[int(n) for n in x_rot.shape])
    else:
        rotated = gc.cat([real, imag], -1)
    out = rotated if rot == d else gc.cat([rotated, t.narrow(3, rot, d - rot)], -1)
    return out.permute(0, 2, 1, 3) if x.ndim == 4 else out.reshape(*shape)


@handles("SwiGLU")
def swiglu(ctx, node, ins):
    """SwiGLU(A, B; alpha): A * sigmoid(alpha * A) * B."""
    a, b = ctx.tensor(ins[0]), ctx.tensor(ins[1])
    alpha = float(ctx.attr("alpha", 1.0))
    return a * (a * alpha).sigmoid() * b
