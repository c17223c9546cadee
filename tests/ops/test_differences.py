"""torch.gradient and renorm (gpucore/ops/differences.py) against PyTorch and numpy: spacings,
coordinates, edge orders, dims, integer inputs, gradients, errors."""

import numpy as np
import pytest
from torch_compare import same_as_torch

import gpucore as gc

RNG = np.random.default_rng(0)
F = RNG.uniform(-2, 2, (4, 5, 6))


@pytest.mark.parametrize("edge_order", [1, 2])
def test_gradient_uniform_as_torch_and_numpy(edge_order):
    for kw in ({}, {"spacing": 2.5}, {"dim": 1}, {"dim": (0, 2), "spacing": [0.5, 3.0]}):
        for k in range(len(gc.gradient(gc.tensor(F), edge_order=edge_order, **kw))):
            same_as_torch(lambda m, f, k=k, kw=kw: m.gradient(f, edge_order=edge_order, **kw)[k], F)
    want = np.gradient(F, 0.5, axis=1, edge_order=edge_order)
    got = gc.gradient(gc.tensor(F), spacing=0.5, dim=1, edge_order=edge_order)[0]
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("edge_order", [1, 2])
def test_gradient_coordinates_as_torch_and_numpy(edge_order):
    x0, x2 = np.array([0.0, 0.5, 1.5, 3.0]), np.array([0.0, 1, 1.5, 3, 3.2, 5])
    for k in range(2):
        same_as_torch(
            lambda m, f, k=k: m.gradient(
                f, spacing=[m.tensor(x0), m.tensor(x2)], dim=[0, 2], edge_order=edge_order
            )[k],
            F,
        )
    want = np.gradient(F, x2, axis=2, edge_order=edge_order)
    got = gc.gradient(gc.tensor(F), spacing=[gc.tensor(x2)], dim=2, edge_order=edge_order)[0]
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)


def test_gradient_integers_and_errors():
    torch = pytest.importorskip("torch")
    g, t = gc.gradient(gc.tensor([1, 4, 9, 16])), torch.gradient(torch.tensor([1, 4, 9, 16]))
    assert g[0].dtype is gc.float32 and g[0].tolist() == t[0].tolist()
    with pytest.raises(gc.ShapeError, match="edge_order"):
        gc.gradient(gc.tensor([1.0, 4.0]), edge_order=2)
    with pytest.raises(ValueError, match="spacing"):
        gc.gradient(gc.tensor(F), spacing=[1.0, 2.0])
    with pytest.raises(ValueError, match="edge_order"):
        gc.gradient(gc.tensor(F), edge_order=3)


@pytest.mark.parametrize("p", [1, 2, 3.5])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_renorm_as_torch(p, dim):
    same_as_torch(lambda m, x: m.renorm(x, p, dim, 2.0), F)
    same_as_torch(lambda m, x: x.renorm(p, dim, 0.5), F[0])
    x = gc.tensor(F)
    x.renorm_(p, dim, 2.0)
    np.testing.assert_allclose(x.numpy(), gc.renorm(gc.tensor(F), p, dim, 2.0).numpy())


def test_renorm_errors():
    with pytest.raises(ValueError, match="renorm"):
        gc.renorm(gc.tensor(F), -1, 0, 1.0)
    with pytest.raises(ValueError, match="renorm"):
        gc.renorm(gc.tensor(F), 2, 0, -1.0)
    with pytest.raises(gc.DTypeError, match="renorm"):
        gc.renorm(gc.tensor([[1, 2]]), 2, 0, 1.0)
