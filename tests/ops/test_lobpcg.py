"""gpucore.lobpcg (gpucore/ops/lobpcg.py): the extreme eigenpairs of symmetric and generalized
problems against numpy's float64 eigh and PyTorch's lobpcg (values; vectors through projectors,
free of sign), largest and smallest, a given X and a preconditioner, batches, float32, gradients
against PyTorch's backward and finite differences, the Vulkan device and errors."""

import numpy as np
import pytest

import gpucore
from gpucore.autograd import gradcheck
from gpucore.errors import LinAlgError


def _spd(m, seed, batch=()):
    a = np.random.default_rng(seed).standard_normal(batch + (m, m))
    return a @ np.swapaxes(a, -1, -2) + np.eye(m)


def _proj(x):
    return x @ np.swapaxes(x, -1, -2)


@pytest.mark.parametrize("largest", [True, False])
def test_lobpcg_standard_problem_numpy(largest):
    a = _spd(30, 1)
    w, v = np.linalg.eigh(a)
    e, x = gpucore.lobpcg(gpucore.tensor(a), k=3, n=4, largest=largest)
    ref_w, ref_v = (w[::-1][:3], v[:, ::-1][:, :3]) if largest else (w[:3], v[:, :3])
    np.testing.assert_allclose(e.numpy(), ref_w, rtol=1e-10)
    np.testing.assert_allclose(_proj(x.numpy()), _proj(ref_v), atol=1e-6)
    np.testing.assert_allclose(x.numpy().T @ x.numpy(), np.eye(3), atol=1e-12)


def test_lobpcg_generalized_problem_as_torch_and_numpy():
    torch = pytest.importorskip("torch")
    a, b = _spd(24, 2), _spd(24, 3) + 24 * np.eye(24)
    li = np.linalg.inv(np.linalg.cholesky(b))
    ref = np.linalg.eigvalsh(li @ a @ li.T)[::-1][:2]
    e, x = gpucore.lobpcg(gpucore.tensor(a), k=2, B=gpucore.tensor(b))
    te, _ = torch.lobpcg(torch.tensor(a), k=2, B=torch.tensor(b))
    np.testing.assert_allclose(e.numpy(), ref, rtol=1e-10)
    np.testing.assert_allclose(e.numpy(), te.numpy(), rtol=1e-10)
    np.testing.assert_allclose(x.numpy().T @ b @ x.numpy(), np.eye(2), atol=1e-10)
    np.testing.assert_allclose(a @ x.numpy(), b @ x.numpy() * e.numpy(), atol=1e-6)


def test_lobpcg_given_x_preconditioner_batches_and_float32():
    a = _spd(15, 4, batch=(2,))
    x0 = np.random.default_rng(5).standard_normal((15, 2))
    ik = np.linalg.inv(a[0] + np.eye(15))  # a good preconditioner for the first matrix
    e, x = gpucore.lobpcg(gpucore.tensor(a[0]), X=gpucore.tensor(x0), iK=gpucore.tensor(ik))
    assert tuple(e.shape) == (2,) and tuple(x.shape) == (15, 2)  # k = X's columns
    np.testing.assert_allclose(e.numpy(), np.linalg.eigvalsh(a[0])[::-1][:2], rtol=1e-10)
    e, x = gpucore.lobpcg(gpucore.tensor(a), k=1)
    assert tuple(e.shape) == (2, 1) and tuple(x.shape) == (2, 15, 1)
    np.testing.assert_allclose(e.numpy()[:, 0], np.linalg.eigvalsh(a)[:, -1], rtol=1e-10)
    e32, _ = gpucore.lobpcg(gpucore.tensor(a[1].astype(np.float32)), k=2)
    assert e32.dtype is gpucore.float32
    np.testing.assert_allclose(e32.numpy(), np.linalg.eigvalsh(a[1])[::-1][:2], rtol=1e-5)


def _loss(m, a, w, x0):
    s = (a + a.T) / 2  # a symmetric function of the input, as PyTorch's tests
    e, x = m.lobpcg(s, k=2, X=m.tensor(x0), tol=1e-12, niter=-1)
    return e.sum() * 0.3 + ((x @ x.T) * m.tensor(w)).sum()  # free of the vectors' signs


