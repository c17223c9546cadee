"""Elementwise ops (gpucore/ops/elementwise.py): binary arithmetic with broadcasting,
comparisons, logical ops, where, clamp, dtype promotion, IEEE special values and bad input."""

import numpy as np
import pytest
from helpers import assert_close, check_grad, check_op, rand, sum_to, to_np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, mutually_broadcastable_shapes

import gpucore
import gpucore.nn.functional as F
from gpucore.autograd import gradgradcheck

SHAPES = [(), (1, 1, 1), (7, 13, 5), (5,)]
GRAD_SHAPE = (2, 3)

# ----------------------------------------------------------------------------- binary
BINARY = {
    "add": (lambda a, b: a + b, None, -2, 2),
    "sub": (lambda a, b: a - b, None, -2, 2),
    "mul": (lambda a, b: a * b, None, -2, 2),
    "div": (lambda a, b: a / b, None, 0.5, 2),
    "pow": (lambda a, b: a**b, None, 0.5, 2),
    "maximum": (gpucore.maximum, np.maximum, -2, 2),
    "minimum": (gpucore.minimum, np.minimum, -2, 2),
}
BROADCAST = [
    [(3, 4), (3, 4)],
    [(3, 1), (1, 4)],
    [(4,), (2, 3, 4)],
    [(), (2, 3)],
    [(2, 3), ()],
    [(2, 1, 3), (4, 1)],
]


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("shapes", BROADCAST)
def test_binary(name, shapes):
    fn, np_fn, lo, hi = BINARY[name]
    check_op(fn, np_fn, shapes, low=lo, high=hi)


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("shapes", [[(1, 1, 1), (7, 13, 5)], [(7, 13, 5), (13, 1)], [(0, 3), (3,)]])
def test_binary_odd_shapes(name, shapes):
    fn, np_fn, lo, hi = BINARY[name]
    check_op(fn, np_fn, shapes, low=lo, high=hi, grad=False)


def test_binary_transposed_operands():
    a, b = rand((5, 7)), rand((7, 5), seed=1)
    ta = gpucore.tensor(a)
    tb = gpucore.tensor(b)
    assert_close(ta + tb.T, a + b.T)
    assert_close(ta.T * tb, a.T * b)
    assert_close(ta[::2, ::-3] - tb.T[::2, ::3], a[::2, ::-3] - b.T[::2, ::3])


def test_pow_grad_both_operands_and_scalars():
    check_op(lambda a, b: a**b, None, [(2, 3), (2, 3)], low=0.5, high=2)
    check_op(lambda a: a**3, None, [(2, 3)])
    check_op(lambda a: a**0.5, None, [(2, 3)], low=0.5, high=2)
    check_op(lambda a: 2.0**a, None, [(2, 3)])
    check_op(lambda a: a**-1.5, None, [(2, 3)], low=0.5, high=2)


def test_pow_zero_base_gradients():
    a = gpucore.tensor([0.0, 0.0, 2.0], dtype=gpucore.float64, requires_grad=True)
    b = gpucore.tensor([2.0, 0.0, 0.0], dtype=gpucore.float64, requires_grad=True)
    (a**b).sum().backward()
    # PyTorch: d/da = b * a**(b-1) (0 where b == 0); d/db = a**b * log(a) (0 where a == 0)
    assert to_np(a.grad).tolist() == [0.0, 0.0, 0.0]
    np.testing.assert_allclose(to_np(b.grad), [0.0, 0.0, np.log(2.0)])


def test_scalar_operands_and_reflected():
    x = rand((3, 4))
    t = gpucore.tensor(x)
    assert_close(2 + t, 2 + x)
    assert_close(2 - t, 2 - x)
    assert_close(2 * t, 2 * x)
    assert_close(2 / (t + 3), 2 / (x + 3))
    assert_close(t - 1.5, x - 1.5)
    assert_close(gpucore.add(t, t, alpha=2), x + 2 * x)
    assert_close(gpucore.sub(t, t, alpha=0.5), x - 0.5 * x)
    check_op(lambda a: 1 - 3 * a / 2 + a * 0.5, None, [(2, 3)])


