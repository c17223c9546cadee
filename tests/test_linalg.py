"""gpucore.linalg (and the top-level det, logdet, slogdet, inverse, pinverse, cholesky,
matrix_exp, qr, svd) against PyTorch: values, batching, gradients (PyTorch's and gradcheck's,
through gauge-invariant functions for the decompositions), errors; numpy float64 otherwise."""

import math

import numpy as np
import pytest
from torch_compare import same_as_torch

import gpucore
from gpucore.autograd import gradcheck


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape)


def _well(*shape, seed=0):
    return _rand(*shape, seed=seed) + 3 * np.eye(shape[-1])


def _spd(*shape, seed=0):
    a = _rand(*shape, seed=seed)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


A, B = _well(2, 4, 4, seed=1), _rand(2, 4, 3, seed=2)
M = _rand(5, 3, seed=3)


def test_inverse_solve_det_as_torch():
    same_as_torch(lambda m, a: m.linalg.inv(a), A)
    same_as_torch(lambda m, a: m.inverse(a), A[0])
    same_as_torch(lambda m, a, b: m.linalg.solve(a, b), A, B)
    same_as_torch(lambda m, a, b: m.linalg.solve(a, b), A, B[..., 0])  # a batch of vectors
    same_as_torch(lambda m, a, b: m.linalg.solve(a, b), A[0], B)  # batch broadcast
    same_as_torch(lambda m, a, b: m.linalg.solve(a, b, left=False), A, np.swapaxes(B, 1, 2))
    same_as_torch(lambda m, a: m.linalg.det(a), A)
    same_as_torch(lambda m, a: a.det(), A[1] - 4 * np.eye(4))
    same_as_torch(lambda m, a: m.linalg.slogdet(a)[1], A - 4 * np.eye(4))
    same_as_torch(lambda m, a: m.slogdet(a), A - 4 * np.eye(4), grad=False)
    same_as_torch(lambda m, a: m.logdet(a), A, check_fd=True)
    np.testing.assert_allclose(gpucore.linalg.inv(gpucore.tensor(A)).numpy(), np.linalg.inv(A))
    with pytest.raises(gpucore.linalg.LinAlgError, match="inv"):
        gpucore.linalg.inv(gpucore.zeros(3, 3))
    with pytest.raises(ValueError, match="square"):
        gpucore.linalg.det(gpucore.zeros(3, 2))


def test_cholesky_eigh_as_torch_through_symmetrization():
    s = _spd(2, 4, 4, seed=4)
    same_as_torch(lambda m, a: m.linalg.cholesky(a + a.mT), s)
    same_as_torch(lambda m, a: m.cholesky(a + a.mT, upper=True), s[0])
    same_as_torch(lambda m, a: m.linalg.eigvalsh(a + a.mT), s)
    # eigenvectors up to sign: their squares
    same_as_torch(lambda m, a: m.linalg.eigh(a + a.mT)[1] ** 2, s)
    with pytest.raises(gpucore.linalg.LinAlgError, match="cholesky"):
        gpucore.linalg.cholesky(-gpucore.eye(3))


def test_qr_svd_as_torch_gauge_invariant():
    same_as_torch(lambda m, a: m.linalg.qr(a)[1].abs(), M)
    same_as_torch(lambda m, a: (lambda q, r: q @ r)(*m.linalg.qr(a)), M)
    same_as_torch(lambda m, a: m.linalg.svdvals(a), M)
    same_as_torch(lambda m, a: m.linalg.svd(a, full_matrices=False)[0] ** 2, M)
    same_as_torch(lambda m, a: m.linalg.svd(a, full_matrices=False)[2] ** 2, M.T.copy())
    same_as_torch(lambda m, a: m.svd(a)[2] ** 2, M)  # torch.svd returns V
    q, r = gpucore.linalg.qr(gpucore.tensor(M), mode="complete")
    assert tuple(q.shape) == (5, 5) and tuple(r.shape) == (5, 3)
    np.testing.assert_allclose((q @ r).numpy(), M, atol=1e-12)


