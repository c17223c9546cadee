"""prod, aminmax, var_mean/std_mean, nansum/nanmean, quantile/nanquantile, histc
(gpucore/ops/statistics.py) against PyTorch (values, dtypes, gradients) and numpy float64."""

import math

import numpy as np
import pytest
from torch_compare import same_as_torch

import gpucore


def _rand(*shape, seed=0, low=-2.0, high=2.0):
    return np.random.default_rng(seed).uniform(low, high, shape)


def test_prod_as_torch_zero_safe_gradient():
    x = _rand(3, 4, seed=1)
    x[0, 1] = 0.0
    x[2, 0] = x[2, 3] = 0.0  # two zeros in a row: zero gradient there
    same_as_torch(lambda m, x: m.prod(x), x)
    same_as_torch(lambda m, x: m.prod(x, 1), x)
    same_as_torch(lambda m, x: x.prod(0, keepdim=True), x)
    same_as_torch(lambda m, x: m.prod(x, -1, dtype=m.float64), x)
    np.testing.assert_allclose(gpucore.prod(gpucore.tensor(x), 1).numpy(), np.prod(x, 1))
    same_as_torch(lambda m, x: m.prod(x), np.array([[1, 2], [3, 4]]), grad=False)
    same_as_torch(lambda m, x: m.prod(x, 0), np.zeros((0, 3)), grad=False)


def test_aminmax_var_mean_std_mean_as_torch():
    x = _rand(3, 4, seed=2)
    same_as_torch(lambda m, x: m.aminmax(x), x, grad=False)
    same_as_torch(lambda m, x: m.aminmax(x, dim=1, keepdim=True), x, grad=False)
    same_as_torch(lambda m, x: m.var_mean(x, 1), x)
    same_as_torch(lambda m, x: m.std_mean(x, (0, 1), correction=0, keepdim=True), x)
    same_as_torch(lambda m, x: m.var_mean(x, 0, unbiased=False)[0], x)
    lo, hi = gpucore.aminmax(gpucore.tensor(x), dim=0)
    np.testing.assert_array_equal(lo.numpy(), x.min(0))
    np.testing.assert_array_equal(hi.numpy(), x.max(0))


def test_nansum_nanmean_as_torch():
    x = _rand(3, 4, seed=3)
    x[0, 0] = x[1, 2] = np.nan
    same_as_torch(lambda m, x: m.nansum(x), x)
    same_as_torch(lambda m, x: m.nansum(x, 1, keepdim=True), x)
    same_as_torch(lambda m, x: m.nanmean(x, 1), x)
    x[2, :] = np.nan  # a row of NaN: nanmean gives NaN (PyTorch's gradient there is NaN too)
    same_as_torch(lambda m, x: m.nanmean(x, 1), x, grad=False)
    np.testing.assert_allclose(gpucore.nanmean(gpucore.tensor(x)).item(), np.nanmean(x))


@pytest.mark.parametrize("fn", ["quantile", "nanquantile"])
@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantile_as_torch(fn, interpolation):
    x = _rand(4, 5, seed=4)
    x[1, 2] = np.nan
    x[3, :] = np.nan
    q = np.array([0.0, 0.1, 0.5, 0.75, 1.0])
    for dim in (None, 0, 1, -1):
        for keepdim in (False, True):
            same_as_torch(
                lambda m, x, q, d=dim, k=keepdim: getattr(m, fn)(
                    x, q, dim=d, keepdim=k, interpolation=interpolation
                ),
                x,
                q,
                grad=False,
            )
            same_as_torch(
                lambda m, x, d=dim, k=keepdim: getattr(m, fn)(
                    x, 0.3, d, k, interpolation=interpolation
                ),
                x,
                grad=False,
            )


