"""Unary elementwise ops (gpucore/ops/unary.py): math functions and activations, their
gradients and second derivatives, the function/method forms and numerical accuracy."""

import numpy as np
import pytest
from helpers import assert_close, check_op, np_gelu, to_np

import gpucore

SHAPES = [(), (1, 1, 1), (7, 13, 5), (5,)]
GRAD_SHAPE = (2, 3)

# name -> (gpucore fn, numpy fn, low, high)
UNARY = {
    "neg": (lambda x: -x, None, -2, 2),
    "abs": (lambda x: x.abs(), np.abs, -2, 2),
    "exp": (lambda x: x.exp(), np.exp, -3, 3),
    "log": (lambda x: x.log(), np.log, 0.1, 3),
    "sqrt": (lambda x: x.sqrt(), np.sqrt, 0.1, 3),
    "sin": (lambda x: x.sin(), np.sin, -3, 3),
    "cos": (lambda x: x.cos(), np.cos, -3, 3),
    "reciprocal": (lambda x: x.reciprocal(), np.reciprocal, 0.5, 3),
    "relu": (lambda x: x.relu(), lambda x: np.maximum(x, 0), -2, 2),
    "sigmoid": (lambda x: x.sigmoid(), lambda x: 1 / (1 + np.exp(-x)), -5, 5),
    "tanh": (lambda x: x.tanh(), np.tanh, -3, 3),
    "gelu": (lambda x: x.gelu(), np_gelu, -4, 4),
    "gelu_tanh": (lambda x: x.gelu(approximate="tanh"), lambda x: np_gelu(x, "tanh"), -4, 4),
    "rsqrt": (lambda x: x.rsqrt(), lambda x: 1 / np.sqrt(x), 0.2, 3),
    "square": (lambda x: x.square(), np.square, -2, 2),
    "log1p": (lambda x: x.log1p(), np.log1p, -0.5, 3),
    "softplus": (lambda x: x.softplus(), lambda x: np.logaddexp(0, x), -5, 5),
    "sign": (lambda x: x.sign(), np.sign, -2, 2),
}
ACTIVATIONS = ["relu", "sigmoid", "tanh", "gelu", "gelu_tanh", "softplus", "exp"]


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("shape", SHAPES)
def test_unary_forward(name, shape):
    fn, np_fn, lo, hi = UNARY[name]
    check_op(fn, np_fn, [shape], low=lo, high=hi, grad=False)


@pytest.mark.parametrize("name", UNARY)
def test_unary_grad(name):
    fn, np_fn, lo, hi = UNARY[name]
    check_op(fn, np_fn, [GRAD_SHAPE], low=lo, high=hi)


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_gradgrad(name):
    fn, np_fn, lo, hi = UNARY[name]
    check_op(fn, np_fn, [(2, 3)], low=lo, high=hi, grad=False, gradgrad=True, noncontig=False)


@pytest.mark.parametrize("name", ["exp", "abs", "relu", "sigmoid"])
def test_unary_empty(name):
    fn, np_fn, lo, hi = UNARY[name]
    check_op(fn, np_fn, [(0, 3)], grad=False)


def test_unary_function_forms():
    x = gpucore.tensor([-1.0, 0.5, 2.0])
    for fn, np_fn in (
        (gpucore.exp, np.exp),
        (gpucore.abs, np.abs),
        (gpucore.tanh, np.tanh),
        (gpucore.relu, lambda v: np.maximum(v, 0)),
        (gpucore.neg, np.negative),
    ):
        assert_close(fn(x), np_fn(to_np(x).astype(np.float64)))


def test_gelu_far_tails():
    v = np.array([-9.0, -8.25, -6.5, -5.0, 5.0, 9.0])
    for dt, rtol in ((gpucore.float32, 1e-4), (gpucore.float64, 1e-10)):
        # erf form: x * Phi(x) must not cancel to 0 or lose digits for very negative x
        assert_close(gpucore.tensor(v, dtype=dt).gelu(), np_gelu(v), rtol=rtol, atol=0)


