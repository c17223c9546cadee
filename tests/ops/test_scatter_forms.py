"""put / put_, index_reduce(_), select_scatter, slice_scatter, diagonal_scatter, as_strided,
as_strided_scatter and unravel_index (gpucore/ops/scatter_forms.py) against PyTorch: values,
gradients (and gradcheck), errors, device tensors."""

import warnings

import numpy as np
import pytest
from torch_compare import same_as_torch

import gpucore as gc

RNG = np.random.default_rng(0)
X = RNG.uniform(-2, 2, (3, 4))


def test_put_as_torch():
    idx = np.array([0, -1, 5, 7])
    src = RNG.uniform(-1, 1, (2, 2))
    same_as_torch(lambda m, x, s: m.put(x, m.tensor(idx), s), X, src)
    dup = np.array([1, 1, 2, 1])
    same_as_torch(lambda m, x, s: m.put(x, m.tensor(dup), s, accumulate=True), X, src)
    x = gc.tensor(X)
    x.put_(gc.tensor(dup), gc.tensor(src), True)
    np.testing.assert_allclose(
        x.numpy().reshape(-1)[[1, 2]],
        X.reshape(-1)[[1, 2]] + [src.reshape(-1)[[0, 1, 3]].sum(), src[1, 0]],
    )


def test_put_errors():
    x = gc.zeros(2, 3)
    with pytest.raises(IndexError, match="put"):
        gc.put(x, gc.tensor([0, 6]), gc.tensor([1.0, 2.0]))
    with pytest.raises(IndexError, match="put"):
        gc.put(x, gc.tensor([0, 1]), gc.tensor([1.0, 2.0, 3.0]))
    with pytest.raises(gc.DTypeError, match="put"):
        gc.put(x, gc.tensor([0, 1]), gc.tensor([1.0, 2.0], dtype=gc.float64))


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce_as_torch(reduce, include_self):
    pytest.importorskip("torch")
    idx = np.array([0, 2, 0, 1, 2])
    src = RNG.uniform(0.5, 2, (3, 5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyTorch: index_reduce is in beta
        same_as_torch(
            lambda m, x, s: m.index_reduce(
                x, 1, m.tensor(idx), s, reduce, include_self=include_self
            ),
            X + 3,
            src,
        )
    x = gc.tensor(X)
    x.index_reduce_(1, gc.tensor(idx[:3]), gc.tensor(src[:, :3]), reduce, include_self=include_self)
    want = gc.index_reduce(gc.tensor(X), 1, gc.tensor(idx[:3]), gc.tensor(src[:, :3]), reduce,
                           include_self=include_self)  # fmt: skip
    np.testing.assert_array_equal(x.numpy(), want.numpy())


def test_scatters_as_torch():
    same_as_torch(lambda m, x, s: m.select_scatter(x, s, 0, 1), X, RNG.uniform(-1, 1, 4))
    same_as_torch(lambda m, x, s: m.select_scatter(x, s, 1, -1), X, RNG.uniform(-1, 1, 3))
    same_as_torch(lambda m, x, s: m.slice_scatter(x, s, 1, 1, 4, 2), X, RNG.uniform(-1, 1, (3, 2)))
    same_as_torch(lambda m, x, s: m.slice_scatter(x, s), X, RNG.uniform(-1, 1, (3, 4)))
    same_as_torch(lambda m, x, s: m.diagonal_scatter(x, s), X, RNG.uniform(-1, 1, 3))
    same_as_torch(lambda m, x, s: m.diagonal_scatter(x, s, 1), X, RNG.uniform(-1, 1, 3))
    x3 = RNG.uniform(-1, 1, (2, 3, 3))
    same_as_torch(lambda m, x, s: m.diagonal_scatter(x, s, 0, 1, 2), x3, RNG.uniform(-1, 1, (2, 3)))
    with pytest.raises(gc.ShapeError, match="select_scatter"):
        gc.select_scatter(gc.tensor(X), gc.rand(3), 0, 1)
    with pytest.raises(gc.ShapeError, match="diagonal_scatter"):
        gc.diagonal_scatter(gc.tensor(X), gc.rand(4))


def test_as_strided_as_torch():
    x = RNG.uniform(-1, 1, (6,))
    same_as_torch(lambda m, x: m.as_strided(x, (2, 2), (1, 2), 1), x)
    same_as_torch(lambda m, x: m.as_strided(x, (3, 3), (1, 1)), x)  # overlapping: sums
    same_as_torch(lambda m, x: x.as_strided((2, 3), (3, 1)), x)
    src = RNG.uniform(-1, 1, (2, 2))
    # PyTorch 2.13's gradient for as_strided_scatter's input is the complement of the right one
    # (it passes the overwritten positions' gradient): values vs PyTorch, src's gradient vs
    # PyTorch, input's by finite differences
    same_as_torch(lambda m, x, s: m.as_strided_scatter(x, s, (2, 2), (1, 2), 1), x, src,
                  grad=False)  # fmt: skip
    same_as_torch(lambda m, s: m.as_strided_scatter(m.tensor(x), s, (2, 2), (1, 2), 1), src)
    gx = gc.tensor(x, requires_grad=True)
    assert gc.autograd.gradcheck(
        lambda a: gc.as_strided_scatter(a, gc.tensor(src), (2, 2), (1, 2), 1), (gx,)
    )
    with pytest.raises(gc.ShapeError, match="out of bounds"):
        gc.as_strided(gc.rand(6), (2, 2), (3, 3))
    with pytest.raises(gc.ShapeError, match="contiguous"):
        gc.as_strided(gc.rand(3, 4).t(), (2,), (1,))


def test_unravel_index_as_torch():
    torch = pytest.importorskip("torch")
    for idx, shape in (([-1, 3, 6, 0], (2, 3)), ([[4, 7], [0, 59]], (3, 4, 5)), (4, 5)):
        g = gc.unravel_index(gc.tensor(idx), shape)
        t = torch.unravel_index(torch.tensor(idx), shape)
        assert len(g) == len(t)
        for a, b in zip(g, t):
            assert a.dtype is gc.int64
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    with pytest.raises(TypeError, match="unravel_index"):
        gc.unravel_index(gc.tensor([1.0]), (2, 3))


@pytest.mark.parametrize("shape", [(2, 0), (0,), (3, 0, 2), (0, 0)])
@pytest.mark.parametrize("idx_shape", [(0,), (2, 0)])
def test_unravel_index_into_an_empty_shape_as_torch(shape, idx_shape):
    # no indices: empty coordinates (PyTorch's); some indices: an error naming the function
    torch = pytest.importorskip("torch")
    g = gc.unravel_index(gc.zeros(idx_shape, dtype=gc.int64), shape)
    t = torch.unravel_index(torch.zeros(idx_shape, dtype=torch.int64), shape)
    assert len(g) == len(t) == len(shape)
    for a, b in zip(g, t):
        assert a.dtype is gc.int64 and tuple(a.shape) == tuple(b.shape)
    with pytest.raises(RuntimeError):
        torch.unravel_index(torch.tensor([0]), shape)
    with pytest.raises(ValueError, match="unravel_index"):
        gc.unravel_index(gc.tensor([0]), shape)


def test_on_vulkan_the_cpu_answers(vulkan):
    x = RNG.uniform(-1, 1, (3, 4)).astype(np.float32)
    s = RNG.uniform(-1, 1, 4).astype(np.float32)
    with gc.device_policy("cpu"):
        want = gc.select_scatter(gc.tensor(x), gc.tensor(s), 0, 2).numpy()
        p = gc.put(gc.tensor(x), gc.tensor([0, 5]), gc.tensor(s[:2])).numpy()
    got = gc.select_scatter(gc.tensor(x, device="vulkan"), gc.tensor(s, device="vulkan"), 0, 2)
    np.testing.assert_array_equal(got.numpy(), want)
    got = gc.put(
        gc.tensor(x, device="vulkan"), gc.tensor([0, 5]), gc.tensor(s[:2], device="vulkan")
    )
    np.testing.assert_array_equal(got.numpy(), p)
