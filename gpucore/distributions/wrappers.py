"""Distributions built from other distributions: TransformedDistribution (a base pushed through
transforms), Independent (batch dimensions read as event dimensions) and MixtureSameFamily (a
Categorical mixture of one family's batch)."""

from __future__ import annotations

import math

import gpucore as gc

from ..autograd.grad_mode import no_grad
from . import constraints as C
from .distribution import Distribution
from .transforms import ComposeTransform, Transform, _sum_rightmost

__all__ = ["TransformedDistribution", "Independent", "MixtureSameFamily"]


class TransformedDistribution(Distribution):
    """The distribution of ``transforms(x)`` for x from ``base_distribution``: sampling
    applies the transforms in order, scoring inverts them and subtracts each log|det J|."""

    arg_constraints: dict = {}

    def __init__(self, base_distribution, transforms, validate_args=None):
        if isinstance(transforms, Transform):
            transforms = [transforms]
        elif not (
            isinstance(transforms, list) and all(isinstance(t, Transform) for t in transforms)
        ):
            raise ValueError(
                f"transforms must be a Transform or a list of Transforms, but was {transforms}"
            )
        self.transforms = transforms
        chain = ComposeTransform(transforms)
        base = base_distribution
        base_shape = tuple(base.batch_shape) + tuple(base.event_shape)
        base_event = len(base.event_shape)
        if len(base_shape) < chain.domain.event_dim:
            raise ValueError(
                f"base_distribution needs at least {chain.domain.event_dim} dimensions, but got "
                f"{base_shape}"
            )
        out_shape = tuple(chain.forward_shape(base_shape))
        needed = tuple(chain.inverse_shape(out_shape))
        if needed != base_shape:
            base = base.expand(needed[: len(needed) - base_event])
        extra = chain.domain.event_dim - base_event
        if extra > 0:
            base = Independent(base, extra)
        self.base_dist = base
        event_dim = chain.codomain.event_dim + max(base_event - chain.domain.event_dim, 0)
        cut = len(out_shape) - event_dim
        Distribution.__init__(self, out_shape[:cut], out_shape[cut:], validate_args=validate_args)

    @C.dependent_property(is_discrete=False)
    def support(self):
        if not self.transforms:
            return self.base_dist.support
        s = self.transforms[-1].codomain
        extra = len(self.event_shape) - s.event_dim
        return C.independent(s, extra) if extra > 0 else s

    @property
    def has_rsample(self):
        return self.base_dist.has_rsample

    def expand(self, batch_shape, _instance=None):
        new = _instance if _instance is not None else type(self).__new__(type(self))
        # the base shape that the transforms map onto batch_shape + event_shape
        wanted = tuple(batch_shape) + tuple(self.event_shape)
        base_shape = tuple(ComposeTransform(self.transforms).inverse_shape(wanted))
        keep = len(base_shape) - len(self.base_dist.event_shape)
        new.base_dist = self.base_dist.expand(base_shape[:keep])
        new.transforms = self.transforms
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _forward(self, x):
        for t in self.transforms:
            x = t(x)
        return x

    def _backward(self, y):
        """The base-space point of y and, per transform from the output end, (t, x, y)."""
        steps = []
        for t in reversed(self.transforms):
            x = t.inv(y)
            steps.append((t, x, y))
            y = x
        return y, steps

    def sample(self, sample_shape=()):
        with no_grad():
            return self._forward(self.base_dist.sample(sample_shape))

    def rsample(self, sample_shape=()):
        return self._forward(self.base_dist.rsample(sample_shape))

    def log_prob(self, value):
        # change of variables: log p(y) = log p_base(x) - sum over the transforms of
        # log|det dy/dx|. ``rank`` is this distribution's event rank measured in the space
        # being walked through; each transform's term (and the base's log_prob) has the event
        # dims it reads as batch summed away
        self._checked(value)
        x, steps = self._backward(value)
        rank = len(self.event_shape)
        jacobians = []
        for t, before, after in steps:
            rank += t.domain.event_dim - t.codomain.event_dim
            term = t.log_abs_det_jacobian(before, after)
            jacobians.append(_sum_rightmost(term, rank - t.domain.event_dim))
        base = _sum_rightmost(self.base_dist.log_prob(x), rank - len(self.base_dist.event_shape))
        return base - sum(jacobians) if jacobians else base

    def _oriented(self, p):
        """A probability of the base read through the transforms: unchanged where their
        composition increases, complemented where it decreases."""
        sign = math.prod((t.sign for t in self.transforms), start=1)
        if isinstance(sign, int):
            return p if sign > 0 else 1 - p
        return gc.where(sign > 0, p, 1 - p)

    def cdf(self, value):
        x, _ = self._backward(value)
        if self._validate_args:
            self.base_dist._validate_sample(x)
        return self._oriented(self.base_dist.cdf(x))

    def icdf(self, value):
        return self._forward(self.base_dist.icdf(self._oriented(value)))


