"""Reductions: sum, mean, amax/amin, max/min (full and along a dim), argmax/argmin, all/any,
var/std/norm, sum_to_size; dims as int/tuple/None, keepdim, ties, NaN, empty dims, dtypes."""

import numpy as np
import pytest
from helpers import assert_close, check_grad, check_op, rand, to_np

import gpucore

R = dict(rtol=1e-4, atol=1e-5)  # reductions: rtol 1e-4 in float32
DIMS = [None, 0, 1, -1, (0, 2), (1, 2), (-1, 0)]


def _np_dim(d):
    return d if d is None or isinstance(d, int) else tuple(d)


REDUCE = {
    "sum": (lambda x, d, k: x.sum(d, keepdim=k), lambda x, d, k: x.sum(_np_dim(d), keepdims=k)),
    "mean": (lambda x, d, k: x.mean(d, keepdim=k), lambda x, d, k: x.mean(_np_dim(d), keepdims=k)),
    "amax": (
        lambda x, d, k: x.amax(() if d is None else d, keepdim=k),
        lambda x, d, k: x.max(_np_dim(d), keepdims=k),
    ),
    "amin": (
        lambda x, d, k: x.amin(() if d is None else d, keepdim=k),
        lambda x, d, k: x.min(_np_dim(d), keepdims=k),
    ),
    "var": (
        lambda x, d, k: x.var(d, keepdim=k),
        lambda x, d, k: x.var(_np_dim(d), ddof=1, keepdims=k),
    ),
    "std": (
        lambda x, d, k: x.std(d, keepdim=k),
        lambda x, d, k: x.std(_np_dim(d), ddof=1, keepdims=k),
    ),
    "norm": (
        lambda x, d, k: x.norm(dim=d, keepdim=k),
        lambda x, d, k: np.sqrt((x * x).sum(_np_dim(d), keepdims=k)),
    ),
}


@pytest.mark.parametrize("name", REDUCE)
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("keepdim", [False, True])
def test_reduce_forward(name, dim, keepdim):
    fn, np_fn = REDUCE[name]
    check_op(
        lambda x: fn(x, dim, keepdim),
        lambda x: np_fn(x, dim, keepdim),
        [(7, 13, 5)],
        grad=False,
        **R,
    )


@pytest.mark.parametrize("name", REDUCE)
@pytest.mark.parametrize("dim,keepdim", [(None, False), (1, False), (-1, True), ((0, 2), True)])
def test_reduce_grad(name, dim, keepdim):
    fn, np_fn = REDUCE[name]
    check_op(lambda x: fn(x, dim, keepdim), lambda x: np_fn(x, dim, keepdim), [(2, 3, 4)], **R)


@pytest.mark.parametrize("name", ["sum", "mean", "amax", "amin"])
@pytest.mark.parametrize(
    "shape,dim",
    [((1, 1, 1), None), ((1, 1, 1), 1), ((), None), ((), 0), ((5,), 0), ((4, 1), (0, 1))],
)
def test_reduce_small_shapes(name, shape, dim):
    fn, np_fn = REDUCE[name]
    np_d = None if (shape == () or dim is None) else dim
    check_op(lambda x: fn(x, dim, False), lambda x: np_fn(x, np_d, False), [shape], **R)


def test_reduce_empty():
    x = gpucore.zeros(0, 3)
    assert_close(x.sum(0), np.zeros(3))
    assert_close(x.sum(), np.zeros(()))
    assert_close(x.sum(1), np.zeros(0))
    assert np.isnan(x.mean().item())
    assert tuple(x.amax(1).shape) == (0,)
    with pytest.raises(IndexError, match="size 0"):
        x.amax(0)
    with pytest.raises(IndexError, match="size 0"):
        x.max(0)
    with pytest.raises(IndexError, match="empty"):
        x.argmax()


def test_float32_sum_accuracy():
    x = rand((1000, 1000), 0, 1)
    assert_close(gpucore.tensor(x).sum(), x.sum(), rtol=1e-5)
    assert_close(gpucore.tensor(x).sum(0), x.sum(0), rtol=1e-5)
    assert_close(gpucore.tensor(x).mean(1), x.mean(1), rtol=1e-5)


