"""Fused NN primitives: softmax, log_softmax, logsumexp, per-row cross-entropy, im2col/col2im."""

import numpy as np
import pytest
from helpers import (
    assert_close,
    check_grad,
    check_op,
    np_col2im,
    np_im2col,
    np_log_softmax,
    np_softmax,
    rand,
    to_np,
)

import gpucore
from gpucore.ops.nn import col2im, cross_entropy_rows, im2col

R = dict(rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_forward(dim, log):
    fn = (lambda x: x.log_softmax(dim)) if log else (lambda x: x.softmax(dim))
    np_fn = (lambda x: np_log_softmax(x, dim)) if log else (lambda x: np_softmax(x, dim))
    check_op(fn, np_fn, [(7, 13, 5)], grad=False, low=-5, high=5, **R)
    check_op(fn, np_fn, [(1, 1, 1)], grad=False, **R)


@pytest.mark.parametrize("dim", [0, -1])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_grad_and_gradgrad(dim, log):
    fn = (lambda x: gpucore.log_softmax(x, dim)) if log else (lambda x: gpucore.softmax(x, dim))
    np_fn = (lambda x: np_log_softmax(x, dim)) if log else (lambda x: np_softmax(x, dim))
    check_op(fn, np_fn, [(3, 4)], gradgrad=True, **R)
    # weighted so that the first derivative is not identically zero for gradgradcheck's sum
    w = rand((3, 4), seed=7)
    check_grad(
        lambda x: fn(x) * gpucore.tensor(w, dtype=gpucore.float64), rand((3, 4)), gradgrad=True
    )


def test_softmax_small_and_empty():
    check_op(lambda x: x.softmax(0), lambda x: np.ones(()), [()], **R)
    check_op(lambda x: x.log_softmax(0), lambda x: np.zeros(()), [()], **R)
    check_op(lambda x: x.softmax(1), lambda x: np_softmax(x, 1), [(0, 3)], grad=False, **R)
    check_op(lambda x: x.softmax(-1), lambda x: np_softmax(x, -1), [(5,)], **R)


def test_softmax_stability():
    rows = [[1000.0, 1000.0, 1000.0], [1000.0, -1000.0, 0.0], [-1000.0, -1000.0, -1000.0]]
    x = np.array(rows)
    for dt in (gpucore.float32, gpucore.float64, gpucore.float16, gpucore.bfloat16):
        if dt in (gpucore.float16, gpucore.bfloat16):
            t = gpucore.tensor(x / 100, dtype=dt)
            ref = x / 100
        else:
            t = gpucore.tensor(x, dtype=dt)
            ref = x
        s = to_np(t.softmax(1).float())
        ls = to_np(t.log_softmax(1).float())
        assert np.isfinite(s).all() and np.isfinite(ls).all()
        tol = 1e-2 if dt in (gpucore.float16, gpucore.bfloat16) else 1e-5
        assert_close(s, np_softmax(ref, 1), rtol=tol, atol=tol)
        assert_close(ls, np_log_softmax(ref, 1), rtol=tol, atol=tol)
    t = gpucore.tensor(x, dtype=gpucore.float64, requires_grad=True)
    t.softmax(1)[:, 0].sum().backward()
    assert np.isfinite(to_np(t.grad)).all()


def test_softmax_inf_and_nan():
    inf = float("inf")
    s = to_np(gpucore.tensor([[-inf, 0.0, 0.0], [1.0, float("nan"), 0.0]]).softmax(1))
    assert_close(s[0], [0.0, 0.5, 0.5])
    assert np.isnan(s[1]).all()


def test_softmax_errors():
    with pytest.raises(gpucore.DTypeError, match="floating"):
        gpucore.tensor([1, 2]).softmax(0)
    with pytest.raises(gpucore.GpucoreIndexError, match="out of range"):
        gpucore.zeros(2, 3).softmax(2)
    assert gpucore.tensor([1, 2]).softmax(0, dtype=gpucore.float32).dtype is gpucore.float32


def test_logsumexp():
    def np_lse(x, d, k=False):
        m = x.max(d, keepdims=True)
        out = np.log(np.exp(x - m).sum(d, keepdims=True)) + m
        return out if k else out.squeeze(d)

    check_op(lambda x: x.logsumexp(1), lambda x: np_lse(x, 1), [(3, 4)], **R)
    check_op(
        lambda x: gpucore.logsumexp(x, -1, keepdim=True),
        lambda x: np_lse(x, -1, True),
        [(2, 3, 4)],
        **R,
    )
    out = to_np(gpucore.tensor([[1000.0, 1000.0], [-float("inf"), -float("inf")]]).logsumexp(1))
    assert_close(out, [1000.0 + np.log(2), -np.inf])


# ----------------------------------------------------------------------------- cross-entropy
def np_xent_rows(x, t, ignore=-100):
    ls = np_log_softmax(x, 1)
    return np.array([0.0 if ti == ignore else -ls[i, ti] for i, ti in enumerate(t)])


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int32", "int64", "bool"])
def test_logsumexp_of_integer_inputs(dtype):
    """Issue 20, item 11: uint8/int8 overflowed (inf) in an integer intermediate; PyTorch gives
    float32."""
    values = {"uint8": [200, 100, 255], "int8": [127, -128, 100], "bool": [True, False, True]}
    v = values.get(dtype, [100000, -3, 7])
    got = gpucore.logsumexp(gpucore.tensor(v, dtype=getattr(gpucore, dtype)), 0)
    assert got.dtype is gpucore.float32
    want = np.logaddexp.reduce(np.array(v, np.float64))
    np.testing.assert_allclose(to_np(got), want, rtol=1e-6)


def test_logsumexp_over_every_dim_and_empty_dims():
    x = rand((3, 4))
    t = gpucore.tensor(x)
    all_dims = np.log(np.exp(x).sum())
    for dim in ((), (0, 1), [1, 0]):
        assert_close(gpucore.logsumexp(t, dim), all_dims)
    assert gpucore.logsumexp(t, (), keepdim=True).shape == (1, 1)
    assert gpucore.logsumexp(t, (0, 1), keepdim=True).shape == (1, 1)
    empty = gpucore.logsumexp(gpucore.zeros(0, 3), 0)
    assert empty.shape == (3,) and np.isneginf(to_np(empty)).all()  # log(0), as PyTorch


def test_cross_entropy_rows():
    t = np.array([0, 3, 3, 1, 2])
    check_op(
        lambda x: cross_entropy_rows(x, gpucore.tensor(t)),
        lambda x: np_xent_rows(x, t),
        [(5, 4)],
        gradgrad=True,
        noncontig=True,
        **R,
    )
    ti = np.array([0, 5, 2, 5])
    check_op(
        lambda x: cross_entropy_rows(x, gpucore.tensor(ti), ignore_index=5),
        lambda x: np_xent_rows(x, ti, 5),
        [(4, 6)],
        gradgrad=True,
        **R,
    )


def test_cross_entropy_rows_errors():
    x = gpucore.zeros(2, 3)
    with pytest.raises(IndexError, match="3") as e:
        cross_entropy_rows(x, gpucore.tensor([0, 3]))
    assert isinstance(e.value, gpucore.GpucoreError)
    with pytest.raises(IndexError, match="-1"):
        cross_entropy_rows(x, gpucore.tensor([-1, 0]))
    with pytest.raises(gpucore.DTypeError, match="int64"):
        cross_entropy_rows(x, gpucore.tensor([0, 1]).int())
    with pytest.raises(gpucore.ShapeError, match=r"\(2, 3\)"):
        cross_entropy_rows(x, gpucore.tensor([0, 1, 2]))


# ----------------------------------------------------------------------------- im2col / col2im
GEOMS = [
    # shape, kernel, stride, padding, dilation
    ((1, 1, 3, 3), (3, 3), (1, 1), (0, 0), (1, 1)),
    ((2, 3, 5, 4), (2, 3), (1, 1), (1, 0), (1, 1)),
    ((1, 2, 7, 6), (3, 3), (2, 2), (1, 1), (1, 1)),
    ((2, 1, 7, 7), (2, 2), (1, 2), (0, 1), (2, 2)),
    ((1, 2, 4, 4), (1, 1), (1, 1), (0, 0), (1, 1)),
    ((1, 1, 2, 2), (3, 3), (1, 1), (1, 1), (1, 1)),
]


@pytest.mark.parametrize("shape,k,s,p,d", GEOMS)
def test_im2col(shape, k, s, p, d):
    check_op(lambda x: im2col(x, k, s, p, d), lambda x: np_im2col(x, k, s, p, d), [shape], **R)


@pytest.mark.parametrize("shape,k,s,p,d", GEOMS)
def test_col2im(shape, k, s, p, d):
    cols_shape = np_im2col(np.zeros(shape), k, s, p, d).shape
    check_op(
        lambda c: col2im(c, shape, k, s, p, d),
        lambda c: np_col2im(c, shape, k, s, p, d),
        [cols_shape],
        **R,
    )


def test_im2col_col2im_adjoint_and_gradgrad():
    shape, k, s, p = (1, 2, 5, 5), (3, 3), (2, 1), (1, 1)
    x, y = rand(shape), rand(np_im2col(np.zeros(shape), k, s, p).shape, seed=1)
    lhs = (to_np(im2col(gpucore.tensor(x, dtype=gpucore.float64), k, s, p)) * y).sum()
    rhs = (x * to_np(col2im(gpucore.tensor(y, dtype=gpucore.float64), shape, k, s, p))).sum()
    assert_close(lhs, rhs, rtol=1e-12)
    check_grad(lambda t: im2col(t, 2, 1, 1) ** 2, rand((1, 1, 3, 3)), gradgrad=True)


def test_im2col_errors():
    with pytest.raises(gpucore.ShapeError, match="4-D"):
        im2col(gpucore.zeros(3, 4, 4), 2)
    with pytest.raises(gpucore.ShapeError, match="too small"):
        im2col(gpucore.zeros(1, 1, 2, 2), 3)
    with pytest.raises(gpucore.DTypeError, match="floating"):
        im2col(gpucore.zeros(1, 1, 3, 3, dtype=gpucore.int64), 2)
    for kw in ({"stride": 0}, {"padding": -1}, {"dilation": (1, 0)}, {"kernel_size": 2.5}):
        args = {"kernel_size": 2, **kw}
        with pytest.raises(ValueError, match=next(iter(kw))):
            im2col(gpucore.zeros(1, 1, 3, 3), **args)
    with pytest.raises(gpucore.ShapeError, match=r"\(1, 4, 4\)"):  # columns of the wrong size
        col2im(gpucore.zeros(1, 4, 5), (1, 1, 3, 3), 2)
    with pytest.raises(gpucore.ShapeError, match="N, C, H, W"):
        col2im(gpucore.zeros(1, 4, 4), (1, 3, 3), 2)


def test_im2col_low_precision():
    x = rand((1, 2, 5, 5))
    for dt in (gpucore.float16, gpucore.bfloat16):
        out = im2col(gpucore.tensor(x, dtype=dt), 3, padding=1)
        assert out.dtype is dt
        assert_close(out.float(), np_im2col(x, (3, 3), p=(1, 1)), rtol=1e-2, atol=1e-2)