class Independent(Distribution):
    """``base_distribution`` with its rightmost ``reinterpreted_batch_ndims`` batch dimensions
    read as event dimensions: log_prob and entropy sum over them."""

    arg_constraints: dict = {}

    def __init__(self, base_distribution, reinterpreted_batch_ndims: int, validate_args=None):
        n = reinterpreted_batch_ndims
        if n > len(base_distribution.batch_shape):
            raise ValueError(
                "Expected reinterpreted_batch_ndims <= len(base_distribution.batch_shape), "
                f"actual {n} vs "
                f"{len(base_distribution.batch_shape)}"
            )
        self.base_dist, self.reinterpreted_batch_ndims = base_distribution, n
        shape = tuple(base_distribution.batch_shape) + tuple(base_distribution.event_shape)
        cut = len(base_distribution.batch_shape) - n
        super().__init__(shape[:cut], shape[cut:], validate_args=validate_args)

    has_rsample = property(lambda self: self.base_dist.has_rsample)
    has_enumerate_support = property(
        lambda self: self.reinterpreted_batch_ndims == 0 and self.base_dist.has_enumerate_support
    )

    @C.dependent_property
    def support(self):
        s = self.base_dist.support
        return (
            C.independent(s, self.reinterpreted_batch_ndims)
            if self.reinterpreted_batch_ndims
            else s
        )

    mean = property(lambda self: self.base_dist.mean)
    mode = property(lambda self: self.base_dist.mode)
    variance = property(lambda self: self.base_dist.variance)

    def expand(self, batch_shape, _instance=None):
        n = self.reinterpreted_batch_ndims
        inner = tuple(self.event_shape)[:n]
        return Independent(
            self.base_dist.expand(tuple(batch_shape) + inner), n, validate_args=False
        )

    def sample(self, sample_shape=()):
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape=()):
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value):
        return _sum_rightmost(self.base_dist.log_prob(value), self.reinterpreted_batch_ndims)

    def entropy(self):
        return _sum_rightmost(self.base_dist.entropy(), self.reinterpreted_batch_ndims)

    def enumerate_support(self, expand=True):
        if self.reinterpreted_batch_ndims > 0:
            raise NotImplementedError("Enumeration over cartesian product is not implemented")
        return self.base_dist.enumerate_support(expand=expand)

    def __repr__(self):
        return f"Independent({self.base_dist!r}, {self.reinterpreted_batch_ndims})"


class MixtureSameFamily(Distribution):
    """A mixture whose weights are ``mixture_distribution`` (a Categorical over K) and whose
    components are the last batch dimension (of size K) of ``component_distribution``."""

    arg_constraints: dict = {}
    has_rsample = False

    def __init__(self, mixture_distribution, component_distribution, validate_args=None):
        from .discrete import Categorical  # noqa: PLC0415 (discrete imports this module's siblings)

        if not isinstance(mixture_distribution, Categorical):
            raise ValueError(
                "The Mixture distribution needs to be an instance of "
                "gpucore.distributions.Categorical"
            )
        if not isinstance(component_distribution, Distribution):
            raise ValueError(
                "The Component distribution needs to be an instance of "
                "gpucore.distributions.Distribution"
            )
        mix_batch, comp_batch = (
            tuple(mixture_distribution.batch_shape),
            tuple(component_distribution.batch_shape),
        )
        if len(comp_batch) < 1 or mixture_distribution._num_events != comp_batch[-1]:
            raise ValueError(
                f"The mixture has {mixture_distribution._num_events} components but the "
                "component batch shape is "
                f"{comp_batch}: its last dimension must equal the number of components"
            )
        for a, b in zip(reversed(mix_batch), reversed(comp_batch[:-1])):
            if a != 1 and b != 1 and a != b:
                raise ValueError(
                    f"`mixture_distribution.batch_shape` ({mix_batch}) is not compatible with "
                    f"`component_distribution.batch_shape`({comp_batch})"
                )
        self._mixture_distribution, self._component_distribution = (
            mixture_distribution,
            component_distribution,
        )
        self._num_component = comp_batch[-1]
        self._event_ndims = len(component_distribution.event_shape)
        super().__init__(
            comp_batch[:-1], component_distribution.event_shape, validate_args=validate_args
        )

    mixture_distribution = property(lambda self: self._mixture_distribution)
    component_distribution = property(lambda self: self._component_distribution)

    @C.dependent_property
    def support(self):
        return C.MixtureSameFamilyConstraint(self._component_distribution.support)

    def expand(self, batch_shape, _instance=None):
        batch = tuple(batch_shape)
        comp = self._component_distribution.expand(batch + (self._num_component,))
        mix = self._mixture_distribution.expand(batch)
        return MixtureSameFamily(mix, comp, validate_args=False)

    def _weights(self):
        p = self._mixture_distribution.probs
        return p.reshape(tuple(p.shape) + (1,) * self._event_ndims)

    def _mix_dim(self):
        return -1 - self._event_ndims

    @property
    def mean(self):
        return (self._weights() * self._component_distribution.mean).sum(self._mix_dim())

    @property
    def variance(self):
        w, comp, d = self._weights(), self._component_distribution, self._mix_dim()
        within = (w * comp.variance).sum(d)
        between = (w * (comp.mean - self.mean.unsqueeze(d)).pow(2)).sum(d)
        return within + between

    def _per_component(self, x):
        return x.unsqueeze(self._mix_dim())

    def cdf(self, x):
        x = self._per_component(self._checked(x))
        return (self._component_distribution.cdf(x) * self._mixture_distribution.probs).sum(-1)

    def log_prob(self, x):
        x = self._per_component(self._checked(x))
        lp = self._component_distribution.log_prob(x)
        return (lp + self._mixture_distribution.logits.log_softmax(-1)).logsumexp(-1)

    def sample(self, sample_shape=()):
        with no_grad():
            sample_shape = tuple(sample_shape)
            which = self._mixture_distribution.sample(sample_shape)
            comps = self._component_distribution.sample(sample_shape)
            event = tuple(self.event_shape)
            index = which.reshape(tuple(which.shape) + (1,) * (1 + len(event)))
            index = index.expand(tuple(which.shape) + (1,) + event)
            return comps.gather(len(which.shape), index).squeeze(len(which.shape))

    def __repr__(self):
        mix, comp = self._mixture_distribution, self._component_distribution
        return f"MixtureSameFamily(\n  {mix!r},\n  {comp!r})"
