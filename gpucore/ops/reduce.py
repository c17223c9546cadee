"""Reductions: sum, mean, max/min (values, or values and indices along a dim), argmax/argmin,
all/any, and the compositions built on them (var, std, sum_to_size, norm).

kernels: backends/cpu/kernels/reduce.py (cpu/reduce.c), backends/vulkan/kernels/reduce.py
(shaders/reduce.comp)."""

from __future__ import annotations

import builtins
from collections import namedtuple

import numpy as np

from .. import dtypes as D
from ..creation import zeros
from ..errors import DTypeError, GpucoreIndexError, ShapeError
from ..tensor import Tensor
from .api import public
from .common import norm_dims, reduced_shape, wrap_dim
from .elementwise import maximum, minimum, where
from .indexing import scatter_add
from .registry import apply, defop
from .samples import Sample, halves, integers, uniform, via

# what x.max(dim) / x.min(dim) return: named tuples with PyTorch's type names
_RETURN_TYPES = {n: namedtuple(n, ["values", "indices"]) for n in ("max", "min")}


# ----------------------------------------------------------------------------- samples
# Built lazily by the test harness; the public functions they call (sum, max...) are this
# module's, defined below.
def _reduce_samples(np_fn, public_fn, ints=False, ties=False, empty=False):
    """sum/mean/amax/amin: adjacent and non-adjacent dims (a permuted copy), keepdim, all dims,
    0-d, a strided input with a negative dim through the public function, and two large
    reductions (long columns and one long row, both split into chunks on Vulkan)."""

    def ref(x, dims, keepdim, shape):
        return np_fn(x, axis=dims, keepdims=keepdim)

    def s(x, dims, keepdim=False, **kw):
        return Sample(x, dims=dims, keepdim=keepdim, shape=x.shape, ref=ref, **kw)

    def samples():
        out = [
            s(uniform(3, 4, 5, seed=1), (1,), True),
            s(uniform(3, 4, 5, seed=2), (0, 2)),
            s(uniform(2, 3, seed=3), (0, 1)),
            s(uniform(seed=4), ()),
            s(uniform(70, 65, seed=5), (0,), grad=False),
            s(uniform(4100, seed=6), (0,), True, grad=False),
            Sample(
                uniform(4, 3, seed=7),
                ref=lambda x: np_fn(x.T, axis=-1, keepdims=True),
                call=via(lambda x: public_fn()(x.mT, -1, True)),
            ),
        ]
        if ties:  # forward only: ties share the gradient, finite differences do not
            out.append(s(halves(4, 6, seed=8), (1,), grad=False))
        if empty:
            out.append(s(np.zeros((0, 3)), (0,)))
        if ints:  # numpy paths of the CPU kernel; the shaders take float32 only
            out += [
                s(integers(9, 3, 4, low=-9, seed=9), (1,), on_vulkan=False),
                s(integers(2, 2, 5, seed=10).astype(bool), (0, 1), on_vulkan=False),
            ]
        return out

    return samples


def _dim_samples(np_val, np_arg, public_fn):
    """max_dim/min_dim (values + int64 indices): keepdim, inner and last dims, 1-D, 0-d, ties
    (the first index wins), large, int64, and a strided input with a negative dim."""

    def ref(x, dim, keepdim):
        if x.ndim == 0:
            return x.copy(), np.zeros((), np.int64)
        return (
            np_val(x, axis=dim, keepdims=keepdim),
            np_arg(x, axis=dim, keepdims=keepdim).astype(np.int64),
        )

    def samples():
        return [
            Sample(uniform(3, 4, 5, seed=1), dim=1, keepdim=True, ref=ref),
            Sample(uniform(3, 4, 5, seed=2), dim=2, keepdim=False, ref=ref),
            Sample(uniform(5, seed=3), dim=0, keepdim=False, ref=ref),
            Sample(uniform(seed=4), dim=0, keepdim=False, ref=ref),
            Sample(halves(4, 6, seed=5), dim=1, keepdim=False, ref=ref, grad=False),
            Sample(uniform(70, 65, seed=6), dim=0, keepdim=False, ref=ref, grad=False),
            Sample(uniform(4100, seed=7), dim=0, keepdim=True, ref=ref, grad=False),
            Sample(
                integers(9, 3, 4, low=-9, seed=8), dim=0, keepdim=False, ref=ref, on_vulkan=False
            ),
            Sample(
                uniform(4, 3, seed=9),
                ref=lambda x: ref(x.T, -1, False),
                call=via(lambda x: public_fn()(x.mT, -1)),
            ),
        ]

    return samples