def test_pinv_rank_matrix_exp_as_torch():
    same_as_torch(lambda m, a: m.linalg.pinv(a), M)
    same_as_torch(lambda m, a: m.pinverse(a), M.T.copy())
    low = M @ M.T  # rank 3 of 5
    same_as_torch(lambda m, a: m.linalg.pinv(a, hermitian=False), low, grad=False)
    same_as_torch(lambda m, a: m.linalg.matrix_rank(a), low, grad=False)
    same_as_torch(lambda m, a: m.linalg.matrix_rank(a, atol=1.0, rtol=0.0), low, grad=False)
    same_as_torch(lambda m, a: m.matrix_exp(a), A * 0.7)
    same_as_torch(lambda m, a: m.linalg.matrix_exp(a), _rand(3, 3, seed=5) * 6)
    x = np.array([[0.0, -math.pi], [math.pi, 0.0]])  # a rotation by pi: -I
    np.testing.assert_allclose(
        gpucore.matrix_exp(gpucore.tensor(x)).numpy(), -np.eye(2), atol=1e-12
    )


@pytest.mark.parametrize("ord", ["fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf])
def test_matrix_norm_as_torch(ord):
    same_as_torch(lambda m, a: m.linalg.matrix_norm(a, ord), A)
    same_as_torch(lambda m, a: m.linalg.matrix_norm(a, ord, dim=(2, 0), keepdim=True), A)
    same_as_torch(lambda m, a: m.linalg.norm(a, ord), M)


@pytest.mark.parametrize("ord", [2, 1, 0, 3.5, -1, math.inf, -math.inf])
def test_vector_norm_as_torch(ord):
    x = _rand(3, 4, seed=6)
    same_as_torch(lambda m, a: m.linalg.vector_norm(a, ord), x, check_fd=ord != 0)
    same_as_torch(lambda m, a: m.linalg.vector_norm(a, ord, dim=1, keepdim=True), x)
    same_as_torch(lambda m, a: m.linalg.norm(a, ord, dim=0), x)
    z = np.zeros((2, 3))  # gradient 0 at 0 (not NaN)
    if ord > 0:
        same_as_torch(lambda m, a: m.linalg.vector_norm(a, ord), z, check_fd=False)


def test_multi_dot_cross_as_torch():
    a, b, c = _rand(3, seed=7), _rand(3, 4, seed=8), _rand(4, seed=9)
    same_as_torch(lambda m, a, b, c: m.linalg.multi_dot([a, b, c]), a, b, c)
    same_as_torch(lambda m, b: m.linalg.multi_dot([b, b.mT, b]), b)
    x, y = _rand(2, 3, seed=10), _rand(2, 3, seed=11)
    same_as_torch(lambda m, x, y: m.linalg.cross(x, y), x, y)
    np.testing.assert_allclose(
        gpucore.linalg.cross(gpucore.tensor(x), gpucore.tensor(y)).numpy(), np.cross(x, y)
    )


def test_gradcheck_float64_and_vulkan_through_the_host():
    a = gpucore.tensor(_well(3, 3, seed=12), requires_grad=True)
    assert gradcheck(lambda a: gpucore.linalg.inv(a) @ gpucore.linalg.cholesky(a @ a.mT), [a])
    assert gradcheck(lambda a: gpucore.linalg.svdvals(a) + gpucore.linalg.det(a), [a])
    if gpucore.dispatch.vulkan_backend(allow_cpu=True) is None:
        pytest.skip("no Vulkan device")
    v = gpucore.tensor(_well(3, 3, seed=12).astype(np.float32), device="vulkan")
    got = gpucore.linalg.inv(v)  # computed on the host, as the other host-kernel ops (sort)
    np.testing.assert_allclose(got.cpu().numpy(), np.linalg.inv(v.cpu().numpy()), rtol=1e-5)
