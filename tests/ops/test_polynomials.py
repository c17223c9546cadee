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
