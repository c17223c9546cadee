"""Samples of every distribution: shapes for any sample_shape, and their statistics, checked
against the distribution's own (PyTorch-checked) cdf, pmf and moments with a fixed seed:
Kolmogorov-Smirnov bounds for continuous distributions, per-value frequencies for discrete
ones, mean and covariance for the multivariate ones. The bounds are several standard errors
wide (a correct sampler passes with any seed) yet fail a sampler off by a few percent."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dist_cases import CASES, make

import gpucore as gc

N = 40_000
# Kolmogorov-Smirnov: P(sqrt(n) * D > 1.95) = 0.001
KS = 1.95 / math.sqrt(N)

CONTINUOUS_CDF = [
    n
    for n in sorted(CASES)
    if CASES[n][0]
    in (
        "Normal",
        "LogNormal",
        "Uniform",
        "Exponential",
        "Laplace",
        "Cauchy",
        "Gamma",
        "Chi2",
        "Gumbel",
        "HalfNormal",
        "HalfCauchy",
        "Pareto",
        "Weibull",
        "Kumaraswamy",
        "InverseGamma",
        "ContinuousBernoulli",
    )
]
DISCRETE = [
    "Bernoulli_probs",
    "Bernoulli_logits",
    "Categorical_probs",
    "Categorical_logits",
    "Binomial",
    "Geometric",
    "Poisson",
    "NegativeBinomial",
]
MOMENTS = [
    "Beta",
    "StudentT",
    "FisherSnedecor",
    "Dirichlet",
    "MVN_cov",
    "MVN_prec",
    "MVN_tril",
    "LowRankMVN",
    "OneHotCategorical",
    "Multinomial",
]


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("sample_shape", [(), (5,), (2, 3)])
def test_sample_shapes(name, sample_shape):
    d, _ = make(gc, name)
    want = tuple(sample_shape) + tuple(d.batch_shape) + tuple(d.event_shape)
    x = d.sample(sample_shape)
    assert tuple(x.shape) == want, name
    assert not x.requires_grad
    if d.has_rsample:
        assert tuple(d.rsample(sample_shape).shape) == want
    else:
        with pytest.raises(NotImplementedError):
            d.rsample(sample_shape)
    assert bool(d.support.check(x).all()), f"{name}: samples outside the support"


def test_samples_follow_the_seed():
    d, _ = make(gc, "Gamma")
    gc.manual_seed(7)
    a = d.sample((50,)).numpy()
    gc.manual_seed(7)
    b = d.sample((50,)).numpy()
    c = d.sample((50,)).numpy()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(b, c)


@pytest.mark.parametrize("name", CONTINUOUS_CDF)
def test_continuous_samples_match_the_cdf(name):
    gc.manual_seed(11)
    d, _ = make(gc, name)
    x = d.sample((N,))
    u = np.sort(d.cdf(x).numpy().reshape(N, -1), axis=0)
    grid = np.arange(1, N + 1)[:, None] / N
    dev = np.max(np.maximum(np.abs(u - grid), np.abs(u - grid + 1 / N)))
    assert dev < KS, f"{name}: Kolmogorov-Smirnov distance {dev:.4f} >= {KS:.4f}"


@pytest.mark.parametrize("name", DISCRETE)
def test_discrete_frequencies_match_the_pmf(name):
    gc.manual_seed(12)
    d, _ = make(gc, name)
    x = d.sample((N,)).numpy()
    values = np.unique(x)
    for v in values[:40]:
        freq = (x == v).mean(0)
        value = gc.full(tuple(d.batch_shape), float(v), dtype=gc.float64)
        inside = d.support.check(value)
        safe = gc.where(inside, value, gc.zeros_like(value))
        p = np.where(inside.numpy(), np.exp(d.log_prob(safe).numpy()), 0.0)
        tol = 5 * np.sqrt(p * (1 - p) / N) + 1e-4
        assert np.all(np.abs(freq - p) < tol), f"{name}: P(X = {v}) {freq} vs {p}"


@pytest.mark.parametrize("name", MOMENTS)
def test_sample_moments(name):
    gc.manual_seed(13)
    d, _ = make(gc, name)
    x = d.sample((N,)).numpy().astype(np.float64)
    mean, var = d.mean.detach().numpy(), d.variance.detach().numpy()
    se = np.sqrt(var / N)
    assert np.all(np.abs(x.mean(0) - mean) < 6 * se + 1e-4), f"{name}: mean"
    sv = x.var(0)
    assert np.all(np.abs(sv - var) < 0.06 * var + 1e-4), f"{name}: variance {sv} vs {var}"
    if name.startswith(("MVN", "LowRank")):
        cov = d.covariance_matrix.detach().numpy().reshape(-1, *d.event_shape * 2)
        flat = x.reshape(N, -1, x.shape[-1])
        for b in range(flat.shape[1]):
            c, want = np.cov(flat[:, b].T), cov[b % cov.shape[0]]
            assert np.allclose(c, want, atol=0.06 * np.abs(want).max()), f"{name}: covariance"


def _ks(u: np.ndarray) -> float:
    u = np.sort(u.reshape(u.shape[0], -1), axis=0)
    grid = np.arange(1, u.shape[0] + 1)[:, None] / u.shape[0]
    return float(np.max(np.maximum(np.abs(u - grid), np.abs(u - grid + 1 / u.shape[0]))))


def _bessel_i(n: int, k: np.ndarray) -> np.ndarray:
    """I_n(k) = sum_m (k/2)^(2m+n) / (m! (m+n)!) in float64 (positive terms: no cancellation;
    80 terms are exact to rounding for k <= 40)."""
    k = np.asarray(k, np.float64)
    return sum(
        (k / 2) ** (2 * m + n) / (math.factorial(m) * math.factorial(m + n)) for m in range(80)
    )


def test_von_mises_limits_never_hang():
    """Tiny concentration samples the uniform circle, +inf the point mass at loc, NaN gives
    NaN (validate_args=False); none of them loops forever."""
    gc.manual_seed(15)
    for k in (1e-9, 1e-13, 0.0):
        d = gc.distributions.VonMises(gc.tensor(0.5), gc.tensor(k), validate_args=False)
        x = d.sample((20000,)).numpy().astype(np.float64)
        assert _ks((x[:, None] + math.pi) / (2 * math.pi)) < 0.02
        assert abs(np.cos(x - 0.5).mean()) < 0.03
    loc = gc.tensor([0.25, -1.0, 2.0], dtype=gc.float64)
    k = gc.tensor([math.inf, math.nan, 3.0], dtype=gc.float64)
    x = gc.distributions.VonMises(loc, k, validate_args=False).sample((7,)).numpy()
    assert np.all(x[:, 0] == 0.25) and np.all(np.isnan(x[:, 1])) and np.all(np.isfinite(x[:, 2]))


def test_lkj_cholesky_marginals_of_every_row():
    """Every off-diagonal correlation r of LKJ(eta) in dimension d has (r + 1) / 2 ~
    Beta(b, b), b = eta - 1 + d / 2: E r^2 = 1 / (2b + 1), E r^4 = 3 / ((2b + 1)(2b + 3)),
    and (with scipy) a KS test, for the rows >= 2 as well as the first."""
    gc.manual_seed(16)
    n, dim = 40000, 5
    for eta in (0.5, 2.0):
        low = gc.distributions.LKJCholesky(dim, gc.tensor(eta, dtype=gc.float64)).sample((n,))
        corr = (low @ low.mT).numpy()
        b = eta - 1 + dim / 2
        for i in range(1, dim):
            for j in range(i):
                r = corr[:, i, j]
                m2, m4 = 1 / (2 * b + 1), 3 / ((2 * b + 1) * (2 * b + 3))
                assert abs(r.mean()) < 5 * np.sqrt(m2 / n), (eta, i, j)
                assert abs((r**2).mean() / m2 - 1) < 0.04, (eta, i, j, (r**2).mean(), m2)
                assert abs((r**4).mean() / m4 - 1) < 0.08, (eta, i, j, (r**4).mean(), m4)
                try:
                    from scipy import stats
                except ImportError:
                    continue
                assert stats.kstest((r + 1) / 2, stats.beta(b, b).cdf).pvalue > 1e-4


def test_von_mises_circular_moments():
    """E[cos(X - loc)] = I1(k) / I0(k) and E[sin(X - loc)] = 0; samples lie in [-pi, pi)."""
    gc.manual_seed(14)
    d, _ = make(gc, "VonMises")
    x = d.sample((N,)).numpy()
    assert x.min() >= -math.pi and x.max() < math.pi
    k = d.concentration.numpy()
    c = np.cos(x - d.loc.numpy())
    want = _bessel_i(1, k) / _bessel_i(0, k)
    assert np.all(np.abs(c.mean(0) - want) < 6 * np.sqrt(c.var(0) / N)), (c.mean(0), want, k)
    s = np.sin(x - d.loc.numpy())
    assert np.all(np.abs(s.mean(0)) < 6 * np.sqrt(s.var(0) / N) + 1e-4)


def test_relaxed_bernoulli_cdf():
    """X = sigmoid((logits + L) / t) with L logistic: P(X <= x) = sigmoid(t logit(x) - logits)."""
    gc.manual_seed(15)
    d, _ = make(gc, "RelaxedBernoulli")
    x = np.clip(d.sample((N,)).numpy(), 1e-12, 1 - 1e-12)
    t, logits = float(d.temperature), d.logits.numpy()
    z = t * np.log(x / (1 - x)) - logits
    assert _ks(1 / (1 + np.exp(-z))) < KS


def test_relaxed_one_hot_argmax_is_categorical():
    """Gumbel-max: the argmax of a relaxed sample is distributed as Categorical(probs)."""
    gc.manual_seed(16)
    d, _ = make(gc, "RelaxedOneHotCategorical")
    x = d.sample((N,)).numpy()
    assert np.allclose(x.sum(-1), 1, atol=1e-6)
    top = x.argmax(-1)
    p = d.probs.numpy()
    for k in range(p.shape[-1]):
        freq = (top == k).mean(0)
        assert np.all(np.abs(freq - p[..., k]) < 5 * np.sqrt(p[..., k] / N) + 1e-4)


def test_logistic_normal_log_ratios_are_normal():
    """Undoing the stick breaking in numpy (z_i = y_i / (1 - y_1 - ... - y_{i-1}),
    x_i = logit(z_i) + log(K - i)) gives back Normal(loc, scale) samples."""
    gc.manual_seed(17)
    d, _ = make(gc, "LogisticNormal")
    y = d.sample((N,)).numpy()
    k = y.shape[-1] - 1
    rest = 1 - np.concatenate([np.zeros_like(y[..., :1]), np.cumsum(y[..., :-2], -1)], -1)
    zz = y[..., :-1] / rest
    z = np.log(zz / (1 - zz)) + np.log(np.arange(k, 0, -1))
    loc, scale = d.base_dist.base_dist.loc, d.base_dist.base_dist.scale
    u = gc.distributions.Normal(loc, scale).cdf(gc.tensor(z)).numpy()
    assert _ks(u) < KS


def test_von_mises_rejection_is_bounded(monkeypatch):
    """If the rejection rounds ran out, sample raises naming VonMises instead of looping."""
    from gpucore.distributions import continuous_bernoulli_von_mises as cbvm

    monkeypatch.setattr(cbvm, "_MAX_ROUNDS", 0)
    with pytest.raises(RuntimeError, match="VonMises"):
        gc.distributions.VonMises(gc.tensor(0.0), gc.tensor(2.0)).sample((3,))
