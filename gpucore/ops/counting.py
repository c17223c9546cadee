"""Counting values: histogram and histogramdd (PyTorch's bin-edge rules: equal-width edges made
as torch.linspace makes them in the input's dtype, each bin [left, right) but the last [left,
right], values outside or NaN ignored) and mode (the most frequent value, ties to the smallest,
its last index; the value's gradient goes to that index, as PyTorch).

kernels: backends/cpu/kernels/counting.py (cpu/histogram.c: each point's bin found as PyTorch
finds it, the bin search or equal-width interpolation per ``mode``, one pass, fixed chunks);
none on Vulkan (device tensors are read back; the results are host tensors, as for sort).
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from .. import dtypes as D
from ..creation import fused_linspace
from ..creation import tensor as _tensor
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .api import public
from .common import wrap_dim
from .indexing import gather
from .registry import apply, defop
from .samples import Sample, integers, uniform

_HIST = namedtuple("histogram", ["hist", "bin_edges"])
_HISTDD = namedtuple("histogramdd", ["hist", "bin_edges"])
_MODE = namedtuple("mode", ["values", "indices"])


# ----------------------------------------------------------------------------- references
def np_histogramdd(x, *rest, has_weight, density, mode=0):
    """float64 reference: numpy's histogramdd over the given edges (the same bin rules)."""
    edges = rest[: len(rest) - has_weight]
    w = rest[-1] if has_weight else None
    h, _ = np.histogramdd(x.reshape(-1, len(edges)), bins=list(edges), weights=w, density=density)
    return h


def _hist_samples():
    x = uniform(20, 2, seed=1)
    e0, e1 = np.linspace(-2, 2, 5), np.array([-2.0, -0.5, 0.0, 0.3, 2.0])
    x[0] = (e0[1], e1[2])  # on inner edges: the bin to the right
    x[1] = (2.0, 2.0)  # the last edge: the last bin
    x[2] = (3.0, 0.1)  # outside: ignored
    return [
        Sample(x, e0, e1, has_weight=0, density=False, mode=0, ref=np_histogramdd),
        Sample(
            x, e0, e1, uniform(20, seed=2), has_weight=1, density=False, mode=0, ref=np_histogramdd
        ),
        Sample(x[:, :1], e0, has_weight=0, density=True, mode=1, ref=np_histogramdd),
        Sample(np.zeros((0, 1)), e0, has_weight=0, density=False, mode=0, ref=np_histogramdd),
    ]


def _hist_infer(x, *rest, has_weight, density, mode):
    edges = rest[: len(rest) - has_weight]
    return (tuple(e.shape[0] - 1 for e in edges), x.dtype)


HISTOGRAMDD = defop("histogramdd", infer=_hist_infer, samples=_hist_samples)
HISTC_MODE = 2  # the kernel's mode for torch.histc's binning (its interpolation alone)


def np_mode_indices(x, dim):
    """float64 reference of the mode's indices along ``dim``."""
    xm = np.moveaxis(x, dim, -1)
    out = np.zeros(xm.shape[:-1], np.int64)
    for idx in np.ndindex(*xm.shape[:-1]):
        row = xm[idx]
        vals, counts = np.unique(row, return_counts=True)
        v = vals[np.argmax(counts)]  # np.unique sorts: the first maximum is the smallest value
        out[idx] = np.nonzero(row == v)[0][-1]
    return out


def _mode_samples():
    a = np.round(uniform(4, 7, low=-2, high=2, seed=1))
    return [
        Sample(a, dim=1, ref=np_mode_indices),
        Sample(integers(3, 3, 5, 2, seed=2).astype(np.float64), dim=1, ref=np_mode_indices),
        Sample(np.round(uniform(6, seed=3)), dim=0, ref=np_mode_indices),
    ]


MODE_INDICES = defop(
    "mode_indices",
    infer=lambda x, dim: (x.shape[:dim] + x.shape[dim + 1 :], D.int64),
    samples=_mode_samples,
)


# ----------------------------------------------------------------------------- edges
def _linspace_edges(lo: float, hi: float, bins: int, dt) -> np.ndarray:
    """torch.linspace(lo, hi, bins + 1) as PyTorch's CPU kernel makes it in ``dt``
    (creation.fused_linspace)."""
    return fused_linspace(lo, hi, bins + 1, dt)


def _outer_edges(name, x: np.ndarray, d: int, rng) -> tuple:
    """(left, right) of dim d: ``range``'s or the data's (widened by 0.5 when equal)."""
    if rng is not None:
        lo, hi = float(rng[2 * d]), float(rng[2 * d + 1])
    elif x.shape[0] == 0:
        lo, hi = 0.0, 1.0
    else:
        lo, hi = float(x[:, d].min()), float(x[:, d].max())
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"{name}(): dimension {d}'s range [{lo}, {hi}] is not finite")
    if lo > hi:
        raise ValueError(f"{name}(): min {lo} must not be larger than max {hi} for dimension {d}")
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    return lo, hi


