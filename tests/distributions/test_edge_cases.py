"""Edge cases against torch.distributions from the same float64 parameters: ContinuousBernoulli
at probs 0 and 1 and near 1/2, OneHotCategorical not being a Categorical, integer Binomial
counts, Multinomial's and LowRankMultivariateNormal's argument errors, GeneralizedPareto's
bounded support."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gpucore as gc

torch = pytest.importorskip("torch")
D, TD = gc.distributions, torch.distributions


def _pair(fn, values):
    """fn(library, its distributions module, tensor maker) for gpucore and for PyTorch."""
    g = fn(gc, D, lambda v: gc.tensor(np.asarray(v, np.float64)))
    t = fn(torch, TD, lambda v: torch.tensor(np.asarray(v, np.float64)))
    return g, t


def _close(a, b, rtol=1e-9, atol=1e-12):
    b = b.detach().numpy() if hasattr(b, "detach") else np.asarray(b)
    np.testing.assert_allclose(a.numpy(), b, rtol=rtol, atol=atol, equal_nan=True)


PROBS = [0.0, 1.0, 1e-9, 1 - 1e-9, 0.2, 0.4995, 0.5, 0.5 + 1e-7, 0.7]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_continuous_bernoulli_everywhere_as_torch(dtype):
    """probs 0 and 1 are clamped to [eps, 1 - eps] (finite log_prob and entropy), and every
    formula agrees with PyTorch's from the extremes to the series region around 1/2."""
    gd, td = getattr(gc, dtype), getattr(torch, dtype)
    tol = dict(rtol=1e-9, atol=1e-12) if dtype == "float64" else dict(rtol=2e-4, atol=2e-5)
    p = np.array(PROBS)
    g = D.ContinuousBernoulli(probs=gc.tensor(p, dtype=gd))
    t = TD.ContinuousBernoulli(probs=torch.tensor(p, dtype=td))
    for attr in ("mean", "variance"):
        _close(getattr(g, attr), getattr(t, attr), **tol)
    _close(g.entropy(), t.entropy(), **tol)
    x = np.array([0.0, 0.3, 1.0, 0.9, 0.05, 0.5, 0.25, 0.75, 0.6])
    _close(g.log_prob(gc.tensor(x, dtype=gd)), t.log_prob(torch.tensor(x, dtype=td)), **tol)
    # cdf and icdf against their closed forms in numpy float64 (expm1 keeps them exact for any
    # eta != 0): PyTorch replaces them by the uniform's inside lims = (0.499, 0.501), off by up
    # to 2.5e-4 there; outside lims against PyTorch too
    eps = np.finfo(np.float64 if dtype == "float64" else np.float32).eps
    eta = np.log(np.clip(p, eps, 1 - eps)) - np.log1p(-np.clip(p, eps, 1 - eps))
    eta = eta.astype(np.float32).astype(np.float64) if dtype == "float32" else eta
    u = np.array([0.1, 0.5, 0.9, 0.3, 0.7, 0.01, 0.99, 0.5, 0.2])
    with np.errstate(invalid="ignore", divide="ignore"):
        cdf = np.where(eta == 0, x, np.expm1(eta * x) / np.expm1(eta))
        icdf = np.where(eta == 0, u, np.log1p(u * np.expm1(eta)) / eta)
    _close(g.cdf(gc.tensor(x, dtype=gd)), cdf, **tol)
    _close(g.icdf(gc.tensor(u, dtype=gd)), icdf, **tol)
    away = (p < 0.499) | (p > 0.501)
    _close(
        g.cdf(gc.tensor(x, dtype=gd))[gc.tensor(away)],
        t.cdf(torch.tensor(x, dtype=td))[away],
        **tol,
    )
    _close(
        g.icdf(gc.tensor(u, dtype=gd))[gc.tensor(away)],
        t.icdf(torch.tensor(u, dtype=td))[away],
        **tol,
    )
    assert np.isfinite(g.log_prob(gc.tensor(x, dtype=gd)).numpy()).all()


def test_continuous_bernoulli_rsample_gradient_near_half():
    """The reparameterised sample's gradient in probs, against a central difference of the
    numpy closed form log1p(u expm1(eta)) / eta, at and near 1/2 (where PyTorch's uniform
    approximation gives 0) and away from it, where it is also PyTorch's."""
    u = np.array([0.2, 0.6, 0.9])

    def icdf(p):
        eta = math.log(p) - math.log1p(-p)
        return np.log1p(u * math.expm1(eta)) / eta

    for p in (0.5, 0.5 + 1e-6, 0.4995, 0.3):
        pg = gc.tensor(p, dtype=gc.float64, requires_grad=True)
        D.ContinuousBernoulli(probs=pg).icdf(gc.tensor(u)).sum().backward()
        h = 1e-4
        want = (icdf(p + h) - icdf(p - h)).sum() / (2 * h)
        np.testing.assert_allclose(pg.grad.numpy(), want, rtol=1e-7)
    pt = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    TD.ContinuousBernoulli(probs=pt).icdf(torch.tensor(u)).sum().backward()
    np.testing.assert_allclose(pg.grad.numpy(), pt.grad.numpy(), rtol=1e-9)


