"""lerp and nan_to_num against PyTorch: values (weight 1 gives end exactly), gradients,
in-place forms, dtypes and errors."""

import numpy as np
import pytest
from torch_compare import same_as_torch

import gpucore


def _rand(*shape, seed=0, low=-2.0, high=2.0):
    return np.random.default_rng(seed).uniform(low, high, shape)


@pytest.mark.parametrize("w", [0.0, 0.25, 0.5, 0.75, 1.0, -0.5, 1.5])
def test_lerp_scalar_weight(w):
    same_as_torch(lambda m, a, b: m.lerp(a, b, w), _rand(3, 4, seed=1), _rand(3, 4, seed=2))
    same_as_torch(lambda m, a, b: a.lerp(b, w), _rand(2, 3, 4, seed=3), _rand(3, 1, seed=4))


def test_lerp_tensor_weight():
    w = _rand(3, 4, seed=5, low=-0.5, high=1.5)
    w[0, 0], w[0, 1] = 0.5, 1.0
    same_as_torch(lambda m, a, b, w: m.lerp(a, b, w), _rand(3, 4, seed=6), _rand(3, 4), w)
    same_as_torch(lambda m, a, b, w: a.lerp(b, w), _rand(3, 4, seed=7), _rand(4, seed=8), w[:1])


def test_lerp_exact_ends_inplace_and_errors():
    torch = pytest.importorskip("torch")
    a = np.array([1e8, -3.0, 0.1], np.float32)
    b = np.array([1.0, 7.0, 0.3], np.float32)
    assert gpucore.lerp(gpucore.tensor(a), gpucore.tensor(b), 1.0).tolist() == b.tolist()
    g, t = gpucore.tensor(a), torch.tensor(a)
    g.lerp_(gpucore.tensor(b), 0.3)
    t.lerp_(torch.tensor(b), 0.3)
    np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-6, atol=1e-6)
    with pytest.raises(TypeError, match="lerp"):
        gpucore.lerp(gpucore.zeros(2), gpucore.zeros(2, dtype=gpucore.float64), 0.5)
    with pytest.raises(TypeError, match="lerp"):
        gpucore.lerp(gpucore.tensor([1, 2]), gpucore.tensor([1, 2]), 0.5)


def _specials(seed):
    x = _rand(3, 5, seed=seed)
    x[0, 1], x[1, 2], x[2, 3], x[2, 4] = np.nan, np.inf, -np.inf, np.nan
    return x


@pytest.mark.parametrize(
    "kw", [{}, {"nan": 1.5}, {"posinf": 9.0}, {"neginf": -9.0}, {"nan": 0.0, "posinf": 1.0}]
)
def test_nan_to_num(kw):
    same_as_torch(lambda m, x: m.nan_to_num(x, **kw), _specials(1), check_fd=False)
    same_as_torch(lambda m, x: x.nan_to_num(**kw), _rand(4, seed=2))


def test_nan_to_num_dtypes_and_inplace():
    torch = pytest.importorskip("torch")
    for dt, tdt in ((gpucore.float32, torch.float32), (gpucore.float16, torch.float16)):
        a = np.array([np.nan, np.inf, -np.inf, 1.0])
        g = gpucore.tensor(a, dtype=dt).nan_to_num()
        t = torch.tensor(a, dtype=tdt).nan_to_num()
        np.testing.assert_array_equal(g.float().numpy(), t.float().numpy())
    ints = gpucore.tensor([1, 2])
    assert ints.nan_to_num().tolist() == [1, 2]
    x = gpucore.tensor([np.nan, 2.0])
    x.nan_to_num_(nan=-1.0)
    assert x.tolist() == [-1.0, 2.0]


def test_on_vulkan(vulkan):
    a = _specials(3).astype(np.float32)
    x = gpucore.tensor(a, device="vulkan")
    out = x.nan_to_num(nan=0.0, posinf=1.0, neginf=-1.0).numpy()
    np.testing.assert_array_equal(out, np.nan_to_num(a, nan=0.0, posinf=1.0, neginf=-1.0))
    b = gpucore.tensor(np.ones((3, 5), np.float32), device="vulkan")
    np.testing.assert_allclose(gpucore.lerp(b, b * 3, 0.25).numpy(), 1.5)
