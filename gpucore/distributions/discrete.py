"""Discrete families, each a declaration and its formulas: Bernoulli, Geometric, Binomial,
NegativeBinomial, Poisson, Categorical, OneHotCategorical(StraightThrough), Multinomial.
Probabilities and logits are alternative parametrisations (``OneOf``): one is given, the other
computed on first use."""

from __future__ import annotations

import math

import gpucore as gc
import gpucore.nn.functional as F

from ..autograd.grad_mode import no_grad
from . import constraints as C
from .distribution import Arg, Declared, OneOf, Param
from .exp_family import ExponentialFamily
from .gamma import standard_gamma
from .utils import logits_to_probs, probs_to_logits

__all__ = [
    "Bernoulli",
    "Geometric",
    "Binomial",
    "NegativeBinomial",
    "Poisson",
    "Categorical",
    "OneHotCategorical",
    "OneHotCategoricalStraightThrough",
    "Multinomial",
]


def _binary(probs_constraint=C.unit_interval):
    """probs in ``probs_constraint`` or logits (log-odds), one given."""
    return OneOf(
        Param("probs", probs_constraint, derive=lambda d: logits_to_probs(d.logits, True)),
        Param("logits", C.real, derive=lambda d: probs_to_logits(d.probs, True)),
    )


def _categorical():
    """probs on the simplex (normalised) or logits (normalised to log-probabilities), one given."""
    return OneOf(
        Param(
            "probs",
            C.simplex,
            1,
            prepare=lambda p: p / p.sum(-1, keepdim=True),
            derive=lambda d: logits_to_probs(d.logits),
        ),
        Param(
            "logits",
            C.real_vector,
            1,
            prepare=lambda v: v - v.logsumexp(-1, keepdim=True),
            derive=lambda d: probs_to_logits(d.probs),
        ),
    )


def _entropy_by_enumeration(d):
    values = d.enumerate_support(False)
    lp = d.log_prob(values)
    return -(lp.exp() * lp).sum(0)


class Bernoulli(ExponentialFamily):
    """Bernoulli(probs=None, logits=None): 1 with probability ``probs``, else 0."""

    fields = (_binary(),)
    support = C.boolean

    mean = property(lambda self: self.probs)
    variance = property(lambda self: self.probs * (1 - self.probs))

    @property
    def mode(self):
        m = (self.probs >= 0.5).to(self.probs.dtype)
        return gc.where(self.probs == 0.5, gc.full_like(m, math.nan), m)

    def _sample(self, shape):
        return gc.bernoulli(self.probs.expand(shape))

    def _log_prob(self, x):
        return x * self.logits - F.softplus(self.logits)

    def entropy(self):
        return F.softplus(self.logits) - self.probs * self.logits

    def _support_values(self):
        return gc.arange(2, dtype=self._like().dtype, device=self._like().device)

    def _natural_params(self):
        return (self.logits,)

    def _log_normalizer(self, x):
        return F.softplus(x)


class Geometric(Declared):
    """Geometric(probs=None, logits=None): the number of failures before the first success."""

    fields = (_binary(),)
    support = C.nonnegative_integer

    mean = property(lambda self: 1 / self.probs - 1)
    mode = property(lambda self: gc.zeros_like(self.probs))
    variance = property(lambda self: (1 / self.probs - 1) / self.probs)

    def _sample(self, shape):
        u = self._draw("open", shape)
        return (u.log() / (-self.probs.expand(shape)).log1p()).floor()

    def _log_prob(self, x):
        return gc.special.xlog1py(x, -self.probs) + self.probs.log()

    def entropy(self):
        return (F.softplus(self.logits) - self.probs * self.logits) / self.probs


