"""Transforms against torch.distributions.transforms (forward, inverse, log|det J|, shapes,
caching, composition), biject_to / transform_to for every constraint they register, and
TransformedDistribution built from them."""

from __future__ import annotations

import numpy as np
import pytest

import gpucore as gc

torch = pytest.importorskip("torch")
D = gc.distributions
T = D.transforms
R = np.random.default_rng(5)


def _both(make):
    """The transform ``make`` builds, in gpucore and in PyTorch."""
    return make(gc), make(torch)


TRANSFORMS = {
    "exp": lambda lib: lib.distributions.ExpTransform(),
    "power": lambda lib: lib.distributions.PowerTransform(
        lib.tensor([0.5, 2.0, 3.0], dtype=lib.float64)
    ),
    "sigmoid": lambda lib: lib.distributions.SigmoidTransform(),
    "tanh": lambda lib: lib.distributions.TanhTransform(),
    "softplus": lambda lib: lib.distributions.transforms.SoftplusTransform(),
    "affine": lambda lib: lib.distributions.AffineTransform(
        lib.tensor([1.0, -2.0, 0.5], dtype=lib.float64),
        lib.tensor([2.0, 0.5, -3.0], dtype=lib.float64),
    ),
    "affine_event": lambda lib: lib.distributions.AffineTransform(0.5, 2.0, event_dim=1),
    "compose": lambda lib: lib.distributions.ComposeTransform(
        [lib.distributions.AffineTransform(0.3, 2.0), lib.distributions.ExpTransform()]
    ),
    "independent": lambda lib: lib.distributions.transforms.IndependentTransform(
        lib.distributions.SigmoidTransform(), 1
    ),
    "stick_breaking": lambda lib: lib.distributions.StickBreakingTransform(),
    "lower_cholesky": lambda lib: lib.distributions.LowerCholeskyTransform(),
    "corr_cholesky": lambda lib: lib.distributions.CorrCholeskyTransform(),
    "inverse_exp": lambda lib: lib.distributions.ExpTransform().inv,
    "cat": lambda lib: lib.distributions.CatTransform(
        [lib.distributions.ExpTransform(), lib.distributions.SigmoidTransform()],
        dim=-1,
        lengths=[1, 2],
    ),
    "stack": lambda lib: lib.distributions.StackTransform(
        [
            lib.distributions.ExpTransform(),
            lib.distributions.TanhTransform(),
            lib.distributions.SigmoidTransform(),
        ],
        dim=-1,
    ),
    "reshape": lambda lib: lib.distributions.transforms.ReshapeTransform((2, 3), (6,)),
}
INPUTS = {"lower_cholesky": (4, 3, 3), "corr_cholesky": (4, 3), "reshape": (4, 2, 3)}


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_transform_against_torch(name):
    ours, ref = _both(TRANSFORMS[name])
    x = R.normal(0, 1, INPUTS.get(name, (4, 3)))
    if name == "power":
        x = np.abs(x) + 0.1
    xt, xg = torch.tensor(x), gc.tensor(x, dtype=gc.float64)
    yt, yg = ref(xt), ours(xg)
    np.testing.assert_allclose(yg.numpy(), yt.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ours.inv(yg).numpy(), ref.inv(yt).numpy(), rtol=1e-7, atol=1e-9)
    if name == "lower_cholesky":  # no log|det J| in PyTorch either
        with pytest.raises(NotImplementedError):
            ours.log_abs_det_jacobian(xg, yg)
    elif name != "reshape":
        np.testing.assert_allclose(
            ours.log_abs_det_jacobian(xg, yg).numpy(),
            ref.log_abs_det_jacobian(xt, yt).numpy(),
            rtol=1e-8,
            atol=1e-10,
        )
    assert ours.bijective == ref.bijective
    assert ours.domain.event_dim == ref.domain.event_dim
    assert ours.codomain.event_dim == ref.codomain.event_dim
    assert tuple(ours.forward_shape(x.shape)) == tuple(ref.forward_shape(x.shape))
    assert tuple(ours.inverse_shape(yt.shape)) == tuple(ref.inverse_shape(yt.shape))


def test_log_abs_det_jacobian_is_the_autograd_jacobian():
    """For elementwise transforms log|dy/dx| from autograd equals log_abs_det_jacobian."""
    for t in (T.ExpTransform(), T.SigmoidTransform(), T.TanhTransform(), T.SoftplusTransform()):
        x = gc.tensor(R.normal(0, 1, 6), dtype=gc.float64, requires_grad=True)
        y = t(x)
        (g,) = gc.autograd.grad(y.sum(), x)
        np.testing.assert_allclose(
            np.log(np.abs(g.numpy())), t.log_abs_det_jacobian(x, y).detach().numpy(), rtol=1e-9
        )


def test_cache_returns_the_input():
    t = T.ExpTransform(cache_size=1)
    x = gc.tensor([0.5, 1.0])
    y = t(x)
    assert t.inv(y) is x
    with pytest.raises(ValueError):
        T.ExpTransform(cache_size=2)


