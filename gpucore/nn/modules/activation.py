"""Activation modules: ReLU, LeakyReLU, Sigmoid, Tanh, GELU, Softmax, LogSoftmax, and SiLU, Mish,
ELU, SELU, CELU, Softplus, Hardtanh, ReLU6, Hardsigmoid, Hardswish, LogSigmoid, Softsign,
Tanhshrink, Softmin, GLU, PReLU; and MultiheadAttention (as PyTorch's torch.nn.modules.activation),
a composition over F.scaled_dot_product_attention's code."""

from __future__ import annotations

import warnings

from ... import _caller_warnings as caller_warnings
from .. import functional as F
from .. import init
from ..functional.attention import _multi_head_attention
from ..module import Module
from ..parameter import Parameter
from .linear import Linear, NonDynamicallyQuantizableLinear, _new


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
    caller_warnings.warn(
        f"Implicit dimension choice for {name} has been deprecated. Change the call to include "
        "dim=X as an argument.",
        UserWarning,
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
        self.out_proj = NonDynamicallyQuantizableLinear(
            embed_dim, embed_dim, bias=bias, device=device, dtype=dtype
        )
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
        """(weight, bias) of the query, key and value projections (separate weights)."""
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
        if self.batch_first and query.ndim == 3:  # work in [L, N, E] like PyTorch (views)
            if query is key and key is value:
                query = key = value = query.transpose(0, 1)
            else:
                query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        proj = None if self._qkv_same_embed_dim else self._projections()
        op = self.out_proj  # a swapped-in module (e.g. a quantized Linear) is called as a module
        op_w, op_b = (op.weight, op.bias) if isinstance(op, Linear) else (op, None)
        out, weights = _multi_head_attention(
            "MultiheadAttention", query, key, value, self.num_heads, self.in_proj_weight,
            self.in_proj_bias, proj, self.bias_k, self.bias_v, self.add_zero_attn,
            self.dropout if self.training else 0.0, op_w, op_b,
            key_padding_mask, need_weights, attn_mask, None, None, average_attn_weights,
            is_causal,
        )  # fmt: skip
        if self.batch_first and query.ndim == 3:
            out = out.transpose(0, 1)
        return out, weights