class Binomial(Declared):
    """Binomial(total_count=1, probs=None, logits=None): successes in ``total_count`` trials."""

    fields = (Param("total_count", C.nonnegative_integer, default=1), _binary())

    @C.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return C.integer_interval(0, self.total_count)

    mean = property(lambda self: self.total_count * self.probs)
    mode = property(
        lambda self: ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)
    )
    variance = property(lambda self: self.total_count * self.probs * (1 - self.probs))
    has_enumerate_support = True

    def _setup(self):
        # an integer count (tensor([5, 10])) is held in the probabilities' float dtype, as
        # PyTorch: sampling, scoring and enumerate_support then all answer in that dtype
        n = self.__dict__["total_count"]
        p = self.__dict__.get("probs", self.__dict__.get("logits"))
        if n.dtype is not p.dtype:
            self.__dict__["total_count"] = n.to(p.dtype)

    def _sample(self, shape):
        return gc.binomial(self.total_count.expand(shape), self.probs.expand(shape))

    def _log_prob(self, k):
        n, lg = self.total_count, self.logits
        comb = (n + 1).lgamma() - (k + 1).lgamma() - (n - k + 1).lgamma()
        # k log p + (n - k) log(1 - p) with log p = l - softplus(l), log(1 - p) = -softplus(l)
        return comb + gc.where(k == 0, gc.zeros_like(lg), k * lg) - n * F.softplus(lg)

    def entropy(self):
        return _entropy_by_enumeration(self)

    def _support_values(self):
        n = self.total_count
        top = int(n.max()) if n.numel() else 0
        if n.numel() and not bool((n == top).all()):
            raise NotImplementedError(
                "Inhomogeneous total count not supported by `enumerate_support`."
            )
        return gc.arange(1 + top, dtype=n.dtype, device=n.device)


class NegativeBinomial(Declared):
    """NegativeBinomial(total_count, probs=None, logits=None): successes (each of probability
    ``probs``) before ``total_count`` failures."""

    fields = (Param("total_count", C.greater_than_eq(0)), _binary(C.half_open_interval(0.0, 1.0)))
    support = C.nonnegative_integer

    mean = property(lambda self: self.total_count * self.logits.exp())
    mode = property(
        lambda self: ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0)
    )
    variance = property(lambda self: self.mean / (-self.logits).sigmoid())

    def _sample(self, shape):
        # a Poisson whose rate is Gamma(total_count, (1 - p) / p)
        rate = standard_gamma(self.total_count.expand(shape)) * self.logits.exp()
        return gc.poisson(rate)

    def _log_prob(self, k):
        r = self.total_count
        unnorm = r * F.logsigmoid(-self.logits) + k * F.logsigmoid(self.logits)
        lnorm = -(r + k).lgamma() + (1 + k).lgamma() + r.lgamma()
        lnorm = gc.where(r + k == 0, gc.zeros_like(lnorm), lnorm)
        return unnorm - lnorm


class Poisson(ExponentialFamily):
    """Poisson(rate): counts with mean ``rate``."""

    fields = (Param("rate", C.nonnegative),)
    support = C.nonnegative_integer

    mean = property(lambda self: self.rate)
    mode = property(lambda self: self.rate.floor())
    variance = property(lambda self: self.rate)

    def _sample(self, shape):
        return gc.poisson(self.rate.expand(shape))

    def _log_prob(self, k):
        return gc.xlogy(k, self.rate) - self.rate - (k + 1).lgamma()

    def _natural_params(self):
        return (self.rate.log(),)

    def _log_normalizer(self, x):
        return x.exp()


class Categorical(Declared):
    """Categorical(probs=None, logits=None): an index in [0, K) with the given probabilities
    (the last dimension of the parameter holds the K categories)."""

    fields = (_categorical(),)

    @C.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return C.integer_interval(0, self._num_events - 1)

    def _setup(self):
        param = self.__dict__.get("probs", self.__dict__.get("logits"))
        self._num_events = param.shape[-1]
        self._param = param

    @property
    def param_shape(self):
        return self._param.shape

    def _undefined(self):
        p = self._param
        return gc.full(tuple(self.batch_shape), math.nan, dtype=p.dtype, device=p.device)

    mean = property(_undefined)
    variance = property(_undefined)
    mode = property(lambda self: self.probs.argmax(-1))

    def _sample(self, shape):
        flat = self.probs.reshape(-1, self._num_events)
        n = 1
        for s in shape[: len(shape) - len(self.batch_shape)]:
            n *= s
        draws = (
            gc.multinomial(flat, n, replacement=True)
            if flat.shape[0]
            else gc.zeros((0, n), dtype=gc.int64, device=flat.device)
        )
        return draws.mT.reshape(tuple(shape))

    def _log_prob(self, x):
        idx = x.long().unsqueeze(-1)
        idx, logp = gc.broadcast_tensors(idx, self.logits)
        return logp.gather(-1, idx[..., :1]).squeeze(-1)

    def entropy(self):
        logits = self.logits.clamp(min=gc.finfo(self.logits.dtype).min)
        return -(logits * self.probs).sum(-1)

    def _support_values(self):
        return gc.arange(self._num_events, dtype=gc.int64, device=self._param.device)