def test_with_cache_copies_and_composites_cache_their_parts():
    x = gc.tensor([0.5, 1.0])
    plain = T.ComposeTransform([T.ExpTransform(), T.AffineTransform(1.0, 2.0)])
    cached = plain.with_cache()
    assert cached is not plain and plain._cache_size == 0 and cached.with_cache(1) is cached
    assert all(p._cache_size == 1 for p in cached.parts)
    y = cached(x)
    assert cached.inv(y) is x and cached.inv.inv is cached
    assert plain.inv(plain(x)) is not x  # no cache: recomputed
    a = T.AffineTransform(gc.tensor([1.0, 2.0]), -3.0).with_cache()
    assert a.inv(a(x)) is x and a.sign == -1 and a.inv.with_cache(0).inv._cache_size == 0
    ind = T.IndependentTransform(T.ExpTransform(), 1).with_cache()
    assert ind.base_transform._cache_size == 1 and ind.inv(ind(x)) is x


CONSTRAINTS = {
    "real": lambda c: c.real,
    "positive": lambda c: c.positive,
    "greater_than": lambda c: c.greater_than(1.5),
    "less_than": lambda c: c.less_than(-0.5),
    "unit_interval": lambda c: c.unit_interval,
    "interval": lambda c: c.interval(-1.0, 3.0),
    "simplex": lambda c: c.simplex,
    "lower_cholesky": lambda c: c.lower_cholesky,
    "corr_cholesky": lambda c: c.corr_cholesky,
    "positive_definite": lambda c: c.positive_definite,
    "real_vector": lambda c: c.real_vector,
}
CON_INPUTS = {"lower_cholesky": (3, 3), "positive_definite": (3, 3), "corr_cholesky": (3,)}


@pytest.mark.parametrize("fn", ["biject_to", "transform_to"])
@pytest.mark.parametrize("name", sorted(CONSTRAINTS))
def test_biject_to_and_transform_to(fn, name):
    c_ours = CONSTRAINTS[name](D.constraints)
    c_ref = CONSTRAINTS[name](torch.distributions.constraints)
    try:
        ref = getattr(torch.distributions, fn)(c_ref)
    except NotImplementedError:
        with pytest.raises(NotImplementedError):
            getattr(D, fn)(c_ours)
        return
    ours = getattr(D, fn)(c_ours)
    x = R.normal(0, 1, (5, *CON_INPUTS.get(name, (4,))))
    yg, yt = ours(gc.tensor(x, dtype=gc.float64)), ref(torch.tensor(x))
    np.testing.assert_allclose(yg.numpy(), yt.numpy(), rtol=1e-9, atol=1e-12)
    assert bool(c_ours.check(yg).all()), f"{fn}({name}) leaves the support"


def test_transformed_distribution_against_torch():
    base_g = D.Normal(
        gc.tensor([0.2, -0.3], dtype=gc.float64), gc.tensor([1.0, 0.5], dtype=gc.float64)
    )
    base_t = torch.distributions.Normal(
        torch.tensor([0.2, -0.3], dtype=torch.float64),
        torch.tensor([1.0, 0.5], dtype=torch.float64),
    )
    tg = [T.AffineTransform(1.0, 2.0), T.SigmoidTransform()]
    tt = [torch.distributions.AffineTransform(1.0, 2.0), torch.distributions.SigmoidTransform()]
    dg, dt = (
        D.TransformedDistribution(base_g, tg),
        torch.distributions.TransformedDistribution(base_t, tt),
    )
    y = dt.sample((7,))
    np.testing.assert_allclose(
        dg.log_prob(gc.tensor(y.numpy())).numpy(), dt.log_prob(y).numpy(), rtol=1e-10
    )
    np.testing.assert_allclose(dg.cdf(gc.tensor(y.numpy())).numpy(), dt.cdf(y).numpy(), rtol=1e-10)
    assert dg.has_rsample and tuple(dg.rsample((3,)).shape) == (3, 2)
    assert type(dg.support).__name__ == type(dt.support).__name__


def test_constraint_checks_against_torch():
    values = {
        "boolean": np.array([0.0, 1.0, 0.5]),
        "nonnegative_integer": np.array([0.0, 2.0, -1.0, 1.5]),
        "positive_integer": np.array([0.0, 2.0, 3.0]),
        "positive": np.array([0.0, 2.0, -1.0]),
        "nonnegative": np.array([0.0, 2.0, -1.0]),
        "unit_interval": np.array([0.0, 1.0, 1.5, -0.1]),
        "simplex": np.array([[0.2, 0.8], [0.5, 0.6], [1.0, 0.0]]),
        "real": np.array([np.nan, 1.0, np.inf]),
        "lower_triangular": np.tril(R.normal(size=(2, 3, 3))),
        "symmetric": np.eye(3) + 0.1,
        "positive_semidefinite": np.diag([1.0, 0.0, 2.0]),
        "positive_definite": np.diag([1.0, 0.0, 2.0]),
        "one_hot": np.array([[0.0, 1.0], [1.0, 1.0]]),
    }
    for name, v in values.items():
        got = getattr(D.constraints, name).check(gc.tensor(v, dtype=gc.float64)).numpy()
        want = getattr(torch.distributions.constraints, name).check(torch.tensor(v)).numpy()
        np.testing.assert_array_equal(got, want, err_msg=name)
    assert D.constraints.is_dependent(D.constraints.dependent)
    assert not D.constraints.is_dependent(D.constraints.real)
    assert repr(D.constraints.interval(0.0, 1.0)) == repr(
        torch.distributions.constraints.interval(0.0, 1.0)
    )