def test_maximum_minimum_ties_split_gradient():
    a = gpucore.tensor([1.0, 2.0, 3.0], dtype=gpucore.float64, requires_grad=True)
    b = gpucore.tensor([1.0, 5.0, 0.0], dtype=gpucore.float64, requires_grad=True)
    gpucore.maximum(a, b).sum().backward()
    assert to_np(a.grad).tolist() == [0.5, 0.0, 1.0]
    assert to_np(b.grad).tolist() == [0.5, 1.0, 0.0]
    a.grad = b.grad = None
    gpucore.minimum(a, b).sum().backward()
    assert to_np(a.grad).tolist() == [0.5, 1.0, 0.0]
    assert to_np(b.grad).tolist() == [0.5, 0.0, 1.0]


# ----------------------------------------------------------------------------- comparisons
CMP = {
    "eq": (lambda a, b: a == b, np.equal),
    "ne": (lambda a, b: a != b, np.not_equal),
    "lt": (lambda a, b: a < b, np.less),
    "le": (lambda a, b: a <= b, np.less_equal),
    "gt": (lambda a, b: a > b, np.greater),
    "ge": (lambda a, b: a >= b, np.greater_equal),
}


@pytest.mark.parametrize("name", CMP)
@pytest.mark.parametrize(
    "dtype",
    [
        gpucore.float32,
        gpucore.float64,
        gpucore.int64,
        gpucore.int32,
        gpucore.float16,
        gpucore.bfloat16,
    ],
)
def test_comparisons_give_bool(name, dtype):
    fn, np_fn = CMP[name]
    a = np.array([[1, 2, 3], [4, 5, 6]], np.float64)
    b = np.array([3, 2, 1], np.float64)  # ties included
    out = fn(gpucore.tensor(a, dtype=dtype), gpucore.tensor(b, dtype=dtype))
    assert out.dtype is gpucore.bool
    assert_close(out, np_fn(a, b))
    out = fn(gpucore.tensor(a, dtype=dtype), 2)
    assert out.dtype is gpucore.bool
    assert_close(out, np_fn(a, 2))
    assert_close(
        getattr(gpucore, name)(gpucore.tensor(a, dtype=dtype)[:, ::2], 3), np_fn(a[:, ::2], 3)
    )


def test_comparisons_nan():
    a = gpucore.tensor([float("nan"), 1.0])
    assert (a == a).tolist() == [False, True]
    assert (a != a).tolist() == [True, False]
    assert (a < 2).tolist() == [False, True]


def test_logical_ops():
    a = gpucore.tensor([True, True, False, False])
    b = gpucore.tensor([True, False, True, False])
    assert (a & b).tolist() == [True, False, False, False]
    assert (a | b).tolist() == [True, True, True, False]
    assert (a ^ b).tolist() == [False, True, True, False]
    assert (~a).tolist() == [False, False, True, True]
    assert gpucore.logical_and(a, gpucore.tensor([1.0, 0.0, 2.0, 0.0])).tolist() == [
        True,
        False,
        False,
        False,
    ]
    assert gpucore.logical_not(gpucore.tensor([0, 3])).tolist() == [True, False]


# ----------------------------------------------------------------------------- where, clamp
def test_where():
    cond = rand((3, 4), seed=5) > 0
    check_op(
        lambda a, b: gpucore.where(gpucore.tensor(cond), a, b),
        lambda a, b: np.where(cond, a, b),
        [(3, 4), (3, 4)],
    )
    # broadcasting condition and operands
    c2 = rand((3, 1), seed=6) > 0
    check_op(
        lambda a, b: gpucore.where(gpucore.tensor(c2), a, b),
        lambda a, b: np.where(c2, a, b),
        [(1, 4), ()],
    )
    # scalar operand, method form
    x = rand((5,))
    t = gpucore.tensor(x)
    assert_close(t.where(t > 0, 0.0), np.where(x > 0, x, 0.0))
    assert_close(t.where(t > 0, -t), np.where(x > 0, x, -x))
    assert_close(gpucore.where(t > 0, 1.0, t), np.where(x > 0, 1.0, x))


