"""normal, bernoulli and the in-place fills (gpucore/ops/sampling.py): their distributions
(moments on 200,000 samples against the exact values), ranges, dtypes, reproducibility from a
generator's seed, and errors."""

import math

import numpy as np
import pytest

import gpucore

N = 200_000


def _fill(name, *args, dtype=gpucore.float64, seed=0, **kw):
    g = gpucore.Generator().manual_seed(seed)
    x = gpucore.empty(N, dtype=dtype)
    getattr(x, name)(*args, generator=g, **kw)
    return x.numpy()


def test_fill_distributions():
    x = _fill("exponential_", 2.0)
    assert x.min() >= 0 and abs(x.mean() - 0.5) < 0.01 and abs(x.std() - 0.5) < 0.01
    x = _fill("geometric_", 0.25)
    assert x.min() >= 1 and (x == np.round(x)).all() and abs(x.mean() - 4.0) < 0.05
    x = _fill("bernoulli_", 0.3)
    assert set(np.unique(x)) <= {0.0, 1.0} and abs(x.mean() - 0.3) < 0.01
    x = _fill("log_normal_", 1.0, 0.5)
    assert abs(np.log(x).mean() - 1.0) < 0.01 and abs(np.log(x).std() - 0.5) < 0.01
    x = _fill("cauchy_", 2.0, 3.0)
    assert abs(np.median(x) - 2.0) < 0.05
    assert abs(np.percentile(x, 75) - np.percentile(x, 25) - 6.0) < 0.15  # IQR = 2 sigma
    x = _fill("random_", 3, 7)
    assert set(np.unique(x)) == {3.0, 4.0, 5.0, 6.0}
    x = _fill("random_", 4, dtype=gpucore.int64)
    assert set(np.unique(x)) == {0, 1, 2, 3}
    x = _fill("random_", dtype=gpucore.float32)
    assert x.min() >= 0 and x.max() <= 2**24 and (x == np.round(x)).all()
    assert x.max() > 2**23  # the whole range is drawn


def test_fills_are_reproducible_from_the_seed():
    for name, args in (("exponential_", ()), ("cauchy_", ()), ("random_", (10,))):
        np.testing.assert_array_equal(_fill(name, *args, seed=3), _fill(name, *args, seed=3))
        assert not np.array_equal(_fill(name, *args, seed=3), _fill(name, *args, seed=4))


def test_normal_and_bernoulli_functions():
    g = gpucore.Generator().manual_seed(1)
    mean = gpucore.tensor(np.linspace(-3, 3, 6))
    z = gpucore.normal(mean.expand(N // 6, 6), 0.5, generator=g).numpy()
    np.testing.assert_allclose(z.mean(0), np.linspace(-3, 3, 6), atol=0.02)
    np.testing.assert_allclose(z.std(0), 0.5, atol=0.01)
    s = gpucore.normal(2.0, gpucore.full((N,), 3.0), generator=g).numpy()
    assert abs(s.mean() - 2.0) < 0.05 and abs(s.std() - 3.0) < 0.05
    f = gpucore.normal(0.0, 1.0, (3, 4))
    assert tuple(f.shape) == (3, 4) and f.dtype == gpucore.float32
    p = gpucore.tensor(np.tile([0.0, 0.2, 1.0], N // 3))
    b = gpucore.bernoulli(p, generator=g).numpy().reshape(-1, 3)
    assert (b[:, 0] == 0).all() and (b[:, 2] == 1).all() and abs(b[:, 1].mean() - 0.2) < 0.01
    assert abs(gpucore.bernoulli(p, 0.7).numpy().mean() - 0.7) < 0.01
    with pytest.raises(ValueError, match="bernoulli"):
        gpucore.bernoulli(gpucore.tensor([1.5]))
    with pytest.raises(TypeError, match="normal"):
        gpucore.normal(0.0, 1.0)
    with pytest.raises(ValueError, match="geometric"):
        gpucore.zeros(3).geometric_(1.5)
    assert math.isfinite(float(gpucore.zeros(1).exponential_()))
