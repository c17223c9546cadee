"""kl_divergence for every pair PyTorch registers (the same pairs are registered here), against
PyTorch from the same float64 parameters, its gradients, register_kl's dispatch, and the
closed forms of two pairs in numpy for when PyTorch is absent."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gpucore as gc

D = gc.distributions
R = np.random.default_rng(99)


def _pos(lo=0.5, hi=3.0):
    return R.uniform(lo, hi, 3)


def _probs():
    p = R.uniform(0.1, 1.0, (3, 4))
    return p / p.sum(-1, keepdims=True)


def _spd():
    a = R.normal(0, 1, (3, 3))
    return a @ a.T + 3 * np.eye(3)


# family -> (class name, parameters); batch shape (3,) throughout
FAMILIES = {
    "Bernoulli": ("Bernoulli", {"probs": R.uniform(0.1, 0.9, 3)}),
    "Beta": ("Beta", {"concentration1": _pos(), "concentration0": _pos()}),
    "Binomial": (
        "Binomial",
        {"total_count": np.array([10.0, 10.0, 10.0]), "probs": _pos(0.1, 0.9)},
    ),
    "Binomial_more": (
        "Binomial",
        {"total_count": np.array([12.0, 10.0, 15.0]), "probs": _pos(0.1, 0.9)},
    ),
    "Categorical": ("Categorical", {"probs": _probs()}),
    "Cauchy": ("Cauchy", {"loc": R.normal(size=3), "scale": _pos()}),
    "ContinuousBernoulli": ("ContinuousBernoulli", {"probs": np.array([0.2, 0.45, 0.8])}),
    "Dirichlet": ("Dirichlet", {"concentration": R.uniform(0.5, 3, (3, 4))}),
    "Exponential": ("Exponential", {"rate": _pos()}),
    "Gamma": ("Gamma", {"concentration": _pos(), "rate": _pos()}),
    "Geometric": ("Geometric", {"probs": _pos(0.1, 0.9)}),
    "Gumbel": ("Gumbel", {"loc": R.normal(size=3), "scale": _pos()}),
    "HalfNormal": ("HalfNormal", {"scale": _pos()}),
    "Laplace": ("Laplace", {"loc": R.normal(size=3), "scale": _pos()}),
    "LowRankMultivariateNormal": (
        "LowRankMultivariateNormal",
        {"loc": R.normal(size=(3, 3)), "cov_factor": R.normal(size=(3, 3, 2)), "cov_diag": _pos()},
    ),
    "MultivariateNormal": (
        "MultivariateNormal",
        {"loc": R.normal(size=3), "covariance_matrix": _spd()},
    ),
    "Normal": ("Normal", {"loc": R.normal(size=3), "scale": _pos()}),
    "OneHotCategorical": ("OneHotCategorical", {"probs": _probs()}),
    "Pareto": ("Pareto", {"scale": _pos(0.2, 0.9), "alpha": _pos(2.0, 4.0)}),
    "Poisson": ("Poisson", {"rate": _pos()}),
    "Uniform": ("Uniform", {"low": R.uniform(-1, 0.2, 3), "high": R.uniform(0.5, 2, 3)}),
    "LogNormal": ("LogNormal", {"loc": R.normal(size=3), "scale": _pos()}),
}
# a second parameter set per family, for same-family pairs
FAMILIES_Q = {
    k: (c, {n: (v if n == "total_count" else _shift(v, n)) for n, v in p.items()})
    for k, (c, p) in FAMILIES.items()
    for _shift in [lambda v, n: v * R.uniform(0.8, 1.25, v.shape) if n != "loc" else v + 0.3]
}
FAMILIES_Q["Categorical"] = ("Categorical", {"probs": _probs()})
FAMILIES_Q["OneHotCategorical"] = ("OneHotCategorical", {"probs": _probs()})
FAMILIES_Q["Dirichlet"] = ("Dirichlet", {"concentration": R.uniform(0.5, 3, (3, 4))})
FAMILIES_Q["MultivariateNormal"] = (
    "MultivariateNormal",
    {"loc": R.normal(size=3), "covariance_matrix": _spd()},
)
for k in ("Bernoulli", "ContinuousBernoulli", "Geometric"):
    FAMILIES_Q[k] = (FAMILIES[k][0], {"probs": R.uniform(0.1, 0.9, 3)})
FAMILIES_Q["Binomial"] = (
    "Binomial",
    {"total_count": np.array([10.0, 10.0, 10.0]), "probs": _pos(0.1, 0.9)},
)


def build(lib, table, key, requires_grad=False):
    cls, params = table[key]
    ts = {
        n: lib.tensor(v, dtype=lib.float64, requires_grad=requires_grad and n != "total_count")
        for n, v in params.items()
    }
    return getattr(lib.distributions, cls)(**ts), ts


def _pairs():
    pytest.importorskip("torch")
    from torch.distributions.kl import _KL_REGISTRY

    out = []
    for p, q in sorted(_KL_REGISTRY, key=lambda pq: (pq[0].__name__, pq[1].__name__)):
        a, b = p.__name__, q.__name__
        if a == "TransformedDistribution":
            a = b = "LogNormal"
        if a in ("ExponentialFamily", "Independent"):
            continue
        out.append((a, b))
    out.append(("Binomial_more", "Binomial"))  # PyTorch: inf where p has more trials than q
    return out


try:
    PAIRS = _pairs()
except pytest.skip.Exception:
    PAIRS = []


@pytest.mark.parametrize("p_name,q_name", PAIRS)
def test_kl_against_torch(p_name, q_name):
    torch = pytest.importorskip("torch")
    qt = FAMILIES_Q if p_name == q_name or q_name == "Binomial" else FAMILIES
    p, pp = build(gc, FAMILIES, p_name, requires_grad=True)
    q, qp = build(gc, qt, q_name, requires_grad=True)
    tp, tpp = build(torch, FAMILIES, p_name, requires_grad=True)
    tq, tqp = build(torch, qt, q_name, requires_grad=True)
    want = torch.distributions.kl_divergence(tp, tq)
    got = D.kl_divergence(p, q)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6, atol=1e-9)
    finite = torch.isfinite(want).all()
    if finite and want.requires_grad:
        want.sum().backward()
        got.sum().backward()
        for mine, ref in [(pp, tpp), (qp, tqp)]:
            for name, t in ref.items():
                if t.grad is None:
                    continue
                g = mine[name].grad.numpy()
                if name == "covariance_matrix":
                    g = (g + g.T) / 2  # cholesky's gradient convention, see test_against_torch
                np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-5, atol=1e-8, err_msg=name)


def test_independent_and_expfamily_kl():
    torch = pytest.importorskip("torch")
    p, _ = build(gc, FAMILIES, "Normal")
    q, _ = build(gc, FAMILIES_Q, "Normal")
    tp, _ = build(torch, FAMILIES, "Normal")
    tq, _ = build(torch, FAMILIES_Q, "Normal")
    got = D.kl_divergence(D.Independent(p, 1), D.Independent(q, 1))
    want = torch.distributions.kl_divergence(
        torch.distributions.Independent(tp, 1), torch.distributions.Independent(tq, 1)
    )
    assert tuple(got.shape) == ()
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10)
    # the Bregman-divergence form for exponential families gives the closed form's values
    from gpucore.distributions.exp_family import bregman_kl as _kl_expfamily_expfamily

    g, _ = build(gc, FAMILIES, "Gamma")
    h, _ = build(gc, FAMILIES_Q, "Gamma")
    np.testing.assert_allclose(
        _kl_expfamily_expfamily(g, h).detach().numpy(), D.kl_divergence(g, h).numpy(), rtol=1e-8
    )


def test_kl_normal_normal_numpy():
    m1, s1, m2, s2 = 0.3, 1.5, -1.0, 0.7
    want = math.log(s2 / s1) + (s1**2 + (m1 - m2) ** 2) / (2 * s2**2) - 0.5
    got = D.kl_divergence(D.Normal(m1, s1), D.Normal(m2, s2))
    assert abs(float(got) - want) < 1e-6


def test_kl_categorical_numpy():
    p = np.array([0.2, 0.5, 0.3])
    q = np.array([0.4, 0.4, 0.2])
    got = D.kl_divergence(
        D.Categorical(gc.tensor(p, dtype=gc.float64)), D.Categorical(gc.tensor(q, dtype=gc.float64))
    )
    np.testing.assert_allclose(float(got), np.sum(p * np.log(p / q)), rtol=1e-12)


def test_register_kl_dispatch_and_missing_pair():
    class MyNormal(D.Normal):
        pass

    calls = []

    @D.register_kl(MyNormal, D.Normal)
    def _kl(p, q):
        calls.append(1)
        return gc.zeros(p.batch_shape)

    p, q = MyNormal(0.0, 1.0), D.Normal(1.0, 2.0)
    assert float(D.kl_divergence(p, q)) == 0.0 and calls == [1]
    # the more specific registration wins over Normal-Normal; a plain pair is unaffected
    assert float(D.kl_divergence(D.Normal(0.0, 1.0), q)) > 0
    with pytest.raises(NotImplementedError):
        D.kl_divergence(D.Cauchy(0.0, 1.0), D.Normal(0.0, 1.0))


@pytest.mark.parametrize(
    "p,q",
    [
        (lambda: D.Gamma(2.5, 1.5), lambda: D.Exponential(0.8)),
        (lambda: D.Beta(2.0, 3.0), lambda: D.Normal(0.3, 0.5)),
        (lambda: D.Normal(0.2, 0.7), lambda: D.Gumbel(0.0, 1.3)),
        (lambda: D.Uniform(0.2, 0.9), lambda: D.Beta(1.5, 2.0)),
        (lambda: D.Pareto(1.2, 3.5), lambda: D.Gamma(2.0, 1.0)),
        (lambda: D.Normal(0.4, 1.1), lambda: D.Laplace(-0.2, 0.8)),
        (lambda: D.Exponential(2.0), lambda: D.ContinuousBernoulli(probs=0.3)),
    ],
    ids=[
        "gamma-exp",
        "beta-normal",
        "normal-gumbel",
        "uniform-beta",
        "pareto-gamma",
        "normal-laplace",
        "exp-cb",
    ],
)
def test_cross_family_kl_against_monte_carlo(p, q):
    """kl_cross's identity -H(p) - E_p[log q] against the mean of log p(x) - log q(x) over
    200k samples of p (a reference that needs neither PyTorch nor the formulas)."""
    p, q = p(), q()
    gc.manual_seed(12)
    x = p.sample((200_000,)).to(gc.float64)
    if isinstance(q, D.ContinuousBernoulli):
        want = math.inf  # Exponential's support leaves [0, 1]
        assert float(D.kl_divergence(p, q)) == want
        return
    diff = (p.log_prob(x) - q.log_prob(x)).numpy()
    se = diff.std() / math.sqrt(diff.size)
    assert abs(float(D.kl_divergence(p, q)) - diff.mean()) < 5 * se + 1e-3


def _event_reshaping_pairs(lib):
    M = lib.distributions
    T = M.transforms
    f64 = dict(dtype=lib.float64)
    loc = np.arange(24.0).reshape(4, 6) / 10

    def event_reshaped(m, t, n):
        base = M.Independent(M.Normal(lib.tensor(m[:, :n], **f64), lib.ones(4, n, **f64)), 1)
        return M.TransformedDistribution(base, [t])

    out = []
    for t, n in ((T.ReshapeTransform((6,), (2, 3)), 6), (T.CorrCholeskyTransform(), 3)):
        out.append((event_reshaped(loc, t, n), event_reshaped(loc + 1.0, t, n)))
    # a transform that folds a batch dim of the base into the event: summed over it
    fold = T.ReshapeTransform((4, 6), (24,))

    def folded(m):
        return M.TransformedDistribution(
            M.Normal(lib.tensor(m, **f64), lib.ones(4, 6, **f64)), [fold]
        )

    out.append((folded(loc), folded(loc * 2)))
    return out


def test_kl_transformed_keeps_batch_dims():
    torch = pytest.importorskip("torch")
    for (p, q), (tp, tq) in zip(_event_reshaping_pairs(gc), _event_reshaping_pairs(torch)):
        want = torch.distributions.kl_divergence(tp, tq)
        got = D.kl_divergence(p, q)
        assert tuple(got.shape) == tuple(want.shape) == tuple(tp.batch_shape)
        np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-10)