def test_where_scalars_and_none_comparison():
    c = gpucore.tensor([True, False])
    assert gpucore.where(c, 1.0, 0.0).dtype is gpucore.float32
    assert gpucore.where(c, 1, 0).tolist() == [1, 0]
    assert gpucore.where(c, 1, 0.5).tolist() == [1.0, 0.5]
    t = gpucore.tensor([1.0, 2.0])
    assert (t == None) is False and (t != None) is True  # noqa: E711 - operator fallback
    with pytest.raises(TypeError):
        t < "a"  # noqa: B015
    assert (2 < t).tolist() == [False, False] and (1.5 <= t).tolist() == [False, True]


def test_where_int():
    c = gpucore.tensor([True, False, True])
    out = gpucore.where(c, gpucore.tensor([1, 2, 3]), gpucore.tensor([7, 8, 9]))
    assert out.dtype is gpucore.int64 and out.tolist() == [1, 8, 3]


@pytest.mark.parametrize("lo,hi", [(-0.5, 0.5), (-0.5, None), (None, 0.5)])
def test_clamp(lo, hi):
    check_op(lambda x: x.clamp(lo, hi), lambda x: np.clip(x, lo, hi), [(7, 13, 5)], grad=False)
    check_op(lambda x: x.clamp(lo, hi), lambda x: np.clip(x, lo, hi), [(3, 4)])


def test_clamp_tensor_bounds_and_boundary_grad():
    check_op(
        lambda x, lo, hi: x.clamp(lo, hi),
        lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi),
        [(3, 4)],
        vals=[rand((3, 4)), rand((4,), -2, -0.5, 1), rand((3, 1), 0.5, 2, 2)],
    )
    x = gpucore.tensor([-2.0, -1.0, 0.0, 1.0, 2.0], requires_grad=True)
    x.clamp(-1, 1).sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 1.0, 1.0, 0.0]  # PyTorch: boundary passes the gradient


def test_clamp_tensor_bounds_ties_give_the_gradient_to_the_input():
    # As torch.clamp with tensor bounds: at x == bound the input gets the whole gradient, a bound
    # only where it is the result (min > max gives max).
    x = gpucore.tensor([0.0, 1.0, 2.0, 2.0, 3.0], requires_grad=True)
    lo = gpucore.tensor([1.0, 1.0, 1.0, 2.5, 1.0], requires_grad=True)
    hi = gpucore.tensor([2.0, 2.0, 2.0, 1.0, 2.0], requires_grad=True)
    out = x.clamp(lo, hi)
    assert out.tolist() == [1.0, 1.0, 2.0, 1.0, 2.0]
    out.sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 1.0, 0.0, 0.0]
    assert lo.grad.tolist() == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert hi.grad.tolist() == [0.0, 0.0, 0.0, 1.0, 1.0]


def test_clamp_int_and_nan():
    assert gpucore.tensor([-5, 0, 5]).clamp(-1, 2).tolist() == [-1, 0, 2]
    assert gpucore.tensor([-5, 0, 5]).clamp(-1, 2).dtype is gpucore.int64
    out = gpucore.tensor([1, 2, 3]).clamp(min=1.5)  # a float bound promotes, as PyTorch
    assert out.dtype is gpucore.float32 and out.tolist() == [1.5, 2.0, 3.0]
    out = gpucore.tensor([float("nan"), 3.0]).clamp(0.0, 1.0)
    assert np.isnan(out.tolist()[0]) and out.tolist()[1] == 1.0
    with pytest.raises(ValueError, match="min and max"):
        gpucore.tensor([1.0]).clamp()


# ----------------------------------------------------------------------------- broadcasting
_BCAST = mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, min_side=1, max_side=4)


