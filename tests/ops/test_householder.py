"""linalg.householder_product and orgqr (gpucore/ops/householder.py) against PyTorch (values and
gradients with respect to A and tau), a float64 numpy product of the reflectors, finite
differences, batches, the Vulkan device and errors."""

import numpy as np
import pytest
from torch_compare import same_as_torch

import gpucore
from gpucore.autograd import gradcheck


def _geqrf(a: np.ndarray):
    """A and tau as LAPACK's geqrf stores them, from numpy's raw QR (row-major transposed)."""
    h, tau = np.linalg.qr(a, mode="raw")
    return h.T.copy(), tau


def _np_product(a: np.ndarray, tau: np.ndarray) -> np.ndarray:
    m, n = a.shape
    q = np.eye(m)
    for i in range(len(tau)):
        v = np.zeros(m)
        v[i] = 1.0
        v[i + 1 :] = a[i + 1 :, i]
        q = q @ (np.eye(m) - tau[i] * np.outer(v, v))
    return q[:, :n]


@pytest.mark.parametrize("m,n,k", [(5, 3, 3), (4, 4, 4), (6, 4, 2), (3, 3, 0)])
def test_householder_product_numpy_and_qr(m, n, k):
    a = np.random.default_rng(m * 10 + n).uniform(-1, 1, (m, n))
    h, tau = _geqrf(a)
    tau = tau[:k]
    got = gpucore.linalg.householder_product(gpucore.tensor(h), gpucore.tensor(tau)).numpy()
    np.testing.assert_allclose(got, _np_product(h, tau), atol=1e-12)
    if k == n:  # the Q of the QR factorization
        np.testing.assert_allclose(np.abs(got), np.abs(np.linalg.qr(a)[0]), atol=1e-12)


def test_householder_product_as_torch_with_gradients_and_batches():
    rng = np.random.default_rng(3)
    a = rng.uniform(-1, 1, (2, 5, 3))
    tau = rng.uniform(0.5, 1.5, (2, 3))
    same_as_torch(lambda m, a, t: m.linalg.householder_product(a, t), a, tau)
    same_as_torch(lambda m, a, t: m.linalg.householder_product(a, t), a[0], tau[0, :2])
    same_as_torch(lambda m, a, t: m.orgqr(a, t), a[1], tau[1], check_fd=False)
    same_as_torch(lambda m, a, t: a.orgqr(t), a[1], tau[1], check_fd=False)


def test_householder_product_float32_vulkan_gradcheck_and_errors(vulkan):
    rng = np.random.default_rng(4)
    a, tau = rng.uniform(-1, 1, (4, 3)), rng.uniform(0.5, 1.5, 3)
    got = gpucore.linalg.householder_product(
        gpucore.tensor(a.astype(np.float32), device="vulkan"),
        gpucore.tensor(tau.astype(np.float32), device="vulkan"),
    )
    np.testing.assert_allclose(got.cpu().numpy(), _np_product(a, tau), atol=1e-5)
    ta = gpucore.tensor(a, requires_grad=True)
    tt = gpucore.tensor(tau, requires_grad=True)
    assert gradcheck(gpucore.linalg.householder_product, (ta, tt))
    with pytest.raises(gpucore.ShapeError, match="tau.shape"):
        gpucore.linalg.householder_product(gpucore.zeros(3, 4), gpucore.zeros(3))
    with pytest.raises(gpucore.ShapeError, match="tau.shape"):
        gpucore.linalg.householder_product(gpucore.zeros(4, 3), gpucore.zeros(4))
    with pytest.raises(gpucore.ShapeError, match="batch"):
        gpucore.linalg.householder_product(gpucore.zeros(2, 4, 3), gpucore.zeros(3, 3))
    with pytest.raises(gpucore.DTypeError, match="floating"):
        gpucore.linalg.householder_product(gpucore.zeros(4, 3), gpucore.zeros(3).double())


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4), (0, 3)])
def test_geqrf_as_torch_and_reconstruction(shape):
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(sum(shape)).uniform(-1, 1, shape)
    h, tau = gpucore.geqrf(gpucore.tensor(a))
    th, ttau = torch.geqrf(torch.tensor(a))
    np.testing.assert_allclose(h.numpy(), th.numpy(), atol=1e-12)
    np.testing.assert_allclose(tau.numpy(), ttau.numpy(), atol=1e-12)
    if a.size:
        n = min(shape[-2:])
        q = gpucore.linalg.householder_product(h[..., :n], tau).numpy()
        np.testing.assert_allclose(q @ np.triu(h.numpy()[..., :n, :]), a, atol=1e-12)
    assert tuple(gpucore.tensor(a).geqrf().tau.shape) == tuple(ttau.shape)


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("transpose", [True, False])
def test_ormqr_as_torch_with_gradients(left, transpose):
    rng = np.random.default_rng(5)
    h, tau = _geqrf(rng.uniform(-1, 1, (5, 3)))
    other = rng.uniform(-1, 1, (5, 2) if left else (2, 5))
    same_as_torch(lambda m, a, t, c: m.ormqr(a, t, c, left, transpose), h, tau, other)
    q = _np_product(np.concatenate([h, np.zeros((5, 2))], 1), tau)
    q = q.T if transpose else q
    got = gpucore.ormqr(
        gpucore.tensor(h), gpucore.tensor(tau), gpucore.tensor(other), left, transpose
    )
    np.testing.assert_allclose(got.numpy(), q @ other if left else other @ q, atol=1e-12)


def test_geqrf_ormqr_errors():
    with pytest.raises(ValueError, match="geqrf"):
        gpucore.geqrf(gpucore.zeros(3))
    with pytest.raises(gpucore.ShapeError, match="ormqr"):
        gpucore.ormqr(gpucore.zeros(4, 3), gpucore.zeros(3), gpucore.zeros(5, 2))
