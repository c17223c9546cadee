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
from ...creation import ones, zeros
from ...errors import DTypeError, ShapeError
from ...ops import elementwise as E
from ...ops import nn as nn_ops
from ...ops import registry
from ...ops.attention import fused_attention
from ...ops.joining import cat
from ...tensor import Tensor
from ._utils import _check_tensor
from .dropout import dropout
from .linear import linear

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
    if dt not in (D.float32, D.float64):
        return None
    if registry.CAPTURE[0] is not None and registry.capturing():
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
        query._requires_grad
        or key._requires_grad
        or value._requires_grad
        or (mask is not None and mask._requires_grad)
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


# ============================================================================= multi-head attention
def multi_head_attention_forward(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    embed_dim_to_check: int,
    num_heads: int,
    in_proj_weight: Tensor | None,
    in_proj_bias: Tensor | None,
    bias_k: Tensor | None,
    bias_v: Tensor | None,
    add_zero_attn: bool,
    dropout_p: float,
    out_proj_weight: Tensor,
    out_proj_bias: Tensor | None,
    training: bool = True,
    key_padding_mask: Tensor | None = None,
    need_weights: bool = True,
    attn_mask: Tensor | None = None,
    use_separate_proj_weight: bool = False,
    q_proj_weight: Tensor | None = None,
    k_proj_weight: Tensor | None = None,
    v_proj_weight: Tensor | None = None,
    static_k: Tensor | None = None,
    static_v: Tensor | None = None,
    average_attn_weights: bool = True,
    is_causal: bool = False,
) -> tuple:
    """The forward of nn.MultiheadAttention as a function, as
    torch.nn.functional.multi_head_attention_forward: query [L, N, E] (unbatched [L, E]), key
    [S, N, kdim] and value [S, N, vdim] projected by in_proj_weight [3E, E] (or q/k/v_proj_weight
    with use_separate_proj_weight) and in_proj_bias [3E]; bias_k / bias_v [1, 1, E] appended to
    the keys and values; static_k / static_v [N*H, S, E/H] replace the projected ones; a zero key
    and value appended with add_zero_attn; dropout on the weights while training; the heads
    joined and projected by out_proj. Returns (output [L, N, E], weights [N, L, S] averaged over
    heads, or [N, H, L, S] with average_attn_weights=False, or None with need_weights=False).

    Masks as PyTorch's: bool True marks what may NOT be attended, float masks are added;
    attn_mask [L, S] or [N*H, L, S], key_padding_mask [N, S]. is_causal is a hint that
    attn_mask is the causal mask (an attn_mask is required with it, as in PyTorch)."""
    _check_tensor("multi_head_attention_forward", query, "query")
    _check_tensor("multi_head_attention_forward", out_proj_weight, "out_proj_weight")
    if is_causal and attn_mask is None:
        raise ValueError(
            "multi_head_attention_forward(): Need attn_mask if specifying the is_causal hint. "
            "You may use the Transformer module method `generate_square_subsequent_mask` to "
            "create this mask."
        )
    e = query.shape[-1] if query.ndim else 0
    if e != embed_dim_to_check:
        raise ShapeError(
            f"multi_head_attention_forward(): was expecting embedding dimension of "
            f"{embed_dim_to_check}, but got {e} (query shape {tuple(query.shape)})"
        )
    if use_separate_proj_weight:
        if q_proj_weight is None or k_proj_weight is None or v_proj_weight is None:
            raise ValueError(
                "multi_head_attention_forward(): use_separate_proj_weight=True needs "
                "q_proj_weight, k_proj_weight and v_proj_weight"
            )
        bs = (None,) * 3 if in_proj_bias is None else in_proj_bias.chunk(3)
        proj = tuple(zip((q_proj_weight, k_proj_weight, v_proj_weight), bs))
    elif in_proj_weight is None:
        raise ValueError(
            "multi_head_attention_forward(): use_separate_proj_weight is False but "
            "in_proj_weight is None"
        )
    else:
        proj = None
    if (bias_k is None) != (bias_v is None):
        raise ValueError("multi_head_attention_forward(): pass both bias_k and bias_v, or neither")
    if bias_k is not None and (static_k is not None or static_v is not None):
        raise ValueError(
            "multi_head_attention_forward(): bias_k / bias_v cannot be added to static keys "
            "and values"
        )
    return _multi_head_attention(
        "multi_head_attention_forward()", query, key, value, num_heads, in_proj_weight,
        in_proj_bias, proj, bias_k, bias_v, add_zero_attn, dropout_p if training else 0.0,
        out_proj_weight, out_proj_bias, key_padding_mask, need_weights, attn_mask,
        static_k, static_v, average_attn_weights, is_causal,
    )  # fmt: skip


