"""scaled_dot_product_attention: the fused op (gpucore/ops/attention.py: the tiled online-softmax
C kernel forward and the FlashAttention-2 C backward; the attention shader on Vulkan) where it
applies, else a composition of registry ops (matmul, where, softmax) that autograd
differentiates with no backward of its own and that runs on every backend.

PyTorch's semantics: a bool attn_mask keeps the scores where it is True, a float one is added to
them; is_causal keeps the lower triangle (top-left aligned, as PyTorch); enable_gqa repeats the
key/value heads to the query's; a row whose every score is masked gives zeros (and zero
gradients), as PyTorch's safe softmax.

The composition runs for dropout_p > 0, dtypes other than float32/float64, empty tensors, a
non-finite scale, masks with more dims than the query, and while a model is traced
(gpucore.runtime's capture: its passes fuse the composition into their own attention node). On
Vulkan tensors the fused op runs as on the CPU (the attention shaders: forward with the
logsumexp, FlashAttention-2 backward), float32 only: other dtypes there take the composition
when gradients are wanted.
"""

from __future__ import annotations

import math

import numpy as np

from ... import dtypes as D
from ...autograd.grad_mode import _state as _grad_state
from ...creation import ones
from ...errors import DTypeError, ShapeError
from ...ops import elementwise as E
from ...ops import nn as nn_ops
from ...ops import registry
from ...ops.attention import fused_attention
from ...tensor import Tensor
from ._utils import _check_tensor
from .dropout import dropout

_OP = "scaled_dot_product_attention"


def _check_shapes(query: Tensor, key: Tensor, value: Tensor, enable_gqa: bool) -> None:
    if query.ndim < 2 or key.ndim != query.ndim or value.ndim != query.ndim:
        raise ShapeError(
            f"{_OP}(): query, key and value must have the same number of dims (>= 2, "
            f"[..., L, E]), got shapes {tuple(query.shape)}, {tuple(key.shape)} and "
            f"{tuple(value.shape)}"
        )
    if query.shape[-1] != key.shape[-1]:
        raise ShapeError(
            f"{_OP}(): query's last dim {query.shape[-1]} differs from key's {key.shape[-1]} "
            f"(shapes {tuple(query.shape)} and {tuple(key.shape)})"
        )
    if key.shape[-2] != value.shape[-2]:
        raise ShapeError(
            f"{_OP}(): key and value must have the same sequence length (dim -2), got shapes "
            f"{tuple(key.shape)} and {tuple(value.shape)}"
        )
    if enable_gqa and query.ndim >= 3:
        hq, hk, hv = query.shape[-3], key.shape[-3], value.shape[-3]
        if hk == 0 or hv == 0 or hq % hk or hq % hv:
            raise ShapeError(
                f"{_OP}(): with enable_gqa the query's heads ({hq}) must be a multiple of the "
                f"key's ({hk}) and the value's ({hv})"
            )


def _repeat_heads(t: Tensor, heads: int) -> Tensor:
    """t [..., Hkv, S, E] with each head repeated to give [..., heads, S, E] (GQA)."""
    n = heads // t.shape[-3]
    return t if n == 1 else t.repeat_interleave(n, dim=-3)


def _causal_mask(query: Tensor, key: Tensor) -> Tensor:
    """[L, S] bool, True on and below the diagonal (PyTorch's top-left aligned causal mask)."""
    keep = ones(query.shape[-2], key.shape[-2], dtype=D.bool_).tril()
    return keep if query.device == keep.device else keep.to(query.device)


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Tensor:
    """softmax(query @ key^T * scale + mask) @ value over query [..., L, E], key [..., S, E] and
    value [..., S, Ev], giving [..., L, Ev].

    attn_mask broadcasts to [..., L, S]: bool keeps where True, float is added. is_causal keeps
    the lower triangle (no attn_mask allowed with it). scale defaults to 1/sqrt(E). dropout_p
    drops attention weights (always, as PyTorch: pass 0.0 in eval). enable_gqa repeats key and
    value heads (dim -3) to the query's number of heads.
    """
    _validate(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa)
    if dropout_p == 0.0:
        out = _fused(query, key, value, attn_mask, is_causal, scale, enable_gqa)
        if out is not None:
            return out
    return _attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)[0]


def _validate(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa=False) -> None:
    _check_tensor(_OP, query, "query")
    _check_tensor(_OP, key, "key")
    _check_tensor(_OP, value, "value")
    if key.dtype is not query.dtype or value.dtype is not query.dtype:
        raise DTypeError(
            f"{_OP}(): query, key and value must share one dtype, got {query.dtype}, "
            f"{key.dtype} and {value.dtype}"
        )
    _check_shapes(query, key, value, enable_gqa)
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"{_OP}(): dropout_p must be in [0, 1], got {dropout_p}")
    if is_causal and attn_mask is not None:
        raise ValueError(f"{_OP}(): pass either attn_mask or is_causal=True, not both")
    if attn_mask is not None and not isinstance(attn_mask, Tensor):
        raise TypeError(
            f"{_OP}(): attn_mask must be a gpucore Tensor, got {type(attn_mask).__name__}"
        )


