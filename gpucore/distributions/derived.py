"""Families defined as a simpler distribution pushed through transforms: each declares its
parameters, builds its base and transforms in ``_base_and_transforms``, and adds the closed
forms the transforms cannot give (moments, entropy, and the scoring of the non-bijective
half-distributions). LogNormal, HalfNormal, HalfCauchy, Gumbel, Pareto, Weibull, Kumaraswamy,
InverseGamma, LogisticNormal, RelaxedBernoulli, RelaxedOneHotCategorical, and the bases of the
relaxed ones (LogitRelaxedBernoulli, ExpRelaxedCategorical)."""

from __future__ import annotations

import math

import gpucore as gc
import gpucore.nn.functional as F

from . import constraints as C
from .continuous import Cauchy, Exponential, Gamma, Normal, Uniform
from .discrete import _binary, _categorical
from .distribution import Arg, Declared, Param
from .transforms import (
    AbsTransform,
    AffineTransform,
    ExpTransform,
    PowerTransform,
    SigmoidTransform,
)
from .transforms_vector import StickBreakingTransform
from .utils import clamp_probs
from .wrappers import TransformedDistribution

__all__ = [
    "LogNormal",
    "HalfNormal",
    "HalfCauchy",
    "Gumbel",
    "Pareto",
    "Weibull",
    "Kumaraswamy",
    "InverseGamma",
    "LogisticNormal",
    "LogitRelaxedBernoulli",
    "RelaxedBernoulli",
    "ExpRelaxedCategorical",
    "RelaxedOneHotCategorical",
]

_EULER = 0.57721566490153286061


class _Pushed(TransformedDistribution, Declared):
    """A declared family that is a TransformedDistribution of its parameters."""

    __init__ = Declared.__init__
    expand = Declared.expand

    def _start(self, batch_shape, validate_args):
        if validate_args is not None:
            self._validate_args = validate_args
        self._batch_shape = batch_shape
        if self._validate_args:
            self._check_parameters()
        self._setup()
        base, transforms = self._base_and_transforms()
        keep = self._validate_args
        TransformedDistribution.__init__(self, base, transforms, validate_args=False)
        self._validate_args = keep

    def _base_and_transforms(self):
        raise NotImplementedError


def _const(like, value):
    return gc.full_like(like, value)


class LogNormal(_Pushed):
    """LogNormal(loc, scale): exp of a Normal(loc, scale)."""

    fields = (Param("loc", C.real), Param("scale", C.positive))
    support = C.positive

    def _base_and_transforms(self):
        return Normal(self.loc, self.scale, validate_args=False), [ExpTransform()]

    mean = property(lambda self: (self.loc + self.scale.pow(2) / 2).exp())
    mode = property(lambda self: (self.loc - self.scale.pow(2)).exp())

    @property
    def variance(self):
        s2 = self.scale.pow(2)
        return s2.expm1() * (2 * self.loc + s2).exp()

    def entropy(self):
        return self.base_dist.entropy() + self.loc


class _Folded(_Pushed):
    """|x| of a distribution symmetric about 0: density twice the base's on x >= 0."""

    support = C.nonnegative

    def log_prob(self, value):
        self._checked(value)
        lp = self.base_dist.log_prob(value) + math.log(2)
        return gc.where(value >= 0, lp, gc.full_like(lp, -math.inf))

    def cdf(self, value):
        self._checked(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, p):
        return self.base_dist.icdf((p + 1) / 2)

    def entropy(self):
        return self.base_dist.entropy() - math.log(2)


class HalfNormal(_Folded):
    """HalfNormal(scale): |x| for x ~ Normal(0, scale)."""

    fields = (Param("scale", C.positive),)

    def _base_and_transforms(self):
        return Normal(gc.zeros_like(self.scale), self.scale, validate_args=False), [AbsTransform()]

    mean = property(lambda self: self.scale * math.sqrt(2 / math.pi))
    mode = property(lambda self: gc.zeros_like(self.scale))
    variance = property(lambda self: self.scale.pow(2) * (1 - 2 / math.pi))


class HalfCauchy(_Folded):
    """HalfCauchy(scale): |x| for x ~ Cauchy(0, scale)."""

    fields = (Param("scale", C.positive),)

    def _base_and_transforms(self):
        return Cauchy(gc.zeros_like(self.scale), self.scale, validate_args=False), [AbsTransform()]

    mean = property(lambda self: _const(self.scale, math.inf))
    mode = property(lambda self: gc.zeros_like(self.scale))
    variance = property(lambda self: _const(self.scale, math.inf))


