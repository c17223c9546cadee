"""rsample is differentiable through gpucore's autograd: exact per-sample pathwise gradients of
the location-scale families, the implicit gamma gradient against finite differences of the
gamma CDF (and PyTorch's), and for every distribution with rsample the Monte Carlo gradient of
E[x + x^2] against the gradient of its closed form (mean + variance + mean^2)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dist_cases import CASES, make

import gpucore as gc
from gpucore.distributions.gamma import standard_gamma, standard_gamma_grad

D = gc.distributions

# rsample distributions whose mean and variance are finite and closed-form
PATHWISE = [
    "Normal",
    "LogNormal",
    "Uniform",
    "Exponential",
    "Laplace",
    "Gamma",
    "Beta",
    "Dirichlet",
    "Chi2",
    "StudentT_df_above_4",  # (the other StudentT case has df near 3: E[x^4] infinite)
    "MVN_cov",
    "MVN_prec",
    "MVN_tril",
    "LowRankMVN",
    "Gumbel",
    "HalfNormal",
    "Pareto",
    "Weibull",
    "Kumaraswamy",
    "FisherSnedecor",
    "InverseGamma",
]


@pytest.mark.parametrize("name", PATHWISE)
def test_monte_carlo_gradient_matches_closed_form(name):
    d, params = make(gc, name, requires_grad=True)
    assert d.has_rsample
    gc.manual_seed(21)
    n = 40_000
    x = d.rsample((n,))
    (x + x * x).sum().div(n).backward()
    mc = {k: t.grad.numpy().copy() for k, t in params.items() if isinstance(t, gc.Tensor)}
    for t in params.values():
        if isinstance(t, gc.Tensor):
            t.grad = None
    d, params = make(gc, name, requires_grad=True)
    (d.mean + d.variance + d.mean * d.mean).sum().backward()
    for k, t in params.items():
        if not isinstance(t, gc.Tensor):
            continue
        exact = t.grad.numpy()
        err = np.abs(mc[k] - exact)
        assert np.all(err < 0.06 * np.abs(exact) + 0.02 * np.abs(exact).max() + 1e-3), (
            f"{name}: d E[x + x^2] / d {k}: Monte Carlo {mc[k]} vs exact {exact}"
        )


def test_normal_pathwise_gradient_is_the_noise():
    loc = gc.tensor([0.5, -1.0], dtype=gc.float64, requires_grad=True)
    scale = gc.tensor([2.0, 0.3], dtype=gc.float64, requires_grad=True)
    x = D.Normal(loc, scale).rsample((7,))
    x.sum().backward()
    eps = (x.detach() - loc.detach()) / scale.detach()
    np.testing.assert_allclose(loc.grad.numpy(), [7, 7])
    np.testing.assert_allclose(scale.grad.numpy(), eps.sum(0).numpy(), rtol=1e-12)


@pytest.mark.parametrize("cls", ["Laplace", "Cauchy", "Gumbel"])
def test_location_scale_pathwise_gradients(cls):
    loc = gc.tensor([0.2, 1.5], dtype=gc.float64, requires_grad=True)
    scale = gc.tensor([0.7, 2.0], dtype=gc.float64, requires_grad=True)
    x = getattr(D, cls)(loc, scale).rsample((5,))
    x.sum().backward()
    np.testing.assert_allclose(loc.grad.numpy(), [5, 5])
    want = ((x.detach() - loc.detach()) / scale.detach()).sum(0).numpy()
    np.testing.assert_allclose(scale.grad.numpy(), want, rtol=1e-10)


def test_uniform_and_exponential_pathwise_gradients():
    low = gc.tensor([0.0, -2.0], dtype=gc.float64, requires_grad=True)
    high = gc.tensor([1.0, 3.0], dtype=gc.float64, requires_grad=True)
    x = D.Uniform(low, high).rsample((6,))
    x.sum().backward()
    u = ((x.detach() - low.detach()) / (high.detach() - low.detach())).numpy()
    np.testing.assert_allclose(high.grad.numpy(), u.sum(0), rtol=1e-10)
    np.testing.assert_allclose(low.grad.numpy(), (1 - u).sum(0), rtol=1e-10)
    rate = gc.tensor([0.5, 4.0], dtype=gc.float64, requires_grad=True)
    y = D.Exponential(rate).rsample((6,))
    y.sum().backward()
    want = (-y.detach() / rate.detach()).sum(0).numpy()
    np.testing.assert_allclose(rate.grad.numpy(), want, rtol=1e-10)


def _gamma_p_q(a: float, x: float) -> tuple[float, float]:
    """The regularized incomplete gamma functions (P, Q) in plain float64 math, independent of
    gpucore: the power series of P below x = a + 1, Lentz's continued fraction of Q above."""
    log_front = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1:
        term = total = 1 / a
        n = 0
        while abs(term) > 1e-17 * abs(total):
            n += 1
            term *= x / (a + n)
            total += term
        p = math.exp(log_front) * total
        return p, 1 - p
    tiny = 1e-300
    b = x + 1 - a
    c, d = 1 / tiny, 1 / b
    h = d
    for i in range(1, 10000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        h *= d * c
        if abs(d * c - 1) < 1e-16:
            break
    q = math.exp(log_front) * h
    return 1 - q, q


def _gamma_cdf_grad(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """dx/da = -(dF/da) / f: central differences of the independent float64 P (or -Q in the
    upper tail, where P rounds to 1) over the gamma density."""
    out = np.empty(len(a))
    for i, (ai, xi) in enumerate(zip(a, x)):
        h = 1e-6 * ai
        k = 1 if xi >= ai + 1 else 0  # differences of Q (its sign flipped) in the upper tail
        hi, lo = _gamma_p_q(ai + h, xi)[k], _gamma_p_q(ai - h, xi)[k]
        dcdf = (hi - lo) / (2 * h) * (-1 if k else 1)
        pdf = math.exp((ai - 1) * math.log(xi) - xi - math.lgamma(ai))
        out[i] = -dcdf / pdf
    return out


def test_implicit_gamma_gradient_against_the_cdf():
    rng = np.random.default_rng(3)
    a = np.exp(rng.uniform(-3, 5, 2000))
    x = np.maximum(rng.gamma(a), 1e-300)
    got = standard_gamma_grad(gc.tensor(a), gc.tensor(x)).numpy()
    want = _gamma_cdf_grad(a, x)
    np.testing.assert_allclose(got, want, rtol=1e-3)


def test_standard_gamma_backward_is_the_implicit_gradient():
    alpha = gc.tensor([0.2, 1.0, 3.0, 12.0, 50.0], dtype=gc.float64, requires_grad=True)
    gc.manual_seed(5)
    x = standard_gamma(alpha.expand(4, 5))
    x.sum().backward()
    want = standard_gamma_grad(alpha.detach().expand(4, 5), x.detach()).sum(0).numpy()
    np.testing.assert_allclose(alpha.grad.numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(
        want,
        _gamma_cdf_grad(
            np.broadcast_to(alpha.detach().numpy(), (4, 5)).ravel(), x.detach().numpy().ravel()
        )
        .reshape(4, 5)
        .sum(0),
        rtol=1e-3,
    )


def test_gamma_gradient_against_mpmath_and_torch():
    """The implicit gradient against -dP/da / density in 30-digit mpmath (to 1e-6), and against
    PyTorch's (a rational approximation, within 1e-3 of the exact value)."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 30
    rng = np.random.default_rng(4)
    a = np.exp(rng.uniform(-4, 6, 40))
    x = np.maximum(rng.gamma(a), 1e-300)
    got = standard_gamma_grad(gc.tensor(a), gc.tensor(x)).numpy()
    want = []
    for ai, xi in zip(a, x):
        ai, xi = mp.mpf(ai), mp.mpf(xi)
        dP = mp.diff(lambda s, xi=xi: mp.gammainc(s, 0, xi, regularized=True), ai)
        want.append(float(-dP / mp.exp((ai - 1) * mp.log(xi) - xi - mp.loggamma(ai))))
    np.testing.assert_allclose(got, want, rtol=1e-6)
    torch = pytest.importorskip("torch")
    a = np.exp(rng.uniform(-4, 6, 3000))
    x = np.maximum(rng.gamma(a), 1e-300)
    ref = torch._standard_gamma_grad(torch.tensor(a), torch.tensor(x)).numpy()
    got = standard_gamma_grad(gc.tensor(a), gc.tensor(x)).numpy()
    np.testing.assert_allclose(got, ref, rtol=1e-3)


def test_gamma_rate_gradient():
    """Gamma(a, rate).rsample() is standard_gamma(a) / rate: d x / d rate = -x / rate."""
    conc = gc.tensor([2.0, 0.5], dtype=gc.float64)
    rate = gc.tensor([1.5, 3.0], dtype=gc.float64, requires_grad=True)
    x = D.Gamma(conc, rate).rsample((8,))
    x.sum().backward()
    np.testing.assert_allclose(
        rate.grad.numpy(), (-x.detach() / rate.detach()).sum(0).numpy(), rtol=1e-10
    )


@pytest.mark.parametrize("name", ["RelaxedBernoulli", "RelaxedOneHotCategorical"])
def test_relaxed_rsample_gradients_reach_the_logits(name):
    d, params = make(gc, name, requires_grad=True)
    gc.manual_seed(6)
    d.rsample((4,)).pow(2).sum().backward()
    g = params["probs"].grad.numpy()
    assert np.all(np.isfinite(g)) and np.any(g != 0)


@pytest.mark.parametrize("name", sorted(n for n in CASES if not make(gc, n)[0].has_rsample))
def test_no_rsample_gives_not_implemented(name):
    with pytest.raises(NotImplementedError):
        make(gc, name)[0].rsample()
