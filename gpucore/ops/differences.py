"""Finite differences and norm clamping as compositions (gradients from the composed ops, on
every backend): gradient (torch.gradient: second-order central differences inside, first- or
second-order one-sided at the edges, for uniform spacings or coordinates, numpy's formulas) and
renorm (sub-tensors whose p-norm exceeds maxnorm scaled down to it).

kernels: none (the composed ops').
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .api import public
from .common import norm_dims, wrap_dim
from .elementwise import where
from .joining import cat
from .matrix import vector_norm


def _part(f: Tensor, d: int, start: int, length: int) -> Tensor:
    return f.narrow(d, start, length)


def _along(v: Tensor, d: int, ndim: int) -> Tensor:
    """1-D v shaped to broadcast along dim d of an ndim-D tensor."""
    shape = [1] * ndim
    shape[d] = v.shape[0]
    return v.reshape(shape)


def _uniform(f: Tensor, d: int, h: float, edge_order: int) -> Tensor:
    n = f.shape[d]
    inner = (_part(f, d, 2, n - 2) - _part(f, d, 0, n - 2)) / (2 * h)
    if edge_order == 1:
        first = (_part(f, d, 1, 1) - _part(f, d, 0, 1)) / h
        last = (_part(f, d, n - 1, 1) - _part(f, d, n - 2, 1)) / h
    else:
        first = (-1.5 * _part(f, d, 0, 1) + 2 * _part(f, d, 1, 1) - 0.5 * _part(f, d, 2, 1)) / h
        last = (0.5 * _part(f, d, n - 3, 1) - 2 * _part(f, d, n - 2, 1)
                + 1.5 * _part(f, d, n - 1, 1)) / h  # fmt: skip
    return cat([first, inner, last], d)


def _coordinates(f: Tensor, d: int, x: np.ndarray, edge_order: int) -> Tensor:
    """numpy.gradient's formulas for sample coordinates x (float64 weights, cast to f)."""
    n, nd = f.shape[d], f.ndim
    dx = np.diff(x)
    hd, hs = dx[:-1], dx[1:]  # the steps before and after each inner point
    den = hs * hd * (hd + hs)
    w = [(-(hs**2)) / den, (hs**2 - hd**2) / den, (hd**2) / den]

    def weights(a):
        return _along(f.new_tensor(np.asarray(a, np.float64)), d, nd)

    inner = (weights(w[0]) * _part(f, d, 0, n - 2) + weights(w[1]) * _part(f, d, 1, n - 2)
             + weights(w[2]) * _part(f, d, 2, n - 2))  # fmt: skip
    if edge_order == 1:
        first = (_part(f, d, 1, 1) - _part(f, d, 0, 1)) / float(dx[0])
        last = (_part(f, d, n - 1, 1) - _part(f, d, n - 2, 1)) / float(dx[-1])
    else:
        h1, h2 = float(dx[0]), float(dx[1])
        a, b, c = -(2 * h1 + h2) / (h1 * (h1 + h2)), (h1 + h2) / (h1 * h2), -h1 / (h2 * (h1 + h2))
        first = a * _part(f, d, 0, 1) + b * _part(f, d, 1, 1) + c * _part(f, d, 2, 1)
        h1, h2 = float(dx[-2]), float(dx[-1])
        a, b, c = h2 / (h1 * (h1 + h2)), -(h2 + h1) / (h1 * h2), (2 * h2 + h1) / (h2 * (h1 + h2))
        last = a * _part(f, d, n - 3, 1) + b * _part(f, d, n - 2, 1) + c * _part(f, d, n - 1, 1)
    return cat([first, inner, last], d)


@public("gradient", method=False)
def gradient(input: Tensor, *, spacing=1, dim=None, edge_order: int = 1) -> tuple:
    """The derivative estimates of ``input`` along each of ``dim`` (all dims by default), one
    tensor per dim, as torch.gradient: central differences inside, one-sided differences of
    order ``edge_order`` (1 or 2) at the edges; ``spacing`` a number (one step for every dim),
    a list of numbers (one per dim) or a list of 1-D coordinate tensors. Integer inputs give the
    default floating dtype."""
    if edge_order not in (1, 2):
        raise ValueError(f"gradient(): edge_order must be 1 or 2, got {edge_order!r}")
    if input.ndim == 0 and dim is None:
        return ()  # no dims, no derivatives (PyTorch's empty tuple)
    dims = tuple(range(input.ndim)) if dim is None else norm_dims(dim, input.ndim, "gradient()")
    if isinstance(dim, int):
        dims = (wrap_dim(dim, input.ndim, "gradient()"),)
    f = input if input.dtype.is_floating_point else input.to(D.default_float())
    if input.dtype is D.bool_:
        raise DTypeError("gradient(): bool tensors are not supported (as in PyTorch)")
    if isinstance(spacing, (int, float)) and not isinstance(spacing, bool):
        steps = [float(spacing)] * len(dims)
    elif isinstance(spacing, Tensor) and spacing.ndim == 0:
        steps = [float(spacing.item())] * len(dims)
    elif isinstance(spacing, (list, tuple)):
        if len(spacing) != len(dims):
            raise ValueError(
                f"gradient(): expected spacing to be unspecified, a scalar or a list of length "
                f"{len(dims)} (one per dim), got a list of length {len(spacing)}"
            )
        steps = list(spacing)
    else:
        raise TypeError(f"gradient(): spacing must be a number or a list, got {spacing!r}")
    out = []
    for d, s in zip(dims, steps):
        n = f.shape[d]
        if n < edge_order + 1:
            raise ShapeError(
                f"gradient(): expected each dimension size to be at least edge_order + 1 = "
                f"{edge_order + 1}, got size {n} along dim {d}"
            )
        if isinstance(s, Tensor) and s.ndim == 1:
            if s.shape[0] != n:
                raise ShapeError(
                    f"gradient(): the coordinates of dim {d} have {s.shape[0]} values, expected {n}"
                )
            x = np.asarray(s.detach().cpu().numpy(), np.float64)
            out.append(_coordinates(f, d, x, edge_order))
        else:
            h = float(s.item()) if isinstance(s, Tensor) else float(s)
            out.append(_uniform(f, d, h, edge_order))
    return tuple(out)


@public("renorm", inplace=True)
def renorm(input: Tensor, p, dim: int, maxnorm) -> Tensor:
    """input with each sub-tensor along ``dim`` (``input.select(dim, i)``) whose ``p``-norm
    exceeds ``maxnorm`` scaled to norm ``maxnorm`` (by ``maxnorm / (norm + 1e-7)``), as
    torch.renorm (differentiable through the norm)."""
    if not input.dtype.is_floating_point:
        raise DTypeError(f"renorm(): expected a floating point tensor, got {input.dtype}")
    if isinstance(p, bool) or not isinstance(p, (int, float)) or p <= 0:
        raise ValueError(f"renorm(): non-positive norm not supported, got p={p!r}")
    if isinstance(maxnorm, bool) or not isinstance(maxnorm, (int, float)) or maxnorm < 0:
        raise ValueError(f"renorm(): expected maxnorm to be >= 0, got {maxnorm!r}")
    if input.ndim <= 1:
        raise ShapeError(f"renorm(): input needs at least 2 dimensions, got {input.ndim}")
    d = wrap_dim(dim, input.ndim, "renorm()")
    others = tuple(k for k in range(input.ndim) if k != d)
    norm = vector_norm(input, p, others, True)
    factor = where(norm > maxnorm, maxnorm / (norm + 1e-7), 1.0)
    return input * factor