def test_lobpcg_gradients_as_torch_and_finite_differences():
    torch = pytest.importorskip("torch")
    a = _spd(12, 6)
    w = np.random.default_rng(7).standard_normal((12, 12))
    x0 = np.eye(12)[:, :4]
    ga, ta = gpucore.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    _loss(gpucore, ga, w, x0).backward()
    _loss(torch, ta, w, x0).backward()
    np.testing.assert_allclose(ga.grad.numpy(), ta.grad.numpy(), atol=1e-10)
    ga = gpucore.tensor(a, requires_grad=True)
    assert gradcheck(lambda t: _loss(gpucore, t, w, x0), (ga,), atol=1e-5, rtol=1e-3)
    # E alone: x_i x_i^T, batched
    ab = gpucore.tensor(_spd(12, 8, batch=(2,)), requires_grad=True)
    e, x = gpucore.lobpcg(ab, k=1)
    e.sum().backward()
    xs = x.detach().numpy()
    np.testing.assert_allclose(ab.grad.numpy(), xs @ np.swapaxes(xs, -1, -2), atol=1e-8)


def test_lobpcg_on_vulkan(vulkan):
    a = _spd(12, 9).astype(np.float32)
    e, x = gpucore.lobpcg(gpucore.tensor(a, device="vulkan"), k=2)
    np.testing.assert_allclose(e.cpu().numpy(), np.linalg.eigvalsh(a)[::-1][:2], rtol=1e-5)


def test_lobpcg_errors():
    a = gpucore.tensor(_spd(6, 10))
    with pytest.raises(ValueError, match="3 x the number"):
        gpucore.lobpcg(a, k=3)
    with pytest.raises(gpucore.ShapeError, match="square"):
        gpucore.lobpcg(gpucore.zeros(6, 5))
    with pytest.raises(gpucore.ShapeError, match="same shape"):
        gpucore.lobpcg(a, B=gpucore.zeros(5, 5))
    with pytest.raises(ValueError, match="method"):
        gpucore.lobpcg(a, method="fast")
    with pytest.raises(ValueError, match="with B"):
        gpucore.lobpcg(gpucore.tensor(_spd(6, 11), requires_grad=True), B=a)


def test_lobpcg_gradient_of_an_unsymmetrized_leaf_is_torchs():
    # A itself (not (A + A^T) / 2) goes in, as PyTorch's own tests do: the gradient must be the
    # symmetric one torch.lobpcg and torch.linalg.eigh give, not just agree in its symmetric part
    torch = pytest.importorskip("torch")
    q = np.linalg.qr(np.random.default_rng(3).standard_normal((12, 12)))[0]
    a = q @ np.diag(np.arange(1, 13.0)) @ q.T
    a = (a + a.T) / 2
    rows = np.arange(12.0)[:, None]

    def grad(lib, fn):
        t = lib.tensor(a, requires_grad=True)
        e, x = fn(t)
        (e.sum() + (x**2 * lib.tensor(rows)).sum()).backward()
        return t.grad.numpy()

    got = grad(gpucore, lambda t: gpucore.lobpcg(t, k=2, tol=1e-12, niter=-1))
    ref = grad(torch, lambda t: torch.lobpcg(t, k=2))

    def eigh_top2(t):
        w, v = torch.linalg.eigh(t)
        return w[-2:].flip(0), v[:, -2:].flip(1)

    np.testing.assert_allclose(got, grad(torch, eigh_top2), atol=1e-8)
    np.testing.assert_allclose(got, ref, atol=1e-5)  # torch.lobpcg stops at its default tol
    np.testing.assert_allclose(got, got.T, atol=1e-12)


def test_lobpcg_never_loops_forever(monkeypatch):
    from gpucore.ops import lobpcg as mod

    nan = _spd(12, 12)
    nan[3, 4] = np.nan
    with pytest.raises(LinAlgError, match="lobpcg.*non-finite"):
        gpucore.lobpcg(gpucore.tensor(nan), k=1, niter=-1)
    with pytest.raises(LinAlgError, match="lobpcg.*non-finite"):
        gpucore.lobpcg(gpucore.tensor(_spd(12, 12)), X=gpucore.full((12, 2), np.inf), niter=-1)
    # the zero matrix: every residual is exactly 0 (0 / 0 in the relative test): converged
    e, x = gpucore.lobpcg(gpucore.zeros(12, 12, dtype=gpucore.float64), k=2, niter=-1)
    np.testing.assert_array_equal(e.numpy(), [0.0, 0.0])
    np.testing.assert_allclose(x.numpy().T @ x.numpy(), np.eye(2), atol=1e-12)
    # a tolerance no residual can meet: niter=-1 stops at the cap and says so
    monkeypatch.setattr(mod, "_MAX_ITER", 3)
    with pytest.raises(LinAlgError, match="lobpcg.*did not converge"):
        gpucore.lobpcg(gpucore.tensor(_spd(12, 12)), k=1, tol=0.0, niter=-1)
