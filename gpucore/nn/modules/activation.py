"""Activation modules: ReLU, LeakyReLU, Sigmoid, Tanh, GELU, Softmax, LogSoftmax, and SiLU, Mish,
ELU, SELU, CELU, Softplus, Hardtanh, ReLU6, Hardsigmoid, Hardswish, LogSigmoid, Softsign,
Tanhshrink, Softmin, GLU, PReLU; and MultiheadAttention (as PyTorch's torch.nn.modules.activation),
a composition over F.scaled_dot_product_attention's code."""

from __future__ import annotations

import warnings

from ... import dtypes as D
from ...creation import zeros
from ...errors import ShapeError
from ...ops.elementwise import where
from ...ops.joining import cat
from .. import functional as F
from .. import init
from ..functional.attention import _attention, scaled_dot_product_attention
from ..module import Module
from ..parameter import Parameter
from .linear import Linear, _new


class ReLU(Module):
    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.relu(input, inplace=self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class LeakyReLU(Module):
    def __init__(self, negative_slope: float = 0.01, inplace: bool = False):
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class Sigmoid(Module):
    def forward(self, input):
        return F.sigmoid(input)


class Tanh(Module):
    def forward(self, input):
        return F.tanh(input)


class GELU(Module):
    """GELU, exact (approximate='none') or the tanh approximation."""

    def __init__(self, approximate: str = "none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


def _implicit_dim(name: str, ndim: int) -> int:
    warnings.warn(
        f"Implicit dimension choice for {name} has been deprecated. Change the call to include "
        "dim=X as an argument.",
        UserWarning,
        stacklevel=3,
    )
    return 0 if ndim in (0, 1, 3) else 1


class Softmax(Module):
    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        dim = self.dim if self.dim is not None else _implicit_dim("softmax", input.ndim)
        return F.softmax(input, dim=dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Module):
    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        dim = self.dim if self.dim is not None else _implicit_dim("log_softmax", input.ndim)
        return F.log_softmax(input, dim=dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class _InplaceActivation(Module):
    """An activation whose only argument is inplace."""

    _fn = None
    _show_inplace = True  # PyTorch's Hardsigmoid/Hardswish print no inplace flag

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return type(self)._fn(input, inplace=self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace and self._show_inplace else ""


class SiLU(_InplaceActivation):
    """x * sigmoid(x)."""

    _fn = F.silu


class Mish(_InplaceActivation):
    """x * tanh(softplus(x))."""

    _fn = F.mish


class SELU(_InplaceActivation):
    """Scaled ELU with the self-normalizing constants."""

    _fn = F.selu


class Hardsigmoid(_InplaceActivation):
    """relu6(x + 3) / 6."""

    _fn = F.hardsigmoid
    _show_inplace = False


class Hardswish(_InplaceActivation):
    """x * relu6(x + 3) / 6."""

    _fn = F.hardswish
    _show_inplace = False


class ELU(Module):
    """x where x > 0, else alpha * (exp(x) - 1)."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class CELU(ELU):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""

    def forward(self, input):
        return F.celu(input, self.alpha, self.inplace)


class Softplus(Module):
    """log(1 + exp(beta * x)) / beta, linear above threshold."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Hardtanh(Module):
    """x clamped to [min_val, max_val] (min_value/max_value: PyTorch's deprecated names)."""

    def __init__(
        self,
        min_val: float = -1.0,
        max_val: float = 1.0,
        inplace: bool = False,
        min_value: float | None = None,
        max_value: float | None = None,
    ):
        super().__init__()
        if min_value is not None or max_value is not None:
            warnings.warn(
                "keyword arguments min_value and max_value are deprecated, use min_val and "
                "max_val instead",
                FutureWarning,
                stacklevel=2,
            )
            min_val = min_val if min_value is None else min_value
            max_val = max_val if max_value is None else max_value
        if min_val > max_val:
            raise ValueError(
                f"{type(self).__name__}: min_val ({min_val}) cannot be greater than max_val "
                f"({max_val})"
            )
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}" + (
            ", inplace=True" if self.inplace else ""
        )


class ReLU6(Hardtanh):
    """min(max(x, 0), 6)."""

    def __init__(self, inplace: bool = False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class LogSigmoid(Module):
    """log(sigmoid(x))."""

    def forward(self, input):
        return F.logsigmoid(input)


class Softsign(Module):
    """x / (1 + |x|)."""

    def forward(self, input):
        return F.softsign(input)


class Tanhshrink(Module):
    """x - tanh(x)."""

    def forward(self, input):
        return F.tanhshrink(input)


class Softmin(Module):
    """softmax(-x) along dim (None: PyTorch's deprecated implicit choice, with its warning)."""

    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        dim = self.dim if self.dim is not None else _implicit_dim("softmin", input.ndim)
        return F.softmin(input, dim=dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class GLU(Module):
    """a * sigmoid(b) for the two halves a, b of the input along dim."""

    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class PReLU(Module):
    """x where x > 0, else a * x with a learnable slope a: one (num_parameters=1) or one per
    channel (dim 1 of the input), initialised to init."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(_new((num_parameters,), device, dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.constant_(self.weight, self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class MultiheadAttention(Module):
    """Multi-head attention, PyTorch's parameters and semantics: in_proj_weight [3E, E] (or
    q_proj_weight, k_proj_weight [E, kdim], v_proj_weight [E, vdim] when kdim/vdim differ from
    embed_dim), in_proj_bias [3E], out_proj (a Linear), bias_k/bias_v [1, 1, E] with add_bias_kv.

    forward(query, key, value) takes [L, N, E] ([N, L, E] with batch_first, or unbatched [L, E])
    and returns (output, weights): the weights [N, L, S] averaged over heads (or [N, H, L, S]
    with average_attn_weights=False), None with need_weights=False. Masks as PyTorch's: a bool
    key_padding_mask [N, S] or attn_mask [L, S] / [N*H, L, S] marks with True what may NOT be
    attended; float masks are added to the scores. A row masked everywhere gives zeros.
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        device=None,
        dtype=None,
    ):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(
                f"MultiheadAttention: embed_dim and num_heads must be > 0, got {embed_dim} and "
                f"{num_heads}"
            )
        if embed_dim % num_heads:
            raise ValueError(
                f"MultiheadAttention: embed_dim ({embed_dim}) must be divisible by num_heads "
                f"({num_heads})"
            )
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(_new((3 * embed_dim, embed_dim), device, dtype))
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = Parameter(_new((embed_dim, embed_dim), device, dtype))
            self.k_proj_weight = Parameter(_new((embed_dim, self.kdim), device, dtype))
            self.v_proj_weight = Parameter(_new((embed_dim, self.vdim), device, dtype))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(_new((3 * embed_dim,), device, dtype))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, device=device, dtype=dtype)
        if add_bias_kv:
            self.bias_k = Parameter(_new((1, 1, embed_dim), device, dtype))
            self.bias_v = Parameter(_new((1, 1, embed_dim), device, dtype))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        """PyTorch's start: xavier_uniform_ projections, zero biases, xavier_normal_ bias_k/v."""
        for w in (self.in_proj_weight, self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
            if w is not None:
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)
        for b in (self.bias_k, self.bias_v):
            if b is not None:
                init.xavier_normal_(b)

    def _projections(self) -> tuple:
        """(weight, bias) of the query, key and value projections."""
        # chunk, not three slices: the three gradients meet in one cat
        if self._qkv_same_embed_dim:
            ws = self.in_proj_weight.chunk(3)
        else:
            ws = (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)
        b = self.in_proj_bias
        bs = (None,) * 3 if b is None else b.chunk(3)
        return tuple(zip(ws, bs))

    def forward(
        self,
        query,
        key,
        value,
        key_padding_mask=None,
        need_weights: bool = True,
        attn_mask=None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple:
        """(attention output, attention weights or None); see the class docstring."""
        unbatched = query.ndim == 2
        self_attention = query is key and key is value and self._qkv_same_embed_dim
        if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
            raise ShapeError(
                "MultiheadAttention: query, key and value must all be 3-D (batched) or 2-D "
                f"(unbatched), got shapes {tuple(query.shape)}, {tuple(key.shape)}, "
                f"{tuple(value.shape)}"
            )
        if unbatched:
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif self.batch_first:  # work in [L, N, E] like PyTorch; transposes are views
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        tgt, bsz, e = query.shape
        src = key.shape[0]
        if e != self.embed_dim or key.shape[2] != self.kdim or value.shape[2] != self.vdim:
            raise ShapeError(
                f"MultiheadAttention: expected query, key and value features {self.embed_dim}, "
                f"{self.kdim} and {self.vdim}, got shapes {tuple(query.shape)}, "
                f"{tuple(key.shape)} and {tuple(value.shape)}"
            )
        if key.shape[:2] != value.shape[:2] or key.shape[1] != bsz:
            raise ShapeError(
                f"MultiheadAttention: key {tuple(key.shape)} and value {tuple(value.shape)} must "
                f"share sequence length and batch size, and the batch must be the query's {bsz}"
            )
        if self_attention:  # one GEMM for the three projections
            q, k, v = F.linear(query, self.in_proj_weight, self.in_proj_bias).chunk(3, dim=-1)
        else:
            (wq, bq), (wk, bk), (wv, bv) = self._projections()
            q, k, v = F.linear(query, wq, bq), F.linear(key, wk, bk), F.linear(value, wv, bv)
        mask = _float_mask(attn_mask, q.dtype, "attn_mask")
        if mask is not None and mask.ndim == 3:
            if tuple(mask.shape) != (bsz * self.num_heads, tgt, src):
                raise ShapeError(
                    f"MultiheadAttention: a 3-D attn_mask must have shape "
                    f"{(bsz * self.num_heads, tgt, src)}, got {tuple(mask.shape)}"
                )
            mask = mask.reshape(bsz, self.num_heads, tgt, src)
        elif mask is not None and tuple(mask.shape) != (tgt, src):
            raise ShapeError(
                f"MultiheadAttention: a 2-D attn_mask must have shape {(tgt, src)}, got "
                f"{tuple(mask.shape)}"
            )
        kpm = _float_mask(key_padding_mask, q.dtype, "key_padding_mask")
        if kpm is not None and tuple(kpm.shape) != (bsz, src):
            raise ShapeError(
                f"MultiheadAttention: key_padding_mask must have shape {(bsz, src)}, got "
                f"{tuple(kpm.shape)}"
            )
        if self.bias_k is not None:
            k = cat([k, self.bias_k.expand(1, bsz, e)], 0)
            v = cat([v, self.bias_v.expand(1, bsz, e)], 0)
            mask, kpm = _pad_last(mask), _pad_last(kpm)
        # [S, N, E] -> [N, H, S, hd]
        h, hd = self.num_heads, self.head_dim
        q, k, v = (t.reshape(t.shape[0], bsz, h, hd).permute(1, 2, 0, 3) for t in (q, k, v))
        if self.add_zero_attn:
            z = zeros(bsz, h, 1, hd, dtype=k.dtype)
            z = z if z.device == k.device else z.to(k.device)
            k, v = cat([k, z], 2), cat([v, z], 2)
            mask, kpm = _pad_last(mask), _pad_last(kpm)
        if kpm is not None:
            kpm = kpm.reshape(bsz, 1, 1, kpm.shape[-1])
            mask = kpm if mask is None else mask + kpm
        causal = is_causal and mask is None
        p = self.dropout if self.training else 0.0
        if need_weights:
            out, weights = _attention(q, k, v, attn_mask=mask, dropout_p=p, is_causal=causal)
        else:  # the fused kernels where they apply
            out = scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=p, is_causal=causal
            )
        out = out.permute(2, 0, 1, 3).reshape(tgt, bsz, e)  # [L, N, E]
        out = self.out_proj(out)
        if self.batch_first and not unbatched:
            out = out.transpose(0, 1)
        if unbatched:
            out = out.squeeze(1)
        if not need_weights:
            return out, None
        if average_attn_weights:
            weights = weights.mean(dim=1)
        return out, weights.squeeze(0) if unbatched else weights


def _float_mask(mask, dtype, what: str):
    """PyTorch's canonical mask: a bool mask becomes 0 where False and -inf where True; a float
    mask is kept (cast to dtype); None stays None."""
    if mask is None:
        return None
    if mask.dtype is D.bool_:
        return where(mask, float("-inf"), 0.0).to(dtype)
    if not mask.dtype.is_floating_point:
        raise TypeError(
            f"MultiheadAttention: {what} must be bool or floating point, got {mask.dtype}"
        )
    return mask.to(dtype)


def _pad_last(mask):
    """mask with a zero column appended on its last dim (for bias_k/v and add_zero_attn)."""
    if mask is None:
        return None
    z = zeros(*mask.shape[:-1], 1, dtype=mask.dtype)
    return cat([mask, z if z.device == mask.device else z.to(mask.device)], -1)
