"""Reductions: sum, mean, max/min (values, or values and indices along a dim), argmax/argmin,
all/any, and the compositions built on them (var, std, sum_to_size, norm)."""

from __future__ import annotations

import builtins
from collections import namedtuple

from .. import dtypes as D
from ..errors import GpucoreIndexError, ShapeError
from ..tensor import Tensor
from .common import method, norm_dims, reduced_shape, wrap_dim
from .registry import apply, defop

# what x.max(dim) / x.min(dim) return: named tuples with PyTorch's type names
_RETURN_TYPES = {n: namedtuple(n, ["values", "indices"]) for n in ("max", "min")}


def _grad_back(g: Tensor, shape: tuple, dims: tuple, keepdim: bool) -> Tensor:
    """Broadcast a reduced gradient back over the reduced dims."""
    if not keepdim:
        g = g.reshape(reduced_shape(shape, dims, True))
    return g.expand(shape)


def _sum_infer(x, dims, keepdim):
    dt = x.dtype if x.dtype.is_floating_point else D.int64
    return (reduced_shape(x.shape, dims, keepdim), dt)


def _sum_bwd(ctx, g):
    return _grad_back(g, ctx.attrs["shape"], ctx.attrs["dims"], ctx.attrs["keepdim"])


def _mean_bwd(ctx, g):
    a = ctx.attrs
    n = 1
    for d in a["dims"]:
        n *= a["shape"][d]
    return _grad_back(g, a["shape"], a["dims"], a["keepdim"]) / builtins.max(n, 1)


def _mean_infer(x, dims, keepdim, shape):
    return (reduced_shape(x.shape, dims, keepdim), x.dtype)


SUM = defop(
    "sum", infer=lambda x, dims, keepdim, shape: _sum_infer(x, dims, keepdim), backward=_sum_bwd
)
MEAN = defop("mean", infer=_mean_infer, backward=_mean_bwd)


def _extreme_bwd(ctx, g):
    # Ties share the gradient evenly, as PyTorch's amax/amin.
    x, out = ctx.saved
    a = ctx.attrs
    back = out if a["keepdim"] else out.reshape(reduced_shape(a["shape"], a["dims"], True))
    mask = (x == back).to(g.dtype)
    count = mask.sum(dim=a["dims"], keepdim=True)
    return _grad_back(g, a["shape"], a["dims"], a["keepdim"]) * mask / count


def _extreme_infer(name):
    def infer(x, dims, keepdim, shape):
        for d in dims:
            if x.shape[d] == 0:
                raise GpucoreIndexError(
                    f"{name}(): cannot reduce over dim {d} of size 0 (shape {tuple(x.shape)}); "
                    "there is no identity for this reduction"
                )
        return (reduced_shape(x.shape, dims, keepdim), x.dtype)

    return infer


AMAX = defop(
    "amax", infer=_extreme_infer("amax"), save_inputs=(0,), save_outputs=(0,), backward=_extreme_bwd
)
AMIN = defop(
    "amin", infer=_extreme_infer("amin"), save_inputs=(0,), save_outputs=(0,), backward=_extreme_bwd
)


def _dim_infer(name):
    def infer(x, dim, keepdim):
        if x.ndim and x.shape[dim] == 0:
            raise GpucoreIndexError(
                f"{name}(): cannot reduce over dim {dim} of size 0 (shape {tuple(x.shape)})"
            )
        shape = reduced_shape(x.shape, (dim,), keepdim) if x.ndim else ()
        return [(shape, x.dtype), (shape, D.int64)]

    return infer


def _dim_bwd(ctx, g):
    from ..creation import zeros
    from .indexing import scatter_add

    (x, idx) = ctx.saved
    dim, keepdim = ctx.attrs["dim"], ctx.attrs["keepdim"]
    if x.ndim == 0:
        return g
    if not keepdim:
        g = g.unsqueeze(dim)
        idx = idx.unsqueeze(dim)
    return scatter_add(zeros(x.shape, dtype=g.dtype), dim, idx, g)


