"""matmul/mm/bmm/addmm: odd and large shapes, K=1, transposed and strided operands, 1-D operands,
batch broadcasting, empty dims, gradients, dtypes and bad input."""

import numpy as np
import pytest
from helpers import assert_close, check_grad, check_op, rand, to_np

import gpucore

G = dict(rtol=1e-4, atol=1e-5)  # GEMM: rtol 1e-4 in float32


def mm(a, b):
    return a @ b


@pytest.mark.parametrize(
    "shapes",
    [
        [(1, 1), (1, 1)],
        [(3, 4), (4, 5)],
        [(7, 1), (1, 5)],  # K = 1
        [(1, 13), (13, 1)],
        [(129, 257), (257, 65)],
        [(64, 64), (64, 64)],
        [(4,), (4,)],  # 1-D @ 1-D: a scalar
        [(4,), (4, 3)],
        [(3, 4), (4,)],
        [(5,), (2, 5, 3)],
        [(2, 3, 5), (5,)],
        [(2, 3, 4), (2, 4, 5)],
        [(2, 1, 3, 4), (5, 4, 2)],  # batch broadcasting
        [(1, 3, 4), (6, 4, 2)],
        [(7, 13, 5), (5, 1)],
    ],
)
def test_matmul_forward(shapes):
    check_op(mm, np.matmul, shapes, grad=False, **G)


@pytest.mark.parametrize(
    "shapes",
    [
        [(0, 3), (3, 4)],
        [(3, 0), (0, 4)],  # K = 0: zeros
        [(2, 0, 3), (3, 4)],
        [(3, 4), (4, 0)],
    ],
)
def test_matmul_empty(shapes):
    check_op(mm, np.matmul, shapes, grad=False, noncontig=False, **G)


@pytest.mark.parametrize(
    "fn,np_fn",
    [
        (lambda a, b: a.T @ b, lambda a, b: a.T @ b),
        (lambda a, b: a @ b.T, lambda a, b: a @ b.T),
        (lambda a, b: a.T @ b.T, lambda a, b: a.T @ b.T),
        (lambda a, b: a[::2] @ b[:, 1::2], lambda a, b: a[::2] @ b[:, 1::2]),
        (lambda a, b: a.T[1:, ::3] @ b[::-3], lambda a, b: a.T[1:, ::3] @ b[::-3]),
    ],
)
def test_matmul_transposed_and_strided(fn, np_fn):
    check_op(fn, np_fn, [(9, 9), (9, 9)], **G)
    check_op(fn, np_fn, [(65, 65), (65, 65)], grad=False, **G)


def test_matmul_transposed_batches():
    check_op(
        lambda a, b: a.mT @ b, lambda a, b: a.swapaxes(-1, -2) @ b, [(3, 5, 4), (3, 5, 2)], **G
    )
    check_op(
        lambda a, b: a @ b.permute(2, 0, 1),
        lambda a, b: a @ b.transpose(2, 0, 1),
        [(3, 4), (4, 2, 3)],
        **G,
    )
    check_op(
        lambda a, b: a @ b.expand(3, 4, 2),
        lambda a, b: a @ np.broadcast_to(b, (3, 4, 2)),
        [(3, 2, 4), (4, 2)],
        **G,
    )


@pytest.mark.parametrize(
    "shapes",
    [
        [(3, 4), (4, 2)],
        [(4,), (4,)],
        [(4,), (4, 2)],
        [(3, 4), (4,)],
        [(2, 1, 3, 4), (2, 4, 2)],
        [(3,), (2, 3, 2)],
        [(1, 1), (1, 3)],
    ],
)
def test_matmul_grad(shapes):
    check_op(mm, np.matmul, shapes, **G)


@pytest.mark.parametrize("a_shape, b_shape", [((5, 3, 4), (4, 6)), ((2, 3, 1, 4), (4, 2)),
                                              ((3, 2, 4), (4,))])  # fmt: skip
def test_a_batch_times_one_matrix_is_one_product(a_shape, b_shape):
    """The batch's rows go through one matrix product (as torch folds them): b is not copied
    per batch entry, for strided batches too, and the gradient reaches both operands."""
    from gpucore import runtime  # noqa: PLC0415

    a_np, b_np = rand(a_shape, seed=1), rand(b_shape, seed=2)
    a = gpucore.tensor(np.ascontiguousarray(np.swapaxes(a_np, 0, -1))).transpose(0, -1)  # strided
    b = gpucore.tensor(b_np)
    assert_close(a @ b, np.matmul(a_np, b_np))
    check_grad(lambda x, y: x @ y, a_np, b_np)
    f32 = [a_np.astype(np.float32), b_np.astype(np.float32)]
    cm = runtime.compile(lambda x, y: x @ y, f32, device="cpu", optimize=False)
    ops = {n.op for n in cm.graph.nodes}
    assert "expand" not in ops, ops


