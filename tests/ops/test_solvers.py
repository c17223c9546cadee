"""Triangular and Cholesky solves, the linalg *_ex forms, cond, tensorinv / tensorsolve, vander
and chain_matmul (gpucore/ops/solvers.py) against PyTorch: values, gradients (and gradcheck),
info codes, batches, errors, device tensors."""

import numpy as np
import pytest
from torch_compare import same_as_torch

import gpucore as gc

RNG = np.random.default_rng(0)
A = RNG.uniform(-1, 1, (2, 4, 4)) + 4 * np.eye(4)
B = RNG.uniform(-1, 1, (2, 4, 3))


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unit", [True, False])
def test_solve_triangular_as_torch(upper, left, unit):
    b = B if left else B.transpose(0, 2, 1).copy()
    same_as_torch(
        lambda m, a, b: m.linalg.solve_triangular(a, b, upper=upper, left=left, unitriangular=unit),
        A,
        b,
    )


def test_solve_triangular_broadcasts_batches():
    same_as_torch(lambda m, a, b: m.linalg.solve_triangular(a, b, upper=True), A[0], B)


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("transpose", [True, False])
def test_triangular_solve_as_torch(upper, transpose):
    pytest.importorskip("torch")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyTorch's deprecation warning
        same_as_torch(lambda m, b, a: m.triangular_solve(b, a, upper, transpose)[0], B, A)
        same_as_torch(lambda m, b, a: m.triangular_solve(b, a, upper, transpose)[1], B, A)


@pytest.mark.parametrize("upper", [True, False])
def test_cholesky_solve_and_inverse_as_torch(upper):
    spd = A @ A.transpose(0, 2, 1)
    fac = np.linalg.cholesky(spd)
    if upper:
        fac = fac.transpose(0, 2, 1).copy()
    # PyTorch's factor gradient is dense (that of (L L^T)^-1 as a function of all of L) while
    # the forward reads one triangle: finite differences cannot agree with it there
    same_as_torch(lambda m, b, f: m.cholesky_solve(b, f, upper), B, fac, check_fd=False)
    same_as_torch(lambda m, f: m.cholesky_inverse(f, upper), fac, check_fd=False)
    same_as_torch(lambda m, f: m.cholesky_inverse(f, upper), fac[0], check_fd=False)
    same_as_torch(lambda m, b: m.cholesky_solve(b, m.tensor(fac), upper), B)
    np.testing.assert_allclose(
        gc.cholesky_inverse(gc.tensor(fac), upper).numpy(), np.linalg.inv(spd), rtol=1e-10
    )


def test_ex_forms_info_as_torch():
    torch = pytest.importorskip("torch")
    m = np.stack([A[0], np.zeros((4, 4)), np.diag([1.0, 2, -1, 3])])
    g, t = gc.linalg.cholesky_ex(gc.tensor(m)), torch.linalg.cholesky_ex(torch.tensor(m))
    np.testing.assert_array_equal(g.info.numpy(), t.info.numpy())
    assert g.info.dtype is gc.int32
    np.testing.assert_allclose(g.L.numpy()[0], t.L.numpy()[0])
    sing = np.array([[1.0, 2, 3, 4], [2, 4, 6, 8], [0, 0, 1, 0], [0, 1, 0, 0]])
    s = np.stack([A[0], sing, np.zeros((4, 4))])
    g, t = gc.linalg.inv_ex(gc.tensor(s)), torch.linalg.inv_ex(torch.tensor(s))
    np.testing.assert_array_equal(g.info.numpy(), t.info.numpy())
    np.testing.assert_allclose(g.inverse.numpy()[0], t.inverse.numpy()[0])
    g = gc.linalg.solve_ex(gc.tensor(s), gc.tensor(B[0]))
    t = torch.linalg.solve_ex(torch.tensor(s), torch.tensor(B[0]))
    np.testing.assert_array_equal(g.info.numpy(), t.info.numpy())
    np.testing.assert_allclose(g.result.numpy()[0], t.result.numpy()[0])
    with pytest.raises(gc.linalg.LinAlgError, match="inv_ex"):
        gc.linalg.inv_ex(gc.tensor(s), check_errors=True)
    with pytest.raises(gc.linalg.LinAlgError, match="cholesky_ex"):
        gc.linalg.cholesky_ex(gc.tensor(m), check_errors=True)
    same_as_torch(lambda m, a: m.linalg.cholesky_ex(a @ a.mT)[0], A)
    same_as_torch(lambda m, a: m.linalg.inv_ex(a)[0], A)
    same_as_torch(lambda m, a, b: m.linalg.solve_ex(a, b)[0], A, B)