def _arg_samples(np_arg):
    """argmax/argmin: flattened (dim None, with and without keepdim), along a dim, ties (the
    first index wins), 0-d, large, int64."""

    def ref(x, dim, keepdim):
        if dim is None:
            return np.array(np_arg(x), np.int64).reshape((1,) * x.ndim if keepdim else ())
        return np_arg(x, axis=dim, keepdims=keepdim).astype(np.int64)

    def samples():
        return [
            Sample(uniform(3, 4, 5, seed=1), dim=None, keepdim=False, ref=ref),
            Sample(uniform(3, 4, 5, seed=2), dim=None, keepdim=True, ref=ref),
            Sample(uniform(3, 4, seed=3), dim=1, keepdim=True, ref=ref),
            Sample(halves(4, 6, seed=4), dim=1, keepdim=False, ref=ref),
            Sample(halves(5, 7, seed=5), dim=None, keepdim=False, ref=ref),
            Sample(uniform(seed=6), dim=None, keepdim=False, ref=ref),
            Sample(uniform(70, 65, seed=7), dim=0, keepdim=False, ref=ref),
            Sample(uniform(4100, seed=8), dim=None, keepdim=False, ref=ref),
            Sample(
                integers(9, 3, 4, low=-9, seed=9), dim=0, keepdim=False, ref=ref, on_vulkan=False
            ),
        ]

    return samples