def test_matmul_gradgrad():
    check_grad(lambda a, b: (a @ b) ** 2, rand((2, 3)), rand((3, 2), seed=1), gradgrad=True)


def test_mm_bmm_addmm():
    check_op(gpucore.mm, np.matmul, [(3, 4), (4, 2)], **G)
    check_op(lambda a, b: a.mm(b), np.matmul, [(3, 4), (4, 2)], **G)
    check_op(gpucore.bmm, np.matmul, [(2, 3, 4), (2, 4, 2)], **G)
    check_op(
        lambda c, a, b: gpucore.addmm(c, a, b, beta=0.5, alpha=2.0),
        lambda c, a, b: 0.5 * c + 2.0 * (a @ b),
        [(2,), (3, 4), (4, 2)],
        **G,
    )
    check_op(
        lambda c, a, b: c.addmm(a, b), lambda c, a, b: c + a @ b, [(3, 2), (3, 4), (4, 2)], **G
    )
    with pytest.raises(gpucore.ShapeError, match="2-D"):
        gpucore.mm(gpucore.zeros(2, 3, 4), gpucore.zeros(4, 2))
    with pytest.raises(gpucore.ShapeError, match="bmm"):
        gpucore.bmm(gpucore.zeros(2, 3, 4), gpucore.zeros(3, 4, 2))


def test_matmul_errors():
    with pytest.raises(gpucore.ShapeError) as e:
        gpucore.zeros(2, 3) @ gpucore.zeros(4, 5)
    assert "(2, 3)" in str(e.value) and "(4, 5)" in str(e.value) and "matmul" in str(e.value)
    with pytest.raises(gpucore.ShapeError, match=r"\(3,\).*\(4,\)"):
        gpucore.zeros(3) @ gpucore.zeros(4)
    with pytest.raises(gpucore.ShapeError, match="not broadcastable"):
        gpucore.zeros(2, 3, 4) @ gpucore.zeros(3, 4, 5)
    with pytest.raises(gpucore.ShapeError, match="at least 1 dim"):
        gpucore.matmul(gpucore.tensor(1.0), gpucore.zeros(3))
    with pytest.raises(gpucore.DTypeError, match="bool"):
        gpucore.tensor([[True, False]]) @ gpucore.tensor([[True], [True]])
    with pytest.raises(TypeError):
        gpucore.zeros(2, 2) @ 2.0


def test_matmul_dtypes():
    a, b = rand((5, 7)), rand((7, 3), seed=1)
    ref = a @ b
    assert (gpucore.tensor(a) @ gpucore.tensor(b, dtype=gpucore.float64)).dtype is gpucore.float64
    for dt, tol in ((gpucore.float16, 1e-2), (gpucore.bfloat16, 5e-2)):
        out = gpucore.tensor(a, dtype=dt) @ gpucore.tensor(b, dtype=dt)
        assert out.dtype is dt
        assert_close(out.float(), ref, rtol=tol, atol=tol)


def test_matmul_nan_and_inf():
    a = gpucore.tensor([[float("nan"), 1.0], [1.0, 1.0]])
    b = gpucore.ones(2, 2)
    out = to_np(a @ b)
    assert np.isnan(out[0]).all() and (out[1] == 2.0).all()
    out = to_np(gpucore.tensor([[float("inf"), 1.0]]) @ gpucore.ones(2, 1))
    assert out[0, 0] == float("inf")


def test_matmul_large_k_accuracy():
    a, b = rand((4, 4096), 0, 1), rand((4096, 3), 0, 1, seed=1)
    assert_close(gpucore.tensor(a) @ gpucore.tensor(b), a @ b, **G)


@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 2.0), (0, 1)])
def test_baddbmm_addbmm_match_torch(beta, alpha):
    from torch_compare import same_as_torch

    rng = np.random.default_rng(3)
    b1, b2 = rng.uniform(-1, 1, (2, 3, 4)), rng.uniform(-1, 1, (2, 4, 5))
    for inp in (rng.uniform(-1, 1, (2, 3, 5)), rng.uniform(-1, 1, (5,))):
        same_as_torch(lambda m, i, x, y: m.baddbmm(i, x, y, beta=beta, alpha=alpha), inp, b1, b2)
    same_as_torch(
        lambda m, i, x, y: i.addbmm(x, y, beta=beta, alpha=alpha),
        rng.uniform(-1, 1, (3, 5)),
        b1,
        b2,
    )


