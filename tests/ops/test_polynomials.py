"""The orthogonal polynomials (gpucore/ops/polynomials.py) against PyTorch (same algorithm) and
numpy.polynomial (an independent evaluation), with PyTorch's degree rules: n truncated, 0 for
negative n, a tensor or a number, broadcasting, integer inputs in the default float."""

from __future__ import annotations

import numpy as np
import pytest

import gpucore
from gpucore import special
from gpucore.ops.polynomials import _REFS

NAMES = sorted(_REFS)


@pytest.mark.parametrize("name", NAMES)
def test_against_numpy_polynomial(name):
    ref, lo, hi = _REFS[name]
    x = np.linspace(lo, hi, 61)
    n = np.arange(61) % 25
    got = getattr(special, name)(gpucore.tensor(x), gpucore.tensor(n)).numpy()
    want = ref(x, n)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * np.abs(want).max(), err_msg=name)


@pytest.mark.parametrize("name", NAMES)
def test_matches_torch(name):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    _, lo, hi = _REFS[name]
    x = np.concatenate([rng.uniform(lo - 0.3, hi + 0.3, 500), [lo, hi, 0.0, 1.0, -1.0, 0.5] * 3])
    n = np.concatenate(
        [
            rng.integers(-3, 40, 500),
            [0, 1, 2, 7, 9, 12, 3, 4, 5, 10, 11, 13] * 1,
            [2.7, -0.5, 30.2, 1.9, 0.99, 8.5],
        ]
    )
    got = getattr(special, name)(gpucore.tensor(x), gpucore.tensor(n.astype(np.float64)))
    want = getattr(torch.special, name)(torch.tensor(x), torch.tensor(n.astype(np.float64)))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("name", NAMES)
def test_scalar_degree_broadcasting_and_dtypes(name):
    torch = pytest.importorskip("torch")
    x = np.linspace(-0.9, 0.9, 12).reshape(3, 4)
    got = getattr(special, name)(gpucore.tensor(x), 5)
    want = getattr(torch.special, name)(torch.tensor(x), 5)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    n = np.array([[0], [3], [6]])
    got = getattr(special, name)(gpucore.tensor(x, dtype=gpucore.float32), gpucore.tensor(n))
    want = getattr(torch.special, name)(torch.tensor(x, dtype=torch.float32), torch.tensor(n))
    assert got.dtype is gpucore.float32 and tuple(got.shape) == (3, 4)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    ints = getattr(special, name)(gpucore.tensor([1, 2, 0]), gpucore.tensor([2, 3, 4]))
    assert ints.dtype is gpucore.float32
    want = getattr(torch.special, name)(torch.tensor([1, 2, 0]), torch.tensor([2, 3, 4]))
    np.testing.assert_allclose(ints.numpy(), want.numpy(), rtol=1e-6)


def test_nan_x_gives_nan():
    """PyTorch returns numbers for NaN x in some of these (its end-point tests run first);
    gpucore gives NaN, the value of the recurrence."""
    for name in NAMES:
        out = getattr(special, name)(gpucore.tensor([np.nan]), 3).numpy()
        assert np.isnan(out).all(), name


def test_shape_mismatch_names_the_function():
    with pytest.raises(ValueError, match="hermite_polynomial_h"):
        special.hermite_polynomial_h(gpucore.zeros(3), gpucore.zeros(4))


def _torch_points(name, dtype):
    """x across and beyond the interval (|x| > 1: the recurrence's overflow), the end points,
    and degrees: negative, non-integer, NaN, infinities, beyond int64 (all count as negative,
    as PyTorch's int64 cast gives them on x86), up to 3000."""
    rng = np.random.default_rng(21)
    _, lo, hi = _REFS[name]
    x = np.concatenate(
        [rng.uniform(lo - 0.6, hi + 0.6, 1500), [lo, hi, 0.0, 1.0, -1.0, 0.5, 1e-20]]
    )
    special_n = [-1.0, 2.5, -0.5, 7.9, np.nan, np.inf, -np.inf, 1e19, -1e19, 2.0**63, 0.0]
    n = np.concatenate([rng.integers(-3, 80, 1200), rng.integers(80, 3000, 296), special_n])
    return x.astype(dtype), rng.permutation(n).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", NAMES)
def test_as_torch_in_its_own_precision(name, dtype):
    """The C kernels run PyTorch's algorithm in the element type, each step rounded as PyTorch's
    build rounds it (a * b - c fused): equal to PyTorch's values, overflow to inf and NaN where
    they overflow, 0 for the degrees that count as negative. (Bit for bit on x86 with FMA;
    compared to a few units in the last place here, so that other builds pass.)"""
    torch = pytest.importorskip("torch")
    x, n = _torch_points(name, dtype)
    got = getattr(special, name)(gpucore.tensor(x), gpucore.tensor(n)).numpy()
    want = getattr(torch.special, name)(torch.tensor(x), torch.tensor(n)).numpy()
    assert got.dtype == want.dtype == dtype
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=name)
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want), err_msg=name)
    fin = np.isfinite(got)
    eps = np.finfo(dtype).eps
    scale = np.maximum(np.abs(want[fin]), 1.0)
    err = np.abs(got[fin] - want[fin]) / scale
    assert err.max() <= 64 * eps, name
    with np.errstate(invalid="ignore"):
        negative = ~np.isfinite(n) | (np.abs(n) >= 2.0**63) | (np.trunc(n) < 0)
    assert negative.sum() >= 8 and (got[negative] == 0).all(), name


def test_huge_degrees_are_quick_and_as_torch():
    """A degree of 1e12 at |x| > 1 overflows to NaN within a few hundred steps (the recurrence
    stays NaN after: PyTorch's full loop gives the same value, as it does at n = 5000)."""
    torch = pytest.importorskip("torch")
    x = np.array([1.5, -1.5, 3.0, -2.5])
    for name in NAMES:
        xs = x
        if name.startswith("shifted"):
            xs = x / 2 + 0.5 + np.sign(x) * 0.5  # outside [0, 1]
        elif name.startswith("laguerre"):
            xs = -40 * np.abs(x)  # L_n(x) stays bounded for x > 0
        big = getattr(special, name)(gpucore.tensor(xs), 1e12).numpy()
        want = getattr(torch.special, name)(torch.tensor(xs), 5000.0).numpy()
        assert np.isnan(want).all() and np.isnan(big).all(), name