def _bcast_grads(name, a, b, g):
    """numpy reference gradients (summed back to the input shapes)."""
    bb = np.broadcast_to(b, g.shape)
    ab = np.broadcast_to(a, g.shape)
    if name == "add":
        ga, gb = g, g
    elif name == "mul":
        ga, gb = g * bb, g * ab
    else:  # maximum
        ga = np.where(ab > bb, g, 0) + np.where(ab == bb, g / 2, 0)
        gb = np.where(bb > ab, g, 0) + np.where(ab == bb, g / 2, 0)
    return sum_to(ga, a.shape), sum_to(gb, b.shape)


@pytest.mark.parametrize("name", ["add", "mul", "maximum"])
@settings(max_examples=40, deadline=None)
@given(shapes=_BCAST, seed=st.integers(0, 2**16))
def test_broadcast_property(name, shapes, seed):
    sa, sb = shapes.input_shapes
    rng = np.random.default_rng(seed)
    a = rng.integers(-3, 4, size=sa).astype(np.float64)  # small ints: ties happen in maximum
    b = rng.integers(-3, 4, size=sb).astype(np.float64)
    fn = {"add": np.add, "mul": np.multiply, "maximum": np.maximum}[name]
    ta = gpucore.tensor(a, dtype=gpucore.float64, requires_grad=True)
    tb = gpucore.tensor(b, dtype=gpucore.float64, requires_grad=True)
    out = getattr(gpucore, name)(ta, tb)
    expected = fn(a, b)
    assert tuple(out.shape) == shapes.result_shape
    assert_close(out, expected)
    g = rng.standard_normal(expected.shape)
    out.backward(gpucore.tensor(g, dtype=gpucore.float64))
    ga, gb = _bcast_grads(name, a, b, g)
    assert tuple(ta.grad.shape) == sa and tuple(tb.grad.shape) == sb
    assert_close(ta.grad, ga, rtol=1e-12, atol=1e-12)
    assert_close(tb.grad, gb, rtol=1e-12, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(shapes=_BCAST, name=st.sampled_from(sorted(CMP)))
def test_broadcast_property_comparisons(shapes, name):
    sa, sb = shapes.input_shapes
    rng = np.random.default_rng(0)
    a = rng.integers(-2, 3, size=sa).astype(np.float32)
    b = rng.integers(-2, 3, size=sb).astype(np.float32)
    fn, np_fn = CMP[name]
    out = fn(gpucore.tensor(a), gpucore.tensor(b))
    assert out.dtype is gpucore.bool
    assert_close(out, np_fn(a, b))


@settings(max_examples=30, deadline=None)
@given(shape=array_shapes(min_dims=1, max_dims=4, min_side=2, max_side=5), data=st.data())
def test_non_broadcastable_shapes_raise(shape, data):
    d = data.draw(st.integers(0, len(shape) - 1))
    bad = shape[:d] + (shape[d] + 1,) + shape[d + 1 :]  # both sizes >= 2 and different
    bad = bad[data.draw(st.integers(0, d)) :]  # drop some leading dims (still mismatched)
    name = data.draw(st.sampled_from(["add", "mul", "maximum", "lt"]))
    with pytest.raises(gpucore.ShapeError) as e:
        getattr(gpucore, name)(gpucore.zeros(shape), gpucore.zeros(bad))
    assert str(shape) in str(e.value) and str(bad) in str(e.value) and name in str(e.value)


# ----------------------------------------------------------------------------- dtypes
def test_promotion():
    i = gpucore.tensor([1, 2, 3])
    f = gpucore.tensor([0.5, 0.5, 0.5])
    d = gpucore.tensor([0.5, 0.5, 0.5], dtype=gpucore.float64)
    assert (i + f).dtype is gpucore.float32
    assert (f + i).tolist() == [1.5, 2.5, 3.5]
    assert (f + d).dtype is gpucore.float64
    assert (d * f).dtype is gpucore.float64
    assert (f + 2).dtype is gpucore.float32
    assert (f + 2.5).dtype is gpucore.float32
    assert (d + 2.5).dtype is gpucore.float64
    assert (i + 2).dtype is gpucore.int64
    assert (i + 2.5).dtype is gpucore.float32
    assert (i.int() + i).dtype is gpucore.int64
    assert (i.int() + 1).dtype is gpucore.int32
    h = gpucore.tensor([1.0], dtype=gpucore.float16)
    assert (h + 1.0).dtype is gpucore.float16
    assert (h + f[:1]).dtype is gpucore.float32
    assert (h + gpucore.tensor([1.0], dtype=gpucore.bfloat16)).dtype is gpucore.float32
    # a 0-d tensor acts like a scalar of its category
    assert (f + gpucore.tensor(2.0, dtype=gpucore.float64)).dtype is gpucore.float32
    assert (i / i).dtype is gpucore.float32
    b = gpucore.tensor([True, False])
    assert (b + gpucore.tensor(3)).dtype is gpucore.int64  # bool < int < float categories
    assert (i + gpucore.tensor(2.5)).dtype is gpucore.float32
    assert (i.int() + gpucore.tensor(2)).dtype is gpucore.int32


def test_numpy_operands():
    i = gpucore.tensor([1, 2])
    assert (i + np.float32(1.5)).tolist() == [2.5, 3.5]  # numpy scalars act as Python numbers
    assert (i * np.int64(2)).dtype is gpucore.int64
    out = np.ones(2) + gpucore.tensor([1.0, 2.0])
    assert isinstance(out, gpucore.Tensor) and out.tolist() == [2.0, 3.0]


def test_int_ops_exact():
    a = np.array([[7, -3, 0], [100, 5, -8]], np.int64)
    b = np.array([2, 3, -4], np.int64)
    ta, tb = gpucore.tensor(a), gpucore.tensor(b)
    for fn in (lambda x, y: x + y, lambda x, y: x - y, lambda x, y: x * y):
        out = fn(ta, tb)
        assert out.dtype is gpucore.int64
        assert_close(out, fn(a, b))
    assert_close(ta / tb, a / b)
    assert (ta / tb).dtype is gpucore.float32
    assert_close(gpucore.maximum(ta, tb), np.maximum(a, b))
    assert_close(-ta, -a)
    assert_close(ta.abs(), np.abs(a))
    assert_close(ta**2, a**2)
    assert (ta**2).dtype is gpucore.int64
    with np.errstate(over="ignore"):
        assert_close(ta.exp(), np.exp(a.astype(np.float32)), rtol=1e-5)
    assert ta.exp().dtype is gpucore.float32
    assert ta.relu().tolist() == np.maximum(a, 0).tolist()
    i8 = gpucore.tensor(np.array([100, 120], np.int8))
    assert (i8 + i8).dtype is gpucore.int8
    u8 = gpucore.tensor(np.array([200, 250], np.uint8))
    assert (u8 + i8).dtype is gpucore.int16  # as PyTorch
    assert (u8 + i8).tolist() == [300, 370]


def test_bool_ops():
    a = gpucore.tensor([True, False, True])
    assert (a == gpucore.tensor([True, True, False])).tolist() == [True, False, False]
    assert (a + 1).dtype is gpucore.int64
    assert (a + 1).tolist() == [2, 1, 2]
    assert (a * 1.5).dtype is gpucore.float32
    assert (a.float() * 2).tolist() == [2.0, 0.0, 2.0]


@pytest.mark.parametrize("dtype,rtol", [(gpucore.float16, 2e-3), (gpucore.bfloat16, 1e-2)])
def test_low_precision_close_to_float32(dtype, rtol):
    x = rand((4, 5), -2, 2)
    y = rand((5,), 0.5, 2, 1)
    for fn in (
        lambda a, b: a + b,
        lambda a, b: a * b,
        lambda a, b: a / b,
        lambda a, b: (a.exp() - b).tanh(),
        lambda a, b: gpucore.maximum(a, b).gelu(),
        lambda a, b: a.sigmoid() * b.sqrt(),
    ):
        ref = fn(gpucore.tensor(x), gpucore.tensor(y))
        out = fn(gpucore.tensor(x, dtype=dtype), gpucore.tensor(y, dtype=dtype))
        assert out.dtype is dtype
        assert_close(out.float(), to_np(ref), rtol=rtol, atol=rtol)
    cmp = gpucore.tensor(x, dtype=dtype) > 0
    assert cmp.dtype is gpucore.bool


def test_low_precision_grad():
    x = gpucore.tensor([0.5, -1.0, 2.0], dtype=gpucore.bfloat16, requires_grad=True)
    (x * x).sum().backward()
    assert x.grad.dtype is gpucore.bfloat16
    assert_close(x.grad.float(), [1.0, -2.0, 4.0], rtol=1e-2)


# ----------------------------------------------------------------------------- IEEE specials
def test_nan_inf_propagate():
    nan, inf = float("nan"), float("inf")
    x = gpucore.tensor([nan, 1.0, -inf, inf])
    y = gpucore.tensor([0.0, nan, 0.0, 0.0])
    assert np.isnan(gpucore.maximum(x, y).tolist()[:2]).all()
    assert np.isnan(gpucore.minimum(x, y).tolist()[:2]).all()
    assert gpucore.maximum(x, y).tolist()[2:] == [0.0, inf]
    assert gpucore.minimum(x, y).tolist()[2:] == [-inf, 0.0]
    e = gpucore.tensor([inf, -inf, nan, 1000.0]).exp().tolist()
    assert e[0] == inf and e[1] == 0.0 and np.isnan(e[2]) and e[3] == inf
    assert gpucore.tensor([0.0, -1.0]).log().tolist()[0] == -inf
    assert np.isnan(gpucore.tensor([-1.0]).log().item())
    assert np.isnan(gpucore.tensor([-1.0]).sqrt().item())
    assert (gpucore.tensor([1.0, -1.0, 0.0]) / 0.0).tolist()[:2] == [inf, -inf]
    assert np.isnan((gpucore.tensor([0.0]) / 0.0).item())
    assert np.isnan(gpucore.tensor([nan]).relu().item())
    assert np.isnan(gpucore.tensor([nan]).sigmoid().item())
    assert gpucore.tensor([inf, -inf]).tanh().tolist() == [1.0, -1.0]
    assert gpucore.tensor([-1000.0, 1000.0]).sigmoid().tolist() == [0.0, 1.0]
    assert (gpucore.tensor([inf]) - inf).isnan().all()


@pytest.mark.parametrize(
    "dtype", [gpucore.float32, gpucore.float64, gpucore.float16, gpucore.bfloat16]
)
def test_isnan_isinf_isfinite(dtype):
    v = np.array([1.0, np.nan, np.inf, -np.inf, 0.0])
    x = gpucore.tensor(v, dtype=dtype)
    assert_close(x.isnan(), np.isnan(v))
    assert_close(gpucore.isinf(x), np.isinf(v))
    assert_close(gpucore.isfinite(x[::2]), np.isfinite(v[::2]))
    assert gpucore.isfinite(gpucore.tensor([1, 2])).tolist() == [True, True]
    assert gpucore.isnan(gpucore.tensor([True])).tolist() == [False]


# ----------------------------------------------------------------------------- bad input
def test_bad_shapes():
    with pytest.raises(gpucore.ShapeError) as e:
        gpucore.zeros(3, 4) + gpucore.zeros(5)
    assert "(3, 4)" in str(e.value) and "(5,)" in str(e.value)
    assert isinstance(e.value, ValueError)
    with pytest.raises(gpucore.ShapeError, match=r"\(2, 3\).*\(3, 2\)"):
        gpucore.maximum(gpucore.zeros(2, 3), gpucore.zeros(3, 2))
    with pytest.raises(gpucore.ShapeError, match="where"):
        gpucore.where(gpucore.zeros(2, dtype=gpucore.bool), gpucore.zeros(3), gpucore.zeros(3))


def test_bad_dtypes():
    with pytest.raises(gpucore.DTypeError, match="bool"):
        gpucore.where(gpucore.zeros(3), gpucore.zeros(3), gpucore.zeros(3))
    with pytest.raises(gpucore.DTypeError, match="bool"):
        gpucore.zeros(3) & gpucore.zeros(3)
    with pytest.raises(gpucore.DTypeError, match="floating point"):
        gpucore.tensor([1, 2]).requires_grad_()
    b = gpucore.tensor([True, False])
    for fn in (lambda: b - 1, lambda: 1.0 - b, lambda: -b, lambda: gpucore.sub(b, b)):
        with pytest.raises(gpucore.DTypeError, match="bool"):
            fn()
    with pytest.raises(TypeError, match="str"):
        gpucore.zeros(3) + "a"
    assert issubclass(gpucore.DTypeError, TypeError)


def test_grad_dtype_mixed_float32_float64():
    a = gpucore.tensor([1.0, 2.0], requires_grad=True)
    b = gpucore.tensor([3.0, 4.0], dtype=gpucore.float64, requires_grad=True)
    (a * b).sum().backward()
    assert a.grad.dtype is gpucore.float32 and b.grad.dtype is gpucore.float64
    assert a.grad.tolist() == [3.0, 4.0] and b.grad.tolist() == [1.0, 2.0]


def test_check_grad_views():
    # gradients flow through views taken before the op
    check_grad(lambda x: (x.T * x[0]).exp(), rand((3, 3)))
    check_grad(lambda x: x[::2, 1:].sigmoid() * x[1:, ::-2], rand((3, 3)))


# ----------------------------------------------------------------------------- torch
def test_gelu_matches_torch():
    torch = pytest.importorskip("torch")
    x = rand((50,), -6, 6)
    for approx in ("none", "tanh"):
        ref = torch.nn.functional.gelu(torch.tensor(x), approximate=approx).numpy()
        assert_close(
            F.gelu(gpucore.tensor(x, dtype=gpucore.float64), approximate=approx),
            ref,
            rtol=1e-12,
            atol=1e-14,
        )
        tx = torch.tensor(x, requires_grad=True)
        torch.nn.functional.gelu(tx, approximate=approx).sum().backward()
        gx = gpucore.tensor(x, dtype=gpucore.float64, requires_grad=True)
        F.gelu(gx, approximate=approx).sum().backward()
        assert_close(gx.grad, tx.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_gradgradcheck_binary():
    x = gpucore.tensor(rand((2, 3)), dtype=gpucore.float64, requires_grad=True)
    y = gpucore.tensor(rand((3,), 0.5, 2, 1), dtype=gpucore.float64, requires_grad=True)
    assert gradgradcheck(lambda a, b: a * b / (b + a * a + 3), [x, y])
    assert gradgradcheck(lambda a, b: b**a, [x, y])


def test_integer_negative_powers_as_torch():
    """Integer tensor exponents below 0 give PyTorch's 1 / -1 / 0; a negative Python integer
    exponent of an integer tensor raises, as PyTorch's RuntimeError (issue 14)."""
    torch = pytest.importorskip("torch")
    from helpers import same_as_torch

    base = [2, 1, -1, 0, -3, 5]
    exps = [-1, -3, -3, -1, -2, 0]
    for dt in ("int8", "int16", "int32", "int64", "uint8"):
        b = base if dt != "uint8" else [abs(v) for v in base]
        ours = gpucore.tensor(b, dtype=getattr(gpucore, dt)) ** gpucore.tensor(exps)
        theirs = torch.tensor(b, dtype=getattr(torch, dt)) ** torch.tensor(exps)
        same_as_torch(ours, theirs)
    same_as_torch(2 ** gpucore.tensor(exps), 2 ** torch.tensor(exps))
    same_as_torch(gpucore.pow(-1, gpucore.tensor(exps)), torch.pow(-1, torch.tensor(exps)))
    same_as_torch(
        gpucore.tensor([2, 1]) ** gpucore.tensor(-1), torch.tensor([2, 1]) ** torch.tensor(-1)
    )
    for bad in (lambda m: m.tensor([2]) ** -1, lambda m: m.tensor([True]) ** -2):
        with pytest.raises(RuntimeError):
            bad(torch)
        with pytest.raises(ValueError, match="negative integer powers"):
            bad(gpucore)
    same_as_torch(gpucore.tensor([2]) ** -1.0, torch.tensor([2]) ** -1.0)  # a float exponent
