"""Folding an eval-mode BatchNorm into the convolution or linear layer before it, as
torch.nn.utils.fusion: the fused layer computes ``bn(layer(x))`` in one affine map (deployment
and export scripts fuse before tracing).

For a BatchNorm with running mean m, variance v, eps, weight g and bias b, the scale
``s = g / sqrt(v + eps)`` multiplies the layer's output channels: ``W' = W * s`` (per output
channel), ``b' = (bias - m) * s + b``.
"""

from __future__ import annotations

import copy

from ...autograd.grad_mode import no_grad
from ...creation import ones_like, zeros_like
from ...errors import ShapeError
from ...tensor import Tensor
from ..parameter import Parameter

__all__ = [
    "fuse_conv_bn_eval",
    "fuse_conv_bn_weights",
    "fuse_linear_bn_eval",
    "fuse_linear_bn_weights",
]


def _check_eval(layer, bn, what: str) -> None:
    if layer.training or bn.training:
        raise RuntimeError(f"{what}: fusion only for eval (call .eval() on both modules first)")
    if bn.running_mean is None or bn.running_var is None:
        raise RuntimeError(f"{what}: the BatchNorm has no running statistics to fold")


def fuse_conv_bn_eval(conv, bn, transpose: bool = False):
    """A copy of ``conv`` (eval mode) computing ``bn(conv(x))``; ``transpose`` for a
    ConvTranspose (its output channels are the weight's dim 1)."""
    _check_eval(conv, bn, "fuse_conv_bn_eval")
    fused = copy.deepcopy(conv)
    fused.weight, fused.bias = fuse_conv_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias,
        transpose,
    )  # fmt: skip
    return fused


def fuse_conv_bn_weights(
    conv_w: Tensor,
    conv_b: Tensor | None,
    bn_rm: Tensor,
    bn_rv: Tensor,
    bn_eps: float,
    bn_w: Tensor | None,
    bn_b: Tensor | None,
    transpose: bool = False,
) -> tuple:
    """(weight, bias) Parameters of the convolution fused with the BatchNorm's statistics and
    affine parameters (missing bias / weight: zeros / ones), in the convolution's dtypes."""
    w_dtype = conv_w.dtype
    b_dtype = conv_b.dtype if conv_b is not None else w_dtype
    with no_grad():
        conv_b = zeros_like(bn_rm) if conv_b is None else conv_b
        bn_w = ones_like(bn_rm) if bn_w is None else bn_w
        bn_b = zeros_like(bn_rm) if bn_b is None else bn_b
        rsqrt = (bn_rv + bn_eps).rsqrt()
        tail = [1] * (conv_w.ndim - 2)
        shape = [1, -1, *tail] if transpose else [-1, 1, *tail]
        w = (conv_w * (bn_w * rsqrt).reshape(shape)).to(w_dtype)
        b = ((conv_b - bn_rm) * rsqrt * bn_w + bn_b).to(b_dtype)
    return Parameter(w, conv_w.requires_grad), Parameter(b, conv_b.requires_grad)


def fuse_linear_bn_eval(linear, bn):
    """A copy of ``linear`` (eval mode) computing ``bn(linear(x))`` (a BatchNorm1d over its
    outputs, or one with a single feature)."""
    _check_eval(linear, bn, "fuse_linear_bn_eval")
    if linear.out_features != bn.num_features and bn.num_features != 1:
        raise ShapeError(
            f"fuse_linear_bn_eval: the linear layer's {linear.out_features} outputs and the "
            f"BatchNorm's {bn.num_features} features must match, or the BatchNorm must have 1"
        )
    fused = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias
    )
    return fused


def fuse_linear_bn_weights(
    linear_w: Tensor,
    linear_b: Tensor | None,
    bn_rm: Tensor,
    bn_rv: Tensor,
    bn_eps: float,
    bn_w: Tensor | None,
    bn_b: Tensor | None,
) -> tuple:
    """(weight, bias) Parameters of the linear layer fused with the BatchNorm."""
    with no_grad():
        linear_b = zeros_like(bn_rm) if linear_b is None else linear_b
        bn_w = ones_like(bn_rm) if bn_w is None else bn_w
        bn_b = zeros_like(bn_rm) if bn_b is None else bn_b
        scale = bn_w * (bn_rv + bn_eps).rsqrt()
        w = linear_w * scale.unsqueeze(-1)
        b = (linear_b - bn_rm) * scale + bn_b
    return Parameter(w, linear_w.requires_grad), Parameter(b, linear_b.requires_grad)
