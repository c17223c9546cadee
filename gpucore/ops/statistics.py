"""Reductions as compositions: prod (through cumprod, whose backward is exact at zeros),
aminmax, var_mean/std_mean, nansum/nanmean, quantile/nanquantile (through sort), histc
(ops/counting.py's histogram op with PyTorch's histc binning). They run on every backend; the
differentiable ones get their gradients from the composed ops.

kernels: none (the composed ops').
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from .. import dtypes as D
from ..creation import tensor as _tensor
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .api import public
from .common import norm_dims, wrap_dim
from .counting import HISTC_MODE, HISTOGRAMDD, _linspace_edges
from .elementwise import where
from .reduce import amax, amin, var
from .registry import apply
from .scan import cumprod
from .sorting import sort

_AMINMAX = namedtuple("aminmax", ["min", "max"])


@public("prod")
def prod(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """The product of the elements (along ``dim``), as torch.prod: integer and bool inputs give
    int64; the gradient is exact where factors are zero (cumprod's)."""
    if dtype is not None:
        input = input.to(dtype)
    elif not input.dtype.is_floating_point:
        input = input.to(D.int64)
    if dim is None:
        flat = input.reshape(-1)
        if flat.numel() == 0:
            return (flat.sum() * 0 + 1).reshape(())
        return cumprod(flat, 0)[-1]
    if isinstance(dim, (tuple, list)):
        raise TypeError("prod(): dim must be an int (PyTorch's prod reduces one dim)")
    d = wrap_dim(dim, input.ndim, "prod")
    if input.ndim == 0:
        return input.clone()
    if input.shape[d] == 0:
        shape = list(input.shape)
        shape[d] = 1
        out = input.new_ones(tuple(shape))
        return out if keepdim else out.squeeze(d)
    last = cumprod(input, d).narrow(d, input.shape[d] - 1, 1)
    return last if keepdim else last.squeeze(d)


@public("aminmax")
def aminmax(input: Tensor, *, dim=None, keepdim: bool = False) -> tuple:
    """(min, max) over ``dim`` (all elements when None), as torch.aminmax."""
    if input.numel() == 0 and dim is None:
        raise ShapeError("aminmax(): cannot compute aminmax of an empty tensor without a dim")
    d = () if dim is None else wrap_dim(dim, input.ndim, "aminmax")
    if dim is None and keepdim:
        lo = amin(input).reshape((1,) * input.ndim)
        hi = amax(input).reshape((1,) * input.ndim)
        return _AMINMAX(lo, hi)
    return _AMINMAX(amin(input, d, keepdim), amax(input, d, keepdim))


def _correction(unbiased, correction):
    if correction is None:
        return 1 if unbiased is None or unbiased else 0
    return correction


@public("var_mean")
def var_mean(
    input: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None
) -> tuple:
    """(var, mean) over ``dim`` (Bessel's correction by default), as torch.var_mean."""
    c = _correction(unbiased, correction)
    dims = norm_dims(dim, input.ndim, "var_mean")
    return var(input, dims, keepdim=keepdim, correction=c), input.mean(dims, keepdim)


@public("std_mean")
def std_mean(
    input: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None
) -> tuple:
    """(std, mean) over ``dim``, as torch.std_mean."""
    v, m = var_mean(input, dim, unbiased, keepdim, correction=correction)
    return v.sqrt(), m


@public("nansum")
def nansum(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """The sum treating NaN as zero, as torch.nansum."""
    x = input
    if x.dtype.is_floating_point:
        x = where(x != x, 0.0, x)
    return x.sum(dim, keepdim, dtype=dtype)


@public("nanmean")
def nanmean(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """The mean of the non-NaN elements (NaN where there are none), as torch.nanmean (float
    tensors only)."""
    if dtype is not None:
        input = input.to(dtype)
    if not input.dtype.is_floating_point:
        raise DTypeError(f"nanmean(): expected a float tensor, got {input.dtype}")
    ok = input == input
    count = ok.sum(dim, keepdim).to(input.dtype)
    return nansum(input, dim, keepdim) / count


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(op: str, input: Tensor, q, dim, keepdim: bool, interpolation: str, skip_nan: bool):
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(
            f"{op}(): interpolation must be one of {', '.join(_INTERPOLATIONS)}, got "
            f"{interpolation!r}"
        )
    if not input.dtype.is_floating_point:
        raise DTypeError(f"{op}(): input must be a float tensor, got {input.dtype}")
    if isinstance(q, Tensor):
        if q.dtype is not input.dtype:
            raise DTypeError(f"{op}(): q ({q.dtype}) must have input's dtype ({input.dtype})")
        if q.ndim > 1:
            raise ShapeError(f"{op}(): q must be a scalar or 1-D tensor, got {q.ndim} dims")
        qs, scalar_q = q.detach().reshape(-1), q.ndim == 0
    elif isinstance(q, (int, float)) and not isinstance(q, bool):
        qs, scalar_q = _tensor([float(q)], dtype=input.dtype, device=input.device), True
    else:
        raise TypeError(f"{op}(): q must be a number or a Tensor, got {type(q).__name__}")
    qv = qs.cpu().tolist()
    if any(not (0.0 <= v <= 1.0) for v in qv):
        raise ValueError(f"{op}(): q values must be in the range [0, 1], got {qv}")
    if input.numel() == 0:
        raise ShapeError(f"{op}(): input tensor must be non-empty")
    if dim is None:
        x, d = input.reshape(-1), 0
        out_shape = (1,) * input.ndim if keepdim else ()
    else:
        d = wrap_dim(dim, input.ndim, op)
        x = input if input.ndim else input.reshape(1)
        out_shape = list(input.shape)
        if keepdim:
            out_shape[d] = 1
        else:
            out_shape.pop(d)
        out_shape = tuple(out_shape)
    x = x.movedim(d, -1)  # [..., n]
    n = x.shape[-1]
    srt = sort(x, -1)[0]  # NaN last
    nan = x != x
    if skip_nan:
        valid = (~nan).sum(-1, keepdim=True).to(x.dtype)  # [..., 1]
    else:
        valid = x.new_full(tuple(x.shape[:-1]) + (1,), float(n))
    # [..., k]: the rank of each q in each row
    rank = qs.to(x.dtype) * (valid - 1).clamp(min=0)
    lo = rank.floor()
    hi = rank.ceil()
    if interpolation == "nearest":
        lo = hi = rank.round()
    idx_lo = lo.to(D.int64).clamp(0, n - 1)
    idx_hi = hi.to(D.int64).clamp(0, n - 1)
    v_lo = srt.gather(-1, idx_lo)
    v_hi = srt.gather(-1, idx_hi)
    if interpolation in ("lower", "nearest"):
        out = v_lo
    elif interpolation == "higher":
        out = v_hi
    elif interpolation == "midpoint":
        out = (v_lo + v_hi) * 0.5
    else:
        out = v_lo + (v_hi - v_lo) * (rank - lo)
    if not skip_nan:  # any NaN in a row makes its quantiles NaN
        out = where(nan.any(-1, keepdim=True), float("nan"), out)
    out = out.movedim(-1, 0)  # [k, ...]
    if scalar_q:
        return out.reshape(out_shape)
    return out.reshape((len(qv),) + out_shape)


@public("quantile")
def quantile(
    input: Tensor, q, dim=None, keepdim: bool = False, *, interpolation: str = "linear"
) -> Tensor:
    """The ``q``-th quantiles (q a number or a 1-D tensor in [0, 1]) along ``dim`` (of all
    elements when None), as torch.quantile: ``interpolation`` linear, lower, higher, midpoint
    or nearest between the neighbouring ranks; a row holding NaN gives NaN. A tensor q puts its
    dim first."""
    return _quantile("quantile", input, q, dim, keepdim, interpolation, False)


@public("nanquantile")
def nanquantile(
    input: Tensor, q, dim=None, keepdim: bool = False, *, interpolation: str = "linear"
) -> Tensor:
    """quantile ignoring NaN (a row of NaN only gives NaN), as torch.nanquantile."""
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, True)


@public("histc")
def histc(input: Tensor, bins: int = 100, min=0, max=0) -> Tensor:  # noqa: A002
    """A histogram of ``bins`` equal-width bins over [min, max] (the data's range when both are
    0; values outside are ignored, max falls in the last bin), in input's dtype, as
    torch.histc (float tensors only; not differentiable)."""
    if not input.dtype.is_floating_point:
        raise DTypeError(f"histc(): expected a float tensor, got {input.dtype}")
    if isinstance(bins, bool) or not isinstance(bins, int) or bins <= 0:
        raise ValueError(f"histc(): bins must be a positive int, got {bins!r}")
    lo, hi = float(min), float(max)
    if lo > hi:
        raise ValueError(f"histc(): max must be larger than min, got min={lo}, max={hi}")
    x = input.detach().reshape(-1)
    if lo == hi and x.numel():
        lo, hi = float(x.amin()), float(x.amax())
    widen = lo == hi
    if lo != lo or hi != hi or abs(lo) == float("inf") or abs(hi) == float("inf"):
        raise ValueError(f"histc(): range of [{lo}, {hi}] is not finite")
    # PyTorch's histc kernel: (x - min) * bins / (max - min) in the input's dtype, truncated
    dt = input.dtype if input.dtype in (D.float32, D.float64) else D.float32
    if widen:  # min - 1 and max + 1 in dt, each side its neighbouring float where +-1 rounds away
        npd = np.float64 if dt is D.float64 else np.float32
        v = npd(lo)
        lo_, hi_ = npd(v - npd(1)), npd(v + npd(1))
        lo = float(lo_ if lo_ != v else np.nextafter(v, npd(-np.inf)))
        hi = float(hi_ if hi_ != v else np.nextafter(v, npd(np.inf)))
    e = _linspace_edges(lo, hi, bins, dt)
    edges = _tensor(e, dtype=dt, device="cpu")
    flat = x.to(dt).cpu().contiguous().reshape(-1, 1)
    hist = apply(HISTOGRAMDD, flat, edges, has_weight=0, density=False, mode=HISTC_MODE)
    return hist.to(input.dtype).to(input.device)