def test_one_hot_categorical_is_not_a_categorical():
    g, t = _pair(lambda L, M, X: M.OneHotCategorical(X([0.3, 0.7])), None)
    assert isinstance(g, D.Categorical) is isinstance(t, TD.Categorical) is False
    for M, X in ((D, gc.tensor), (TD, torch.tensor)):
        one_hot = M.OneHotCategorical(X([0.3, 0.7]))
        with pytest.raises(ValueError, match="Categorical"):
            M.MixtureSameFamily(one_hot, M.Normal(X([0.0, 2.0]), X([1.0, 0.5])))
        with pytest.raises(NotImplementedError):
            M.kl_divergence(one_hot, M.Categorical(X([0.5, 0.5])))
        with pytest.raises(NotImplementedError):
            M.kl_divergence(M.Categorical(X([0.5, 0.5])), one_hot)
    # and it still scores, samples and expands as before
    probs = np.array([[0.2, 0.5, 0.3], [0.6, 0.1, 0.3]])
    g, t = _pair(lambda L, M, X: M.OneHotCategorical(X(probs)).expand((4, 2)), None)
    x = np.eye(3)[[1, 0]]
    _close(g.log_prob(gc.tensor(x)), t.log_prob(torch.tensor(x)))
    _close(g.entropy(), t.entropy())
    assert tuple(g.sample((5,)).shape) == (5, 4, 2, 3)
    assert tuple(g.enumerate_support().shape) == tuple(t.enumerate_support().shape)


def test_binomial_integer_count_as_torch():
    g = D.Binomial(gc.tensor([5, 10]), gc.tensor([0.3, 0.4], dtype=gc.float64))
    t = TD.Binomial(torch.tensor([5, 10]), torch.tensor([0.3, 0.4], dtype=torch.float64))
    assert g.total_count.dtype is gc.float64 and t.total_count.dtype is torch.float64
    gc.manual_seed(0)
    s = g.sample((200,)).numpy()
    assert s.dtype == np.float64 and s.min() >= 0 and (s <= [5, 10]).all()
    _close(
        g.log_prob(gc.tensor([2.0, 3.0], dtype=gc.float64)),
        t.log_prob(torch.tensor([2.0, 3.0], dtype=torch.float64)),
    )
    e = D.Binomial(gc.tensor([5, 5]), gc.tensor([0.3, 0.4])).enumerate_support(False)
    te = TD.Binomial(torch.tensor([5, 5]), torch.tensor([0.3, 0.4])).enumerate_support(False)
    assert e.dtype is gc.float32 and te.dtype is torch.float32
    _close(e, te)


@pytest.mark.parametrize("count", [2.5, -3, "tensor"])
def test_multinomial_count_checked_in_the_constructor(count):
    probs = [0.5, 0.5]
    tc = torch.tensor(5) if count == "tensor" else count
    gcount = gc.tensor(5) if count == "tensor" else count
    with pytest.raises((ValueError, NotImplementedError)) as want:
        TD.Multinomial(tc, torch.tensor(probs))
    with pytest.raises(want.type, match="Multinomial"):
        D.Multinomial(gcount, gc.tensor(probs))


def test_low_rank_mvn_shape_errors_name_the_class_and_shapes():
    for loc, factor, diag in (((3,), (4, 2), (3,)), ((3,), (3, 2), (4,))):
        with pytest.raises(ValueError):
            TD.LowRankMultivariateNormal(torch.zeros(loc), torch.ones(factor), torch.ones(diag))
        with pytest.raises(ValueError, match="LowRankMultivariateNormal") as e:
            D.LowRankMultivariateNormal(gc.zeros(loc), gc.ones(factor), gc.ones(diag))
        assert str(factor) in str(e.value) and str(diag) in str(e.value)


def test_generalized_pareto_support_as_torch():
    loc, scale, conc = [0.0, 1.0, 0.0], [2.0, 2.0, 1.0], [-0.5, 0.5, -2.0]
    g, t = _pair(lambda L, M, X: M.GeneralizedPareto(X(loc), X(scale), X(conc)), None)
    assert type(g.support).__name__ == type(t.support).__name__ == "_Interval"
    _close(g.support.lower_bound, t.support.lower_bound)
    _close(g.support.upper_bound, t.support.upper_bound)
    x = np.array([3.9, 50.0, 0.49])
    assert g.support.check(gc.tensor(x)).tolist() == t.support.check(torch.tensor(x)).tolist()
    x = np.array([4.1, -0.1, 0.51])
    assert g.support.check(gc.tensor(x)).tolist() == t.support.check(torch.tensor(x)).tolist()
    with pytest.raises(ValueError, match="support"):
        g.log_prob(gc.tensor([4.1, 2.0, 0.2]))


def test_generalized_pareto_divergent_moments_are_inf():
    """Documented: where the moment's integral diverges gpucore gives +inf (PyTorch NaN)."""
    d = D.GeneralizedPareto(gc.tensor(0.0), gc.tensor(1.0), gc.tensor([0.5, 0.7, 1.0, 1.5]))
    assert d.variance.tolist() == [math.inf] * 4
    assert d.mean.tolist()[2:] == [math.inf] * 2
