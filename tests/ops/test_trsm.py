"""The triangular solve op (gpucore/ops/trsm.py) behind linalg.solve_triangular,
triangular_solve and cholesky_solve, and the LU info codes of linalg.inv_ex / solve_ex, on
sizes that cross the kernel's 64-row blocks: against numpy float64 and PyTorch (values,
gradients, float32, broadcast batches, zero diagonals, info codes in float32)."""

import numpy as np
import pytest
from torch_compare import same_as_torch

import gpucore as gc

RNG = np.random.default_rng(1)


def _np_tri(a, upper, unit):
    t = np.triu(a) if upper else np.tril(a)
    if unit:
        t = t * (1 - np.eye(a.shape[-1])) + np.eye(a.shape[-1])
    return t


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unit", [True, False])
def test_solve_triangular_against_float64(dtype, upper, left, unit):
    m, n = 130, 9
    a = RNG.uniform(-1, 1, (2, m, m)) / m + np.eye(m)
    b = RNG.uniform(-1, 1, (2, m, n) if left else (2, n, m))
    t = _np_tri(a, upper, unit)
    if left:
        want = np.linalg.solve(t, b)
    else:
        want = np.linalg.solve(t.transpose(0, 2, 1), b.transpose(0, 2, 1)).transpose(0, 2, 1)
    got = gc.linalg.solve_triangular(gc.tensor(a.astype(dtype)), gc.tensor(b.astype(dtype)),
                                     upper=upper, left=left, unitriangular=unit)  # fmt: skip
    assert got.dtype is (gc.float32 if dtype == np.float32 else gc.float64)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got.numpy(), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("left", [True, False])
def test_solve_triangular_as_torch_past_a_block(upper, left):
    a = RNG.uniform(-1, 1, (70, 70)) / 10 + np.eye(70)
    b = RNG.uniform(-1, 1, (70, 3) if left else (3, 70))
    same_as_torch(lambda m, a, b: m.linalg.solve_triangular(a, b, upper=upper, left=left), a, b,
                  check_fd=False)  # fmt: skip


def test_broadcast_batches_and_strided_inputs_as_torch():
    a = RNG.uniform(-1, 1, (3, 1, 6, 6)) + 3 * np.eye(6)
    b = RNG.uniform(-1, 1, (1, 4, 6, 2))
    same_as_torch(lambda m, a, b: m.linalg.solve_triangular(a, b, upper=False), a, b)
    same_as_torch(lambda m, a, b: m.linalg.solve_triangular(a.mT, b, upper=True), a, b)
    same_as_torch(lambda m, a, b: m.linalg.solve_triangular(a[0, 0], b[0].mT, upper=True,
                                                            left=False), a, b)  # fmt: skip


def test_gradcheck_and_double_backward():
    a = gc.tensor(RNG.uniform(-1, 1, (2, 4, 4)) + 3 * np.eye(4), requires_grad=True)
    b = gc.tensor(RNG.uniform(-1, 1, (2, 4, 3)), requires_grad=True)
    for upper, left, unit in ((True, True, False), (False, False, True)):
        bb = b if left else b.mT

        def f(a, b, upper=upper, left=left, unit=unit):
            return gc.linalg.solve_triangular(a, b, upper=upper, left=left, unitriangular=unit)

        assert gc.autograd.gradcheck(f, (a, bb))
        assert gc.autograd.gradgradcheck(f, (a, bb))


def test_float32_against_torch():
    torch = pytest.importorskip("torch")
    a = (RNG.uniform(-1, 1, (200, 200)) / 20 + np.eye(200)).astype(np.float32)
    b = RNG.uniform(-1, 1, (200, 16)).astype(np.float32)
    for upper in (True, False):
        got = gc.linalg.solve_triangular(gc.tensor(a), gc.tensor(b), upper=upper).numpy()
        ref = torch.linalg.solve_triangular(torch.tensor(a), torch.tensor(b), upper=upper)
        np.testing.assert_allclose(got, ref.numpy(), rtol=1e-5, atol=1e-6)


def test_zero_diagonal_gives_what_torch_gives():
    torch = pytest.importorskip("torch")
    a = np.tril(RNG.uniform(1, 2, (5, 5)))
    a[2, 2] = 0.0
    b = RNG.uniform(1, 2, (5, 2))
    got = gc.linalg.solve_triangular(gc.tensor(a), gc.tensor(b), upper=False).numpy()
    ref = torch.linalg.solve_triangular(torch.tensor(a), torch.tensor(b), upper=False).numpy()
    np.testing.assert_allclose(got[:2], ref[:2], rtol=1e-12)
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(ref))


@pytest.mark.parametrize("upper", [True, False])
def test_cholesky_solve_and_triangular_solve_large_as_torch(upper):
    torch = pytest.importorskip("torch")
    x = RNG.uniform(-1, 1, (2, 90, 90))
    spd = x @ x.transpose(0, 2, 1) + 90 * np.eye(90)
    fac = np.linalg.cholesky(spd)
    fac = fac.transpose(0, 2, 1).copy() if upper else fac
    b = RNG.uniform(-1, 1, (2, 90, 5))
    got = gc.cholesky_solve(gc.tensor(b), gc.tensor(fac), upper).numpy()
    np.testing.assert_allclose(got, np.linalg.solve(spd, b), rtol=1e-10, atol=1e-13)
    small = fac[:, :6, :6].copy()
    same_as_torch(lambda m, b, f: m.cholesky_solve(b, f, upper), b[:, :6], small, check_fd=False)
    with __import__("warnings").catch_warnings():
        __import__("warnings").simplefilter("ignore")  # PyTorch's deprecation warning
        for tr in (True, False):
            g = gc.triangular_solve(gc.tensor(b), gc.tensor(fac), upper, tr).solution.numpy()
            t = torch.triangular_solve(torch.tensor(b), torch.tensor(fac), upper, tr).solution
            np.testing.assert_allclose(g, t.numpy(), rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_info_codes_as_torch_in_the_input_dtype(dtype):
    torch = pytest.importorskip("torch")
    c = float(np.float32(1 / 3))  # float32 LU: 3's reciprocal times 1 is c, the pivot c - c = 0
    tricky = np.array([[3.0, 1.0], [1.0, c]])
    zero_col = RNG.uniform(-1, 1, (80, 80)) + 4 * np.eye(80)
    zero_col[:, 57] = 0
    mats = [tricky, np.zeros((2, 2)), np.array([[0.0, 1], [0, 1]]), np.eye(2)]
    for m in mats + [zero_col]:
        g = gc.linalg.inv_ex(gc.tensor(m.astype(dtype)))
        t = torch.linalg.inv_ex(torch.tensor(m.astype(dtype)))
        assert g.info.item() == t.info.item(), m
        s = gc.linalg.solve_ex(gc.tensor(m.astype(dtype)), gc.tensor(np.ones(m.shape[0], dtype)))
        assert s.info.item() == t.info.item()
    batch = np.stack(mats).astype(dtype)
    g, t = gc.linalg.inv_ex(gc.tensor(batch)), torch.linalg.inv_ex(torch.tensor(batch))
    np.testing.assert_array_equal(g.info.numpy(), t.info.numpy())
    assert g.info.dtype is gc.int32
    assert gc.linalg.inv_ex(gc.zeros(3, 0, 0)).info.tolist() == [0, 0, 0]