def test_reduce_noncontiguous_views():
    x = rand((6, 8, 4))
    t = gpucore.tensor(x)
    assert_close(t.permute(2, 0, 1).sum(1), x.transpose(2, 0, 1).sum(1), **R)
    assert_close(t[::2, 1::3].amax((0, 2)), x[::2, 1::3].max((0, 2)), **R)
    assert_close(t.mT.mean(-1, keepdim=True), x.swapaxes(-1, -2).mean(-1, keepdims=True), **R)


def test_sum_to_size():
    check_op(lambda x: x.sum_to_size(3, 1), lambda x: x.sum(0).sum(-1, keepdims=True), [(2, 3, 4)])
    check_op(lambda x: x.sum_to_size(4), lambda x: x.sum((0, 1)), [(2, 3, 4)])
    with pytest.raises(gpucore.ShapeError, match=r"\(2, 3\)"):
        gpucore.zeros(2, 3).sum_to_size(4)


def test_norm_special_p_and_zero_gradient():
    x = np.array([[0.0, 0.0, 0.0], [1.0, -2.0, 0.5]])
    t = gpucore.tensor(x)
    assert_close(t.norm(0, dim=1), [0.0, 3.0])
    assert_close(t.norm(-float("inf"), dim=1), [0.0, 0.5])
    for p in (2, 3):  # an all-zero row gets gradient 0, not nan (as PyTorch)
        tx = gpucore.tensor(x, dtype=gpucore.float64, requires_grad=True)
        tx.norm(p, dim=1).sum().backward()
        assert np.isfinite(to_np(tx.grad)).all() and (to_np(tx.grad)[0] == 0).all()
    with pytest.raises(ValueError, match="p must be"):
        t.norm(-1)


def test_norm_fro_is_the_default_as_torch():
    x = rand((3, 4))
    t = gpucore.tensor(x)
    assert_close(t.norm("fro"), np.sqrt((x.astype(np.float64) ** 2).sum()), **R)
    assert_close(
        gpucore.norm(t, p="fro", dim=(0, 1)), np.sqrt((x.astype(np.float64) ** 2).sum()), **R
    )
    assert_close(t.norm(), t.norm(2).item(), **R)
    with pytest.raises(ValueError, match="'nuc'"):
        t.norm("nuc")


def test_empty_dim_tuple_reduces_everything():
    x = rand((2, 3))
    t = gpucore.tensor(x)
    assert_close(t.sum(()), x.sum(), **R)
    assert_close(t.mean([]), x.mean(), **R)
    assert_close(t.amax(()), x.max())


def test_norm_p():
    for p, np_fn in (
        (1, lambda x: np.abs(x).sum(1)),
        (3, lambda x: (np.abs(x) ** 3).sum(1) ** (1 / 3)),
        (float("inf"), lambda x: np.abs(x).max(1)),
    ):
        check_op(lambda x, p=p: x.norm(p, dim=1), np_fn, [(3, 4)], **R)


# ----------------------------------------------------------------------------- max/min with dim
@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_min_dim(name, dim, keepdim):
    np_val, np_arg = (np.max, np.argmax) if name == "max" else (np.min, np.argmin)

    def np_fn(x):
        return np_val(x, dim, keepdims=keepdim), np_arg(x, dim, keepdims=keepdim)

    check_op(lambda x: tuple(getattr(x, name)(dim, keepdim)), np_fn, [(7, 13, 5)], grad=False, **R)
    check_op(
        lambda x: getattr(x, name)(dim, keepdim).values, lambda x: np_fn(x)[0], [(3, 4, 2)], **R
    )
    r = getattr(gpucore.tensor(rand((3, 4))), name)(dim=dim, keepdim=keepdim)
    assert r.indices.dtype is gpucore.int64 and r.values is r[0] and r.indices is r[1]


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax_argmin(name):
    x = rand((7, 13, 5))
    t = gpucore.tensor(x)
    np_fn = getattr(np, name)
    assert_close(getattr(t, name)(), np.asarray(np_fn(x)))
    for d in (0, 1, -1):
        assert_close(getattr(t, name)(d), np_fn(x, d))
        assert_close(getattr(t, name)(d, keepdim=True), np_fn(x, d, keepdims=True))
    assert_close(getattr(t[:, ::3], name)(1), np_fn(x[:, ::3], 1))
    xi = np.array([[3, 1, 3], [0, 5, 5]])
    assert_close(getattr(gpucore.tensor(xi), name)(1), np_fn(xi, 1))
    assert getattr(t, name)().dtype is gpucore.int64