def _histdd(name, x: Tensor, dims: int, bins, rng, weight, density):
    """(hist, [edges]) of the rows of x [..., dims] (the shared body of both forms)."""
    if not x.dtype.is_floating_point or x.dtype in (D.float16, D.bfloat16):
        raise DTypeError(f"{name}(): expected a float32 or float64 input, got {x.dtype}")
    flat = x.detach().reshape(-1, dims)
    host = None
    if isinstance(bins, (int, np.integer)) and not isinstance(bins, bool):
        bins = [int(bins)] * dims
    if isinstance(bins, Tensor):
        bins = [bins]
    if not isinstance(bins, (list, tuple)) or len(bins) != dims:
        raise TypeError(
            f"{name}(): bins must be an int or a sequence of {dims} ints or 1-D tensors, "
            f"got {bins!r}"
        )
    if rng is not None:
        rng = [float(v) for v in rng]
        if len(rng) != 2 * dims:
            raise ValueError(f"{name}(): range must hold {2 * dims} floats, got {len(rng)}")
    edges, mode = [], 1  # PyTorch's equal-width interpolation when no dim has edge tensors
    for d, b in enumerate(bins):
        if isinstance(b, Tensor):
            if b.ndim != 1 or b.shape[0] < 1:
                raise ShapeError(
                    f"{name}(): bin edges must be a 1-D tensor of at least one edge, got shape "
                    f"{tuple(b.shape)}"
                )
            e = b.detach().to(x.dtype)
            if bool((e[1:] < e[:-1]).any()):
                raise ValueError(f"{name}(): bin edges must increase monotonically")
            edges.append(e.cpu().contiguous())
            mode = 0  # a binary search
            continue
        if isinstance(b, bool) or not isinstance(b, (int, np.integer)) or b <= 0:
            raise ValueError(f"{name}(): bins must be positive ints, got {b!r}")
        if host is None:
            host = flat.cpu().numpy()  # min and max are exact in the input's dtype
        lo, hi = _outer_edges(name, host, d, rng)
        e = _linspace_edges(lo, hi, int(b), x.dtype)
        if e[0] == e[-1]:
            # the range collapses to one value in the input's dtype (1e10 +- 0.5 in float32):
            # no width to interpolate over, so a binary search over the equal edges, which
            # puts that value in the last bin (PyTorch's bin 1 comes from a 0 / 0 position)
            mode = 0
        edges.append(_tensor(e, dtype=x.dtype, device="cpu"))
    ins = [flat.cpu().contiguous(), *edges]
    if weight is not None:
        if not isinstance(weight, Tensor):
            raise TypeError(f"{name}(): weight must be a Tensor, got {type(weight).__name__}")
        want = tuple(x.shape[:-1])
        if tuple(weight.shape) != want:
            raise ShapeError(
                f"{name}(): weight must have shape {want} (input's without the last dim for "
                f"histogramdd), got {tuple(weight.shape)}"
            )
        ins.append(weight.detach().to(x.dtype).reshape(-1).cpu().contiguous())
    hist = apply(
        HISTOGRAMDD, *ins, has_weight=int(weight is not None), density=bool(density), mode=mode
    )
    return hist, edges


@public("histogram")
def histogram(
    input: Tensor, bins=100, *, range=None, weight: Tensor | None = None, density: bool = False
) -> tuple:
    """(hist, bin_edges) of ``input``'s values, as torch.histogram: ``bins`` an int (equal-width
    edges over ``range`` or the data's min..max) or a 1-D tensor of increasing edges; each bin
    holds [left, right) but the last [left, right]; ``weight`` (input's shape) adds weights,
    ``density`` divides by the total times the bin widths. float32 / float64 only; host results."""
    if isinstance(bins, (list, tuple)):
        raise TypeError(
            "histogram(): bins must be an int or a 1-D tensor (histogramdd takes lists)"
        )
    if weight is not None and tuple(weight.shape) != tuple(input.shape):
        raise ShapeError(
            f"histogram(): weight must have input's shape {tuple(input.shape)}, got "
            f"{tuple(weight.shape)}"
        )
    w = weight.reshape(-1) if weight is not None else None
    hist, edges = _histdd("histogram", input.reshape(-1, 1), 1, bins, range, w, density)
    return _HIST(hist, edges[0])


@public("histogramdd", method=False)
def histogramdd(
    input: Tensor, bins=10, *, range=None, weight: Tensor | None = None, density: bool = False
) -> tuple:
    """(hist, bin_edges) of the points ``input[..., D]`` in D dimensions, as torch.histogramdd:
    ``bins`` an int, D ints or D 1-D tensors of edges; ``range`` 2 * D floats (min, max per
    dim); ``weight`` of ``input.shape[:-1]``; the bin rules of ``histogram``."""
    if input.ndim < 1:
        raise ShapeError("histogramdd(): input must have at least 1 dim (points x D)")
    dims = input.shape[-1]
    if dims == 0:  # no dimensions: PyTorch's 0-d zero and no edges
        if not input.dtype.is_floating_point:
            raise DTypeError(f"histogramdd(): expected a float input, got {input.dtype}")
        return _HISTDD(_tensor(0.0, dtype=input.dtype, device="cpu"), ())
    hist, edges = _histdd("histogramdd", input, dims, bins, range, weight, density)
    return _HISTDD(hist, tuple(edges))


@public("mode")
def mode(input: Tensor, dim: int = -1, keepdim: bool = False) -> tuple:
    """(values, indices): the most frequent value along ``dim`` (ties to the smallest value) and
    the last index where it occurs, as torch.mode; values are differentiable (the gradient goes
    to that index)."""
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"mode(): dim must be an int, got {type(dim).__name__}")
    if input.ndim == 0:
        wrap_dim(dim, 1, "mode()")
        return _MODE(input.clone(), _tensor(0, device=input.device))
    d = wrap_dim(dim, input.ndim, "mode()")
    if input.shape[d] == 0:
        raise ShapeError(
            f"mode(): cannot compute the mode over an empty dim {d} ({tuple(input.shape)})"
        )
    idx = apply(MODE_INDICES, input.detach(), dim=d)
    if input.device != idx.device:
        idx = idx.to(input.device)
    values = gather(input, d, idx.unsqueeze(d))
    if not keepdim:
        values = values.squeeze(d)
    else:
        idx = idx.unsqueeze(d)
    return _MODE(values, idx)