class Gumbel(Declared):
    """Gumbel(loc, scale): the law of maxima, with cdf exp(-exp(-(x - loc) / scale)). Sampled
    by inverting that cdf at a uniform draw in (0, 1); scored by its closed-form density."""

    fields = (Param("loc", C.real), Param("scale", C.positive))
    support = C.real
    has_rsample = True

    def _z(self, x):
        return (x - self.loc) / self.scale

    def _rsample(self, shape):
        return self._icdf(self._draw("open", shape))

    def _log_prob(self, x):
        # log of exp(-z - exp(-z)) / scale
        z = self._z(x)
        return -z - (-z).exp() - self.scale.log()

    def _cdf(self, x):
        return (-(-self._z(x)).exp()).exp()

    def _icdf(self, p):
        return self.loc - self.scale * (-p.log()).log()

    mean = property(lambda self: self.loc + self.scale * _EULER)
    mode = property(lambda self: self.loc)
    stddev = property(lambda self: (math.pi / math.sqrt(6)) * self.scale)
    variance = property(lambda self: self.stddev.pow(2))

    def entropy(self):
        return self.scale.log() + (1 + _EULER)


class Pareto(_Pushed):
    """Pareto(scale, alpha): scale * exp(e) for e ~ Exponential(alpha); support x >= scale."""

    fields = (Param("scale", C.positive), Param("alpha", C.positive))

    @C.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return C.greater_than_eq(self.scale)

    def _base_and_transforms(self):
        return Exponential(self.alpha, validate_args=False), [
            ExpTransform(),
            AffineTransform(0, self.scale),
        ]

    @property
    def mean(self):
        a = self.alpha.clamp(min=1)
        return gc.where(self.alpha > 1, a * self.scale / (a - 1), _const(a, math.inf))

    mode = property(lambda self: self.scale)

    @property
    def variance(self):
        a = self.alpha.clamp(min=2)
        v = self.scale.pow(2) * a / ((a - 1).pow(2) * (a - 2))
        return gc.where(self.alpha > 2, v, _const(v, math.inf))

    def entropy(self):
        return (self.scale / self.alpha).log() + (1 + self.alpha.reciprocal())


class Weibull(_Pushed):
    """Weibull(scale, concentration): scale * e^(1/k) for e ~ Exponential(1)."""

    fields = (Param("scale", C.positive), Param("concentration", C.positive))
    support = C.positive

    def _base_and_transforms(self):
        base = Exponential(gc.ones_like(self.scale), validate_args=False)
        return base, [
            PowerTransform(self.concentration.reciprocal()),
            AffineTransform(0, self.scale),
        ]

    mean = property(lambda self: self.scale * (1 + self.concentration.reciprocal()).lgamma().exp())

    @property
    def mode(self):
        k = self.concentration
        return self.scale * ((k - 1) / k).pow(k.reciprocal())

    @property
    def variance(self):
        k = self.concentration
        return self.scale.pow(2) * ((1 + 2 / k).lgamma().exp() - (2 * (1 + 1 / k).lgamma()).exp())

    def entropy(self):
        k = self.concentration
        return _EULER * (1 - k.reciprocal()) + (self.scale / k).log() + 1


def _kumaraswamy_moment(a, b, n):
    """E[x^n] = b B(1 + n / a, b)."""
    m = 1 + n / a
    return b * (m.lgamma() + b.lgamma() - (m + b).lgamma()).exp()


class Kumaraswamy(_Pushed):
    """Kumaraswamy(concentration1, concentration0): (1 - u^(1/b))^(1/a) for u ~ Uniform(0, 1),
    a = concentration1, b = concentration0 (a Beta-like law with a closed-form CDF)."""

    fields = (Param("concentration1", C.positive), Param("concentration0", C.positive))
    support = C.unit_interval

    def _base_and_transforms(self):
        a, b = self.concentration1, self.concentration0
        base = Uniform(gc.zeros_like(a), gc.ones_like(a), validate_args=False)
        return base, [
            PowerTransform(b.reciprocal()),
            AffineTransform(1.0, -1.0),
            PowerTransform(a.reciprocal()),
        ]

    mean = property(lambda self: _kumaraswamy_moment(self.concentration1, self.concentration0, 1))

    @property
    def mode(self):
        a, b = self.concentration1, self.concentration0
        m = ((a - 1) / (a * b - 1)).pow(a.reciprocal())
        return gc.where((a < 1) | (b < 1), gc.full_like(m, math.nan), m)

    @property
    def variance(self):
        a, b = self.concentration1, self.concentration0
        return _kumaraswamy_moment(a, b, 2) - _kumaraswamy_moment(a, b, 1).pow(2)

    def entropy(self):
        a, b = self.concentration1, self.concentration0
        harmonic_b = (b + 1).digamma() + _EULER
        return (1 - b.reciprocal()) + (1 - a.reciprocal()) * harmonic_b - a.log() - b.log()


