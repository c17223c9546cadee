"""svd_lowrank and pca_lowrank (gpucore/ops/lowrank.py): singular values and subspaces (not
signs) against numpy's float64 SVD and PyTorch's, exact recovery of low-rank matrices, the
centred PCA, M, batches, wide matrices, gradients against PyTorch's through sign-free
functions, repeatability with gpucore.manual_seed, the Vulkan device and errors."""

import numpy as np
import pytest

import gpucore


def _low_rank(m, n, r, seed=0, batch=()):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(batch + (m, r)) @ rng.standard_normal(batch + (r, n))


def _proj(v: np.ndarray) -> np.ndarray:
    """The orthogonal projector onto the column space of v (sign and basis free)."""
    return v @ np.swapaxes(v, -1, -2)


@pytest.mark.parametrize("m,n", [(30, 12), (12, 30)])
def test_svd_lowrank_recovers_low_rank_matrices(m, n):
    a = _low_rank(m, n, 4, seed=m)
    u, s, v = gpucore.svd_lowrank(gpucore.tensor(a), q=6, niter=2)
    assert tuple(u.shape) == (m, 6) and tuple(s.shape) == (6,) and tuple(v.shape) == (n, 6)
    ref_u, ref_s, ref_vh = np.linalg.svd(a, full_matrices=False)
    np.testing.assert_allclose(s.numpy()[:4], ref_s[:4], rtol=1e-10)
    np.testing.assert_allclose(s.numpy()[4:], 0, atol=1e-10)
    u4, v4 = u.numpy()[:, :4], v.numpy()[:, :4]
    np.testing.assert_allclose(_proj(u4), _proj(ref_u[:, :4]), atol=1e-10)
    np.testing.assert_allclose(_proj(v4), _proj(ref_vh[:4].T), atol=1e-10)
    np.testing.assert_allclose(u.numpy() @ np.diag(s.numpy()) @ v.numpy().T, a, atol=1e-10)
    np.testing.assert_allclose(u.numpy().T @ u.numpy(), np.eye(6), atol=1e-12)


def test_svd_lowrank_with_mean_and_batches():
    a = _low_rank(20, 10, 3, seed=1, batch=(2,))
    mean = np.random.default_rng(2).standard_normal((1, 10))
    u, s, v = gpucore.svd_lowrank(gpucore.tensor(a + mean), q=5, M=gpucore.tensor(mean))
    assert tuple(u.shape) == (2, 20, 5)
    ref = np.linalg.svd(a, compute_uv=False)
    np.testing.assert_allclose(s.numpy()[:, :3], ref[:, :3], rtol=1e-10)


def test_pca_lowrank_as_torch_and_numpy():
    torch = pytest.importorskip("torch")
    x = _low_rank(40, 8, 3, seed=4) + 5.0  # offset columns: centring matters
    u, s, v = gpucore.pca_lowrank(gpucore.tensor(x), q=3)
    tu, ts, tv = torch.pca_lowrank(torch.tensor(x), q=3)
    np.testing.assert_allclose(s.numpy(), ts.numpy(), rtol=1e-10)
    np.testing.assert_allclose(_proj(v.numpy()), _proj(tv.numpy()), atol=1e-10)
    xc = x - x.mean(0)
    ref_s = np.linalg.svd(xc, compute_uv=False)[:3]
    np.testing.assert_allclose(s.numpy(), ref_s, rtol=1e-10)
    # default q = min(6, m, n); center=False leaves the offset in
    assert tuple(gpucore.pca_lowrank(gpucore.tensor(x)).S.shape) == (6,)
    s_raw = gpucore.pca_lowrank(gpucore.tensor(x), q=4, center=False)[1].numpy()
    np.testing.assert_allclose(s_raw[0], np.linalg.svd(x, compute_uv=False)[0], rtol=1e-8)


def test_lowrank_gradients_as_torch():
    torch = pytest.importorskip("torch")
    a = _low_rank(15, 8, 5, seed=5) + 0.01 * np.random.default_rng(6).standard_normal((15, 8))
    ga, ta = gpucore.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    # sign-free functions of the result: the singular values and U diag(S) V^T
    u, s, v = gpucore.svd_lowrank(ga, q=5)
    tu, tsv, tv = torch.svd_lowrank(ta, q=5)
    w = np.linspace(-1, 1, 15 * 8).reshape(15, 8)
    (s.sum() + ((u * s) @ v.T * gpucore.tensor(w)).sum()).backward()
    (tsv.sum() + ((tu * tsv) @ tv.T * torch.tensor(w)).sum()).backward()
    np.testing.assert_allclose(ga.grad.numpy(), ta.grad.numpy(), rtol=1e-6, atol=1e-8)


def test_lowrank_repeatable_with_manual_seed_and_float32_vulkan(vulkan):
    a = _low_rank(16, 9, 3, seed=7)
    gpucore.manual_seed(11)
    u1 = gpucore.svd_lowrank(gpucore.tensor(a), q=4, niter=0)[0].numpy()
    gpucore.manual_seed(11)
    u2 = gpucore.svd_lowrank(gpucore.tensor(a), q=4, niter=0)[0].numpy()
    np.testing.assert_array_equal(u1, u2)
    s = gpucore.svd_lowrank(gpucore.tensor(a.astype(np.float32), device="vulkan"), q=4)[1]
    ref = np.linalg.svd(a, compute_uv=False)[:3]
    np.testing.assert_allclose(s.cpu().numpy()[:3], ref, rtol=1e-4)


def test_lowrank_errors():
    with pytest.raises(ValueError, match="q"):
        gpucore.pca_lowrank(gpucore.zeros(5, 3), q=4)
    with pytest.raises(ValueError, match="q"):
        gpucore.svd_lowrank(gpucore.zeros(5, 3), q=-1)
    # a q above min(m, n) gives min(m, n) components, as PyTorch
    assert tuple(gpucore.svd_lowrank(gpucore.ones(5, 3), q=7).S.shape) == (3,)
    with pytest.raises(ValueError, match="niter"):
        gpucore.svd_lowrank(gpucore.zeros(5, 3), q=2, niter=-1)
    with pytest.raises(gpucore.ShapeError, match="matrix"):
        gpucore.svd_lowrank(gpucore.zeros(5), q=1)
