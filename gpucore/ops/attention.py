"""Fused scaled dot-product attention for eager training: the forward op (output and the
per-row logsumexp) and its backward op.

scaled_dot_product_attention(q, k, v[, mask]; scale, causal, with_lse) over q [B, H, Sq, D],
k [B, H / g, Skv, D], v [B, H / g, Skv, Dv] (g query heads per key/value head: grouped-query
attention, head h reads key/value head h // g) and a mask of at most 4 dims broadcast to
[B, H, Sq, Skv] (bool: True keeps the score; float: added to it). causal keeps key j <= query i
(top-left aligned, PyTorch's is_causal), together with the mask if both are given. Outputs:
softmax(q k^T * scale + mask) v [B, H, Sq, Dv], and, with with_lse, lse [B, H, Sq], each row's
logsumexp of its scaled, masked scores (+inf for a row whose every score is masked, whose output
is 0 as PyTorch 2.13's safe softmax gives; empty without with_lse).

Its backward is scaled_dot_product_attention_backward (FlashAttention-2: the probabilities
recomputed from q, k and lse, no Sq x Skv matrix; in C per tile, on Vulkan per query row then
per key row) when the gradients are wanted as values; when they must themselves be
differentiable (create_graph), when the float mask needs a gradient or when no lse was kept,
the gradients are the composition ``attention_grads`` of differentiable ops, so double backward
is exact.

gpucore.nn.functional.scaled_dot_product_attention decides when to use this op (see there).
kernels: backends/cpu/kernels/attention.py (cpu/attention.c, cpu/attention_backward.c),
backends/vulkan/kernels/attention.py (shaders/attention.comp, shaders/attention_backward.comp).
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..autograd.grad_mode import _state as _grad_state
from ..creation import tensor as _tensor
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from . import elementwise as E
from . import nn as nn_ops
from .registry import apply, defop
from .samples import Sample, uniform

_OP = "scaled_dot_product_attention"


def _check(op, q, k, v, mask):
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ShapeError(f"{op}: q, k and v must be 4-D [B, H, S, D], got {q.shape}, {k.shape}")
    b, h, sq, d = q.shape
    hk, skv = k.shape[1], k.shape[2]
    if hk < 1 or h % hk or tuple(k.shape) != (b, hk, skv, d) or tuple(v.shape[:3]) != (b, hk, skv):
        raise ShapeError(
            f"{op}: q {tuple(q.shape)}, k {tuple(k.shape)} and v {tuple(v.shape)} do not fit "
            "([B, H, Sq, D], [B, H / g, Skv, D], [B, H / g, Skv, Dv])"
        )
    if k.dtype is not q.dtype or v.dtype is not q.dtype or not q.dtype.is_floating_point:
        raise DTypeError(f"{op}: q, k and v must share one float dtype, got {q.dtype}, {k.dtype}")
    if mask is not None:
        if mask.dtype is not D.bool_ and mask.dtype is not q.dtype:
            raise DTypeError(f"{op}: the mask must be bool or {q.dtype}, got {mask.dtype}")
        try:
            if mask.ndim > 4:
                raise ValueError
            np.broadcast_to(np.empty(tuple(mask.shape), np.int8), (b, h, sq, skv))
        except ValueError:
            raise ShapeError(
                f"{op}: the mask {tuple(mask.shape)} does not broadcast to {(b, h, sq, skv)}"
            ) from None


def _sdpa_infer(q, k, v, mask=None, *, scale, causal, with_lse):
    _check(_OP, q, k, v, mask)
    b, h, sq, _ = q.shape
    lse = (b, h, sq) if with_lse else (0,)
    return [((b, h, sq, v.shape[3]), q.dtype), (lse, q.dtype)]


def _causal_keep(q: Tensor, sq: int, skv: int) -> Tensor:
    """[Sq, Skv] bool, True on and below the diagonal (top-left aligned)."""
    return _tensor(np.tri(sq, skv, dtype=bool), device=q.device)


def attention_grads(q, k, v, mask, g, scale, causal, need) -> tuple:
    """(dq, dk, dv, dmask) of scaled_dot_product_attention as a composition of differentiable
    ops (matmul, softmax, where, sums) on the inputs' backend: the backward that double backward
    differentiates, and the one for a float mask needing a gradient or tensors on a device.
    dmask is None unless need[3] (a float mask's gradient: dS summed to its shape)."""
    hg = q.shape[1] // k.shape[1]
    kr = k.repeat_interleave(hg, dim=1) if hg > 1 else k
    vr = v.repeat_interleave(hg, dim=1) if hg > 1 else v
    s = q.matmul(kr.mT) * scale
    keep = None
    if mask is not None:
        if mask.dtype is D.bool_:
            keep = mask
        else:
            s = s + mask
    if causal:
        c = _causal_keep(q, q.shape[2], k.shape[2])
        keep = c if keep is None else E.logical_and(keep, c)
    if keep is not None:
        s = E.where(keep, s, float("-inf"))
    # fully masked rows: softmax over zeros, then zeroed (output and gradients 0 there)
    dead = (s.detach() == float("-inf")).all(dim=-1, keepdim=True)
    p = E.where(dead, 0.0, nn_ops.softmax(E.where(dead, 0.0, s), -1))
    dp = g.matmul(vr.mT)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = ds.matmul(kr) * scale if need[0] else None
    dk = dv = None
    if need[1]:
        dk = ds.mT.matmul(q) * scale
        if hg > 1:
            dk = dk.reshape(k.shape[0], k.shape[1], hg, *k.shape[2:]).sum(2)
    if need[2]:
        dv = p.mT.matmul(g)
        if hg > 1:
            dv = dv.reshape(v.shape[0], v.shape[1], hg, *v.shape[2:]).sum(2)
    dmask = None
    if len(need) > 3 and need[3]:
        dmask = ds.sum_to_size(*mask.shape)
    return dq, dk, dv, dmask


def _sdpa_bwd(ctx, g):
    q, k, v, mask, out, lse = ctx.saved
    a = ctx.attrs
    need = ctx.needs_input_grad
    mask_grad = len(need) > 3 and need[3]
    if (
        _grad_state.enabled  # create_graph: gradients that are themselves differentiable
        or mask_grad
        or not a["with_lse"]
    ):
        grads = attention_grads(q, k, v, mask, g, a["scale"], a["causal"], need)
        return grads[: len(need)]
    ins = (q, k, v, out, g, lse) + (() if mask is None else (mask,))
    dq, dk, dv = apply(SDPA_BACKWARD, *ins, scale=a["scale"], causal=a["causal"])
    return (dq, dk, dv) + ((None,) if mask is not None else ())


def _sdpa_backward_infer(q, k, v, out, g, lse, mask=None, *, scale, causal):
    _check(_OP + "_backward", q, k, v, mask)
    b, h, sq, _ = q.shape
    if tuple(g.shape) != tuple(out.shape) or tuple(out.shape) != (b, h, sq, v.shape[3]):
        raise ShapeError(f"{_OP}_backward: g {g.shape} and out {out.shape} must be [B, H, Sq, Dv]")
    if tuple(lse.shape) != (b, h, sq):
        raise ShapeError(f"{_OP}_backward: lse {lse.shape} must be [B, H, Sq] = {(b, h, sq)}")
    return [(tuple(q.shape), q.dtype), (tuple(k.shape), q.dtype), (tuple(v.shape), q.dtype)]


# ----------------------------------------------------------------------------- samples
def _np_probs(q, k, mask, scale, causal):
    """(P, lse, keys repeated per query head) of the float64 reference."""
    hg = q.shape[1] // k.shape[1]
    kr = np.repeat(k, hg, axis=1)
    s = q @ kr.swapaxes(-1, -2) * scale
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    if causal:
        s = np.where(np.tri(s.shape[2], s.shape[3], dtype=bool), s, -np.inf)
    m = s.max(-1, keepdims=True)
    dead = m == -np.inf
    e = np.exp(s - np.where(dead, 0.0, m))
    tot = e.sum(-1, keepdims=True)
    p = np.where(dead, 0.0, e / np.where(dead, 1.0, tot))
    lse = np.where(dead, np.inf, m + np.log(np.where(dead, 1.0, tot)))[..., 0]
    return p, lse, hg


def _np_sdpa(q, k, v, mask=None, *, scale, causal, with_lse):
    p, lse, hg = _np_probs(q, k, mask, scale, causal)
    out = p @ np.repeat(v, hg, axis=1)
    return out, (lse if with_lse else np.zeros(0))


def _np_sdpa_backward(q, k, v, out, g, lse, mask=None, *, scale, causal):
    p, _, hg = _np_probs(q, k, mask, scale, causal)
    kr, vr = np.repeat(k, hg, axis=1), np.repeat(v, hg, axis=1)
    dp = g @ vr.swapaxes(-1, -2)
    ds = p * (dp - (g * out).sum(-1, keepdims=True))
    dq = ds @ kr * scale
    dk = (ds.swapaxes(-1, -2) @ q * scale).reshape(*k.shape[:2], hg, *k.shape[2:]).sum(2)
    dv = (p.swapaxes(-1, -2) @ g).reshape(*v.shape[:2], hg, *v.shape[2:]).sum(2)
    return dq, dk, dv


# (q shape, k heads, Skv, Dv, mask: None / "bool" / "float" / "dead" and its shape, causal)
_CASES = [
    ((1, 2, 5, 4), 2, 5, 4, None, None, False),
    ((2, 2, 7, 3), 2, 6, 5, None, None, True),  # Sq != Skv, Dv != D
    ((1, 4, 6, 4), 2, 9, 4, None, None, True),  # grouped-query attention
    ((2, 2, 4, 3), 2, 5, 3, "bool", (2, 1, 4, 5), False),
    ((1, 2, 5, 4), 1, 5, 2, "float", (5, 5), True),
    ((2, 1, 6, 3), 1, 4, 3, "dead", (1, 6, 4), False),  # rows with every key masked
]


def _sdpa_samples(backward=False):
    out = []
    for i, (qs, hk, skv, dv, mkind, mshape, causal) in enumerate(_CASES):
        b, h, sq, d = qs
        q = uniform(*qs, seed=i)
        k = uniform(b, hk, skv, d, seed=i + 10)
        v = uniform(b, hk, skv, dv, seed=i + 20)
        mask = ()
        if mkind == "float":
            mask = (uniform(*mshape, seed=i + 30),)
        elif mkind is not None:
            m = np.random.default_rng(i).random(mshape) < 0.7
            if mkind == "dead":
                m[..., 1, :] = False
            mask = (m,)
        scale = 1.0 / np.sqrt(d) * (1.5 if i % 2 else 1.0)
        attrs = {"scale": float(scale), "causal": causal}
        if not backward:
            for with_lse in (True, False):
                out.append(Sample(q, k, v, *mask, ref=_np_sdpa, with_lse=with_lse, **attrs))
            continue
        o, lse = _np_sdpa(q, k, v, *mask, with_lse=True, **attrs)
        g = uniform(*o.shape, seed=i + 40)
        out.append(Sample(q, k, v, o, g, lse, *mask, ref=_np_sdpa_backward, **attrs))
    return out


SDPA = defop(
    _OP,
    infer=_sdpa_infer,
    save_inputs=(0, 1, 2, 3),
    save_outputs=(0, 1),
    backward=_sdpa_bwd,
    samples=_sdpa_samples,
)

# dq, dk, dv in one pass; no backward of its own: the forward's backward takes the composition
# when a graph of the gradients is wanted.
SDPA_BACKWARD = defop(
    _OP + "_backward",
    infer=_sdpa_backward_infer,
    samples=lambda: _sdpa_samples(backward=True),
)


def fused_attention(
    q: Tensor, k: Tensor, v: Tensor, mask, scale: float, causal: bool, with_lse: bool
) -> Tensor:
    """The output of the fused op on 4-D q, k, v (shapes as the module docstring; validated by
    gpucore.nn.functional.scaled_dot_product_attention, which decides when to use it)."""
    ins = (q, k, v) if mask is None else (q, k, v, mask)
    return apply(SDPA, *ins, scale=float(scale), causal=bool(causal), with_lse=bool(with_lse))[0]