def _multi_head_attention(
    name, query, key, value, num_heads, in_proj_weight, in_proj_bias, proj, bias_k, bias_v,
    add_zero_attn, dropout_p, out_proj_weight, out_proj_bias, key_padding_mask, need_weights,
    attn_mask, static_k, static_v, average_attn_weights, is_causal,
) -> tuple:  # fmt: skip
    """The code multi_head_attention_forward and nn.MultiheadAttention share. ``proj`` holds the
    ((weight, bias) x 3) of separate projections, None for the packed in_proj_weight; an
    is_causal without attn_mask applies the causal mask (nn.MultiheadAttention's leniency).
    ``out_proj_weight`` may be a module (callable) instead of a weight tensor."""
    unbatched = query.ndim == 2
    self_attention = query is key and key is value and proj is None
    if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
        raise ShapeError(
            f"{name}: query, key and value must all be 3-D (batched) or 2-D (unbatched), got "
            f"shapes {tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}"
        )
    if unbatched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt, bsz, e = query.shape
    src = key.shape[0]
    ws = (in_proj_weight,) * 3 if proj is None else [w for w, _ in proj]
    edim, kdim, vdim = (w.shape[-1] if w.ndim == 2 else -1 for w in ws)
    if e != edim or key.shape[2] != kdim or value.shape[2] != vdim:
        raise ShapeError(
            f"{name}: expected query, key and value features {edim}, {kdim} and {vdim}, got "
            f"shapes {tuple(query.shape)}, {tuple(key.shape)} and {tuple(value.shape)}"
        )
    h = num_heads
    if h <= 0 or e % h:
        raise ValueError(f"{name}: embed_dim {e} not divisible by num_heads {h}")
    hd = e // h
    rows = 3 * e if proj is not None else in_proj_weight.shape[0]  # one bias per projection row
    if in_proj_bias is not None and tuple(in_proj_bias.shape) != (rows,):
        raise ShapeError(
            f"{name}: in_proj_bias must have shape {(rows,)} (3 * embed_dim, one per row of "
            f"in_proj_weight), got {tuple(in_proj_bias.shape)}"
        )
    if key.shape[:2] != value.shape[:2] or key.shape[1] != bsz:
        raise ShapeError(
            f"{name}: key {tuple(key.shape)} and value {tuple(value.shape)} must share sequence "
            f"length and batch size, and the batch must be the query's {bsz}"
        )
    if self_attention:  # one GEMM for the three projections
        q, k, v = linear(query, in_proj_weight, in_proj_bias).chunk(3, dim=-1)
    else:
        if proj is None:
            ws = in_proj_weight.chunk(3)  # the three gradients meet in one cat
            bs = (None,) * 3 if in_proj_bias is None else in_proj_bias.chunk(3)
            proj = tuple(zip(ws, bs))
        (wq, bq), (wk, bk), (wv, bv) = proj
        q, k, v = linear(query, wq, bq), linear(key, wk, bk), linear(value, wv, bv)
    mask = _float_mask(name, attn_mask, q.dtype, "attn_mask")
    if mask is not None and mask.ndim == 3:
        if tuple(mask.shape) != (bsz * h, tgt, src):
            raise ShapeError(
                f"{name}: a 3-D attn_mask must have shape {(bsz * h, tgt, src)}, got "
                f"{tuple(mask.shape)}"
            )
        mask = mask.reshape(bsz, h, tgt, src)
    elif mask is not None and tuple(mask.shape) != (tgt, src):
        raise ShapeError(
            f"{name}: a 2-D attn_mask must have shape {(tgt, src)}, got {tuple(mask.shape)}"
        )
    kpm = _float_mask(name, key_padding_mask, q.dtype, "key_padding_mask")
    if kpm is not None and tuple(kpm.shape) != (bsz, src):
        raise ShapeError(
            f"{name}: key_padding_mask must have shape {(bsz, src)}, got {tuple(kpm.shape)}"
        )
    if is_causal and kpm is None and not need_weights:
        mask = None  # PyTorch's hint: the fused causal attention replaces the mask
    causal = is_causal and mask is None
    if bias_k is not None:
        k = cat([k, bias_k.expand(1, bsz, e)], 0)
        v = cat([v, bias_v.expand(1, bsz, e)], 0)
        mask, kpm = _pad_last(mask), _pad_last(kpm)
    # [S, N, E] -> [N, H, S, hd]; static keys and values [N*H, S, hd] come in as they are
    q = q.reshape(tgt, bsz, h, hd).permute(1, 2, 0, 3)
    k = _heads(name, "static_k", k, static_k, bsz, h, hd)
    v = _heads(name, "static_v", v, static_v, bsz, h, hd)
    if add_zero_attn:
        z = zeros(bsz, h, 1, hd, dtype=k.dtype)
        z = z if z.device == k.device else z.to(k.device)
        k, v = cat([k, z], 2), cat([v, z], 2)
        mask, kpm = _pad_last(mask), _pad_last(kpm)
    if kpm is not None:
        if kpm.shape[-1] != k.shape[2]:
            raise ShapeError(
                f"{name}: key_padding_mask covers {kpm.shape[-1]} keys, the keys are {k.shape[2]}"
            )
        kpm = kpm.reshape(bsz, 1, 1, kpm.shape[-1])
        mask = kpm if mask is None else mask + kpm
    if need_weights:
        out, weights = _attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=causal)
    else:  # the fused kernels where they apply
        out = scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=causal
        )
    out = out.permute(2, 0, 1, 3).reshape(tgt, bsz, e)  # [L, N, E]
    if isinstance(out_proj_weight, Tensor):
        out = linear(out, out_proj_weight, out_proj_bias)
    else:  # nn.MultiheadAttention's out_proj when it is not a float Linear (quantized)
        out = out_proj_weight(out)
    if unbatched:
        out = out.squeeze(1)
    if not need_weights:
        return out, None
    if average_attn_weights:
        weights = weights.mean(dim=1)
    return out, weights.squeeze(0) if unbatched else weights


