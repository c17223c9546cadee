"""nonzero/argwhere, count_nonzero, bincount and unique against PyTorch: values, dtypes, shapes
(empty results included), as_tuple, weights, inverse and counts, dims, NaN handling."""

import numpy as np
import pytest
from torch_compare import same_as_torch

import gpucore


def _sparse(*shape, seed=0):
    a = np.random.default_rng(seed).uniform(-2, 2, shape)
    return np.where(np.abs(a) < 1, 0.0, a)


@pytest.mark.parametrize("shape", [(3, 5), (2, 3, 4), (), (0, 3), (6,)])
def test_nonzero_argwhere(shape):
    x = _sparse(*shape, seed=1)
    same_as_torch(lambda m, x: m.nonzero(x), x, grad=False)
    same_as_torch(lambda m, x: x.argwhere(), x, grad=False)
    same_as_torch(lambda m, x: x.nonzero(as_tuple=True), x, grad=False)
    same_as_torch(lambda m, x: m.nonzero(x != 0), x, grad=False)


def test_count_nonzero():
    x = _sparse(3, 4, 2, seed=2)
    for dim in (None, 0, (0, 2), -1):
        same_as_torch(lambda m, x, d=dim: m.count_nonzero(x, d), x, grad=False)


def test_bincount():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 6, 30)
    same_as_torch(lambda m, x: m.bincount(x), x, grad=False)
    same_as_torch(lambda m, x: x.bincount(minlength=10), x, grad=False)
    same_as_torch(lambda m, x, w: m.bincount(x, w), x, rng.uniform(size=30), grad=False)
    same_as_torch(lambda m, x: m.bincount(x), np.zeros(0, np.int64), grad=False)
    with pytest.raises(ValueError, match="bincount.*non-negative"):
        gpucore.bincount(gpucore.tensor([1, -1]))
    with pytest.raises(ValueError, match="bincount.*1-D"):
        gpucore.bincount(gpucore.tensor([[1]]))


@pytest.mark.parametrize("inverse", [False, True])
@pytest.mark.parametrize("counts", [False, True])
def test_unique(inverse, counts):
    x = np.round(np.random.default_rng(4).uniform(-2, 2, (4, 5)))
    kw = {"return_inverse": inverse, "return_counts": counts}
    same_as_torch(lambda m, x: m.unique(x, **kw), x, grad=False)
    rows = x[[0, 1, 0, 2]]
    same_as_torch(lambda m, x: x.unique(dim=0, **kw), rows, grad=False)
    same_as_torch(lambda m, x: m.unique(x, dim=1, **kw), rows.T.copy(), grad=False)
    same_as_torch(lambda m, x: m.unique(x, **kw), np.array([3, 1, 3, 2]), grad=False)


@pytest.mark.parametrize("counts", [False, True])
def test_unique_sorted_false_is_sorted_as_torchs(counts):
    """torch 2.x's CPU unique(sorted=False) returns its values sorted too (checked here on
    unsorted ints, floats, bools and rows), and gpucore does the same."""
    kw = {"sorted": False, "return_inverse": True, "return_counts": counts}
    ints = np.random.default_rng(5).integers(0, 50, 200)
    for x in (ints, ints[::-1] * 0.5, ints % 2 == 0, np.array([5, 4, 3, 2, 1, 5])):
        same_as_torch(lambda m, x: m.unique(x, **kw), x, grad=False)
    rows = np.array([[3, 1], [1, 2], [3, 1], [0, 9]])
    same_as_torch(lambda m, x: x.unique(dim=0, **kw), rows, grad=False)


def test_unique_nans_are_distinct():
    same_as_torch(lambda m, x: m.unique(x), np.array([2.0, np.nan, 1.0, np.nan]), grad=False)


def test_on_vulkan(vulkan):
    x = gpucore.tensor(_sparse(4, 50, seed=5).astype(np.float32), device="vulkan")
    np.testing.assert_array_equal(x.nonzero().numpy(), np.argwhere(x.numpy()))
    assert x.count_nonzero().item() == np.count_nonzero(x.numpy())
    np.testing.assert_array_equal(x.unique().numpy(), np.unique(x.numpy()))
