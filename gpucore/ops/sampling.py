"""Sampling functions and in-place fills beyond rand/randn (ops/random.py): normal and
bernoulli as functions; Tensor.random_, bernoulli_, exponential_, geometric_, log_normal_,
cauchy_ and bernoulli. Each transforms uniform or normal samples of gpucore's Philox stream
(``generator=`` or the default one), drawn where the tensor lives, as PyTorch's
inverse-transform formulas.

kernels: none (ops/random.py's sampling ops and elementwise compositions).
"""

from __future__ import annotations

import math

from .. import dtypes as D
from ..autograd.grad_mode import no_grad
from ..errors import DTypeError
from ..tensor import Tensor
from .api import public
from .common import broadcast_shapes, shape_arg
from .inplace import inplace
from .random import rand, randint, randn


def _uniform_like(x: Tensor, generator) -> Tensor:
    dt = x.dtype if x.dtype.is_floating_point else D.float32
    return rand(tuple(x.shape), generator=generator, dtype=dt, device=x.device)


def _fill(self: Tensor, op: str, make) -> Tensor:
    """Write ``make(self)`` (a new sample tensor) into self, as the other in-place fills."""
    return inplace(self, lambda x: make(x).to(x.dtype), saves_self=False, op=op)


def _prob(op: str, p) -> None:
    if not isinstance(p, Tensor) and not 0 <= p <= 1:
        raise ValueError(f"{op}: p must be in [0, 1], got {p}")


@public("bernoulli_", function=False)
def bernoulli_(self: Tensor, p=0.5, *, generator=None) -> Tensor:
    """Fill with 1 (probability p, a number or a tensor broadcast to self) or 0."""
    _prob("bernoulli_", p)
    return _fill(self, "bernoulli_", lambda x: _uniform_like(x, generator) < p)


@public("bernoulli")
def bernoulli(input: Tensor, p=None, *, generator=None) -> Tensor:
    """1 with probability ``input`` (or ``p`` when given) elementwise, else 0, in input's dtype,
    as torch.bernoulli."""
    if not input.dtype.is_floating_point:
        raise DTypeError(
            f"bernoulli(): expected a float tensor of probabilities, got {input.dtype}"
        )
    probs = input if p is None else p
    _prob("bernoulli", probs)
    if p is None and ((input < 0) | (input > 1)).any():
        raise ValueError("bernoulli(): the probabilities in input must be in [0, 1]")
    with no_grad():
        return (_uniform_like(input, generator) < probs).to(input.dtype)


@public("exponential_", function=False)
def exponential_(self: Tensor, lambd: float = 1.0, *, generator=None) -> Tensor:
    """Fill with exponential samples of rate lambd: ``-log(1 - u) / lambd``."""
    if lambd <= 0:
        raise ValueError(f"exponential_: lambd must be positive, got {lambd}")
    return _fill(
        self, "exponential_", lambda x: (-_uniform_like(x, generator)).log1p() * (-1.0 / lambd)
    )


@public("geometric_", function=False)
def geometric_(self: Tensor, p: float, *, generator=None) -> Tensor:
    """Fill with geometric samples (trials until the first success, >= 1):
    ``ceil(log(1 - u) / log(1 - p))``."""
    if not 0 < p < 1:
        raise ValueError(f"geometric_: p must be in (0, 1), got {p}")
    scale = 1.0 / math.log1p(-p)
    return _fill(
        self,
        "geometric_",
        lambda x: ((-_uniform_like(x, generator)).log1p() * scale).ceil().clamp(min=1.0),
    )


@public("log_normal_", function=False)
def log_normal_(self: Tensor, mean: float = 1.0, std: float = 2.0, *, generator=None) -> Tensor:
    """Fill with ``exp(N(mean, std))`` samples."""
    if std <= 0:
        raise ValueError(f"log_normal_: std must be positive, got {std}")
    dt = self.dtype if self.dtype.is_floating_point else D.float32
    return _fill(
        self,
        "log_normal_",
        lambda x: (
            randn(tuple(x.shape), generator=generator, dtype=dt, device=x.device) * std + mean
        ).exp(),
    )


def _cauchy(u: Tensor, median: float, sigma: float) -> Tensor:
    a = (u - 0.5) * math.pi
    return a.sin() / a.cos() * sigma + median


@public("cauchy_", function=False)
def cauchy_(self: Tensor, median: float = 0.0, sigma: float = 1.0, *, generator=None) -> Tensor:
    """Fill with Cauchy samples: ``median + sigma * tan(pi (u - 1/2))``."""
    if sigma <= 0:
        raise ValueError(f"cauchy_: sigma must be positive, got {sigma}")
    return _fill(self, "cauchy_", lambda x: _cauchy(_uniform_like(x, generator), median, sigma))


# the default upper bound of random_: every integer the dtype holds exactly (PyTorch's)
_RANDOM_TOP = {D.float16: 2**11, D.bfloat16: 2**8, D.float32: 2**24, D.float64: 2**53}


@public("random_", function=False)
def random_(self: Tensor, *args, generator=None, **kwargs) -> Tensor:
    """Fill with integers drawn uniformly: ``random_(to)`` from [0, to), ``random_(from, to)``
    from [from, to), ``random_()`` from [0, 2^mantissa] (floats) or the dtype's range, as
    Tensor.random_."""
    lo = kwargs.pop("from_", kwargs.pop("from", None))
    hi = kwargs.pop("to", None)
    if kwargs:
        raise TypeError(f"random_(): unexpected keyword arguments {sorted(kwargs)}")
    if len(args) == 1 and lo is None and hi is None:
        lo, hi = 0, args[0]
    elif len(args) == 2:
        lo, hi = args
    elif len(args) > 2:
        raise TypeError(f"random_(): expected at most 2 bounds, got {len(args)}")
    lo = 0 if lo is None else int(lo)
    if hi is None:
        if self.dtype.is_floating_point:
            hi = _RANDOM_TOP[self.dtype] + 1
        elif self.dtype is D.bool_:
            hi = 2
        else:
            hi = {D.uint8: 256, D.int8: 128, D.int32: 2**31}.get(self.dtype, 2**62)
    hi = int(hi)
    if hi <= lo:
        raise ValueError(f"random_(): expects from < to, got from={lo}, to={hi}")
    return _fill(
        self,
        "random_",
        lambda x: randint(lo, hi, tuple(x.shape), generator=generator, device=x.device),
    )


@public("normal", method=False)
def normal(mean, std=1.0, size=None, *, generator=None, dtype=None, device=None) -> Tensor:
    """Normal samples with the given means and standard deviations (tensors broadcast
    together; two numbers need ``size``), as torch.normal (not differentiable)."""
    tm, ts = isinstance(mean, Tensor), isinstance(std, Tensor)
    if not tm and not ts:
        if size is None:
            raise TypeError("normal(): with a number mean and std, give size=")
        shape = shape_arg((size,))
        dt = D.as_dtype(dtype) if dtype is not None else D.default_float()
        with no_grad():
            return randn(shape, generator=generator, dtype=dt, device=device) * std + mean
    ref = mean if tm else std
    if not ref.dtype.is_floating_point:
        raise DTypeError(f"normal(): expected float mean and std, got {ref.dtype}")
    if ts and (std < 0).any():
        raise ValueError("normal(): std must be >= 0")
    if not ts and std < 0:
        raise ValueError(f"normal(): std must be >= 0, got {std}")
    shape = broadcast_shapes("normal", mean.shape if tm else (), std.shape if ts else ())
    with no_grad():
        z = randn(shape, generator=generator, dtype=ref.dtype, device=ref.device)
        return z * std + mean
