"""Data-dependent results: nonzero/argwhere, bincount, unique (ops whose output size the public
function reads from the input first, then passes as an attribute), count_nonzero as a
composition. None is differentiable (their outputs are indices and counts), except bincount's
weights, which PyTorch does not differentiate either.

kernels: backends/cpu/kernels/selection.py (numpy); none on Vulkan (these ops run on the CPU).
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .api import public
from .common import norm_dims, wrap_dim
from .registry import apply, defop
from .samples import Sample, integers, uniform


def _np_nonzero(x, count):
    return np.argwhere(x).astype(np.int64).reshape(count, x.ndim)


def _sparse(*shape, seed):
    a = uniform(*shape, seed=seed)
    return np.where(np.abs(a) < 1, 0.0, a)


NONZERO = defop(
    "nonzero",
    infer=lambda x, count: ((count, x.ndim), D.int64),
    samples=lambda: [
        Sample(s, count=int(np.count_nonzero(s)), ref=_np_nonzero)
        for s in (_sparse(3, 5, seed=1), _sparse(2, 3, 4, seed=2), _sparse(seed=3), np.zeros(4))
    ],
)


def _np_bincount(x, *weights, length):
    w = weights[0] if weights else None
    out = np.bincount(x, weights=w, minlength=length)
    return out if w is not None else out.astype(np.int64)


def _bincount_infer(x, *weights, length):
    return ((length,), weights[0].dtype if weights else D.int64)


BINCOUNT = defop(
    "bincount",
    infer=_bincount_infer,
    samples=lambda: [
        Sample(integers(5, 20, seed=1), length=7, ref=_np_bincount),
        Sample(integers(4, 9, seed=2), uniform(9, seed=3), length=4, ref=_np_bincount, grad=False),
        Sample(np.zeros(0, np.int64), length=0, ref=_np_bincount),
    ],
)


def _np_unique(x, dim, size):
    if dim is None:
        v, inv, cnt = np.unique(x, return_inverse=True, return_counts=True, equal_nan=False)
        return v, inv.reshape(x.shape).astype(np.int64), cnt.astype(np.int64)
    v, inv, cnt = np.unique(x, axis=dim, return_inverse=True, return_counts=True)
    return v, inv.reshape(-1).astype(np.int64), cnt.astype(np.int64)


def _unique_infer(x, dim, size):
    if dim is None:
        return [((size,), x.dtype), (x.shape, D.int64), ((size,), D.int64)]
    shape = tuple(size if i == dim else s for i, s in enumerate(x.shape))
    return [(shape, x.dtype), ((x.shape[dim],), D.int64), ((size,), D.int64)]


def _unique_samples():
    a = np.round(uniform(4, 5, seed=1))
    rows = np.round(uniform(5, 3, seed=2))[[0, 1, 0, 2, 1]]
    return [
        Sample(a, dim=None, size=len(np.unique(a)), ref=_np_unique),
        Sample(rows, dim=0, size=3, ref=_np_unique),
        Sample(rows.T.copy(), dim=1, size=3, ref=_np_unique),
    ]


UNIQUE = defop("unique", infer=_unique_infer, samples=_unique_samples)


# ----------------------------------------------------------------------------- functions
@public("nonzero")
def nonzero(input: Tensor, *, as_tuple: bool = False):
    """The int64 coordinates [N, ndim] of the non-zero elements in row-major order, as
    torch.nonzero; ``as_tuple=True`` gives one 1-D tensor per dim (numpy's form)."""
    count = int(np.count_nonzero(input._host() if input.dtype is not D.bfloat16 else
                                 input._host() & 0x7FFF))  # fmt: skip
    out = apply(NONZERO, input, count=count)
    if not as_tuple:
        return out
    if input.ndim == 0:
        return (out.reshape(-1),)
    return tuple(out[:, i].contiguous() for i in range(input.ndim))


@public("argwhere")
def argwhere(input: Tensor) -> Tensor:
    """The int64 coordinates [N, ndim] of the non-zero elements, as torch.argwhere."""
    return nonzero(input)


@public("count_nonzero")
def count_nonzero(input: Tensor, dim=None) -> Tensor:
    """The number of non-zero elements (over ``dim``, an int or a tuple; all when None) as
    int64, as torch.count_nonzero."""
    dims = norm_dims(dim, input.ndim, "count_nonzero()")
    return (input != 0).sum(dims).to(D.int64)


@public("bincount")
def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """Counts of each value of a 1-D non-negative int tensor (``weights``: their sums), of length
    ``max(input) + 1`` or ``minlength``, as torch.bincount."""
    if input.ndim != 1 or input.dtype not in (D.int64, D.int32, D.int16, D.int8, D.uint8):
        raise ShapeError(
            f"bincount(): input must be a 1-D int tensor, got {input.dtype} of shape "
            f"{tuple(input.shape)}"
        )
    if isinstance(minlength, bool) or not isinstance(minlength, (int, np.integer)) or minlength < 0:
        raise ValueError(f"bincount(): minlength must be a non-negative int, got {minlength!r}")
    data = input._host()
    if data.size and data.min() < 0:
        raise ValueError(f"bincount(): input must be non-negative, got {int(data.min())}")
    length = max(int(data.max()) + 1 if data.size else 0, int(minlength))
    ins = [input]
    if weights is not None:
        if tuple(weights.shape) != tuple(input.shape):
            raise ShapeError(
                f"bincount(): weights shape {tuple(weights.shape)} must match input shape "
                f"{tuple(input.shape)}"
            )
        if not weights.dtype.is_floating_point:
            weights = weights.to(D.float64)
        ins.append(weights.detach())
    return apply(BINCOUNT, *ins, length=length)


@public("unique")
def unique(
    input: Tensor,
    sorted: bool = True,  # noqa: A002 - PyTorch's name
    return_inverse: bool = False,
    return_counts: bool = False,
    dim=None,
):
    """The sorted distinct values of input (of its slices along ``dim``), as torch.unique; with
    ``return_inverse`` where each element went, with ``return_counts`` how often each occurs.
    NaNs are distinct from each other, as PyTorch's. ``sorted=False`` gives sorted values too, as
    PyTorch's CPU unique does."""
    if dim is not None:
        dim = wrap_dim(dim, input.ndim, "unique()")
        if input.ndim == 0:
            raise ShapeError("unique(): dim given but the input is 0-d")
    if input.dtype is D.bfloat16:
        raise DTypeError("unique(): bfloat16 tensors are not supported; convert with .float()")
    data = input._host()
    if dim is None:
        size = len(np.unique(data, equal_nan=False))
    else:
        size = np.unique(data, axis=dim).shape[dim] if data.size else 0
    vals, inv, cnt = apply(UNIQUE, input, dim=dim, size=size)
    out = (vals,) + ((inv,) if return_inverse else ()) + ((cnt,) if return_counts else ())
    return out[0] if len(out) == 1 else out
