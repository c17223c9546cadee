"""Scatter: scatter (write src or a value at the positions index names along a dim) and
scatter_reduce (sum, prod, mean, amax, amin, with or without the input's own values) as ops;
index_add, index_copy, index_fill and take_along_dim as compositions (scatter_add and gather
are in indexing.py).

kernels: backends/cpu/kernels/scatter.py (numpy); none on Vulkan (these ops run on the CPU).
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..autograd.grad_mode import no_grad
from ..creation import full, ones
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .api import public
from .common import check_indices, scalar_tensor
from .elementwise import where
from .indexing import _real_dim, gather, scatter_add
from .registry import apply, defop
from .samples import Sample, integers, uniform, via

_REDUCES = ("sum", "prod", "mean", "amax", "amin")


def _positions(index: np.ndarray, dim: int) -> tuple:
    grids = list(np.indices(index.shape, sparse=True))
    grids[dim] = index
    return tuple(grids)


def _np_scatter_reduce(x, index, src, dim, reduce, include_self) -> np.ndarray:
    """The float64 reference, element by element: positions index names get src's values
    reduced with ``reduce`` (and with x's own value when include_self); others keep x's."""
    groups: dict = {}
    for pos in np.ndindex(*index.shape):
        at = list(pos)
        at[dim] = int(index[pos])
        groups.setdefault(tuple(at), []).append(src[pos])
    out = x.copy()
    fns = {"sum": np.sum, "prod": np.prod, "mean": np.mean, "amax": np.max, "amin": np.min}
    for at, vals in groups.items():
        out[at] = fns[reduce](([x[at]] if include_self else []) + vals)
    return out


def _np_scatter(x, index, src, dim):
    out = x.copy()
    out[_positions(index, dim)] = src[tuple(slice(0, s) for s in index.shape)]
    return out


# ----------------------------------------------------------------------------- scatter
def _scatter_bwd(ctx, g):
    (index,) = ctx.saved
    dim = ctx.attrs["dim"]
    need_x, _, need_src = ctx.needs_input_grad
    gx = _masked(g, dim, index) if need_x else None
    return gx, None, (gather(g, dim, index) if need_src else None)


def _masked(g: Tensor, dim: int, index: Tensor) -> Tensor:
    """g with zeros at the positions index names (their values were overwritten)."""
    zero = scalar_tensor(0, g.dtype).expand(*index.shape)
    return apply(SCATTER, g, index, zero, dim=dim)


def _unique_rows(n: int, rows: int, cols: int, seed: int) -> np.ndarray:
    """[rows, cols] int64 indices below n, distinct within each column (dim 0 scatters)."""
    rng = np.random.default_rng(seed)
    return np.stack([rng.permutation(n)[:rows] for _ in range(cols)], axis=1)


SCATTER = defop(
    "scatter",
    infer=lambda x, index, src, dim: (x.shape, x.dtype),
    save_inputs=(1,),
    backward=_scatter_bwd,
    samples=lambda: [
        Sample(
            uniform(4, 3, seed=1),
            _unique_rows(4, 3, 3, 2),
            uniform(3, 3, seed=3),
            dim=0,
            ref=_np_scatter,
        ),
        Sample(
            uniform(3, 5, seed=4),
            _unique_rows(5, 2, 3, 5).T.copy(),
            uniform(3, 4, seed=6),
            dim=1,
            ref=_np_scatter,
            # src larger than index: only index's region is read
            call=via(lambda x, i, s, dim: scatter(x, dim, i, s)),
        ),
        Sample(
            uniform(3, 4, seed=7),
            integers(4, 3, 4, seed=8),
            uniform(3, 4, seed=9),
            dim=1,
            ref=_np_scatter,
            grad=False,
        ),  # repeated indices: one write wins
    ],
)


def _scatter_reduce_bwd(ctx, g):
    x, index, src, out = ctx.saved
    dim, reduce, inc = ctx.attrs["dim"], ctx.attrs["reduce"], ctx.attrs["include_self"]
    need_x, _, need_src = ctx.needs_input_grad
    part = src[tuple(slice(0, s) for s in index.shape)]
    if reduce in ("sum", "mean"):
        if reduce == "mean":
            cnt = full(tuple(x.shape), 1.0 if inc else 0.0, dtype=g.dtype, device=g.device)
            cnt = scatter_add(cnt, dim, index, ones(tuple(index.shape), dtype=g.dtype))
            g = g / cnt.clamp(min=1.0)
        gx = g if inc else _masked(g, dim, index)
        gs = gather(g, dim, index)
    elif reduce == "prod":
        gx, gs = _prod_grads(g, x, index, part, dim, inc)
    else:  # amax / amin: ties share the gradient evenly
        with no_grad():
            at_src = (part == gather(out, dim, index)).to(g.dtype)
            at_self = (x == out).to(g.dtype)
            if not inc:
                at_self = _masked(at_self, dim, index)
            cnt = scatter_add(at_self, dim, index, at_src)
        gc = g / cnt.clamp(min=1.0)
        gx = gc * at_self
        gs = gather(gc, dim, index) * at_src
    return (gx if need_x else None), None, (gs if need_src else None)


def _prod_grads(g, x, index, part, dim: int, inc: bool):
    """The gradients of a scatter product, exact where factors are zero (``out / v`` is not): a
    factor's gradient is the product of the other factors of its position, i.e. the product of
    the position's non-zero factors when it holds no zero, divided by the factor itself; that
    product for the one zero factor of a position with exactly one; 0 otherwise."""
    with no_grad():
        zx = (
            (x == 0).to(g.dtype)
            if inc
            else full(tuple(x.shape), 0.0, dtype=g.dtype, device=x.device.type)
        )
        zeros = scatter_add(zx, dim, index, (part == 0).to(g.dtype))  # zero factors per position
    one = scalar_tensor(1.0, x.dtype)
    # with the graph (when backward records one): second derivatives go through it
    nonzero_prod = apply(
        SCATTER_REDUCE,
        where(x == 0, one, x),
        index,
        where(part == 0, one, part),
        dim=dim,
        reduce="prod",
        include_self=inc,
    )

    def factor(v, z, p):
        zero = scalar_tensor(0.0, v.dtype)
        return where(v == 0, where(z == 1, p, zero), where(z == 0, p / where(v == 0, one, v), zero))

    gx = g * factor(x, zeros, nonzero_prod) if inc else _masked(g, dim, index)
    gs = gather(g, dim, index) * factor(
        part, gather(zeros, dim, index), gather(nonzero_prod, dim, index)
    )
    return gx, gs


def _scatter_reduce_samples():
    def s(x, idx, src, dim, reduce, inc, **kw):
        return Sample(
            x, idx, src, dim=dim, reduce=reduce, include_self=inc, ref=_np_scatter_reduce, **kw
        )

    out = []
    for k, reduce in enumerate(_REDUCES):
        for inc in (True, False):
            seed = 10 * k + (5 if inc else 0)
            low = 0.5 if reduce == "prod" else -2.0  # no zeros: prod's gradient divides
            out.append(
                s(
                    uniform(3, 5, seed=seed, low=low),
                    integers(5, 3, 4, seed=seed + 1),
                    uniform(3, 4, seed=seed + 2, low=low),
                    1,
                    reduce,
                    inc,
                )
            )
        if reduce == "prod":  # exact zeros: one per position, two in a position, in x and src
            x0 = uniform(3, 5, seed=70, low=0.5)
            x0[0, 1] = x0[2, 3] = 0.0
            src0 = uniform(3, 4, seed=71, low=0.5)
            src0[0, 0] = src0[1, 2] = src0[2, 1] = 0.0
            for inc in (True, False):
                out.append(s(x0, integers(5, 3, 4, seed=72), src0, 1, reduce, inc))
        out.append(
            s(
                uniform(4, 3, seed=60 + k),
                integers(4, 5, 3, seed=61 + k),
                uniform(5, 3, seed=62 + k),
                0,
                reduce,
                False,
            )
        )
    return out


SCATTER_REDUCE = defop(
    "scatter_reduce",
    infer=lambda x, index, src, dim, reduce, include_self: (x.shape, x.dtype),
    save_inputs=(0, 1, 2),
    save_outputs=(0,),
    backward=_scatter_reduce_bwd,
    samples=_scatter_reduce_samples,
)


# ----------------------------------------------------------------------------- functions
def _scatter_args(op: str, input: Tensor, dim, index: Tensor, src) -> tuple:
    """(dim, src) checked as PyTorch's scatter family does: int64 index with input's number
    of dims, no larger than src in any dim nor than input outside dim, values in range."""
    d = _real_dim(dim, input, op)
    if index.dtype is not D.int64:
        raise DTypeError(f"{op}(): index must be int64, got {index.dtype}")
    if not isinstance(src, Tensor):
        src = scalar_tensor(src, input.dtype).expand(*index.shape)
    if index.ndim != input.ndim or src.ndim != input.ndim:
        raise ShapeError(
            f"{op}(): input, index and src must have the same number of dims; got shapes "
            f"{tuple(input.shape)}, {tuple(index.shape)}, {tuple(src.shape)}"
        )
    for i in range(input.ndim):
        if index.shape[i] > src.shape[i] or (i != d and index.shape[i] > input.shape[i]):
            raise ShapeError(
                f"{op}(): index shape {tuple(index.shape)} is too large for input "
                f"{tuple(input.shape)} / src {tuple(src.shape)} in dim {i}"
            )
    check_indices(op, index, input.shape[d], f"dim {d}")
    if src.dtype is not input.dtype:
        src = src.to(input.dtype)
    if tuple(src.shape) != tuple(index.shape):
        src = src[tuple(slice(0, n) for n in index.shape)]  # only index's region is read
    return d, src


@public("scatter", inplace=True, saves_self=False)
def scatter(input: Tensor, dim: int, index: Tensor, src=None, *, value=None, reduce=None) -> Tensor:
    """A copy of input with ``src``'s values (or the number ``value``) written at the positions
    ``index`` names along ``dim``, as torch.scatter (``reduce='add'`` / ``'multiply'``
    combine instead of overwriting)."""
    if src is None:
        if value is None:
            raise TypeError("scatter(): give src (a Tensor) or value (a number)")
        src = value
    if reduce is not None:
        kinds = {"add": "sum", "multiply": "prod"}
        if reduce not in kinds:
            raise ValueError(f"scatter(): reduce must be 'add' or 'multiply', got {reduce!r}")
        d, s = _scatter_args("scatter", input, dim, index, src)
        return apply(
            SCATTER_REDUCE, input, index, s, dim=d, reduce=kinds[reduce], include_self=True
        )
    d, s = _scatter_args("scatter", input, dim, index, src)
    return apply(SCATTER, input, index, s, dim=d)


@public("scatter_reduce", inplace=True)
def scatter_reduce(
    input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *, include_self: bool = True
) -> Tensor:
    """A copy of input where the positions ``index`` names along ``dim`` hold src's values
    reduced by ``reduce`` ('sum', 'prod', 'mean', 'amax', 'amin'), together with input's own
    value unless ``include_self=False``, as torch.scatter_reduce. amax/amin share the gradient
    among ties."""
    if reduce not in _REDUCES:
        raise ValueError(f"scatter_reduce(): reduce must be one of {_REDUCES}, got {reduce!r}")
    d, s = _scatter_args("scatter_reduce", input, dim, index, src)
    return apply(
        SCATTER_REDUCE, input, index, s, dim=d, reduce=reduce, include_self=bool(include_self)
    )


def _index_along(op: str, input: Tensor, dim, index: Tensor, shape) -> tuple:
    """(dim, index expanded to ``shape``): a 1-D index of rows along dim as scatter's index."""
    d = _real_dim(dim, input, op)
    if index.dtype not in (D.int64, D.int32) or index.ndim > 1:
        raise DTypeError(
            f"{op}(): index must be a 0-d or 1-D int64 tensor, got {index.dtype} of shape "
            f"{tuple(index.shape)}"
        )
    index = index.reshape(-1).to(D.int64)
    check_indices(op, index, input.shape[d], f"dim {d}")
    view = [1] * input.ndim
    view[d] = -1
    shape = list(shape)
    if shape[d] != index.numel():
        raise ShapeError(
            f"{op}(): index has {index.numel()} entries but the source has {shape[d]} along "
            f"dim {d} (shape {tuple(shape)})"
        )
    return d, index.reshape(view).expand(*shape)


def _source(op: str, input: Tensor, dim: int, source: Tensor) -> None:
    if source.ndim != input.ndim or any(
        a != b for i, (a, b) in enumerate(zip(source.shape, input.shape)) if i != dim
    ):
        raise ShapeError(
            f"{op}(): source shape {tuple(source.shape)} must match input shape "
            f"{tuple(input.shape)} in every dim but {dim}"
        )


@public("index_add", inplace=True, saves_self=False)
def index_add(input: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha=1) -> Tensor:
    """A copy of input with ``alpha * source``'s slices along ``dim`` added at the rows
    ``index`` names (repeated rows sum), as torch.index_add."""
    d = _real_dim(dim, input, "index_add")
    _source("index_add", input, d, source)
    d, idx = _index_along("index_add", input, d, index, source.shape)
    return scatter_add(input, d, idx, source if alpha == 1 else source * alpha)


@public("index_copy", inplace=True, saves_self=False)
def index_copy(input: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    """A copy of input with ``source``'s slices along ``dim`` written at the rows ``index``
    names, as torch.index_copy."""
    d = _real_dim(dim, input, "index_copy")
    _source("index_copy", input, d, source)
    d, idx = _index_along("index_copy", input, d, index, source.shape)
    return scatter(input, d, idx, source)


@public("index_fill", inplace=True, saves_self=False)
def index_fill(input: Tensor, dim: int, index: Tensor, value) -> Tensor:
    """A copy of input with the rows ``index`` names along ``dim`` set to ``value``, as
    torch.index_fill."""
    d = _real_dim(dim, input, "index_fill")
    shape = list(input.shape)
    shape[d] = index.numel()
    d, idx = _index_along("index_fill", input, d, index, shape)
    if isinstance(value, Tensor):
        if value.ndim:
            raise ShapeError(
                f"index_fill(): value must be a number or a 0-d tensor, got {value.shape}"
            )
        return where(
            scatter(full(tuple(input.shape), False, dtype=D.bool_), d, idx, True),
            value.to(input.dtype),
            input,
        )
    return scatter(input, d, idx, value=value)


@public("take_along_dim")
def take_along_dim(input: Tensor, indices: Tensor, dim=None) -> Tensor:
    """Values of input at ``indices`` along ``dim`` (input and indices broadcast against each
    other outside dim), or of the flattened input when dim is None, as torch.take_along_dim."""
    if indices.dtype is not D.int64:
        raise DTypeError(f"take_along_dim(): indices must be int64, got {indices.dtype}")
    if dim is None:
        return gather(input.reshape(-1), 0, indices.reshape(-1))
    d = _real_dim(dim, input, "take_along_dim")
    if indices.ndim != input.ndim:
        raise ShapeError(
            f"take_along_dim(): input and indices must have the same number of dims, got shapes "
            f"{tuple(input.shape)} and {tuple(indices.shape)}"
        )
    xs, ids = list(input.shape), list(indices.shape)
    for i in range(input.ndim):
        if i != d and xs[i] != ids[i]:
            if 1 not in (xs[i], ids[i]):
                raise ShapeError(
                    f"take_along_dim(): shapes {tuple(input.shape)} and {tuple(indices.shape)} "
                    f"do not broadcast outside dim {d}"
                )
            xs[i] = ids[i] = max(xs[i], ids[i])
    check_indices("take_along_dim", indices, input.shape[d], f"dim {d}")
    return gather(input.expand(*xs), d, indices.expand(*ids))