def _heads(name: str, what: str, t: Tensor, static: Tensor | None, bsz: int, h: int, hd: int):
    """t [S, N, E] as [N, H, S, hd], or the static [N*H, S, hd] tensor given instead."""
    if static is None:
        return t.reshape(t.shape[0], bsz, h, hd).permute(1, 2, 0, 3)
    if static.ndim != 3 or static.shape[0] != bsz * h or static.shape[2] != hd:
        raise ShapeError(
            f"{name}: {what} must have shape [N*num_heads, S, head_dim] = [{bsz * h}, S, {hd}], "
            f"got {tuple(static.shape)}"
        )
    return static.reshape(bsz, h, static.shape[1], hd)


def _float_mask(name: str, mask, dtype, what: str):
    """PyTorch's canonical mask: a bool mask becomes 0 where False and -inf where True; a float
    mask is kept (cast to dtype); None stays None."""
    if mask is None:
        return None
    if mask.dtype is D.bool_:
        return E.where(mask, float("-inf"), 0.0).to(dtype)
    if not mask.dtype.is_floating_point:
        raise TypeError(f"{name}: {what} must be bool or floating point, got {mask.dtype}")
    return mask.to(dtype)


def _pad_last(mask):
    """mask with a zero column appended on its last dim (for bias_k/v and add_zero_attn)."""
    if mask is None:
        return None
    z = zeros(*mask.shape[:-1], 1, dtype=mask.dtype)
    return cat([mask, z if z.device == mask.device else z.to(mask.device)], -1)