@pytest.mark.parametrize("p", [None, 2, -2, "fro", "nuc", float("inf"), float("-inf"), 1, -1])
def test_cond_as_torch(p):
    if p in (None, 2, -2, "nuc"):
        same_as_torch(lambda m, a: m.linalg.cond(a, p), A)
    else:  # PyTorch 2.13's backward of these fails (inv_ex's output modified in place)
        same_as_torch(lambda m, a: m.linalg.cond(a, p), A, grad=False)
        x = gc.tensor(A, requires_grad=True)
        assert gc.autograd.gradcheck(lambda a: gc.linalg.cond(a, p), (x,))
    torch = pytest.importorskip("torch")
    if p not in (None, 2, -2, "nuc"):  # singular: inf (the SVD forms divide by ~0 instead)
        z = np.zeros((3, 3))
        assert gc.linalg.cond(gc.tensor(z), p).item() == torch.linalg.cond(torch.tensor(z), p)


def test_tensorinv_tensorsolve_as_torch():
    t4 = RNG.uniform(-1, 1, (4, 6, 8, 3))
    same_as_torch(lambda m, a: m.linalg.tensorinv(a, 2), t4)
    same_as_torch(lambda m, a: m.linalg.tensorinv(a, 1), RNG.uniform(-1, 1, (6, 2, 3)))
    a, b = RNG.uniform(-1, 1, (2, 3, 6)), RNG.uniform(-1, 1, (2, 3))
    same_as_torch(lambda m, a, b: m.linalg.tensorsolve(a, b), a, b)
    same_as_torch(lambda m, a, b: m.linalg.tensorsolve(a, b, dims=(0,)), a.transpose(2, 0, 1), b)
    with pytest.raises(gc.ShapeError, match="tensorinv"):
        gc.linalg.tensorinv(gc.rand(2, 3, 4), 1)


def test_vander_as_torch():
    torch = pytest.importorskip("torch")
    x = np.array([0.0, 1.5, -2.0, 3.0])
    # PyTorch 2.13's vander backward fails (an output modified in place): values only there
    same_as_torch(lambda m, x: m.vander(x), x, grad=False)
    same_as_torch(lambda m, x: m.vander(x, 6, True), x, grad=False)
    gx = gc.tensor(x, requires_grad=True)
    assert gc.autograd.gradcheck(lambda a: gc.vander(a, 5), (gx,))
    same_as_torch(lambda m, x: m.linalg.vander(x, N=5), RNG.uniform(-2, 2, (2, 3)))
    for data in ([1, 2, 3], [True, False]):
        g, t = gc.vander(gc.tensor(data), 3), torch.vander(torch.tensor(data), 3)
        assert g.dtype is gc.int64 and g.tolist() == t.tolist()
    assert tuple(gc.vander(gc.tensor([1.0, 2.0]), 0).shape) == (2, 0)
    with pytest.raises(gc.ShapeError, match="vander"):
        gc.vander(gc.rand(2, 2))


