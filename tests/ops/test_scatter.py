"""scatter (src, value, reduce), scatter_add_, scatter_reduce (every reduce, include_self),
index_add / index_copy / index_fill against PyTorch: values, gradients, in-place forms, errors."""

import warnings

import numpy as np
import pytest
from torch_compare import same_as_torch

import gpucore


def _rand(*shape, seed=0, low=-2.0):
    return np.random.default_rng(seed).uniform(low, 2, shape)


def _unique_index(n, rows, cols, seed):
    rng = np.random.default_rng(seed)
    return np.stack([rng.permutation(n)[:rows] for _ in range(cols)], axis=1)


def test_scatter_src_and_value():
    idx = _unique_index(4, 3, 5, seed=1)
    same_as_torch(lambda m, x, i, s: m.scatter(x, 0, i, s), _rand(4, 5, seed=2), idx, _rand(3, 5))
    # src larger than index: only index's region is read (forward only: PyTorch's own backward
    # refuses this case)
    same_as_torch(
        lambda m, x, i, s: x.scatter(0, i, s), _rand(4, 5, seed=3), idx, _rand(3, 6), grad=False
    )
    same_as_torch(lambda m, x, i: x.scatter(0, i, 2.5), _rand(4, 5, seed=4), idx)
    same_as_torch(lambda m, x, i: m.scatter(x, 0, i, value=-1.0), _rand(4, 5, seed=5), idx)


@pytest.mark.parametrize("reduce", ["add", "multiply"])
def test_scatter_legacy_reduce(reduce):
    torch = pytest.importorskip("torch")
    idx = np.random.default_rng(6).integers(0, 4, (3, 5))
    x, s = _rand(4, 5, seed=7), _rand(3, 5, seed=8)
    g = gpucore.tensor(x).scatter(0, gpucore.tensor(idx), gpucore.tensor(s), reduce=reduce)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyTorch deprecates reduce= for scatter_reduce
        t = torch.tensor(x).scatter(0, torch.tensor(idx), torch.tensor(s), reduce=reduce)
    np.testing.assert_allclose(g.numpy(), t.numpy())


def test_scatter_in_place_forms():
    torch = pytest.importorskip("torch")
    idx = np.random.default_rng(9).integers(0, 5, (3, 4))
    x, s = _rand(3, 5, seed=10), _rand(3, 4, seed=11)
    for name, args in (
        ("scatter_", (1, idx, s)),
        ("scatter_add_", (1, idx, s)),
        ("scatter_reduce_", (1, idx, s, "amax")),
    ):
        g, t = gpucore.tensor(x), torch.tensor(x)
        getattr(g, name)(*[gpucore.tensor(a) if isinstance(a, np.ndarray) else a for a in args])
        getattr(t, name)(*[torch.tensor(a) if isinstance(a, np.ndarray) else a for a in args])
        if name != "scatter_":  # repeated indices: which write wins is unspecified
            np.testing.assert_allclose(g.numpy(), t.numpy())


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce, include_self):
    low = 0.5 if reduce == "prod" else -2.0
    idx = np.random.default_rng(12).integers(0, 4, (5, 3))
    same_as_torch(
        lambda m, x, i, s: m.scatter_reduce(x, 0, i, s, reduce, include_self=include_self),
        _rand(4, 3, seed=13, low=low),
        idx,
        _rand(5, 3, seed=14, low=low),
    )
    idx = np.random.default_rng(15).integers(0, 6, (2, 4))
    same_as_torch(
        lambda m, x, i, s: x.scatter_reduce(1, i, s, reduce, include_self=include_self),
        _rand(2, 6, seed=16, low=low),
        idx,
        _rand(2, 4, seed=17, low=low),
    )


@pytest.mark.parametrize("reduce", ["amax", "amin"])
def test_scatter_reduce_ties_share_the_gradient(reduce):
    x = np.array([[1.0, 2.0, 3.0]])
    src = np.array([[1.0, 3.0, 1.0, 3.0]])
    idx = np.array([[0, 2, 0, 2]])
    same_as_torch(
        lambda m, x, i, s: m.scatter_reduce(x, 1, i, s, reduce), x, idx, src, check_fd=False
    )


def test_scatter_reduce_integers():
    torch = pytest.importorskip("torch")
    x = np.arange(6).reshape(2, 3)
    idx = np.array([[0, 0, 2], [1, 1, 1]])
    src = np.array([[5, -2, 7], [1, 4, 9]])
    for reduce in ("sum", "prod", "amax", "amin", "mean"):
        for inc in (True, False):
            g = gpucore.tensor(x).scatter_reduce(
                1, gpucore.tensor(idx), gpucore.tensor(src), reduce, include_self=inc
            )
            t = torch.tensor(x).scatter_reduce(
                1, torch.tensor(idx), torch.tensor(src), reduce, include_self=inc
            )
            np.testing.assert_array_equal(g.numpy(), t.numpy(), err_msg=f"{reduce} {inc}")