def test_full_max_min():
    x = rand((7, 13, 5))
    t = gpucore.tensor(x)
    assert t.max().shape == () and t.min().ndim == 0
    assert_close(t.max(), x.max(), **R)
    assert_close(gpucore.min(t), x.min(), **R)
    assert_close(gpucore.max(t, gpucore.tensor(0.5)), np.maximum(x, 0.5))  # max(other)


def test_max_dim_ties_gradient_goes_to_first_index():
    x = gpucore.tensor(
        [[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]], dtype=gpucore.float64, requires_grad=True
    )
    v, i = x.max(1)
    assert i.tolist() == [1, 0]
    v.sum().backward()
    assert x.grad.tolist() == [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]
    x.grad = None
    x.min(0).values.sum().backward()
    assert x.grad.tolist() == [[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]]


def test_amax_ties_share_gradient():
    x = gpucore.tensor(
        [[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]], dtype=gpucore.float64, requires_grad=True
    )
    x.amax(1).sum().backward()
    np.testing.assert_allclose(to_np(x.grad), [[0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3]])
    x.grad = None
    x.max().backward()
    assert x.grad.tolist() == [[0.0, 0.5, 0.5], [0.0, 0.0, 0.0]]
    # gradcheck on an exact two-way tie: central differences also give 1/2 to each
    check_grad(lambda t: t.amax(1, keepdim=True) * 1.0, [[1.0, 1.0, -2.0], [5.0, -1.0, 5.0]])
    check_grad(lambda t: t.amin(0), [[1.0, 1.0, -2.0], [5.0, -1.0, -2.0]])


def test_nan_propagates_in_reductions():
    nan = float("nan")
    t = gpucore.tensor([[1.0, nan, 5.0], [2.0, 3.0, 1.0]])
    assert np.isnan(t.max().item()) and np.isnan(t.min().item())
    assert np.isnan(t.amax(1).tolist()[0]) and t.amax(1).tolist()[1] == 3.0
    v, i = t.max(1)
    assert np.isnan(v.tolist()[0]) and i.tolist() == [1, 1]
    assert t.argmax(1).tolist() == [1, 1] and t.argmin(1).tolist() == [1, 2]
    assert np.isnan(t.sum().item())
    inf = gpucore.tensor([float("inf"), 1.0])
    assert inf.sum().item() == float("inf") and inf.max().item() == float("inf")


# ----------------------------------------------------------------------------- all/any, dtypes
def test_all_any():
    x = np.array([[0, 1, 2], [3, 4, 5]])
    t = gpucore.tensor(x)
    assert t.all().item() is False and t.any().item() is True
    assert_close(t.all(1), x.all(1))
    assert_close(t.any(0, keepdim=True), x.any(0, keepdims=True))
    b = t > 0
    assert b.all(1).dtype is gpucore.bool
    assert gpucore.tensor([0.0, float("nan")]).any().item() is True
    assert gpucore.zeros(0).all().item() is True and gpucore.zeros(0).any().item() is False


@pytest.mark.parametrize("fn", ["all", "any"])
def test_all_any_with_an_empty_dim_tuple_reduce_no_dim(fn):
    """Issue 20, item 13: dim=() reduced every dim; torch 2.13's all/any reduce none (each
    element's truth value, shape kept), unlike sum/amax/logsumexp, whose () means every dim."""
    x = np.array([[0.0, 1.5, np.nan], [-2.0, 0.0, 3.0]])
    t = gpucore.tensor(x)
    for dim in ((), []):
        for keepdim in (False, True):
            got = getattr(gpucore, fn)(t, dim=dim, keepdim=keepdim)
            assert got.dtype is gpucore.bool and got.shape == (2, 3)
            assert got.tolist() == (x != 0).tolist()
    assert getattr(t, fn)(()).shape == (2, 3)
    assert getattr(gpucore, fn)(gpucore.tensor(2.0), dim=()).item() is True
    assert getattr(gpucore, fn)(gpucore.zeros(0, 3), dim=()).shape == (0, 3)
    assert t.sum(()).shape == () and t.amax(()).shape == ()  # () is every dim there


