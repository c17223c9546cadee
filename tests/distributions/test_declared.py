"""The declaration machinery (distribution.py's ``Declared``): what a family gets from its
``fields`` alone. A family defined here, as a user would, is checked against float64 closed
forms; the built-in families' alternative parametrisations against each other."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

import gpucore as gc
from gpucore.distributions import constraints as C
from gpucore.distributions.distribution import Arg, Declared, OneOf, Param

D = gc.distributions


class Rayleigh(Declared):
    """A family written only as its declaration and formulas."""

    fields = (Param("scale", C.positive),)
    support = C.nonnegative
    mean = property(lambda self: self.scale * math.sqrt(math.pi / 2))

    def _rsample(self, shape):
        u = self._draw("open", shape)
        return self.scale * (-2 * u.log()).sqrt()

    def _log_prob(self, x):
        return (x / self.scale.pow(2)).log() - x.pow(2) / (2 * self.scale.pow(2))


class Counted(Declared):
    """An Arg (not broadcast, not a parameter) before a OneOf pair and a defaulted Param."""

    fields = (
        Arg("n", 3),
        OneOf(
            Param("rate", C.positive, derive=lambda d: d.log_rate.exp()),
            Param("log_rate", C.real, derive=lambda d: d.rate.log()),
        ),
        Param("shift", C.real, default=0.0),
    )

    def _sample(self, shape):
        return gc.zeros(tuple(shape))

    def _log_prob(self, x):
        return self.rate.log() + self.shift - x


def test_constructor_and_signature_come_from_the_fields():
    sig = inspect.signature(Counted)
    assert list(sig.parameters) == ["n", "rate", "log_rate", "shift", "validate_args"]
    assert sig.parameters["n"].default == 3 and sig.parameters["rate"].default is None
    d = Counted(
        rate=gc.tensor([1.0, 2.0], dtype=gc.float64), shift=gc.zeros(3, 1, dtype=gc.float64)
    )
    assert tuple(d.batch_shape) == (3, 2) and d.n == 3
    assert sorted(d.arg_constraints) == ["log_rate", "rate", "shift"]
    with pytest.raises(ValueError, match="Either `rate` or `log_rate`"):
        Counted(rate=1.0, log_rate=0.0)
    with pytest.raises(TypeError, match=r"Rayleigh\(\): missing a required argument: 'scale'"):
        Rayleigh()


def test_alternative_is_derived_once_and_not_shown():
    d = Counted(log_rate=gc.tensor([0.0, 1.0], dtype=gc.float64))
    assert "rate" not in d.__dict__
    assert repr(d) == "Counted(log_rate: gpucore.Size([2]), shift: gpucore.Size([2]))"
    np.testing.assert_allclose(d.rate.numpy(), [1.0, math.e])
    assert d.rate is d.rate  # kept after the first use
    e = d.expand((4, 2))
    assert tuple(e.log_rate.shape) == (4, 2) and tuple(e.rate.shape) == (4, 2)


def test_user_family_scores_samples_and_checks():
    scale = gc.tensor([0.5, 2.0], dtype=gc.float64, requires_grad=True)
    d = Rayleigh(scale)
    x = np.array([[0.3, 1.0], [1.2, 4.0]])
    s = np.array([0.5, 2.0])
    want = np.log(x / s**2) - x**2 / (2 * s**2)
    np.testing.assert_allclose(d.log_prob(gc.tensor(x)).detach().numpy(), want, rtol=1e-12)
    assert d.has_rsample and not d.has_enumerate_support
    gc.manual_seed(0)
    y = d.rsample((20_000,))
    np.testing.assert_allclose(y.detach().numpy().mean(0), s * math.sqrt(math.pi / 2), rtol=0.02)
    y.mean(0).sum().backward()  # d E[x] / d scale = sqrt(pi / 2)
    np.testing.assert_allclose(scale.grad.numpy(), [math.sqrt(math.pi / 2)] * 2, rtol=0.02)
    gc.manual_seed(0)
    again = d.rsample((20_000,)).detach().numpy()
    np.testing.assert_array_equal(again, y.detach().numpy())  # manual_seed reproduces
    with pytest.raises(ValueError, match=r"parameter scale .* of distribution Rayleigh\(scale"):
        Rayleigh(gc.tensor([-1.0]))
    with pytest.raises(ValueError, match="within the support"):
        d.log_prob(gc.tensor([-1.0, 1.0], dtype=gc.float64))
    with pytest.raises(NotImplementedError):
        d.entropy()


@pytest.mark.parametrize(
    "build,binary",
    [
        (lambda **k: D.Bernoulli(**k), True),
        (lambda **k: D.Categorical(**k), False),
        (lambda **k: D.Binomial(6, **k), True),
        (lambda **k: D.Geometric(**k), True),
    ],
    ids=["Bernoulli", "Categorical", "Binomial", "Geometric"],
)
def test_probs_and_logits_give_one_distribution(build, binary):
    rng = np.random.default_rng(3)
    p = rng.uniform(0.1, 0.9, (2, 3))
    if binary:
        logits = np.log(p) - np.log1p(-p)
    else:
        p = p / p.sum(-1, keepdims=True)
        logits = np.log(p) + 1.7  # unnormalised: Categorical normalises both forms
    a, b = build(probs=gc.tensor(p)), build(logits=gc.tensor(logits))
    np.testing.assert_allclose(a.logits.numpy(), b.logits.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(a.probs.numpy(), b.probs.numpy(), rtol=1e-10)
    np.testing.assert_allclose(a.entropy().numpy(), b.entropy().numpy(), rtol=1e-10)


def test_mvn_parametrisations_agree():
    rng = np.random.default_rng(4)
    m = rng.normal(size=(3, 3))
    cov = m @ m.T + 3 * np.eye(3)
    loc = gc.tensor(rng.normal(size=3))
    ds = [
        D.MultivariateNormal(loc, covariance_matrix=gc.tensor(cov)),
        D.MultivariateNormal(loc, precision_matrix=gc.tensor(np.linalg.inv(cov))),
        D.MultivariateNormal(loc, scale_tril=gc.tensor(np.linalg.cholesky(cov))),
    ]
    x = gc.tensor(rng.normal(size=(4, 3)))
    for d in ds:
        np.testing.assert_allclose(d.covariance_matrix.numpy(), cov, rtol=1e-10)
        np.testing.assert_allclose(d.precision_matrix.numpy(), np.linalg.inv(cov), rtol=1e-9)
        np.testing.assert_allclose(d.log_prob(x).numpy(), ds[0].log_prob(x).numpy(), rtol=1e-10)


def test_a_plain_distribution_subclass_works_as_in_pytorch():
    """Subclassing Distribution directly (PyTorch's way: own __init__, arg_constraints, support,
    log_prob) still gets the checks, shapes and Independent / TransformedDistribution."""

    class Shifted(D.Distribution):
        arg_constraints = {"rate": C.positive}
        support = C.positive

        def __init__(self, rate, validate_args=None):
            self.rate = rate
            super().__init__(rate.shape, validate_args=validate_args)

        def log_prob(self, value):
            if self._validate_args:
                self._validate_sample(value)
            return self.rate.log() - self.rate * value

    d = Shifted(gc.tensor([1.0, 2.0], dtype=gc.float64))
    assert tuple(d.batch_shape) == (2,) and repr(d).startswith("Shifted(rate: ")
    with pytest.raises(ValueError, match="parameter rate"):
        Shifted(gc.tensor([-1.0]))
    with pytest.raises(ValueError, match="within the support"):
        d.log_prob(gc.tensor([-1.0, 1.0], dtype=gc.float64))
    x = gc.tensor([0.5, 1.5], dtype=gc.float64)
    assert float(D.Independent(d, 1).log_prob(x)) == pytest.approx(
        float(d.log_prob(x).sum()), rel=1e-12
    )
    y = D.TransformedDistribution(d, [D.ExpTransform()]).log_prob(x.exp())
    np.testing.assert_allclose(y.numpy(), (d.log_prob(x) - x).numpy(), rtol=1e-12)


def test_numbers_are_checked_as_the_tensors_they_become():
    """Parameters given as numbers are checked without tensor ops when the tensor holds the
    number exactly, and as the tensor otherwise: 1e-50 is positive, its float32 tensor is 0."""
    assert float(D.Normal(0.0, 0.5).scale) == 0.5
    with pytest.raises(ValueError, match="parameter scale"):
        D.Normal(0.0, 1e-50)  # float32 (the default dtype): scale rounds to 0
    d = D.Normal(gc.tensor(0.0, dtype=gc.float64), 1e-50)  # float64: it stays positive
    assert float(d.scale) == 1e-50
    with pytest.raises(ValueError, match="parameter total_count"):
        D.Binomial(2.5, probs=0.5)
    with pytest.raises(ValueError, match="parameter low"):
        D.Uniform(1.0, 0.0)