def test_index_add_copy_fill():
    idx = np.array([2, 0, 2])
    same_as_torch(lambda m, x, i, s: m.index_add(x, 0, i, s), _rand(4, 3), idx, _rand(3, 3))
    same_as_torch(lambda m, x, i, s: x.index_add(1, i, s, alpha=2.0), _rand(2, 4), idx, _rand(2, 3))
    uidx = np.array([3, 0])
    same_as_torch(lambda m, x, i, s: x.index_copy(0, i, s), _rand(4, 3), uidx, _rand(2, 3))
    same_as_torch(lambda m, x, i: x.index_fill(1, i, -1.5), _rand(2, 4), uidx)
    torch = pytest.importorskip("torch")
    g, t = gpucore.zeros(3, 2), torch.zeros(3, 2)
    g.index_add_(0, gpucore.tensor([1, 1]), gpucore.ones(2, 2))
    t.index_add_(0, torch.tensor([1, 1]), torch.ones(2, 2))
    np.testing.assert_array_equal(g.numpy(), t.numpy())


def test_errors_name_the_op():
    x = gpucore.zeros(3, 4)
    with pytest.raises(TypeError, match="scatter.*int64"):
        x.scatter(0, gpucore.tensor([[0.0]]), 1.0)
    with pytest.raises(IndexError, match="scatter_reduce.*out of range"):
        x.scatter_reduce(0, gpucore.tensor([[5]]), gpucore.ones(1, 1), "sum")
    with pytest.raises(ValueError, match="scatter_reduce.*reduce"):
        x.scatter_reduce(0, gpucore.tensor([[0]]), gpucore.ones(1, 1), "max")
    with pytest.raises(ValueError, match="scatter.*dims"):
        x.scatter(0, gpucore.tensor([0]), gpucore.ones(1))
    with pytest.raises(ValueError, match="index_add.*source shape"):
        x.index_add(0, gpucore.tensor([0]), gpucore.ones(1, 3))


def test_scatter_on_vulkan(vulkan):
    a = _rand(4, 100, seed=18).astype(np.float32)
    idx = np.random.default_rng(19).integers(0, 4, (4, 100))
    x = gpucore.tensor(a, device="vulkan")
    out = x.scatter_reduce(0, gpucore.tensor(idx), x, "sum")
    want = a.copy()
    np.add.at(want, (idx, np.arange(100)), a)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-6)


def test_strided_inputs_and_second_derivatives():
    idx = np.random.default_rng(20).integers(0, 3, (4, 3))
    same_as_torch(
        lambda m, x, i, s: x.t().scatter_reduce(0, i, s.t(), "sum"), _rand(5, 3), idx, _rand(3, 4)
    )
    x = gpucore.tensor(_rand(3, 5, seed=21), requires_grad=True)
    s = gpucore.tensor(_rand(4, 5, seed=22), requires_grad=True)
    i = gpucore.tensor(np.random.default_rng(23).integers(0, 3, (4, 5)))
    for reduce in ("sum", "mean", "prod"):
        assert gpucore.autograd.gradgradcheck(
            lambda x, s, r=reduce: x.scatter_reduce(0, i, s, r) ** 2, (x, s)
        )


def test_take_along_dim_matches_torch():
    idx = np.random.default_rng(24).integers(0, 4, (3, 2))
    same_as_torch(lambda m, x, i: m.take_along_dim(x, i, 1), _rand(3, 4, seed=25), idx)
    same_as_torch(lambda m, x, i: x.take_along_dim(i, dim=1), _rand(1, 4, seed=26), idx)
    same_as_torch(lambda m, x, i: m.take_along_dim(x, i), _rand(3, 4, seed=27), np.array([11, 0]))
    sorted_idx = np.argsort(_rand(3, 4, seed=28), axis=1)
    same_as_torch(lambda m, x, i: m.take_along_dim(x, i, dim=1), _rand(3, 4, seed=28), sorted_idx)


def test_prod_gradients_are_exact_where_factors_are_zero():
    # one zero in a position: it gets the product of the others, the others 0; two zeros: all 0
    x = np.array([[2.0, 0.0, 3.0], [1.0, 4.0, 0.0]])
    src = np.array([[0.0, 5.0], [2.0, 0.0]])
    idx = np.array([[0, 0], [1, 2]])
    for inc in (True, False):
        same_as_torch(
            lambda m, x, i, s, inc=inc: m.scatter_reduce(x, 1, i, s, "prod", include_self=inc),
            x,
            idx,
            src,
        )