def _fused(query, key, value, attn_mask, is_causal, scale, enable_gqa):
    """The output through the fused op on [B, H, S, E] views, or None where the composition
    must run (see the module docstring)."""
    dt = query.dtype
    n = query.ndim
    if registry.CAPTURE[0] is not None or dt not in (D.float32, D.float64):
        return None
    if not (query.numel() and key.numel() and value.numel()):
        return None
    e = query.shape[-1]
    sf = 1.0 / math.sqrt(e) if scale is None else float(scale)
    if not math.isfinite(sf):
        return None
    mask = attn_mask
    if mask is not None:
        if mask.ndim > n or not (mask.dtype is D.bool_ or mask.dtype.is_floating_point):
            return None
        if mask.dtype is not D.bool_ and mask.dtype is not dt:
            mask = mask.to(dt)
    # batch dims (all but the last three), heads (dim -3), broadcast as matmul would
    lead = [t.shape[:-3] if n > 3 else () for t in (query, key, value)]
    heads = [t.shape[-3] if n > 2 else 1 for t in (query, key, value)]
    try:
        batch = tuple(np.broadcast_shapes(*lead))
        if enable_gqa and n > 2:
            if heads[1] != heads[2]:
                return None
            h, hk = heads[0], heads[1]
        else:
            h = hk = np.broadcast_shapes(*[(x,) for x in heads])[0]
        if mask is not None:
            mshape = np.broadcast_shapes(
                tuple(mask.shape), batch + (h, query.shape[-2], key.shape[-2])
            )
            if len(mshape) != len(batch) + 3:
                return None
    except ValueError:
        return None  # the composition raises its own error
    sq, skv, ev = query.shape[-2], key.shape[-2], value.shape[-1]
    nb = math.prod(batch)

    def four(t, heads_, s, d):
        return t.expand(*batch, heads_, s, d).reshape(nb, heads_, s, d)

    q = four(query if n > 2 else query.unsqueeze(0), h, sq, e)
    k = four(key if n > 2 else key.unsqueeze(0), hk, skv, e)
    v = four(value if n > 2 else value.unsqueeze(0), hk, skv, ev)
    if mask is not None and (len(batch) > 1 or mask.ndim > 4):
        mask = mask.expand(*batch, h, sq, skv).reshape(nb, h, sq, skv)
    grads = _grad_state.enabled and (
        query.requires_grad
        or key.requires_grad
        or value.requires_grad
        or (mask is not None and mask.requires_grad)
    )
    if grads and dt is not D.float32 and any(t._dev is not None for t in (q, k, v)):
        return None  # the shaders are float32: keep the composition's work on the device
    out = fused_attention(q, k, v, mask, sf, is_causal, grads)
    return out.reshape(*batch, h, sq, ev) if n > 2 else out.reshape(sq, ev)


def _attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> tuple:
    """(output, attention weights after dropout) of scaled_dot_product_attention; the weights
    serve nn.MultiheadAttention's need_weights."""
    _validate(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa)
    if enable_gqa and query.ndim >= 3:
        key = _repeat_heads(key, query.shape[-3])
        value = _repeat_heads(value, query.shape[-3])
    e = query.shape[-1]
    # 1/sqrt(0) is inf in PyTorch too (its scores are then NaN); no ZeroDivisionError here
    scale_factor = (1.0 / math.sqrt(e) if e else math.inf) if scale is None else float(scale)
    scores = query.matmul(key.transpose(-2, -1)) * scale_factor
    keep = None
    if is_causal:
        keep = _causal_mask(query, key)
    elif attn_mask is not None:
        try:
            np.broadcast_shapes(tuple(attn_mask.shape), tuple(scores.shape))
        except ValueError:
            raise ShapeError(
                f"{_OP}(): attn_mask of shape {tuple(attn_mask.shape)} does not broadcast to the "
                f"attention scores [..., L, S] of shape {tuple(scores.shape)}"
            ) from None
        if attn_mask.dtype is D.bool_:
            keep = attn_mask
        elif attn_mask.dtype.is_floating_point:
            scores = scores + attn_mask.to(scores.dtype)
        else:
            raise DTypeError(
                f"{_OP}(): attn_mask must be bool or floating point, got {attn_mask.dtype}"
            )
    if keep is not None:
        scores = E.where(keep, scores, float("-inf"))
    if attn_mask is not None:
        # Rows masked everywhere would give 0/0: softmax over zeros instead, then zero them, so
        # the output and the gradients are 0 there (PyTorch's safe softmax).
        dead = (scores.detach() == float("-inf")).all(dim=-1, keepdim=True)
        scores = E.where(dead, 0.0, scores)
        weights = E.where(dead, 0.0, nn_ops.softmax(scores, -1))
    else:
        weights = nn_ops.softmax(scores, -1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, training=True)
    return weights.matmul(value), weights