def test_quantile_gradient_and_numpy():
    x = _rand(3, 6, seed=5)
    same_as_torch(lambda m, x: m.quantile(x, 0.4, dim=1), x)
    got = gpucore.quantile(gpucore.tensor(x), gpucore.tensor([0.25, 0.9], dtype=gpucore.float64), 0)
    np.testing.assert_allclose(got.numpy(), np.quantile(x, [0.25, 0.9], axis=0))
    with pytest.raises(ValueError, match="quantile"):
        gpucore.quantile(gpucore.tensor(x), 1.5)
    with pytest.raises(ValueError, match="interpolation"):
        gpucore.quantile(gpucore.tensor(x), 0.5, interpolation="cubic")


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_histc_of_constant_data_widens_as_torch(dt):
    # min == max: the range is min - 1 .. max + 1 in the input's dtype, a side whose +-1 rounds
    # back (2^24 + 1 and 1e10 +- 1 in float32) taking its neighbouring float instead
    torch = pytest.importorskip("torch")
    for v, bins in ((1e10, 4), (16777216.0, 3), (1.0, 4), (0.0, 5), (-3.5, 7), (1e30, 3)):
        x = np.full(2, v, dt)
        got = gpucore.histc(gpucore.tensor(x), bins).numpy()
        np.testing.assert_array_equal(got, torch.histc(torch.tensor(x), bins).numpy(), str(v))


def test_histc_as_torch():
    torch = pytest.importorskip("torch")
    x = np.array([1.0, 2.0, 1.0, 4.0, 5.0, -1.0, 3.999, 0.0])
    for bins, lo, hi in ((4, 0, 4), (3, 0, 0), (10, -2, 6), (1, 1, 1)):
        g = gpucore.histc(gpucore.tensor(x), bins, lo, hi)
        t = torch.histc(torch.tensor(x), bins, lo, hi)
        assert g.dtype == gpucore.float64
        np.testing.assert_array_equal(g.numpy(), t.numpy())
    np.testing.assert_array_equal(
        gpucore.histc(gpucore.tensor(x), 4, 0, 4).numpy(), np.histogram(x, 4, (0, 4))[0]
    )


@pytest.mark.parametrize("p", [2.0, 1.0, 0.0, 3.0, math.inf])
def test_cdist_dist_pdist_as_torch(p):
    a, b = _rand(2, 4, 3, seed=7), _rand(5, 3, seed=8)
    g = p != 0  # PyTorch gives no gradient for p = 0
    same_as_torch(lambda m, a, b: m.cdist(a, b, p), a, b, grad=g)
    same_as_torch(lambda m, a, b: m.dist(a, b, p), a, b[:4], grad=g)
    same_as_torch(lambda m, a: m.pdist(a, p), b, grad=g)
    got = gpucore.cdist(gpucore.tensor(a), gpucore.tensor(b), p).numpy()
    diff = np.abs(a[:, :, None, :] - b[None, None, :, :])
    want = (
        (diff != 0).sum(-1) if p == 0 else diff.max(-1) if p == math.inf
        else (diff**p).sum(-1) ** (1 / p)
    )  # fmt: skip
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_cdist_through_matmul_and_zero_distance_gradient():
    a = _rand(30, 4, seed=9)
    # rows in common: zero distances, where finite differences are meaningless
    same_as_torch(lambda m, a, b: m.cdist(a, b), a, a[:27].copy(), atol=1e-7, check_fd=False)
    same_as_torch(lambda m, a, b: m.cdist(a, b), a, _rand(26, 4, seed=11), atol=1e-7)
    same_as_torch(
        lambda m, a, b: m.cdist(a, b, compute_mode="use_mm_for_euclid_dist"), a[:3], a[:2].copy(),
        atol=1e-7, check_fd=False,
    )  # fmt: skip
    x = gpucore.tensor(_rand(3, 2, seed=10), requires_grad=True)
    gpucore.cdist(x, x.detach()).sum().backward()  # zero distances on the diagonal: no NaN
    assert np.isfinite(x.grad.numpy()).all()