def test_gelu_bad_approximate():
    with pytest.raises(ValueError, match="approximate"):
        gpucore.tensor([1.0]).gelu(approximate="fast")


def test_x_cubed_second_derivative_is_6x():
    x = gpucore.tensor([-1.5, 0.0, 0.5, 2.0], dtype=gpucore.float64, requires_grad=True)
    (g,) = gpucore.autograd.grad((x**3).sum(), [x], create_graph=True)
    assert_close(g, 3 * to_np(x) ** 2)
    (gg,) = gpucore.autograd.grad(g.sum(), [x])
    assert_close(gg, 6 * to_np(x), rtol=1e-12)


def test_log1p_softplus_accuracy():
    x = gpucore.tensor([1e-8, -1e-10, 0.0, 3.0], requires_grad=True)
    assert_close(x.log1p(), np.log1p(np.float32([1e-8, -1e-10, 0.0, 3.0])), rtol=1e-6, atol=0)
    y = gpucore.tensor([-20.0, -60.0, 0.0, 30.0, float("inf"), -float("inf")], requires_grad=True)
    sp = y.softplus()
    ref = np.float64([-20, -60, 0, 30, np.inf, -np.inf])
    assert_close(sp, np.logaddexp(0, ref), rtol=1e-6, atol=0)
    sp.sum().backward()
    assert_close(y.grad, 1 / (1 + np.exp(-ref)), rtol=1e-6, atol=0)  # 1/2 at 0


def test_relu_gradient_at_zero_is_zero():
    x = gpucore.tensor([-1.0, 0.0, 1.0], requires_grad=True)
    x.relu().sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 1.0]


# Issue 20, item 11: integer and bool inputs of float math give float32 computed in float (log1p
# of a uint8 tensor went through a float16 intermediate: log1p(200) was 5.3047, not 5.3033).
_INT_INPUTS = {
    "uint8": [0, 1, 7, 200, 255],
    "int8": [-128, -3, 0, 5, 127],
    "int32": [-100000, -5, 0, 9, 100000],
    "int64": [-(2**40), -5, 0, 9, 2**40],
    "bool": [True, False, True, True, False],
}
_FLOAT_MATH = {
    "exp": np.exp,
    "log": np.log,
    "log1p": np.log1p,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x),
    "sin": np.sin,
    "cos": np.cos,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "tanh": np.tanh,
    "reciprocal": np.reciprocal,
}


@pytest.mark.parametrize("dtype", sorted(_INT_INPUTS))
@pytest.mark.parametrize("name", sorted(_FLOAT_MATH))
def test_float_math_of_integer_inputs_is_float32_and_exact(name, dtype):
    values = _INT_INPUTS[dtype]
    x = gpucore.tensor(values, dtype=getattr(gpucore, dtype))
    got = getattr(gpucore, name)(x)
    assert got.dtype is gpucore.float32
    with np.errstate(all="ignore"):
        # float32 in, float64 math: what PyTorch gives (the int converted to float32 first)
        want = _FLOAT_MATH[name](np.array(values).astype(np.float32).astype(np.float64))
        want = want.astype(np.float32)  # rounded once, overflowing to inf as PyTorch's
    np.testing.assert_allclose(to_np(got), want, rtol=2e-6, atol=1e-30, equal_nan=True)


def test_log1p_of_uint8_has_float32_precision():
    got = gpucore.log1p(gpucore.tensor([200, 255], dtype=gpucore.uint8))
    np.testing.assert_allclose(to_np(got), np.log1p([200.0, 255.0]), rtol=1e-7)


def test_sign_and_square_of_bool_as_pytorch():
    b = gpucore.tensor([True, False])
    assert gpucore.sign(b).dtype is gpucore.bool and gpucore.sign(b).tolist() == [True, False]
    sq = gpucore.square(b)
    assert sq.dtype is gpucore.int64 and sq.tolist() == [1, 0]
