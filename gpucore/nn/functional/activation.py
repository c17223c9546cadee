"""Activations: relu, gelu, sigmoid, tanh, softmax/log_softmax and softmin, leaky_relu, the
smooth ones (silu, mish, softplus, elu, selu, celu, logsigmoid, softsign, tanhshrink), the
hard ones (hardtanh, relu6, hardsigmoid, hardswish), glu and prelu.

relu, gelu, sigmoid, tanh and the softmaxes are registry ops with kernels; the rest are
compositions of tensor ops, differentiated by autograd with no backward of their own.
"""

from __future__ import annotations

from ... import dtypes as D
from ...autograd.grad_mode import is_grad_enabled
from ...errors import ShapeError
from ...ops import elementwise as E
from ...ops import nn as nn_ops
from ...ops import unary as U
from ...ops.inplace import inplace as _inplace
from ...tensor import Tensor
from ._utils import _check_tensor

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _activation(op: str, input, compute, inplace: bool, integers: bool = False) -> Tensor:
    _check_tensor(op, input, floating=not integers)
    if inplace:
        return _inplace(input, compute, saves_self=True, op=op + "_")
    return compute(input)


# ============================================================================= registry ops
def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """max(x, 0)."""
    return input.relu_() if inplace else U.relu(input)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """GELU, exact (erf) by default or the tanh approximation with approximate='tanh'."""
    return U.gelu(input, approximate=approximate)


def sigmoid(input: Tensor) -> Tensor:
    """1 / (1 + exp(-x))."""
    return U.sigmoid(input)


def tanh(input: Tensor) -> Tensor:
    """Hyperbolic tangent."""
    return U.tanh(input)


def softmax(input: Tensor, dim: int | None = None, dtype=None) -> Tensor:
    """Softmax along dim (PyTorch requires dim; so do we)."""
    if dim is None:
        raise TypeError("softmax(): pass dim explicitly (e.g. dim=-1)")
    return nn_ops.softmax(input, dim, dtype=dtype)


def log_softmax(input: Tensor, dim: int | None = None, dtype=None) -> Tensor:
    """log(softmax(x)) along dim, computed stably (PyTorch requires dim; so do we)."""
    if dim is None:
        raise TypeError("log_softmax(): pass dim explicitly (e.g. dim=-1)")
    return nn_ops.log_softmax(input, dim, dtype=dtype)


