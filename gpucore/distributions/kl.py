"""``kl_divergence(p, q)`` and ``register_kl``: a table of closed forms keyed by the pair of
classes, looked up by the most specific registered pair along both classes' MROs (a
registration for a subclass wins over its parent's)."""

from __future__ import annotations

import math

import gpucore as gc
import gpucore.nn.functional as F
from gpucore.ops.common import broadcast_shapes

from .continuous import Beta, Cauchy, Exponential, Gamma, Laplace, Normal, Uniform
from .continuous_bernoulli_von_mises import ContinuousBernoulli
from .derived import HalfNormal
from .discrete import Bernoulli, Binomial, Categorical, Geometric, OneHotCategorical, Poisson
from .exp_family import ExponentialFamily, bregman_kl
from .multivariate import Dirichlet, LowRankMultivariateNormal, MultivariateNormal
from .transforms import _sum_rightmost
from .wrappers import Independent, TransformedDistribution

__all__ = ["kl_divergence", "register_kl"]

_TABLE: dict = {}
_CHOICE: dict = {}


def register_kl(type_p, type_q):
    """Decorator registering ``fn(p, q)`` as KL(p || q) for p of ``type_p``, q of ``type_q``."""
    if not (isinstance(type_p, type) and isinstance(type_q, type)):
        raise TypeError(f"register_kl: expected two classes, got {type_p!r} and {type_q!r}")

    def decorate(fn):
        _TABLE[type_p, type_q] = fn
        _CHOICE.clear()
        return fn

    return decorate


def _lookup(tp, tq):
    key = (tp, tq)
    if key not in _CHOICE:
        best, rank = None, None
        for (a, b), fn in _TABLE.items():
            if issubclass(tp, a) and issubclass(tq, b):
                r = (tp.__mro__.index(a), tq.__mro__.index(b))
                if rank is None or r < rank:
                    best, rank = fn, r
        _CHOICE[key] = best
    return _CHOICE[key]


def kl_divergence(p, q):
    """KL(p || q) = E_p[log p(x) - log q(x)], batched over the two distributions' batch."""
    fn = _lookup(type(p), type(q))
    if fn is None:
        raise NotImplementedError(
            f"No KL(p || q) is implemented for p type {type(p).__name__} and q type "
            f"{type(q).__name__}"
        )
    return fn(p, q)


def _inf_like(t):
    return gc.full_like(t, math.inf)


@register_kl(Normal, Normal)
def _normal(p, q):
    r = (p.scale / q.scale).pow(2)
    return 0.5 * (r + ((p.loc - q.loc) / q.scale).pow(2) - 1 - r.log())


@register_kl(HalfNormal, HalfNormal)
def _half_normal(p, q):
    r = (p.scale / q.scale).pow(2)
    return 0.5 * (r - 1 - r.log())


@register_kl(Bernoulli, Bernoulli)
def _bernoulli(p, q):
    # log p = -softplus(-l), log(1 - p) = -softplus(l)
    lp, lq = p.logits, q.logits
    ones = p.probs * (F.softplus(-lq) - F.softplus(-lp))
    zeros = (1 - p.probs) * (F.softplus(lq) - F.softplus(lp))
    return ones + zeros


@register_kl(Binomial, Binomial)
def _binomial(p, q):
    # equal counts: the binomial coefficients cancel and, with k successes of mean n p_p,
    # E[log p - log q] = n (p_p log(p_p / p_q) + (1 - p_p) log((1 - p_p) / (1 - p_q)));
    # p with more trials than q puts mass where q has none (inf); fewer is not implemented
    if bool((p.total_count < q.total_count).any()):
        raise NotImplementedError(
            "KL between Binomials where q.total_count > p.total_count is not implemented"
        )
    n = p.total_count
    log_ratio_success = F.softplus(-q.logits) - F.softplus(-p.logits)
    log_ratio_failure = F.softplus(q.logits) - F.softplus(p.logits)
    kl = n * (p.probs * log_ratio_success + (1 - p.probs) * log_ratio_failure)
    return gc.where(n > q.total_count, _inf_like(kl), kl)


@register_kl(Geometric, Geometric)
def _geometric(p, q):
    # P(k) = (1 - s)^k s for k >= 0 failures: the log ratio is log(s_p / s_q) plus k times
    # log((1 - s_p) / (1 - s_q)), and E_p[k] = (1 - s_p) / s_p
    sp, sq = p.probs, q.probs
    mean_failures = (1 - sp) / sp
    return (sp.log() - sq.log()) + mean_failures * ((-sp).log1p() - (-sq).log1p())


@register_kl(Poisson, Poisson)
def _poisson(p, q):
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(Bernoulli, Poisson)
def _bernoulli_poisson(p, q):
    return -p.entropy() - (p.probs * q.rate.log() - q.rate)


@register_kl(Poisson, Bernoulli)
@register_kl(Poisson, Binomial)
def _poisson_bounded(p, q):
    # a Poisson puts mass on every count; a bounded count law does not
    return _inf_like(
        p.rate.expand(broadcast_shapes("kl", tuple(p.batch_shape), tuple(q.batch_shape)))
    )


@register_kl(Categorical, Categorical)
@register_kl(OneHotCategorical, OneHotCategorical)
def _categorical(p, q):
    # sum_i p_i log(p_i / q_i) over p's support (0 log 0 = 0); a category with q_i = 0 < p_i
    # makes it infinite
    in_p = p.probs > 0
    shape = tuple(broadcast_shapes("kl", tuple(p.probs.shape), tuple(q.probs.shape)))
    terms = p.probs * (p.logits - q.logits)
    terms = terms.expand(shape)
    terms = gc.where(in_p.expand(shape), terms, gc.zeros_like(terms))
    missing = (in_p & (q.probs == 0)).any(-1)
    total = terms.sum(-1)
    return gc.where(missing, _inf_like(total), total)