MAX_DIM = defop(
    "max_dim", infer=_dim_infer("max"), save_inputs=(0,), save_outputs=(1,), backward=_dim_bwd
)
MIN_DIM = defop(
    "min_dim", infer=_dim_infer("min"), save_inputs=(0,), save_outputs=(1,), backward=_dim_bwd
)


def _arg_infer(name):
    def infer(x, dim, keepdim):
        if x.numel() == 0:
            raise GpucoreIndexError(
                f"{name}(): cannot take {name} of an empty tensor (shape {tuple(x.shape)})"
            )
        if dim is None:
            return ((1,) * x.ndim if keepdim else (), D.int64)
        return (reduced_shape(x.shape, (dim,), keepdim), D.int64)

    return infer


ARGMAX = defop("argmax", infer=_arg_infer("argmax"))
ARGMIN = defop("argmin", infer=_arg_infer("argmin"))
ALL = defop("all", infer=lambda x, dims, keepdim: (reduced_shape(x.shape, dims, keepdim), D.bool_))
ANY = defop("any", infer=lambda x, dims, keepdim: (reduced_shape(x.shape, dims, keepdim), D.bool_))


# ----------------------------------------------------------------------------- functions
@method("sum")
def sum(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:  # noqa: A001
    """Sum over ``dim`` (an int, a tuple, or None for all); ints and bools sum to int64."""
    if dtype is not None:
        input = input.to(dtype)
    dims = norm_dims(dim, input.ndim, "sum")
    return apply(SUM, input, dims=dims, keepdim=keepdim, shape=input.shape)


@method("mean")
def mean(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Arithmetic mean over ``dim``; floating dtypes only, as PyTorch."""
    if dtype is not None:
        input = input.to(dtype)
    if not input.dtype.is_floating_point:
        from ..errors import DTypeError

        raise DTypeError(
            f"mean(): could not infer output dtype from {input.dtype}; use x.float().mean() "
            "or pass dtype=gpucore.float32"
        )
    dims = norm_dims(dim, input.ndim, "mean")
    return apply(MEAN, input, dims=dims, keepdim=keepdim, shape=input.shape)


@method("amax")
def amax(input: Tensor, dim=(), keepdim: bool = False) -> Tensor:
    """Maximum over ``dim`` (all dims when empty); ties share the gradient."""
    dims = norm_dims(None if dim == () else dim, input.ndim, "amax")
    return apply(AMAX, input, dims=dims, keepdim=keepdim, shape=input.shape)


@method("amin")
def amin(input: Tensor, dim=(), keepdim: bool = False) -> Tensor:
    """Minimum over ``dim`` (all dims when empty); ties share the gradient."""
    dims = norm_dims(None if dim == () else dim, input.ndim, "amin")
    return apply(AMIN, input, dims=dims, keepdim=keepdim, shape=input.shape)


def _max_min(name, op_dim, full, input, dim, keepdim, other):
    if isinstance(dim, Tensor) or other is not None:
        from . import elementwise as E

        o = other if other is not None else dim
        return (E.maximum if name == "max" else E.minimum)(input, o)
    if dim is None:
        return full(input)
    d = wrap_dim(dim, input.ndim, name)
    v, i = apply(op_dim, input, dim=d, keepdim=keepdim)
    return _RETURN_TYPES[name](v, i)


@method("max")
def max(input: Tensor, dim=None, keepdim: bool = False, other=None):  # noqa: A001
    """``max()`` -> scalar tensor; ``max(dim)`` -> (values, indices); ``max(other)`` -> maximum."""
    return _max_min("max", MAX_DIM, amax, input, dim, keepdim, other)


@method("min")
def min(input: Tensor, dim=None, keepdim: bool = False, other=None):  # noqa: A001
    """``min()`` -> scalar tensor; ``min(dim)`` -> (values, indices); ``min(other)`` -> minimum."""
    return _max_min("min", MIN_DIM, amin, input, dim, keepdim, other)


@method("argmax")
def argmax(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Index of the maximum (flattened when dim is None); the first one on ties, NaN wins."""
    d = None if dim is None else wrap_dim(dim, input.ndim, "argmax")
    return apply(ARGMAX, input, dim=d, keepdim=keepdim)


@method("argmin")
def argmin(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Index of the minimum (flattened when dim is None); the first one on ties, NaN wins."""
    d = None if dim is None else wrap_dim(dim, input.ndim, "argmin")
    return apply(ARGMIN, input, dim=d, keepdim=keepdim)


@method("all")
def all(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A001
    """True where every element (along dim) is nonzero."""
    return apply(ALL, input, dims=norm_dims(dim, input.ndim, "all"), keepdim=keepdim)


@method("any")
def any(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A001
    """True where some element (along dim) is nonzero."""
    return apply(ANY, input, dims=norm_dims(dim, input.ndim, "any"), keepdim=keepdim)


@method("var")
def var(input: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None):
    """Variance over dim with Bessel's correction by default (correction=1), as PyTorch."""
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    dims = norm_dims(dim, input.ndim, "var")
    n = 1
    for d in dims:
        n *= input.shape[d]
    centered = input - input.mean(dims, keepdim=True)
    return (centered * centered).sum(dims, keepdim=keepdim) / builtins.max(n - correction, 0)


@method("std")
def std(input: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None):
    """Standard deviation: sqrt of var."""
    return var(input, dim, unbiased, keepdim, correction=correction).sqrt()


@method("norm")
def norm(input: Tensor, p="fro", dim=None, keepdim: bool = False) -> Tensor:
    """Vector p-norm over dim (p = 0, 1, 2, inf, -inf or any positive number; 'fro', the
    default, is the 2-norm of the elements), as torch.norm.

    The gradient at an all-zero slice is 0 (as PyTorch), not the 0/0 of the chain rule."""
    if isinstance(p, str):
        if p != "fro":
            raise ValueError(
                f"norm(): p={p!r} is not supported; use 'fro', 0, 1, 2, inf, -inf or a positive "
                "number"
            )
        p = 2
    if p == 2:
        return _safe_root((input * input).sum(dim, keepdim), 0.5)
    if p == 1:
        return input.abs().sum(dim, keepdim)
    if p == float("inf"):
        return input.abs().amax(() if dim is None else dim, keepdim)
    if p == -float("inf"):
        return input.abs().amin(() if dim is None else dim, keepdim)
    if p == 0:
        return (input != 0).to(input.dtype).sum(dim, keepdim)
    if p < 0:
        raise ValueError(f"norm(): p must be 0, inf, -inf or positive, got {p}")
    return _safe_root((input.abs() ** p).sum(dim, keepdim), 1.0 / p)


def _safe_root(s: Tensor, e: float) -> Tensor:
    """s ** e for s >= 0, with gradient 0 (not nan) where s == 0."""
    from .elementwise import where

    zero = s == 0
    return where(zero, 0.0, where(zero, 1.0, s) ** e)


@method("sum_to_size")
def sum_to_size(input: Tensor, *size) -> Tensor:
    """Sum broadcast dims away so the result has ``size`` (the inverse of expand)."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    shape = tuple(input.shape)
    lead = len(shape) - len(size)
    if lead < 0:
        raise ShapeError(f"sum_to_size: shape {shape} cannot be reduced to {tuple(size)}")
    dims = list(range(lead))
    for i, s in enumerate(size):
        if s == 1 and shape[lead + i] != 1:
            dims.append(lead + i)
        elif s != shape[lead + i]:
            raise ShapeError(f"sum_to_size: shape {shape} cannot be reduced to {tuple(size)}")
    out = input.sum(tuple(dims), keepdim=True) if dims else input
    return out.reshape(tuple(size)) if out.shape != tuple(size) else out
