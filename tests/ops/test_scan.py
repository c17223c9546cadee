"""cumsum, cumprod (zeros included), cummax, cummin, logcumsumexp against PyTorch: values,
dtypes (integer scans in int64), gradients, in-place forms and errors."""

import numpy as np
import pytest
from torch_compare import same_as_torch

import gpucore


def _rand(*shape, seed=0, low=-2.0, high=2.0):
    return np.random.default_rng(seed).uniform(low, high, shape)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum_and_cumprod_match_torch(dim):
    x = _rand(3, 5, seed=1)
    same_as_torch(lambda m, x: m.cumsum(x, dim), x)
    same_as_torch(lambda m, x: x.cumprod(dim), x)


def test_cumprod_gradient_with_zeros():
    x = _rand(3, 6, seed=2)
    x[0, 1] = x[1, 0] = x[1, 4] = x[2, 5] = 0.0
    same_as_torch(lambda m, x: m.cumprod(x, 1), x)
    x = _rand(4, 3, 2, seed=3)
    x[1, 2, 0] = x[2, 2, 0] = 0.0
    same_as_torch(lambda m, x: m.cumprod(x, 0), x)


def test_second_derivatives():
    x = _rand(2, 4, seed=4, low=0.5)
    t = gpucore.tensor(x, requires_grad=True)
    assert gpucore.autograd.gradgradcheck(lambda t: t.cumprod(1), (t,))
    assert gpucore.autograd.gradgradcheck(lambda t: t.cumsum(0) ** 2, (t,))


def test_integer_and_bool_scans_give_int64():
    torch = pytest.importorskip("torch")
    for a in (np.arange(6, dtype=np.int32).reshape(2, 3), np.array([True, False, True])):
        for name in ("cumsum", "cumprod"):
            g = getattr(gpucore.tensor(a), name)(0)
            t = getattr(torch.tensor(a), name)(0)
            assert g.dtype is gpucore.int64 and str(t.dtype) == "torch.int64"
            np.testing.assert_array_equal(g.numpy(), t.numpy())
    g = gpucore.tensor([1, 2, 3]).cumsum(0, dtype=gpucore.float64)
    assert g.dtype is gpucore.float64 and g.tolist() == [1.0, 3.0, 6.0]


def test_0d_and_empty():
    same_as_torch(lambda m, x: m.cumsum(x, 0), np.array(2.5))
    same_as_torch(lambda m, x: m.cumprod(x, -1), np.array(2.5))
    same_as_torch(lambda m, x: m.cumsum(x, 1), np.zeros((2, 0)), grad=False)


def test_in_place_forms():
    torch = pytest.importorskip("torch")
    a = _rand(3, 4, seed=5)
    g, t = gpucore.tensor(a), torch.tensor(a)
    g.cumsum_(1)
    t.cumsum_(1)
    np.testing.assert_allclose(g.numpy(), t.numpy())
    g.cumprod_(0)
    t.cumprod_(0)
    np.testing.assert_allclose(g.numpy(), t.numpy())


@pytest.mark.parametrize("name", ["cummax", "cummin"])
def test_cummax_cummin_match_torch(name):
    same_as_torch(lambda m, x: getattr(m, name)(x, 1), _rand(3, 7, seed=6))
    ties = np.round(_rand(3, 9, seed=7))
    same_as_torch(lambda m, x: getattr(x, name)(1), ties, grad=False)
    nan = _rand(2, 6, seed=8)
    nan[0, 2] = nan[1, 5] = np.nan
    same_as_torch(lambda m, x: getattr(m, name)(x, 1), nan, grad=False)


def test_logcumsumexp_matches_torch():
    same_as_torch(lambda m, x: m.logcumsumexp(x, 1), _rand(3, 5, seed=9))
    big = _rand(2, 4, seed=10) * 400
    same_as_torch(lambda m, x: x.logcumsumexp(0), big, check_fd=False)


def test_errors_name_the_op():
    x = gpucore.zeros(2, 3)
    with pytest.raises(IndexError, match="cumsum"):
        x.cumsum(2)
    with pytest.raises(IndexError, match="cumprod"):
        gpucore.cumprod(x, -3)


def test_cumsum_on_vulkan(vulkan):
    a = _rand(4, 300, seed=11).astype(np.float32)
    x = gpucore.tensor(a, device="vulkan", requires_grad=True)
    y = x.cumsum(1)
    np.testing.assert_allclose(y.detach().numpy(), np.cumsum(a, 1), rtol=1e-5, atol=1e-4)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.arange(300, 0, -1) * np.ones((4, 1)))


@pytest.mark.parametrize("n,dim", [(1, -1), (2, 1), (1, 0), (3, 1), (0, 1)])
def test_diff_matches_torch(n, dim):
    same_as_torch(lambda m, x: m.diff(x, n, dim), _rand(4, 5, seed=12))


def test_diff_prepend_append_ints_and_bools():
    x = _rand(3, 4, seed=13)
    same_as_torch(lambda m, x, p: m.diff(x, 1, 0, prepend=p), x, _rand(2, 4, seed=14))
    same_as_torch(lambda m, x, a: x.diff(dim=1, append=a), x, _rand(3, 1, seed=15))
    same_as_torch(lambda m, x: m.diff(x, 2), np.array([1, 3, 6, 10, 15]), grad=False)
    same_as_torch(lambda m, x: m.diff(x), np.array([True, False, False, True]), grad=False)