@register_kl(Uniform, Uniform)
def _uniform(p, q):
    kl = ((q.high - q.low) / (p.high - p.low)).log()
    outside = (q.low > p.low) | (q.high < p.high)
    return gc.where(outside, _inf_like(kl), kl)


@register_kl(Exponential, Exponential)
def _exponential(p, q):
    ratio = q.rate / p.rate
    return ratio - 1 - ratio.log()


@register_kl(Laplace, Laplace)
def _laplace(p, q):
    ratio = p.scale / q.scale
    gap = (p.loc - q.loc).abs()
    return -ratio.log() + gap / q.scale + ratio * (-gap / p.scale).exp() - 1


@register_kl(Cauchy, Cauchy)
def _cauchy(p, q):
    return (((p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2)) / (4 * p.scale * q.scale)).log()


@register_kl(Gamma, Gamma)
def _gamma(p, q):
    # log f(x; a, b) = a log b - lgamma(a) + (a - 1) log x - b x, so the KL needs p's
    # expected statistics E[log x] = digamma(a_p) - log b_p and E[x] = a_p / b_p
    ap, bp, aq, bq = p.concentration, p.rate, q.concentration, q.rate
    mean_log_x = ap.digamma() - bp.log()
    mean_x = ap / bp
    normalisers = (ap * bp.log() - ap.lgamma()) - (aq * bq.log() - aq.lgamma())
    return normalisers + (ap - aq) * mean_log_x - (bp - bq) * mean_x


@register_kl(Beta, Beta)
def _beta(p, q):
    ap, bp, aq, bq = p.concentration1, p.concentration0, q.concentration1, q.concentration0
    lbeta = lambda a, b: a.lgamma() + b.lgamma() - (a + b).lgamma()  # noqa: E731
    return (
        lbeta(aq, bq)
        - lbeta(ap, bp)
        + (ap - aq) * ap.digamma()
        + (bp - bq) * bp.digamma()
        + (aq - ap + bq - bp) * (ap + bp).digamma()
    )


@register_kl(Dirichlet, Dirichlet)
def _dirichlet(p, q):
    cp, cq = p.concentration, q.concentration
    sp, sq = cp.sum(-1), cq.sum(-1)
    mean_log = cp.digamma() - sp.digamma().unsqueeze(-1)
    return (
        sp.lgamma()
        - sq.lgamma()
        - (cp.lgamma() - cq.lgamma()).sum(-1)
        + ((cp - cq) * mean_log).sum(-1)
    )


@register_kl(ContinuousBernoulli, ContinuousBernoulli)
def _continuous_bernoulli(p, q):
    # log p(x) = eta x - A(eta): E_p[log p - log q] = mean_p (eta_p - eta_q) - A(eta_p) + A(eta_q)
    ep, eq = p._eta(), q._eta()
    return p.mean * (ep - eq) - p._log_normalizer(ep) + q._log_normalizer(eq)


def _gaussian(d):
    """(loc, lower Cholesky factor of the covariance) of a (low-rank) multivariate normal."""
    if isinstance(d, MultivariateNormal):
        return d.loc, d._L
    return d.loc, gc.linalg.cholesky(d.covariance_matrix)


@register_kl(MultivariateNormal, MultivariateNormal)
@register_kl(MultivariateNormal, LowRankMultivariateNormal)
@register_kl(LowRankMultivariateNormal, MultivariateNormal)
@register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)
def _mvn(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError(
            "KL-divergence between two Multivariate Normals with different event shapes "
            "cannot be computed"
        )
    (mp, Lp), (mq, Lq) = _gaussian(p), _gaussian(q)
    n = p.event_shape[0]
    batch = tuple(
        broadcast_shapes(
            "kl",
            tuple(Lp.shape[:-2]),
            tuple(Lq.shape[:-2]),
            tuple(mp.shape[:-1]),
            tuple(mq.shape[:-1]),
        )
    )
    Lq_b = Lq.expand(batch + (n, n))
    trace = (
        gc.linalg.solve_triangular(Lq_b, Lp.expand(batch + (n, n)), upper=False)
        .pow(2)
        .sum((-2, -1))
    )
    diff = (mq - mp).expand(batch + (n,)).unsqueeze(-1)
    maha = gc.linalg.solve_triangular(Lq_b, diff, upper=False).pow(2).sum((-2, -1))
    half_log_det = lambda L: L.diagonal(dim1=-2, dim2=-1).log().sum(-1)  # noqa: E731
    return 0.5 * (trace + maha - n) + half_log_det(Lq) - half_log_det(Lp)


@register_kl(Independent, Independent)
def _independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError(
            "KL between Independents with different reinterpreted_batch_ndims"
        )
    return _sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)


@register_kl(TransformedDistribution, TransformedDistribution)
def _transformed(p, q):
    # the same bijection on both sides leaves the divergence of the bases unchanged
    if p.transforms != q.transforms or p.event_shape != q.event_shape:
        raise NotImplementedError("KL between TransformedDistributions with different transforms")
    # batch dims of the base that the transforms fold into the event are summed over; a
    # transform that only reshapes the event (ReshapeTransform, CorrCholeskyTransform) leaves
    # the batch as it is
    folded = len(p.base_dist.batch_shape) - len(p.batch_shape)
    return _sum_rightmost(kl_divergence(p.base_dist, q.base_dist), folded)


@register_kl(ExponentialFamily, ExponentialFamily)
def _exponential_family(p, q):
    if type(p) is not type(q):
        raise NotImplementedError(
            "The cross KL-divergence between different exponential families cannot be computed"
        )
    return bregman_kl(p, q)
