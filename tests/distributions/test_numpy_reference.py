"""Closed forms in float64 numpy and the math module (no PyTorch, no scipy): log_prob, entropy,
mean, variance, cdf and icdf of the common distributions, so the package is checked where
PyTorch is not installed."""

from __future__ import annotations

import math

import numpy as np

import gpucore as gc

D = gc.distributions
lgamma = np.vectorize(math.lgamma)
erf = np.vectorize(math.erf)


def t(a):
    return gc.tensor(np.asarray(a, dtype=np.float64), dtype=gc.float64)


def close(got, want, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(got.detach().numpy(), want, rtol=rtol, atol=atol)


X = np.array([-1.3, 0.2, 0.9, 2.5])


def test_normal():
    mu, s = np.array([0.1, -0.5, 1.0, 2.0]), np.array([0.5, 1.0, 2.0, 3.0])
    d = D.Normal(t(mu), t(s))
    close(d.log_prob(t(X)), -((X - mu) ** 2) / (2 * s**2) - np.log(s) - 0.5 * math.log(2 * math.pi))
    close(d.entropy(), 0.5 + 0.5 * math.log(2 * math.pi) + np.log(s))
    close(d.cdf(t(X)), 0.5 * (1 + erf((X - mu) / (s * math.sqrt(2)))))
    close(d.icdf(d.cdf(t(X))), X, rtol=1e-8)
    close(d.mean, mu)
    close(d.variance, s**2)


def test_exponential_laplace_uniform():
    r = np.array([0.5, 1.0, 2.0, 4.0])
    x = np.abs(X)
    d = D.Exponential(t(r))
    close(d.log_prob(t(x)), np.log(r) - r * x)
    close(d.cdf(t(x)), 1 - np.exp(-r * x))
    close(d.entropy(), 1 - np.log(r))
    lap = D.Laplace(t(0.3), t(1.7))
    close(lap.log_prob(t(X)), -np.log(2 * 1.7) - np.abs(X - 0.3) / 1.7)
    close(lap.variance, 2 * 1.7**2)
    u = D.Uniform(t(-2.0), t(3.0))
    close(u.log_prob(t(X)), np.full(4, -math.log(5)))
    close(u.cdf(t(X)), (X + 2) / 5)
    close(u.entropy(), math.log(5))


def test_gamma_beta_dirichlet():
    a, b = np.array([0.5, 1.0, 2.5, 7.0]), np.array([2.0, 1.0, 0.5, 3.0])
    x = np.array([0.3, 1.2, 2.0, 4.0])
    g = D.Gamma(t(a), t(b))
    close(g.log_prob(t(x)), a * np.log(b) + (a - 1) * np.log(x) - b * x - lgamma(a))
    close(g.mean, a / b)
    close(g.variance, a / b**2)
    p = np.array([0.1, 0.4, 0.6, 0.95])
    be = D.Beta(t(a), t(b))
    close(
        be.log_prob(t(p)),
        (a - 1) * np.log(p) + (b - 1) * np.log1p(-p) - (lgamma(a) + lgamma(b) - lgamma(a + b)),
        rtol=1e-9,
    )
    close(be.mean, a / (a + b))
    conc = np.array([1.5, 2.0, 0.7])
    v = np.array([0.2, 0.5, 0.3])
    dd = D.Dirichlet(t(conc))
    want = np.sum((conc - 1) * np.log(v)) + lgamma(conc.sum()) - lgamma(conc).sum()
    close(dd.log_prob(t(v)), want, rtol=1e-9)


def test_discrete():
    lam, k = np.array([0.5, 3.0, 12.0]), np.array([0.0, 2.0, 15.0])
    close(D.Poisson(t(lam)).log_prob(t(k)), k * np.log(lam) - lam - lgamma(k + 1), rtol=1e-9)
    n, p = np.array([5.0, 10.0, 20.0]), np.array([0.2, 0.5, 0.9])
    want = (
        lgamma(n + 1) - lgamma(k + 1) - lgamma(n - k + 1) + k * np.log(p) + (n - k) * np.log1p(-p)
    )
    k = np.array([0.0, 2.0, 15.0])
    close(D.Binomial(t(n), t(p)).log_prob(t(k)), want, rtol=1e-9)
    probs = np.array([0.2, 0.5, 0.3])
    c = D.Categorical(t(probs))
    close(c.log_prob(t([0.0, 1.0, 2.0])), np.log(probs))
    close(c.entropy(), -np.sum(probs * np.log(probs)))
    close(D.Bernoulli(t(probs)).log_prob(t([1.0, 0.0, 1.0])), np.log([0.2, 0.5, 0.3]))
    close(D.Geometric(t(0.25)).log_prob(t(3.0)), 3 * math.log(0.75) + math.log(0.25))


def test_multivariate_normal():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(3, 3))
    cov = a @ a.T + np.eye(3)
    mu = np.array([0.5, -1.0, 2.0])
    x = rng.normal(size=(4, 3))
    d = D.MultivariateNormal(t(mu), covariance_matrix=t(cov))
    diff = x - mu
    maha = np.einsum("ni,ij,nj->n", diff, np.linalg.inv(cov), diff)
    logdet = np.linalg.slogdet(cov)[1]
    close(d.log_prob(t(x)), -0.5 * (3 * math.log(2 * math.pi) + logdet + maha), rtol=1e-9)
    close(d.entropy(), 0.5 * (3 * (1 + math.log(2 * math.pi)) + logdet), rtol=1e-9)
    close(d.covariance_matrix, cov)
    close(d.scale_tril, np.linalg.cholesky(cov))
    close(
        D.MultivariateNormal(t(mu), precision_matrix=t(np.linalg.inv(cov))).covariance_matrix, cov
    )
