"""Scans along a dim: cumsum, cumprod, logcumsumexp and cummax/cummin (values + int64 indices);
diff (their inverse: differences of neighbours) as a composition.

Integer and bool inputs scan in int64 unless ``dtype=`` says otherwise, as PyTorch.

kernels: backends/cpu/kernels/scan.py (numpy); none on Vulkan (these ops run on the CPU).
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from .. import dtypes as D
from ..autograd.grad_mode import no_grad
from ..creation import tensor as _tensor
from ..creation import zeros
from ..errors import ShapeError
from ..tensor import Tensor
from .api import public
from .common import scalar_tensor, wrap_dim
from .elementwise import where
from .indexing import scatter_add
from .joining import cat
from .registry import apply, defop
from .samples import Sample, uniform

_CUMMAX = namedtuple("cummax", ["values", "indices"])
_CUMMIN = namedtuple("cummin", ["values", "indices"])


def _flip(t: Tensor, dim: int) -> Tensor:
    """t reversed along dim, as a view (a negative-step slice)."""
    return t[(slice(None),) * dim + (slice(None, None, -1),)]


def _rev_cumsum(g: Tensor, dim: int) -> Tensor:
    """Sums from each position to the end of ``dim`` (the adjoint of cumsum)."""
    return _flip(apply(CUMSUM, _flip(g, dim).contiguous(), dim=dim), dim).contiguous()


def _cumsum_bwd(ctx, g):
    if g.ndim == 0:
        return g
    return _rev_cumsum(g, ctx.attrs["dim"])


def _cumprod_bwd(ctx, g):
    (x, out) = ctx.saved
    if g.ndim == 0:
        return g
    dim = ctx.attrs["dim"]
    with no_grad():
        has_zero = bool((x == 0).any().item())
    if not has_zero:
        return _rev_cumsum(g * out, dim) / x
    # With zeros: d out[j] / d x[k] = prod_{i <= j, i != k} x[i], the cumprod of x with x[k] set
    # to 1, for all k at once along a new leading dim (O(n^2), only when x holds a zero).
    n = x.shape[dim]
    eye = np.eye(n, dtype=bool).reshape((n,) + (1,) * dim + (n,) + (1,) * (x.ndim - dim - 1))
    one = scalar_tensor(1.0, x.dtype)
    xs = where(Tensor._wrap(np.ascontiguousarray(eye), D.bool_), one, x.unsqueeze(0))
    upper = np.triu(np.ones((n, n), bool)).reshape(eye.shape)  # j >= k
    parts = apply(CUMPROD, xs.contiguous(), dim=dim + 1) * g.unsqueeze(0)
    parts = where(
        Tensor._wrap(np.ascontiguousarray(upper), D.bool_), parts, scalar_tensor(0, x.dtype)
    )
    return parts.sum(dim + 1).movedim(0, dim)


def _np_cum(fn):
    def ref(x, dim):
        return x if x.ndim == 0 else fn(x, axis=dim)

    return ref


def _scan_samples(ref, zeros_too=False):
    def samples():
        out = [
            Sample(uniform(3, 5, seed=1), dim=1, ref=ref),
            Sample(uniform(4, 3, seed=2), dim=0, ref=ref),
            Sample(uniform(2, 3, 4, seed=3), dim=1, ref=ref),
            Sample(uniform(seed=4), dim=0, ref=ref),
            Sample(uniform(2, 0, seed=5), dim=1, ref=ref),
            Sample(uniform(4100, seed=6, low=0.999, high=1.001), dim=0, ref=ref, grad=False),
        ]
        if zeros_too:
            z = uniform(3, 5, seed=7)
            z[0, 2] = z[1, 0] = z[1, 3] = z[2, 4] = 0.0
            out.append(Sample(z, dim=1, ref=ref))  # the O(n^2) backward, one and two zeros
        return out

    return samples


CUMSUM = defop(
    "cumsum",
    infer=lambda x, dim: (x.shape, x.dtype),
    backward=_cumsum_bwd,
    samples=_scan_samples(_np_cum(np.cumsum)),
)
CUMPROD = defop(
    "cumprod",
    infer=lambda x, dim: (x.shape, x.dtype),
    save_inputs=(0,),
    save_outputs=(0,),
    backward=_cumprod_bwd,
    samples=_scan_samples(_np_cum(np.cumprod), zeros_too=True),
)


def _logcumsumexp_bwd(ctx, g):
    """sum over j >= k of g[j] * exp(x[k] - out[j]), from g's positive and negative parts in
    log space: exp(x + reverse-logcumsumexp(log(g+-) - out)), no overflow."""
    x, out = ctx.saved
    if g.ndim == 0:
        return g
    dim = ctx.attrs["dim"]
    zero = scalar_tensor(0.0, g.dtype)
    parts = []
    for gp in (where(g > 0, g, zero), where(g < 0, -g, zero)):
        lg = gp.log() - out
        rev = _flip(apply(LOGCUMSUMEXP, _flip(lg, dim).contiguous(), dim=dim), dim)
        parts.append((x + rev).exp())
    return parts[0] - parts[1]


def _np_logcumsumexp(x, dim):
    return x if x.ndim == 0 else np.logaddexp.accumulate(x, axis=dim)


LOGCUMSUMEXP = defop(
    "logcumsumexp",
    infer=lambda x, dim: (x.shape, x.dtype),
    save_inputs=(0,),
    save_outputs=(0,),
    backward=_logcumsumexp_bwd,
    samples=lambda: (
        _scan_samples(_np_logcumsumexp)()
        + [Sample(uniform(2, 5, seed=9) * 300, dim=1, ref=_np_logcumsumexp, grad=False)]
    ),
)


def _np_cumext(maximum: bool):
    def ref(x, dim, shape):
        if x.ndim == 0:
            return x, np.zeros((), np.int64)
        xm = np.moveaxis(x, dim, -1)
        vals, idx = np.empty_like(xm), np.zeros(xm.shape, np.int64)
        for pos in np.ndindex(*xm.shape[:-1]):
            best, at = None, 0
            for j, v in enumerate(xm[pos]):
                better = best is None or np.isnan(v) or (v >= best if maximum else v <= best)
                if not (best is not None and np.isnan(best)) and better:
                    best, at = v, j
                vals[pos + (j,)], idx[pos + (j,)] = best, at
        return np.moveaxis(vals, -1, dim), np.moveaxis(idx, -1, dim)

    return ref


def _cumext_bwd(ctx, g):
    (idx,) = ctx.saved
    shape = ctx.attrs["shape"]
    if len(shape) == 0:
        return g
    return scatter_add(zeros(shape, dtype=g.dtype), ctx.attrs["dim"], idx, g)


def _cumext_samples(maximum: bool):
    def samples():
        ref = _np_cumext(maximum)
        nan = uniform(3, 6, seed=5)
        nan[1, 2] = np.nan
        ties = np.round(uniform(2, 7, seed=3))
        return [
            Sample(uniform(3, 5, seed=1), dim=1, shape=(3, 5), ref=ref),
            Sample(uniform(4, 3, seed=2), dim=0, shape=(4, 3), ref=ref),
            Sample(ties, dim=1, shape=(2, 7), ref=ref, grad=False),  # ties: the last one
            Sample(nan, dim=1, shape=(3, 6), ref=ref, grad=False),  # NaN propagates
            Sample(uniform(seed=4), dim=0, shape=(), ref=ref),
        ]

    return samples


def _cumext_infer(x, dim, shape):
    return [(x.shape, x.dtype), (x.shape, D.int64)]


CUMMAX = defop(
    "cummax",
    infer=_cumext_infer,
    save_outputs=(1,),
    backward=_cumext_bwd,
    samples=_cumext_samples(True),
)
CUMMIN = defop(
    "cummin",
    infer=_cumext_infer,
    save_outputs=(1,),
    backward=_cumext_bwd,
    samples=_cumext_samples(False),
)


# ----------------------------------------------------------------------------- functions
def _scan_input(input: Tensor, dtype, op: str) -> Tensor:
    if dtype is not None:
        dt = D.as_dtype(dtype)
    elif input.dtype.is_floating_point:
        dt = input.dtype
    else:
        dt = D.int64  # integer and bool scans in int64, as PyTorch
    return input if input.dtype is dt else input.to(dt)


@public("cumsum", inplace=True, saves_self=False)
def cumsum(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    """Cumulative sum along ``dim`` (integer and bool inputs give int64), as torch.cumsum."""
    d = wrap_dim(dim, input.ndim, "cumsum()")
    return apply(CUMSUM, _scan_input(input, dtype, "cumsum"), dim=d)


@public("cumprod", inplace=True)
def cumprod(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    """Cumulative product along ``dim`` (integer and bool inputs give int64), as torch.cumprod;
    its gradient is exact where the input holds zeros."""
    d = wrap_dim(dim, input.ndim, "cumprod()")
    return apply(CUMPROD, _scan_input(input, dtype, "cumprod"), dim=d)


@public("cummax")
def cummax(input: Tensor, dim: int) -> tuple:
    """(values, indices): the running maximum along ``dim`` and where it was reached (the
    last position on ties; NaN propagates), as torch.cummax."""
    d = wrap_dim(dim, input.ndim, "cummax()")
    return _CUMMAX(*apply(CUMMAX, input, dim=d, shape=tuple(input.shape)))


@public("cummin")
def cummin(input: Tensor, dim: int) -> tuple:
    """(values, indices): the running minimum along ``dim`` and where it was reached, as
    torch.cummin."""
    d = wrap_dim(dim, input.ndim, "cummin()")
    return _CUMMIN(*apply(CUMMIN, input, dim=d, shape=tuple(input.shape)))


@public("logcumsumexp")
def logcumsumexp(input: Tensor, dim: int) -> Tensor:
    """``log(cumsum(exp(input)))`` along ``dim`` without overflow (running log-add-exp), as
    torch.logcumsumexp; integer inputs give the default floating dtype."""
    d = wrap_dim(dim, input.ndim, "logcumsumexp()")
    if not input.dtype.is_floating_point:
        input = input.to(D.default_float())
    return apply(LOGCUMSUMEXP, input, dim=d)


@public("diff")
def diff(input: Tensor, n: int = 1, dim: int = -1, prepend=None, append=None) -> Tensor:
    """The ``n``-th forward difference ``x[i+1] - x[i]`` along ``dim`` (after joining
    ``prepend`` and ``append``), as torch.diff; bool inputs give ``!=``."""
    if input.ndim == 0:
        raise ShapeError("diff(): expects a tensor of at least 1 dim, got a 0-d one")
    d = wrap_dim(dim, input.ndim, "diff()")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"diff(): order n must be a non-negative int, got {n!r}")
    parts = [t for t in (prepend, input, append) if t is not None]
    if len(parts) > 1:
        parts = [t if isinstance(t, Tensor) else _tensor(t, dtype=input.dtype) for t in parts]
        parts = [_along(t, input, d) for t in parts]
        input = cat(parts, d)
    for _ in range(n):
        m = input.shape[d]
        if m == 0:
            break
        hi, lo = input.narrow(d, 1, m - 1), input.narrow(d, 0, m - 1)
        input = (hi != lo) if input.dtype is D.bool_ else hi - lo
    return input


def _along(t: Tensor, like: Tensor, d: int) -> Tensor:
    """diff's prepend/append: a 0-d value broadcast to like's shape with size 1 along d."""
    if t.ndim == 0:
        shape = list(like.shape)
        shape[d] = 1
        return t.expand(*shape)
    return t
