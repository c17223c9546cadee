"""equal, allclose, isclose, masked_select, masked_scatter (gpucore/ops/comparison.py) against
PyTorch and numpy."""

import numpy as np
import pytest
from torch_compare import same_as_torch

import gpucore


def test_equal_allclose_isclose_as_torch():
    torch = pytest.importorskip("torch")
    a = np.array([1.0, np.nan, np.inf, -np.inf, 1e-9, 2.0])
    b = np.array([1.0 + 1e-7, np.nan, np.inf, np.inf, 0.0, 2.1])
    for en in (False, True):
        for rtol, atol in ((1e-5, 1e-8), (0.1, 0.0), (0.0, 1e-8)):
            g = gpucore.isclose(gpucore.tensor(a), gpucore.tensor(b), rtol, atol, en)
            t = torch.isclose(torch.tensor(a), torch.tensor(b), rtol, atol, en)
            np.testing.assert_array_equal(g.numpy(), t.numpy())
            np.testing.assert_array_equal(g.numpy(), np.isclose(a, b, rtol, atol, en))
            assert gpucore.allclose(gpucore.tensor(a[:2]), gpucore.tensor(b[:2]), equal_nan=en) is (
                torch.allclose(torch.tensor(a[:2]), torch.tensor(b[:2]), equal_nan=en)
            )
    i = np.array([1, 2, 3])
    assert gpucore.equal(gpucore.tensor(i), gpucore.tensor(i)) is True
    assert gpucore.equal(gpucore.tensor(i), gpucore.tensor(i[:2])) is False
    assert gpucore.tensor(a).equal(gpucore.tensor(a)) is False  # NaN != NaN
    np.testing.assert_array_equal(
        gpucore.isclose(gpucore.tensor(i), gpucore.tensor(i + 1), atol=1).numpy(), [1, 1, 1]
    )
    with pytest.raises(ValueError, match="isclose"):
        gpucore.isclose(gpucore.tensor(a), gpucore.tensor(b), rtol=-1)


def test_masked_select_as_torch():
    x = np.random.default_rng(1).uniform(-2, 2, (3, 4))
    m = x > 0
    same_as_torch(lambda mod, x, m: mod.masked_select(x, m), x, m)
    same_as_torch(lambda mod, x, m: x.masked_select(m), x, m[0])  # mask broadcast
    got = gpucore.masked_select(gpucore.tensor(x), gpucore.tensor(m)).numpy()
    np.testing.assert_array_equal(got, x[m])


def test_masked_scatter_as_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    x, src = rng.uniform(-2, 2, (3, 4)), rng.uniform(-2, 2, (4, 4))
    m = x > 0
    same_as_torch(lambda mod, x, m, s: x.masked_scatter(m, s), x, m, src)
    same_as_torch(lambda mod, x, m, s: mod.masked_scatter(x, m, s), x, m[:1], src)
    g, t = gpucore.tensor(x), torch.tensor(x)
    g.masked_scatter_(gpucore.tensor(m), gpucore.tensor(src))
    t.masked_scatter_(torch.tensor(m), torch.tensor(src))
    np.testing.assert_array_equal(g.numpy(), t.numpy())
    with pytest.raises(ValueError, match="masked_scatter"):
        gpucore.tensor(x).masked_scatter(
            gpucore.ones(3, 4, dtype=gpucore.bool), gpucore.zeros(2).double()
        )
