"""Matrix products: matmul (with PyTorch's 1-D and batch-broadcasting rules), mm, bmm, addmm."""

from __future__ import annotations

from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .common import as_operands, broadcast_shapes, method
from .registry import apply, defop


def _matmul_infer(a, b):
    return (tuple(a.shape[:-1]) + (b.shape[-1],), a.dtype)


def _matmul_bwd(ctx, g):
    a, b = ctx.saved
    need_a, need_b = ctx.needs_input_grad
    ga = apply(MATMUL, g, b.mT) if need_a else None
    gb = apply(MATMUL, a.mT, g) if need_b else None
    return ga, gb


# Operands reach the kernel with equal batch dims (the wrapper broadcasts them as views).
MATMUL = defop("matmul", infer=_matmul_infer, save_inputs=(0, 1), backward=_matmul_bwd)


@method("matmul", "__matmul__")
def matmul(input: Tensor, other: Tensor) -> Tensor:
    """Matrix product with torch.matmul's rules: 1-D operands are promoted and the added dim
    removed; batch dims broadcast."""
    if type(input) is Tensor and type(other) is Tensor:
        # the common case (two matrices of one float dtype) without the general checks
        a, b = input._data.shape, other._data.shape
        if (len(a) == 2 and len(b) == 2 and a[1] == b[0] and input._dtype is other._dtype
                and input._dtype.is_floating_point):
            return apply(MATMUL, input, other)
    if not isinstance(input, Tensor) or not isinstance(other, Tensor):
        raise TypeError("matmul(): both operands must be tensors")
    a, b = as_operands("matmul", input, other)
    if not a.dtype.is_floating_point:
        raise DTypeError(f"matmul(): expects floating point tensors, got {a.dtype}")
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(
            f"matmul(): both arguments need at least 1 dim, got shapes {tuple(a.shape)} and "
            f"{tuple(b.shape)}"
        )
    squeeze_a = a.ndim == 1
    squeeze_b = b.ndim == 1
    if squeeze_a:
        a = a.unsqueeze(0)
    if squeeze_b:
        b = b.unsqueeze(1)
    if a.shape[-1] != b.shape[-2]:
        raise ShapeError(
            f"matmul(): shapes {tuple(input.shape)} and {tuple(other.shape)} cannot be "
            f"multiplied ({a.shape[-1]} != {b.shape[-2]}); the last dim of the first must "
            "equal the second-to-last of the second"
        )
    batch = broadcast_shapes("matmul", tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    if tuple(a.shape[:-2]) != batch:
        a = a.expand(batch + tuple(a.shape[-2:]))
    if tuple(b.shape[:-2]) != batch:
        b = b.expand(batch + tuple(b.shape[-2:]))
    out = apply(MATMUL, a, b)
    if squeeze_a:
        out = out.squeeze(-2)
    if squeeze_b:
        out = out.squeeze(-1)
    return out


Tensor.__rmatmul__ = lambda self, other: matmul(other, self)


def mm(input: Tensor, mat2: Tensor) -> Tensor:
    """2-D matrix product."""
    if input.ndim != 2 or mat2.ndim != 2:
        raise ShapeError(
            f"mm(): expects 2-D tensors, got shapes {tuple(input.shape)} and {tuple(mat2.shape)}"
        )
    return matmul(input, mat2)


def bmm(input: Tensor, mat2: Tensor) -> Tensor:
    """Batched 3-D matrix product without broadcasting."""
    if input.ndim != 3 or mat2.ndim != 3 or input.shape[0] != mat2.shape[0]:
        raise ShapeError(
            f"bmm(): expects 3-D tensors with equal batch, got {tuple(input.shape)} and "
            f"{tuple(mat2.shape)}"
        )
    return matmul(input, mat2)


Tensor.mm = mm
Tensor.bmm = bmm


def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """beta * input + alpha * (mat1 @ mat2)."""
    prod = mm(mat1, mat2)
    if alpha != 1:
        prod = prod * alpha
    return prod + (input if beta == 1 else input * beta)


Tensor.addmm = addmm


# ----------------------------------------------------------------------------- linear
def _linear_infer(x, w, b=None):
    return ((x.shape[0], w.shape[0]), x.dtype)


def _linear_bwd(ctx, g):
    x, w = ctx.saved
    need = ctx.needs_input_grad
    gx = apply(MATMUL, g, w) if need[0] else None
    # g.T @ x is (out, in) and contiguous, as the weight: the leaf takes it without a copy.
    gw = apply(MATMUL, g.mT, x) if need[1] else None
    if len(need) == 2:
        return gx, gw
    return gx, gw, (g.sum(0) if need[2] else None)


# x [B, in] @ w[out, in].T (+ b[out]) as one GEMM with the bias added while the tile is in
# registers; inputs (x, w) or (x, w, b).
LINEAR = defop("linear", infer=_linear_infer, save_inputs=(0, 1), backward=_linear_bwd,
               save_for={0: (1,), 1: (0,)})