def test_baddbmm_in_place_and_errors():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    a, b1, b2 = (
        rng.uniform(size=(2, 3, 5)),
        rng.uniform(size=(2, 3, 4)),
        rng.uniform(size=(2, 4, 5)),
    )
    g, t = gpucore.tensor(a), torch.tensor(a)
    g.baddbmm_(gpucore.tensor(b1), gpucore.tensor(b2), alpha=0.5)
    t.baddbmm_(torch.tensor(b1), torch.tensor(b2), alpha=0.5)
    np.testing.assert_allclose(g.numpy(), t.numpy())
    nan = gpucore.full((2, 3, 5), float("nan"))
    out = gpucore.baddbmm(nan, gpucore.ones(2, 3, 4), gpucore.ones(2, 4, 5), beta=0)
    assert out.tolist() == [[[4.0] * 5] * 3] * 2  # beta=0 ignores input, NaN included
    with pytest.raises(ValueError, match="baddbmm"):
        gpucore.baddbmm(gpucore.zeros(2, 4, 5), gpucore.zeros(2, 3, 4), gpucore.zeros(2, 4, 5))
    with pytest.raises(ValueError, match="bmm"):
        gpucore.baddbmm(gpucore.zeros(3, 5), gpucore.zeros(2, 3, 4), gpucore.zeros(3, 4, 5))


def test_outer_and_trace_match_torch():
    from torch_compare import same_as_torch

    rng = np.random.default_rng(5)
    a, b = rng.uniform(-1, 1, 3), rng.uniform(-1, 1, 4)
    same_as_torch(lambda m, a, b: m.outer(a, b), a, b)
    same_as_torch(lambda m, a, b: a.ger(b), a, b)
    same_as_torch(lambda m, x: m.trace(x), rng.uniform(-1, 1, (3, 5)))
    with pytest.raises(ValueError, match="outer"):
        gpucore.outer(gpucore.zeros(2, 2), gpucore.zeros(2))
    with pytest.raises(ValueError, match="trace"):
        gpucore.trace(gpucore.zeros(2))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize(
    "fn, a_shape, b_shape",
    [
        ("matmul", (3, 3, 0), (0, 4)),  # a batch times one matrix, K = 0: zeros (3, 3, 4)
        ("matmul", (2, 3, 0), (2, 0, 4)),
        ("matmul", (0, 3, 5), (5, 4)),  # no rows
        ("matmul", (3, 5), (5, 0)),  # no columns
        ("matmul", (2, 1, 3, 0), (4, 0, 2)),  # broadcast batch, K = 0
        ("matmul", (0,), (0, 3)),
        ("matmul", (2, 0, 3), (2, 3, 4)),
        ("mm", (3, 0), (0, 4)),
        ("mm", (0, 3), (3, 4)),
        ("bmm", (2, 3, 0), (2, 0, 4)),
        ("bmm", (0, 3, 2), (0, 2, 4)),
    ],
)
def test_matmul_zero_dims(dtype, fn, a_shape, b_shape):
    """A zero inner or outer dim: the product is zeros of the broadcast shape (empty where m, n
    or the batch is 0), as numpy and torch, forward and backward, float32 and bfloat16."""
    dt = getattr(gpucore, dtype)
    a_np, b_np = rand(a_shape, seed=3), rand(b_shape, seed=4)
    a = gpucore.tensor(a_np).to(dt).requires_grad_()
    b = gpucore.tensor(b_np).to(dt).requires_grad_()
    out = getattr(gpucore, fn)(a, b)
    want = np.matmul(a_np.astype(np.float64), b_np.astype(np.float64))
    assert out.dtype is dt and tuple(out.shape) == want.shape
    np.testing.assert_array_equal(to_np(out.float()), want)
    out.float().sum().backward()
    for t, x_np in ((a, a_np), (b, b_np)):
        # d(sum)/dA = ones @ B^T (summed over broadcast dims): with K = 0 it is empty, with an
        # empty output it is zeros
        assert t.grad is not None and t.grad.dtype is dt and tuple(t.grad.shape) == x_np.shape
        np.testing.assert_array_equal(to_np(t.grad.float()), np.zeros(x_np.shape))
