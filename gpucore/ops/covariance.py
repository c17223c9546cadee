"""Compositions: cov (with correction, frequency weights and observation weights) and corrcoef,
PyTorch's torch.cov / torch.corrcoef (rows are variables, columns observations).

kernels: none (compositions of mean, matmul and elementwise ops: every backend, gradients free).
"""

from __future__ import annotations

from .. import _caller_warnings as caller_warnings
from .. import dtypes as D
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .api import public
from .common import float_input, host_quiet


def _weights(name: str, w: Tensor | None, n_obs: int, integral: bool) -> Tensor | None:
    """Check fweights (integral) or aweights (floating) as PyTorch does."""
    if w is None:
        return None
    if not isinstance(w, Tensor):
        raise DTypeError(f"cov(): argument '{name}' must be Tensor, not {type(w).__name__}")
    if w.ndim > 1:
        raise ShapeError(
            f"cov(): expected {name} to have one or fewer dimensions but got {name} with "
            f"{w.ndim} dimensions"
        )
    if integral and (w.dtype.is_floating_point or w.dtype is D.bool_):
        raise DTypeError(
            f"cov(): expected {name} to have integral dtype but got {name} with {w.dtype} dtype"
        )
    if not integral and not w.dtype.is_floating_point:
        raise DTypeError(
            f"cov(): expected {name} to have floating point dtype but got {name} with "
            f"{w.dtype} dtype"
        )
    if w.numel() != n_obs:
        raise ShapeError(
            f"cov(): expected {name} to have the same numel as there are observations in the "
            f"input but got {w.numel()} != {n_obs}"
        )
    # a check only (the graph does not depend on it): not a host read a capture refuses
    if n_obs and bool(host_quiet((w < 0).any())):
        raise ValueError(f"cov(): {name} cannot be negative")
    return w


@public("cov")
def cov(
    input: Tensor,
    *,
    correction: int = 1,
    fweights: Tensor | None = None,
    aweights: Tensor | None = None,
) -> Tensor:
    """The covariance matrix of the variables in the rows of ``input`` (a 1-D input is one
    variable: a 0-d result), as torch.cov: the sum of the observations' outer products of
    deviations from the weighted mean, divided by ``N - correction`` (by the weights' sum minus
    the correction with ``fweights`` / ``aweights``, PyTorch's formula; degrees of freedom <= 0
    warn and divide by 0)."""
    if input.ndim > 2:
        raise ShapeError(
            "cov(): expected input to have two or fewer dimensions but got an input with "
            f"{input.ndim} dimensions"
        )
    x = input if input.ndim == 2 else input.reshape(1, -1)
    n_obs = x.shape[1]
    fw = _weights("fweights", fweights, n_obs, True)
    aw = _weights("aweights", aweights, n_obs, False)
    x = float_input(x)
    if aw is not None and aw.dtype is not x.dtype:
        dt = D.promote(x.dtype, aw.dtype)
        x, aw = x.to(dt), aw.to(dt)
    w = None
    if fw is not None:
        w = fw.to(x.dtype)
    if aw is not None:
        w = aw if w is None else w * aw
    if w is None:
        w_sum = float(n_obs)
        avg = x.mean(1)
        norm = n_obs - correction
    else:
        w_sum_t = w.sum()
        avg = (x * w).sum(1) / w_sum_t
        w_sum = float(w_sum_t.item())
        if correction == 0:
            norm = w_sum
        elif aw is None:
            norm = w_sum - correction
        else:
            norm = w_sum - correction * float((w * aw).sum().item()) / w_sum
    if norm <= 0:
        caller_warnings.warn(
            "cov(): degrees of freedom is <= 0. Correction should be strictly less than the "
            "number of observations.",
            UserWarning,
        )
        norm = 0.0
    xm = x - avg.unsqueeze(1)
    xw = xm if w is None else xm * w
    c = xm.matmul(xw.t()) / norm
    return c.squeeze()


@public("corrcoef")
def corrcoef(input: Tensor) -> Tensor:
    """The Pearson correlation coefficients of the variables in the rows of ``input``, as
    torch.corrcoef: cov normalised by the standard deviations, clipped to [-1, 1]."""
    c = cov(input)
    if c.ndim == 0:
        return c / c  # 1, or NaN for a constant variable, as PyTorch
    d = c.diagonal()
    std = d.sqrt()
    c = c / std.unsqueeze(1)
    c = c / std.unsqueeze(0)
    return c.clamp(-1.0, 1.0)