class InverseGamma(_Pushed):
    """InverseGamma(concentration, rate): 1 / x for x ~ Gamma(concentration, rate)."""

    fields = (Param("concentration", C.positive), Param("rate", C.positive))
    support = C.positive

    def _base_and_transforms(self):
        return Gamma(self.concentration, self.rate, validate_args=False), [
            PowerTransform(-gc.ones_like(self.rate))
        ]

    @property
    def mean(self):
        c = self.concentration
        return gc.where(c > 1, self.rate / (c - 1), _const(c, math.inf))

    mode = property(lambda self: self.rate / (self.concentration + 1))

    @property
    def variance(self):
        c = self.concentration
        v = self.rate.pow(2) / ((c - 1).pow(2) * (c - 2))
        return gc.where(c > 2, v, _const(v, math.inf))

    def entropy(self):
        c = self.concentration
        return c + self.rate.log() + c.lgamma() - (1 + c) * c.digamma()


class LogisticNormal(_Pushed):
    """LogisticNormal(loc, scale): the stick-breaking image on the simplex of a Normal vector."""

    fields = (Param("loc", C.real, 1), Param("scale", C.positive, 1))
    support = C.simplex

    def _base_and_transforms(self):
        return Normal(self.loc, self.scale, validate_args=False), [StickBreakingTransform()]


class LogitRelaxedBernoulli(Declared):
    """The logit of a RelaxedBernoulli: (logistic noise + logits) / temperature."""

    fields = (Arg("temperature", prepare=gc.as_tensor), _binary())
    support = C.real
    has_rsample = True

    def _rsample(self, shape):
        u = clamp_probs(self._draw("uniform", shape))
        return (u.log() - (-u).log1p() + self.logits) / self.temperature

    def _log_prob(self, x):
        diff = self.logits - x * self.temperature
        return self.temperature.log() + diff - 2 * F.softplus(diff)


class RelaxedBernoulli(_Pushed):
    """RelaxedBernoulli(temperature, probs=None, logits=None): a continuous relaxation of a
    Bernoulli on (0, 1), sharper as the temperature falls."""

    fields = (Arg("temperature", prepare=gc.as_tensor), _binary())
    support = C.unit_interval

    def _base_and_transforms(self):
        base = LogitRelaxedBernoulli(self.temperature, logits=self.logits, validate_args=False)
        return base, [SigmoidTransform()]


class ExpRelaxedCategorical(Declared):
    """The log of a RelaxedOneHotCategorical sample (Gumbel-softmax scores in log space)."""

    fields = (Arg("temperature", prepare=gc.as_tensor), _categorical())
    support = C.real_vector
    has_rsample = True

    def _event_shape_of(self):
        return (self.logits.shape[-1],)

    def _rsample(self, shape):
        u = clamp_probs(self._draw("uniform", shape))
        scores = (self.logits - (-u.log()).log()) / self.temperature
        return scores - scores.logsumexp(-1, keepdim=True)

    def _log_prob(self, x):
        k = self.logits.shape[-1]
        t = self.temperature
        score = self.logits - x * t
        score = (score - score.logsumexp(-1, keepdim=True)).sum(-1)
        return score + math.lgamma(k) + (k - 1) * t.log()


class RelaxedOneHotCategorical(_Pushed):
    """RelaxedOneHotCategorical(temperature, probs=None, logits=None): the Concrete /
    Gumbel-softmax relaxation of a one-hot categorical on the simplex."""

    fields = (Arg("temperature", prepare=gc.as_tensor), _categorical())
    support = C.simplex

    def _base_and_transforms(self):
        base = ExpRelaxedCategorical(self.temperature, logits=self.logits, validate_args=False)
        return base, [ExpTransform()]