def test_all_any_of_uint8_keep_uint8():
    u = gpucore.tensor([[0, 3], [1, 2]], dtype=gpucore.uint8)
    assert u.all().dtype is gpucore.uint8 and u.all().item() == 0
    assert u.any(1).dtype is gpucore.uint8 and u.any(1).tolist() == [1, 1]
    assert u.all(()).tolist() == [[0, 1], [1, 1]]


def test_int_and_bool_reductions():
    x = np.array([[3, -1, 7], [2, 2, -5]], np.int32)
    t = gpucore.tensor(x)
    assert t.sum().dtype is gpucore.int64 and t.sum().item() == 8
    assert_close(t.sum(0), x.sum(0))
    assert (t > 0).sum().dtype is gpucore.int64 and (t > 0).sum().item() == 4
    assert_close(t.amax(1), x.max(1))
    v, i = t.min(1)
    assert v.dtype is gpucore.int32 and v.tolist() == [-1, -5] and i.tolist() == [1, 2]
    assert t.argmax().item() == 2
    with pytest.raises(gpucore.DTypeError, match="mean"):
        t.mean()
    assert_close(t.mean(dtype=gpucore.float32), x.mean())
    assert_close(t.sum(dtype=gpucore.float64), float(x.sum()))


@pytest.mark.parametrize("dtype,tol", [(gpucore.float16, 3e-3), (gpucore.bfloat16, 2e-2)])
def test_low_precision_reductions(dtype, tol):
    x = rand((6, 20), 0, 1)
    t, ref = gpucore.tensor(x, dtype=dtype), gpucore.tensor(x)
    for fn in (
        lambda a: a.sum(1),
        lambda a: a.mean(0),
        lambda a: a.amax(1),
        lambda a: a.max(0)[0],
        lambda a: a.var(1),
    ):
        out = fn(t)
        assert out.dtype is dtype
        assert_close(out.float(), to_np(fn(ref)), rtol=tol, atol=tol)
    assert t.argmax(1).tolist() == ref.argmax(1).tolist()


def test_var_std_correction():
    x = rand((4, 5))
    t = gpucore.tensor(x)
    assert_close(t.var(1, unbiased=False), x.var(1), **R)
    assert_close(t.std(0, correction=0), x.std(0), **R)
    assert_close(gpucore.var(t), x.var(ddof=1), **R)
    assert_close(gpucore.std(t, 1), x.std(1, ddof=1), **R)


# ----------------------------------------------------------------------------- bad input
def test_dim_out_of_range():
    t = gpucore.zeros(2, 3)
    for fn in (
        lambda: t.sum(2),
        lambda: t.mean(-3),
        lambda: t.amax(5),
        lambda: t.max(2),
        lambda: t.argmax(-3),
        lambda: t.any(2),
        lambda: t.sum((0, 2)),
    ):
        with pytest.raises(gpucore.GpucoreIndexError, match="out of range") as e:
            fn()
        assert isinstance(e.value, IndexError)
    with pytest.raises(ValueError, match="repeat"):
        t.sum((1, -1))


def test_function_forms():
    x = rand((3, 4))
    t = gpucore.tensor(x)
    assert_close(gpucore.sum(t, 1), x.sum(1), **R)
    assert_close(gpucore.mean(t, (0, 1)), x.mean(), **R)
    assert_close(gpucore.amax(t, 0), x.max(0))
    assert_close(gpucore.amin(t, 1, True), x.min(1, keepdims=True))
    assert_close(gpucore.argmax(t, 1), x.argmax(1))
    assert_close(gpucore.argmin(t), np.asarray(x.argmin()))
    assert_close(gpucore.max(t, 1).values, x.max(1))
    assert_close(gpucore.norm(t), np.sqrt((x * x).sum()), **R)


def test_max_ties_gradient_matches_torch():
    torch = pytest.importorskip("torch")
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0], [4.0, 4.0, 4.0]])
    for red in ("max_dim", "amax", "max"):
        tx = torch.tensor(x, requires_grad=True)
        gx = gpucore.tensor(x, dtype=gpucore.float64, requires_grad=True)
        if red == "max_dim":
            tx.max(1).values.sum().backward()
            gx.max(1).values.sum().backward()
        elif red == "amax":
            tx.amax(1).sum().backward()
            gx.amax(1).sum().backward()
        else:
            tx.max().backward()
            gx.max().backward()
        assert_close(gx.grad, tx.grad.numpy(), rtol=1e-12, atol=0)