def _one_hot(d, index):
    """``index`` (in [0, K)) as one-hot vectors in d's probabilities' dtype and device (one_hot
    builds on the host)."""
    p = d.probs
    return F.one_hot(index, d._num_events).to(dtype=p.dtype, device=p.device)


class OneHotCategorical(Declared):
    """OneHotCategorical(probs=None, logits=None): a Categorical's draw as a one-hot vector.
    Not a Categorical (as in PyTorch): it holds one (``_categorical``) and answers in vectors."""

    fields = (_categorical(),)
    support = C.one_hot

    def _setup(self):
        given = "probs" if "probs" in self.__dict__ else "logits"
        self._categorical = Categorical(**{given: self.__dict__[given]}, validate_args=False)
        self._num_events = self._categorical._num_events

    def _event_shape_of(self):
        return (self._num_events,)

    param_shape = property(lambda self: self._categorical.param_shape)
    mean = property(lambda self: self.probs)
    variance = property(lambda self: self.probs * (1 - self.probs))
    mode = property(lambda self: _one_hot(self, self.probs.argmax(-1)))

    def _sample(self, shape):
        return _one_hot(self, self._categorical._sample(shape[:-1]))

    def _log_prob(self, x):
        return self._categorical._log_prob(x.argmax(-1))

    def entropy(self):
        return self._categorical.entropy()

    def _support_values(self):
        p = self._categorical._param
        return gc.eye(self._num_events, dtype=p.dtype, device=p.device)


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """A OneHotCategorical whose rsample is the one-hot draw forward and passes gradients to
    the probabilities backward (the straight-through estimator)."""

    has_rsample = True

    def _rsample(self, shape):
        x = self._sample(shape)
        return x + (self.probs - self.probs.detach())

    def sample(self, sample_shape=()):
        with no_grad():
            return self._sample(self._extended_shape(sample_shape))


def _multinomial_count(n):
    """Multinomial's total_count: one Python int >= 0 for the whole batch (as PyTorch)."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise NotImplementedError(
            f"Multinomial(): inhomogeneous total_count is not supported: total_count must be "
            f"a Python int, got {type(n).__name__} {n!r}"
        )
    if n < 0:
        raise ValueError(f"Multinomial(): total_count must be >= 0, got {n}")
    return n


class Multinomial(Declared):
    """Multinomial(total_count=1, probs=None, logits=None): the counts per category of
    ``total_count`` Categorical draws."""

    fields = (Arg("total_count", 1, prepare=_multinomial_count), _categorical())
    _setup = Categorical._setup
    _event_shape_of = OneHotCategorical._event_shape_of

    @C.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        return C.multinomial(self.total_count)

    mean = property(lambda self: self.probs * self.total_count)
    variance = property(lambda self: self.total_count * self.probs * (1 - self.probs))

    def _sample(self, shape):
        if not isinstance(self.total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        draws = Categorical._sample(self, (self.total_count,) + tuple(shape[:-1]))
        return _one_hot(self, draws).sum(0)

    def _log_prob(self, x):
        logits, x = gc.broadcast_tensors(self.logits, x)
        powers = gc.where(x == 0, gc.zeros_like(logits), logits * x).sum(-1)
        return (x.sum(-1) + 1).lgamma() - (x + 1).lgamma().sum(-1) + powers

    def entropy(self):
        # H = -log n! - n sum p log p + sum_i E[log x_i!], each x_i ~ Binomial(n, p_i)
        n = self.total_count
        k = gc.arange(n + 1, dtype=self.probs.dtype, device=self.probs.device)
        k = k.reshape((n + 1,) + (1,) * (self.probs.dim()))
        marginal = Binomial(
            gc.full_like(self.probs, float(n)), probs=self.probs, validate_args=False
        )
        expected = (marginal.log_prob(k).exp() * (k + 1).lgamma()).sum(0).sum(-1)
        cat = -(self.logits.clamp(min=gc.finfo(self.logits.dtype).min) * self.probs).sum(-1)
        return n * cat - math.lgamma(n + 1) + expected