# ============================================================================= compositions
def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """x where x > 0, else negative_slope * x."""
    return _activation(
        "leaky_relu", input, lambda x: E.where(x > 0, x, x * negative_slope), inplace
    )


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """x * sigmoid(x) (also called swish)."""
    return _activation("silu", input, lambda x: x * x.sigmoid(), inplace)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """x * tanh(softplus(x))."""
    return _activation("mish", input, lambda x: x * U.softplus(x).tanh(), inplace)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold (as PyTorch)."""
    _check_tensor("softplus", input)
    if beta == 0:
        raise ValueError("softplus(): beta must be non-zero")
    bx = input if beta == 1 else input * beta
    sp = U.softplus(bx)
    if beta != 1:
        sp = sp / beta
    return E.where(bx > threshold, input, sp)


def _elu(x: Tensor, alpha: float, inv_alpha: float = 1.0) -> Tensor:
    # exp only sees x <= 0: the unused branch of where must stay finite, or its zero gradient
    # times an infinite exp would be NaN.
    neg = x.clamp(max=0.0)
    if inv_alpha != 1.0:
        neg = neg * inv_alpha
    return E.where(x > 0, x, (neg.exp() - 1) * alpha)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """x where x > 0, else alpha * (exp(x) - 1)."""
    return _activation("elu", input, lambda x: _elu(x, alpha), inplace)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """scale * elu(x, alpha) with the self-normalizing constants alpha ~ 1.6733, scale ~ 1.0507."""
    return _activation("selu", input, lambda x: _elu(x, _SELU_ALPHA) * _SELU_SCALE, inplace)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    if alpha == 0:
        raise ValueError("celu(): alpha cannot be 0")
    return _activation("celu", input, lambda x: _elu(x, alpha, 1.0 / alpha), inplace)


def _hardtanh(x: Tensor, lo: float, hi: float) -> Tensor:
    # PyTorch's gradient is 1 strictly inside (lo, hi) and 0 at the bounds; clamp would pass it
    # at the bounds too, so the clamped values come in detached. Without a gradient to take,
    # clamp alone gives the same values (x itself strictly inside, the clamp elsewhere, NaN
    # included) in one kernel, and a captured graph that the C program runs.
    if not (x._requires_grad and is_grad_enabled()):
        return x.clamp(lo, hi)
    return E.where((x > lo) & (x < hi), x, x.detach().clamp(lo, hi))


def hardtanh(
    input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False
) -> Tensor:
    """x clamped to [min_val, max_val]; the gradient is 1 strictly between them."""
    if min_val > max_val:
        raise ValueError(
            f"hardtanh(): min_val ({min_val}) cannot be greater than max_val ({max_val})"
        )
    if isinstance(input, Tensor) and not input.dtype.is_floating_point:
        min_val, max_val = int(min_val), int(max_val)  # PyTorch casts the bounds to the dtype
    return _activation(
        "hardtanh", input, lambda x: _hardtanh(x, min_val, max_val), inplace, integers=True
    )


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """min(max(x, 0), 6) (hardtanh(x, 0, 6))."""
    return _activation("relu6", input, lambda x: _hardtanh(x, 0, 6), inplace, integers=True)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """relu6(x + 3) / 6: 0 below -3, 1 above 3, linear between."""
    return _activation("hardsigmoid", input, lambda x: _hardtanh(x + 3.0, 0.0, 6.0) / 6.0, inplace)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """x * relu6(x + 3) / 6."""
    # clamp (gradient inclusive at the bounds) reproduces PyTorch's hardswish gradient there:
    # -0.5 at x = -3 and 1.5 at x = 3.
    return _activation("hardswish", input, lambda x: x * (x + 3.0).clamp(0.0, 6.0) / 6.0, inplace)


def logsigmoid(input: Tensor) -> Tensor:
    """log(sigmoid(x)), computed stably as -softplus(-x)."""
    _check_tensor("logsigmoid", input)
    return -U.softplus(-input)


def softsign(input: Tensor) -> Tensor:
    """x / (1 + |x|)."""
    _check_tensor("softsign", input)
    return input / (input.abs() + 1.0)


def tanhshrink(input: Tensor) -> Tensor:
    """x - tanh(x)."""
    _check_tensor("tanhshrink", input)
    return input - input.tanh()


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """softmax(-x) along dim (PyTorch requires dim; so do we)."""
    if dim is None:
        raise TypeError("softmin(): pass dim explicitly (e.g. dim=-1)")
    _check_tensor("softmin", input)
    if dtype is not None:
        input = input.to(dtype)
    return softmax(-input, dim)


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """Gated linear unit: a * sigmoid(b), where a and b are the two halves of input along dim."""
    _check_tensor("glu", input)
    if input.ndim == 0:
        raise ShapeError("glu(): does not support scalars because the halving size must be even")
    d = dim + input.ndim if -input.ndim <= dim < 0 else dim
    if not 0 <= d < input.ndim:
        raise IndexError(
            f"glu(): dim {dim} is out of range for a {input.ndim}-D input of shape "
            f"{tuple(input.shape)}"
        )
    size = input.shape[d]
    if size % 2:
        raise ShapeError(f"glu(): halving dimension must be even, but dimension {d} is size {size}")
    half = size // 2
    return input.narrow(d, 0, half) * input.narrow(d, half, half).sigmoid()


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """x where x > 0, else weight * x; weight has one element or one per channel (dim 1)."""
    _check_tensor("prelu", input)
    _check_tensor("prelu", weight, "weight")
    n = weight.numel()
    if n != 1:
        if input.ndim == 0:
            raise ShapeError("prelu(): a zero-dim input needs a weight with one element")
        channels = input.shape[1] if input.ndim > 1 else 1
        if channels != n:
            raise ShapeError(
                f"prelu(): mismatch of parameter numbers and input channel size: found "
                f"parameter numbers = {n} and channel size = {channels}"
            )
        weight = weight.reshape((1, n) + (1,) * (input.ndim - 2))
    elif weight.ndim:
        weight = weight.reshape(())
    return E.where(input > 0, input, input * weight)


# ============================================================= shrinkage, thresholds
def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """x where x > threshold, else value (the gradient passes where x > threshold)."""
    return _threshold(input, threshold, value, inplace)


def _threshold(input, threshold: float, value: float, inplace: bool) -> Tensor:
    if isinstance(input, Tensor) and not input.dtype.is_floating_point:
        threshold, value = int(threshold), int(value)  # PyTorch casts both to the dtype
    compute = lambda x: E.where(x > threshold, x, value)  # noqa: E731
    return _activation("threshold", input, compute, inplace, integers=True)


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """x where |x| > lambd, else 0."""
    _check_tensor("hardshrink", input)
    return E.where((input > lambd) | (input < -lambd), input, 0.0)


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """x - lambd above lambd, x + lambd below -lambd, else 0."""
    _check_tensor("softshrink", input)
    if lambd < 0:
        raise ValueError(f"softshrink(): lambd must be >= 0, got {lambd}")
    x = input
    return E.where(x > lambd, x - lambd, E.where(x < -lambd, x + lambd, 0.0))


def rrelu(
    input: Tensor,
    lower: float = 1.0 / 8,
    upper: float = 1.0 / 3,
    training: bool = False,
    inplace: bool = False,
) -> Tensor:
    """Randomized leaky ReLU: negative inputs times a slope drawn uniformly from [lower, upper]
    per element while training (gpucore's Philox stream), times (lower + upper) / 2 otherwise."""
    if not training:
        return leaky_relu(input, (lower + upper) / 2, inplace)

    def compute(x):
        from ...ops.random import rand  # noqa: PLC0415 - random imports activation's users

        dt = x.dtype if x.dtype.is_floating_point else None
        a = rand(tuple(x.shape), dtype=dt, device=x.device) * (upper - lower) + lower
        return E.where(x >= 0, x, x * a)

    return _activation("rrelu", input, compute, inplace)


def gumbel_softmax(
    logits: Tensor, tau: float = 1.0, hard: bool = False, eps: float = 1e-10, dim: int = -1
) -> Tensor:
    """Samples from the Gumbel-softmax distribution: softmax((logits + g) / tau) with Gumbel
    noise g = -log(E), E ~ Exponential(1) from gpucore's random stream; ``hard=True`` returns
    one-hot vectors in the forward pass whose gradient is the soft sample's (straight-through),
    as torch.nn.functional.gumbel_softmax (``eps`` is accepted, unused, as there)."""
    _check_tensor("gumbel_softmax", logits)
    from ...ops.random import rand  # noqa: PLC0415 - random imports activation's users

    # the noise in float32 at least: half precision would round E to 0 (a log(0) = -inf noise)
    wide = logits.dtype if logits.dtype.itemsize >= 4 else D.float32
    u = rand(tuple(logits.shape), dtype=wide, device=logits.device)
    expo = (-(1.0 - u).log()).clamp(min=1e-30)  # 1 - u in (0, 1]: E >= 0, never log(0)
    y = softmax((logits - expo.log().to(logits.dtype)) / tau, dim)
    if not hard:
        return y
    index = y.argmax(dim, keepdim=True)
    y_hard = y.detach().new_zeros(y.shape).scatter(dim, index, 1.0)
    return y_hard - y.detach() + y


# ============================================================================= in-place forms
# PyTorch's F.<name>_: the activation written into input, which is returned (an error for a leaf
# that requires grad, as for every in-place op; a non-leaf keeps a correct history).
def relu_(input: Tensor) -> Tensor:
    """torch.nn.functional.relu_: relu(input, inplace=True)."""
    return relu(input, inplace=True)


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """torch.nn.functional.elu_: elu(input, alpha, inplace=True)."""
    return elu(input, alpha, inplace=True)


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """torch.nn.functional.celu_: celu(input, alpha, inplace=True)."""
    return celu(input, alpha, inplace=True)


def selu_(input: Tensor) -> Tensor:
    """torch.nn.functional.selu_: selu(input, inplace=True)."""
    return selu(input, inplace=True)


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """torch.nn.functional.leaky_relu_: leaky_relu(input, negative_slope, inplace=True)."""
    return leaky_relu(input, negative_slope, inplace=True)


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """torch.nn.functional.hardtanh_: hardtanh(input, min_val, max_val, inplace=True)."""
    return hardtanh(input, min_val, max_val, inplace=True)


def rrelu_(
    input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False
) -> Tensor:
    """torch.nn.functional.rrelu_: rrelu(input, lower, upper, training, inplace=True)."""
    return rrelu(input, lower, upper, training, inplace=True)


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    """torch.nn.functional.threshold_: threshold(input, threshold, value, inplace=True)."""
    return _threshold(input, threshold, value, True)