def test_chain_matmul_as_torch():
    ms = [RNG.uniform(-1, 1, s) for s in ((3, 4), (4, 2), (2, 5))]
    same_as_torch(lambda m, a, b, c: m.chain_matmul(a, b, c), *ms)
    same_as_torch(lambda m, a: m.chain_matmul(a), ms[0])
    with pytest.raises(gc.ShapeError, match="chain_matmul"):
        gc.chain_matmul(gc.rand(3))


def test_solve_triangular_errors():
    with pytest.raises(gc.ShapeError, match="solve_triangular"):
        gc.linalg.solve_triangular(gc.rand(3, 3), gc.rand(3), upper=True)
    with pytest.raises(gc.ShapeError, match="solve_triangular"):
        gc.linalg.solve_triangular(gc.rand(3, 3), gc.rand(4, 2), upper=True)
    with pytest.raises(gc.DTypeError, match="solve_triangular"):
        gc.linalg.solve_triangular(gc.rand(3, 3), gc.rand(3, 2, dtype=gc.float64), upper=True)


def test_on_vulkan_the_cpu_answers(vulkan):
    a, b = A[0].astype(np.float32), B[0].astype(np.float32)
    with gc.device_policy("cpu"):
        want = gc.linalg.solve_triangular(gc.tensor(a), gc.tensor(b), upper=False).numpy()
        v = gc.linalg.vander(gc.tensor(b[:, 0]), N=3).numpy()
    got = gc.linalg.solve_triangular(gc.tensor(a, device="vulkan"), gc.tensor(b, device="vulkan"),
                                     upper=False)  # fmt: skip
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gc.linalg.vander(gc.tensor(b[:, 0], device="vulkan"), N=3).numpy(),
                               v, rtol=1e-6)  # fmt: skip


LSTSQ_A = {
    "tall": np.random.default_rng(40).uniform(-1, 1, (5, 3)),
    "wide": np.random.default_rng(41).uniform(-1, 1, (3, 5)),
    "rank2": np.random.default_rng(42).uniform(-1, 1, (5, 2))
    @ np.random.default_rng(43).uniform(-1, 1, (2, 3)),
    "batch": np.random.default_rng(44).uniform(-1, 1, (2, 5, 3)),
}


@pytest.mark.parametrize("kind", sorted(LSTSQ_A))
@pytest.mark.parametrize("driver", [None, "gels", "gelsy", "gelsd", "gelss"])
def test_lstsq_as_torch(kind, driver):
    a = LSTSQ_A[kind]
    if kind == "rank2" and driver == "gels":
        pytest.skip("gels assumes full rank (PyTorch's answer is then meaningless)")
    b = np.random.default_rng(45).uniform(-1, 1, a.shape[:-1] + (2,))
    for i in range(4):  # solution, residuals, rank, singular values: values, shapes, dtypes
        same_as_torch(
            lambda m, a, b, i=i: m.linalg.lstsq(a, b, driver=driver)[i],
            a, b, grad=i == 0 and kind != "rank2", check_fd=i == 0,
        )  # fmt: skip
    x = gc.linalg.lstsq(gc.tensor(a), gc.tensor(b), driver=driver).solution
    ref = np.linalg.pinv(a, rcond=np.finfo(np.float64).eps * max(a.shape[-2:])) @ b
    np.testing.assert_allclose(x.numpy(), ref, atol=1e-12)


def test_lstsq_vector_rhs_broadcast_and_errors():
    a, b = LSTSQ_A["tall"], np.random.default_rng(46).uniform(-1, 1, 5)
    same_as_torch(lambda m, a, b: m.linalg.lstsq(a, b).solution, a, b)
    same_as_torch(lambda m, a, b: m.linalg.lstsq(a, b, driver="gelsd").residuals, a, b)
    with pytest.raises(ValueError, match="driver"):
        gc.linalg.lstsq(gc.tensor(a), gc.tensor(b), driver="fast")
    with pytest.raises(gc.ShapeError, match="do not fit"):
        gc.linalg.lstsq(gc.tensor(a), gc.tensor(b[:4]))
