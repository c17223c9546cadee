"""linalg.ldl_factor / ldl_factor_ex / ldl_solve (gpucore/ops/ldl.py): LD and the Bunch-Kaufman
pivots as PyTorch's and LAPACK's dsytrf (through scipy when installed), the reconstruction
P L D L^T P^T from the factors in float64 numpy, solves against numpy's, batches and
broadcasting, float32, singular matrices (info), the Vulkan device and errors."""

import numpy as np
import pytest

import gpucore
from gpucore.ops.ldl import _reconstruct


def _sym(n, seed, zero_diag=False, batch=()):
    a = np.random.default_rng(seed).standard_normal(batch + (n, n))
    a = a + np.swapaxes(a, -1, -2)
    if zero_diag:  # forces 2x2 pivots
        a = a * (1 - np.eye(n))
    return a


MATRICES = [
    (1, 0, False), (2, 1, True), (3, 2, False), (5, 3, True), (8, 4, False), (12, 5, True),
    (70, 6, False), (70, 7, True),  # past LAPACK's block size: sytrf runs blocked there
]  # fmt: skip


@pytest.mark.parametrize("n,seed,zero_diag", MATRICES)
def test_ldl_factor_reconstructs_and_solves(n, seed, zero_diag):
    a = _sym(n, seed, zero_diag)
    ld, piv = gpucore.linalg.ldl_factor(gpucore.tensor(a))
    assert piv.dtype is gpucore.int32 and ld.dtype is gpucore.float64
    assert not np.triu(ld.numpy(), 1).any()
    np.testing.assert_allclose(_reconstruct(ld.numpy(), piv.numpy()), a, atol=1e-9 * n)
    b = np.random.default_rng(seed + 100).standard_normal((n, 3))
    x = gpucore.linalg.ldl_solve(ld, piv, gpucore.tensor(b)).numpy()
    np.testing.assert_allclose(x, np.linalg.solve(a, b), rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("n,seed,zero_diag", MATRICES)
def test_ldl_as_torch(n, seed, zero_diag):
    torch = pytest.importorskip("torch")
    a = _sym(n, seed, zero_diag)
    ld, piv, info = gpucore.linalg.ldl_factor_ex(gpucore.tensor(a))
    tld, tpiv, tinfo = torch.linalg.ldl_factor_ex(torch.tensor(a))
    np.testing.assert_array_equal(piv.numpy(), tpiv.numpy())
    np.testing.assert_allclose(ld.numpy(), tld.numpy(), rtol=1e-9, atol=1e-9)
    assert int(info) == int(tinfo) == 0
    b = np.random.default_rng(seed).standard_normal((n, 2))
    x = gpucore.linalg.ldl_solve(ld, piv, gpucore.tensor(b))
    tx = torch.linalg.ldl_solve(tld, tpiv, torch.tensor(b))
    np.testing.assert_allclose(x.numpy(), tx.numpy(), rtol=1e-8, atol=1e-9)


@pytest.mark.parametrize("n,seed,zero_diag", MATRICES[:6])
def test_ldl_factor_as_lapack_dsytrf(n, seed, zero_diag):
    lapack = pytest.importorskip("scipy.linalg.lapack")
    a = _sym(n, seed, zero_diag)
    lu, ipiv, info = lapack.dsytrf(a, lower=1)
    ld, piv = gpucore.linalg.ldl_factor(gpucore.tensor(a))
    np.testing.assert_array_equal(piv.numpy(), ipiv)
    np.testing.assert_allclose(ld.numpy(), np.tril(lu), rtol=1e-10, atol=1e-12)


def test_ldl_batches_broadcast_and_float32():
    torch = pytest.importorskip("torch")
    a = _sym(4, 9, batch=(2, 3))
    ld, piv = gpucore.linalg.ldl_factor(gpucore.tensor(a), hermitian=True)
    tld, tpiv = torch.linalg.ldl_factor(torch.tensor(a), hermitian=True)
    assert tuple(ld.shape) == (2, 3, 4, 4) and tuple(piv.shape) == (2, 3, 4)
    np.testing.assert_array_equal(piv.numpy(), tpiv.numpy())
    np.testing.assert_allclose(ld.numpy(), tld.numpy(), rtol=1e-9, atol=1e-12)
    b = np.random.default_rng(10).standard_normal((4, 2))  # one right side for every matrix
    x = gpucore.linalg.ldl_solve(ld, piv, gpucore.tensor(b))
    np.testing.assert_allclose(x.numpy(), np.linalg.solve(a, b), rtol=1e-8, atol=1e-9)
    a32 = a[0, 0].astype(np.float32)
    ld32, piv32 = gpucore.linalg.ldl_factor(gpucore.tensor(a32))
    assert ld32.dtype is gpucore.float32
    np.testing.assert_allclose(_reconstruct(ld32.numpy(), piv32.numpy()), a32, atol=1e-5)


def test_ldl_singular_info_and_errors():
    torch = pytest.importorskip("torch")
    z = np.zeros((3, 3))
    z[2, 2] = 1.0
    ld, piv, info = gpucore.linalg.ldl_factor_ex(gpucore.tensor(z))
    _, tpiv, tinfo = torch.linalg.ldl_factor_ex(torch.tensor(z))
    assert int(info) == int(tinfo) == 1
    np.testing.assert_array_equal(piv.numpy(), tpiv.numpy())
    with pytest.raises(gpucore.linalg.LinAlgError, match="ldl_factor"):
        gpucore.linalg.ldl_factor(gpucore.tensor(z))
    with pytest.raises(gpucore.linalg.LinAlgError, match="ldl_factor_ex"):
        gpucore.linalg.ldl_factor_ex(gpucore.tensor(z), check_errors=True)
    with pytest.raises(ValueError, match="square"):
        gpucore.linalg.ldl_factor(gpucore.zeros(3, 2))
    a = gpucore.tensor(_sym(3, 11))
    ld, piv = gpucore.linalg.ldl_factor(a)
    with pytest.raises(gpucore.DTypeError, match="int32"):
        gpucore.linalg.ldl_solve(ld, piv.long(), gpucore.zeros(3, 1, dtype=gpucore.float64))
    with pytest.raises(gpucore.ShapeError, match="do not fit"):
        gpucore.linalg.ldl_solve(ld, piv, gpucore.zeros(4, 1, dtype=gpucore.float64))
    with pytest.raises(ValueError, match="pivots"):
        bad = gpucore.tensor(np.array([0, 1, 2], np.int32))
        gpucore.linalg.ldl_solve(ld, bad, gpucore.zeros(3, 1, dtype=gpucore.float64))


def test_ldl_on_vulkan(vulkan):
    a = _sym(5, 12, zero_diag=True).astype(np.float32)
    ld, piv = gpucore.linalg.ldl_factor(gpucore.tensor(a, device="vulkan"))
    np.testing.assert_allclose(_reconstruct(ld.cpu().numpy(), piv.cpu().numpy()), a, atol=1e-5)
    b = np.ones((5, 1), np.float32)
    x = gpucore.linalg.ldl_solve(ld, piv, gpucore.tensor(b, device="vulkan"))
    np.testing.assert_allclose(x.cpu().numpy(), np.linalg.solve(a, b), rtol=1e-4, atol=1e-4)
