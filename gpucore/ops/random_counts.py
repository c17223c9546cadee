"""Count and gamma sampling: poisson (torch.poisson), binomial (torch.binomial) and
standard_gamma (the sampler under gpucore.distributions' gamma family, torch's private
_standard_gamma; no public name), registry ops that are pure functions of their inputs and a
Philox stream position taken from gpucore's ``Generator`` (``manual_seed`` makes them
reproducible; ``generator=`` draws from another). The kernel draws with numpy's Philox bit
generator keyed by that (seed, offset) as its 128-bit key, counter from 0 (each call its own
stream, so a rejection sampler's unbounded draws never reach another call's): numpy's exact
algorithms (PTRS / BTPE for large parameters, inversion for small; for gamma, Marsaglia-Tsang
above shape 1).
poisson's gradient is zero and binomial has none, as PyTorch; standard_gamma's (the implicit
reparameterisation gradient) is attached by gpucore/distributions/gamma.py.

kernels: backends/cpu/kernels/random_counts.py (numpy); none on Vulkan (device tensors are read
back and the samples uploaded to their device).
"""

from __future__ import annotations

import numpy as np

from .. import dispatch
from ..autograd.grad_mode import no_grad
from ..backends.cpu.kernels.random_counts import np_counts
from ..creation import _to_backend, zeros_like
from ..errors import DTypeError
from ..random import default_generator
from ..tensor import Tensor
from .api import public
from .common import broadcast_shapes
from .registry import apply_on, defop
from .samples import Sample, uniform

# a call needs only a distinct (seed, offset): its draws come from the stream keyed by that pair
_ONE_BLOCK = 4


def _poisson_ref(rate, seed, offset):
    return np_counts("poisson", seed, offset, rate)


def _binomial_ref(count, prob, seed, offset):
    return np_counts("binomial", seed, offset, count, prob)


POISSON = defop(
    "poisson",
    infer=lambda rate, seed, offset: (rate.shape, rate.dtype),
    backward=lambda ctx, g: zeros_like(g),
    samples=lambda: [
        Sample(uniform(3, 5, low=0.0, high=20.0, seed=1), seed=7, offset=3, ref=_poisson_ref,
               grad=False, on_vulkan=False),
        Sample(np.zeros(4), seed=1, offset=0, ref=_poisson_ref, grad=False, on_vulkan=False),
    ],
)  # fmt: skip


def _gamma_ref(concentration, seed, offset):
    return np_counts("standard_gamma", seed, offset, concentration)


# its gradient is the implicit one, attached by gpucore/distributions/gamma.py
STANDARD_GAMMA = defop(
    "standard_gamma",
    infer=lambda concentration, seed, offset: (concentration.shape, concentration.dtype),
    samples=lambda: [
        Sample(uniform(3, 5, low=0.05, high=20.0, seed=4), seed=3, offset=11, ref=_gamma_ref,
               grad=False, on_vulkan=False),
    ],
)  # fmt: skip
BINOMIAL = defop(
    "binomial",
    infer=lambda count, prob, seed, offset: (
        broadcast_shapes("binomial", count.shape, prob.shape),
        count.dtype,
    ),
    samples=lambda: [
        Sample(np.rint(uniform(3, 5, low=0, high=50, seed=2)), uniform(3, 5, low=0, high=1,
               seed=3), seed=5, offset=9, ref=_binomial_ref, grad=False, on_vulkan=False),
    ],
)  # fmt: skip


def _float(name: str, t: Tensor, what: str) -> None:
    if not t.dtype.is_floating_point:
        raise DTypeError(f"{name}(): only supports floating-point dtypes for {what}, got {t.dtype}")


@public("poisson", method=False)
def poisson(input: Tensor, generator=None) -> Tensor:
    """Samples of Poisson distributions with the rates ``input`` (non-negative floats), in
    input's dtype and on its device, as torch.poisson (zero gradient)."""
    _float("poisson", input, "the rates")
    if input.numel() and bool((input < 0).any()):
        raise ValueError("poisson(): invalid Poisson rate, expected rate to be non-negative")
    seed, offset = (generator or default_generator).take(_ONE_BLOCK)
    with no_grad():
        out = apply_on(dispatch.CPU, POISSON, input, seed=seed, offset=offset)
    out = _to_backend(out, input._dev, False)
    if input._requires_grad:  # PyTorch's: part of the graph, with zero gradient
        out = out + input * 0
    return out


@public("binomial", method=False)
def binomial(count: Tensor, prob: Tensor, generator=None) -> Tensor:
    """Samples of binomial distributions with ``count`` trials (floats, rounded; negative ones
    give 0) and success probabilities ``prob`` (clamped to [0, 1]), broadcast, in count's dtype,
    as torch.binomial."""
    _float("binomial", count, "count")
    _float("binomial", prob, "prob")
    if count.dtype is not prob.dtype:
        prob = prob.to(count.dtype)
    if prob.numel() and bool(prob.isnan().any()):
        raise ValueError("binomial(): prob must not be NaN")
    seed, offset = (generator or default_generator).take(_ONE_BLOCK)
    with no_grad():
        out = apply_on(dispatch.CPU, BINOMIAL, count, prob, seed=seed, offset=offset)
    return _to_backend(out, count._dev, False)


def standard_gamma_sample(concentration: Tensor, generator=None) -> Tensor:
    """Gamma(concentration, 1) samples (floats > 0 elementwise), in concentration's dtype and on
    its device, without gradient (gpucore/distributions/gamma.py attaches the implicit one)."""
    _float("standard_gamma", concentration, "the concentrations")
    seed, offset = (generator or default_generator).take(_ONE_BLOCK)
    with no_grad():
        out = apply_on(
            dispatch.CPU, STANDARD_GAMMA, concentration.detach(), seed=seed, offset=offset
        )
    return _to_backend(out, concentration._dev, False)