def _logical_samples(np_fn):
    """all/any over bool and float inputs: rows all true, mixed and all false; keepdim;
    non-adjacent dims; an empty reduced dim (all -> True, any -> False); 0-d."""

    def ref(x, dims, keepdim):
        return np_fn(x, axis=dims, keepdims=keepdim)

    def samples():
        rows = np.array([[1, 1, 1], [1, 0, 1], [0, 0, 0], [0.5, -2, 3]])
        return [
            Sample(rows.astype(bool), dims=(1,), keepdim=False, ref=ref),
            Sample(rows, dims=(0,), keepdim=True, ref=ref),
            Sample(
                np.where(uniform(2, 3, 4, seed=1) > 0, uniform(2, 3, 4, seed=2), 0.0),
                dims=(0, 2),
                keepdim=False,
                ref=ref,
            ),
            Sample(np.zeros((0, 3), bool), dims=(0,), keepdim=False, ref=ref),
            Sample(np.array(True), dims=(), keepdim=False, ref=ref),
        ]

    return samples


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
    "sum",
    infer=lambda x, dims, keepdim, shape: _sum_infer(x, dims, keepdim),
    backward=_sum_bwd,
    samples=_reduce_samples(np.sum, lambda: sum, ints=True, empty=True),
)
MEAN = defop(
    "mean", infer=_mean_infer, backward=_mean_bwd, samples=_reduce_samples(np.mean, lambda: mean)
)


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
    "amax",
    infer=_extreme_infer("amax"),
    save_inputs=(0,),
    save_outputs=(0,),
    backward=_extreme_bwd,
    samples=_reduce_samples(np.amax, lambda: amax, ints=True, ties=True),
)
AMIN = defop(
    "amin",
    infer=_extreme_infer("amin"),
    save_inputs=(0,),
    save_outputs=(0,),
    backward=_extreme_bwd,
    samples=_reduce_samples(np.amin, lambda: amin, ints=True, ties=True),
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
    (x, idx) = ctx.saved
    dim, keepdim = ctx.attrs["dim"], ctx.attrs["keepdim"]
    if x.ndim == 0:
        return g
    if not keepdim:
        g = g.unsqueeze(dim)
        idx = idx.unsqueeze(dim)
    return scatter_add(zeros(x.shape, dtype=g.dtype), dim, idx, g)


MAX_DIM = defop(
    "max_dim",
    infer=_dim_infer("max"),
    save_inputs=(0,),
    save_outputs=(1,),
    backward=_dim_bwd,
    samples=_dim_samples(np.max, np.argmax, lambda: max),
)
MIN_DIM = defop(
    "min_dim",
    infer=_dim_infer("min"),
    save_inputs=(0,),
    save_outputs=(1,),
    backward=_dim_bwd,
    samples=_dim_samples(np.min, np.argmin, lambda: min),
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


ARGMAX = defop("argmax", infer=_arg_infer("argmax"), samples=_arg_samples(np.argmax))
ARGMIN = defop("argmin", infer=_arg_infer("argmin"), samples=_arg_samples(np.argmin))
ALL = defop(
    "all",
    infer=lambda x, dims, keepdim: (reduced_shape(x.shape, dims, keepdim), D.bool_),
    samples=_logical_samples(np.all),
)
ANY = defop(
    "any",
    infer=lambda x, dims, keepdim: (reduced_shape(x.shape, dims, keepdim), D.bool_),
    samples=_logical_samples(np.any),
)


# ----------------------------------------------------------------------------- functions
@public("sum")
def sum(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:  # noqa: A001
    """Sum over ``dim`` (an int, a tuple, or None for all); ints and bools sum to int64, or to
    ``dtype`` when given (wrapping as PyTorch's sum in that type)."""
    if dtype is not None:
        input = input.to(dtype)
    dims = norm_dims(dim, input.ndim, "sum")
    out = apply(SUM, input, dims=dims, keepdim=keepdim, shape=input.shape)
    return out if dtype is None or out.dtype is input.dtype else out.to(input.dtype)


@public("mean")
def mean(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Arithmetic mean over ``dim``; floating dtypes only, as PyTorch."""
    if dtype is not None:
        input = input.to(dtype)
    if not input.dtype.is_floating_point:
        raise DTypeError(
            f"mean(): could not infer output dtype from {input.dtype}; use x.float().mean() "
            "or pass dtype=gpucore.float32"
        )
    dims = norm_dims(dim, input.ndim, "mean")
    return apply(MEAN, input, dims=dims, keepdim=keepdim, shape=input.shape)


@public("amax")
def amax(input: Tensor, dim=(), keepdim: bool = False) -> Tensor:
    """Maximum over ``dim`` (all dims when empty); ties share the gradient."""
    dims = norm_dims(None if dim == () else dim, input.ndim, "amax")
    return apply(AMAX, input, dims=dims, keepdim=keepdim, shape=input.shape)


@public("amin")
def amin(input: Tensor, dim=(), keepdim: bool = False) -> Tensor:
    """Minimum over ``dim`` (all dims when empty); ties share the gradient."""
    dims = norm_dims(None if dim == () else dim, input.ndim, "amin")
    return apply(AMIN, input, dims=dims, keepdim=keepdim, shape=input.shape)


def _max_min(name, op_dim, full, input, dim, keepdim, other):
    if isinstance(dim, Tensor) or other is not None:
        o = other if other is not None else dim
        return (maximum if name == "max" else minimum)(input, o)
    if dim is None:
        return full(input)
    d = wrap_dim(dim, input.ndim, name)
    v, i = apply(op_dim, input, dim=d, keepdim=keepdim)
    return _RETURN_TYPES[name](v, i)


@public("max")
def max(input: Tensor, dim=None, keepdim: bool = False, other=None):  # noqa: A001
    """``max()`` -> scalar tensor; ``max(dim)`` -> (values, indices); ``max(other)`` -> maximum."""
    return _max_min("max", MAX_DIM, amax, input, dim, keepdim, other)


@public("min")
def min(input: Tensor, dim=None, keepdim: bool = False, other=None):  # noqa: A001
    """``min()`` -> scalar tensor; ``min(dim)`` -> (values, indices); ``min(other)`` -> minimum."""
    return _max_min("min", MIN_DIM, amin, input, dim, keepdim, other)


@public("argmax")
def argmax(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Index of the maximum (flattened when dim is None); the first one on ties, NaN wins."""
    d = None if dim is None else wrap_dim(dim, input.ndim, "argmax")
    return apply(ARGMAX, input, dim=d, keepdim=keepdim)


@public("argmin")
def argmin(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Index of the minimum (flattened when dim is None); the first one on ties, NaN wins."""
    d = None if dim is None else wrap_dim(dim, input.ndim, "argmin")
    return apply(ARGMIN, input, dim=d, keepdim=keepdim)


def _truth(op, name: str, input: Tensor, dim, keepdim: bool) -> Tensor:
    """all/any over dim; an empty dim tuple reduces no dim (each element's truth value, as
    torch.all(x, dim=()) in PyTorch 2.13; sum and the others reduce every dim for ()). bool
    results, uint8 for a uint8 input (as PyTorch)."""
    if isinstance(dim, (tuple, list)) and len(dim) == 0:
        out = input.to(D.bool_, copy=True)
    else:
        out = apply(op, input, dims=norm_dims(dim, input.ndim, name), keepdim=keepdim)
    return out.to(D.uint8) if input.dtype is D.uint8 else out  # PyTorch keeps uint8


@public("all")
def all(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A001
    """True where every element (along dim) is nonzero."""
    return _truth(ALL, "all", input, dim, keepdim)


@public("any")
def any(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A001
    """True where some element (along dim) is nonzero."""
    return _truth(ANY, "any", input, dim, keepdim)


@public("var")
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


@public("std")
def std(input: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None):
    """Standard deviation: sqrt of var."""
    return var(input, dim, unbiased, keepdim, correction=correction).sqrt()


@public("norm")
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
    zero = s == 0
    return where(zero, 0.0, where(zero, 1.0, s) ** e)


@public("sum_to_size", function=False)
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
