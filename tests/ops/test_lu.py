"""The LU factorization (gpucore/ops/lu.py): linalg.lu_factor / lu_factor_ex / lu / lu_solve and
torch.lu / lu_unpack / lu_solve against PyTorch (factors, pivots, solves and gradients, square,
tall, wide and batched), the reconstruction P L U and numpy's solve in float64, finite
differences, zero pivots (info), the Vulkan device and errors."""

import numpy as np
import pytest
from torch_compare import same_as_torch

import gpucore
from gpucore.autograd import gradcheck

SHAPES = [(4, 4), (5, 3), (3, 5), (2, 4, 4), (2, 3, 5)]


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape)


@pytest.mark.parametrize("shape", SHAPES)
def test_lu_factor_as_torch_with_gradients(shape):
    a = _rand(*shape, seed=sum(shape))
    same_as_torch(lambda m, x: m.linalg.lu_factor(x).LU, a)
    same_as_torch(lambda m, x: m.linalg.lu_factor(x).pivots, a, grad=False)
    same_as_torch(lambda m, x: m.linalg.lu(x).L, a, check_fd=False)
    same_as_torch(lambda m, x: m.linalg.lu(x).U, a, check_fd=False)
    same_as_torch(lambda m, x: m.linalg.lu(x).P, a, grad=False)
    p, lo, up = gpucore.linalg.lu(gpucore.tensor(a))
    np.testing.assert_allclose((p @ lo @ up).numpy(), a, atol=1e-12)


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [True, False])
def test_lu_solve_as_torch_and_numpy(left, adjoint):
    a, b = _rand(2, 4, 4, seed=1) + 2 * np.eye(4), _rand(2, 4, 3, seed=2)
    b = b if left else np.swapaxes(b, -1, -2)

    def f(m, a, b):
        lu, piv = m.linalg.lu_factor(a)
        return m.linalg.lu_solve(lu, piv, b, left=left, adjoint=adjoint)

    x = same_as_torch(f, a, b)[0].detach().numpy()
    at = np.swapaxes(a, -1, -2) if adjoint else a
    ref = (
        np.linalg.solve(at, b)
        if left
        else np.swapaxes(np.linalg.solve(np.swapaxes(at, -1, -2), np.swapaxes(b, -1, -2)), -1, -2)
    )
    np.testing.assert_allclose(x, ref, atol=1e-12)


@pytest.mark.filterwarnings("ignore:torch.lu")
def test_old_lu_names_as_torch():
    a, b = _rand(3, 3, seed=3) + 2 * np.eye(3), _rand(3, 2, seed=4)
    same_as_torch(lambda m, x: m.lu(x)[0], a)
    same_as_torch(lambda m, x: x.lu(get_infos=True)[2], a, grad=False)
    same_as_torch(lambda m, x, y: m.lu_solve(y, *m.lu(x)), a, b)
    same_as_torch(lambda m, x, y: y.lu_solve(*x.lu()), a, b, check_fd=False)
    same_as_torch(lambda m, x: m.lu_unpack(*m.lu(x))[1], a)
    same_as_torch(lambda m, x: m.lu_unpack(*m.lu(x), unpack_data=False)[0], a, grad=False)


def test_lu_gradcheck_and_zero_pivot():
    a = gpucore.tensor(_rand(4, 3, seed=5), requires_grad=True)
    assert gradcheck(lambda x: gpucore.linalg.lu_factor(x).LU, (a,))
    z = np.zeros((3, 3))
    z[0, 1] = 1.0
    lu, piv, info = gpucore.linalg.lu_factor_ex(gpucore.tensor(z))
    assert int(info) == 1
    np.testing.assert_array_equal(piv.numpy(), [1, 2, 3])
    with pytest.raises(gpucore.linalg.LinAlgError, match="lu_factor"):
        gpucore.linalg.lu_factor(gpucore.tensor(z))
    with pytest.raises(gpucore.linalg.LinAlgError, match="lu_factor_ex"):
        gpucore.linalg.lu_factor_ex(gpucore.tensor(z), check_errors=True)
    assert int(gpucore.lu(gpucore.tensor(z), get_infos=True)[2]) == 1


def test_lu_errors():
    with pytest.raises(NotImplementedError, match="pivoting"):
        gpucore.linalg.lu_factor(gpucore.eye(3), pivot=False)
    with pytest.raises(ValueError, match="matrix"):
        gpucore.linalg.lu_factor(gpucore.zeros(3))
    lu, piv = gpucore.linalg.lu_factor(gpucore.eye(3))
    with pytest.raises(gpucore.ShapeError, match="do not fit"):
        gpucore.linalg.lu_solve(lu, piv, gpucore.zeros(4, 1))
    with pytest.raises(gpucore.ShapeError, match="LU_pivots"):
        gpucore.lu_unpack(lu, piv[:2])


def test_lu_on_vulkan(vulkan):
    a = (_rand(4, 4, seed=6) + 2 * np.eye(4)).astype(np.float32)
    b = _rand(4, 2, seed=7).astype(np.float32)
    lu, piv = gpucore.linalg.lu_factor(gpucore.tensor(a, device="vulkan"))
    x = gpucore.linalg.lu_solve(lu, piv, gpucore.tensor(b, device="vulkan"))
    np.testing.assert_allclose(x.cpu().numpy(), np.linalg.solve(a, b), rtol=1e-4, atol=1e-5)
