"""gpucore.onnx.ops.elementwise: binary ops with broadcasting, comparisons, logical ops, Where,
Min/Max/Sum/Mean, Clip, Cast, against onnxruntime at opset 13 and the newest."""

import numpy as np
import pytest
from onnx_cases import OPSETS, check_op, helper, model, rand, run_gpucore

ARITH = ["Add", "Sub", "Mul", "Div"]
SHAPES = [((2, 3), (2, 3)), ((2, 3, 4), (4,)), ((3, 1), (1, 5)), ((), (2, 2)), ((2, 1, 4), (3, 1))]


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("op", ARITH)
@pytest.mark.parametrize("shapes", SHAPES)
def test_arithmetic_broadcasts(op, shapes, opset):
    a, b = rand(*shapes[0], seed=1), rand(*shapes[1], seed=2, low=0.5, high=2.0)
    check_op(op, [a, b], opset=opset)


@pytest.mark.parametrize("op", ARITH + ["Pow"])
def test_a_constant_operand_and_the_load_time_path(op):
    a, b = rand(2, 3, seed=1, low=0.5), rand(3, seed=2, low=0.5)
    check_op(op, [a, b], static=(1,), opset=17)
    check_op(op, [a, b], opset=17, all_static=True)


@pytest.mark.parametrize("opset", OPSETS)
def test_integer_arithmetic_keeps_onnx_semantics(opset):
    a = np.array([7, -7, 9, -9, 0], np.int64)
    b = np.array([2, 2, -4, -4, 3], np.int64)
    for op in ARITH:
        check_op(op, [a, b], opset=opset)
        check_op(op, [a, b], opset=opset, all_static=True)
    check_op("Mod", [a, b], opset=opset, all_static=True)
    check_op("Mod", [a, b], opset=opset)
    check_op("Mod", [rand(6, seed=3), rand(6, seed=4, low=0.5)], {"fmod": 1}, opset=opset)


def test_pow_with_an_integer_exponent_keeps_the_base_type():
    check_op("Pow", [rand(2, 3, low=0.1), np.array(3, np.int64)], static=(1,), opset=17)
    check_op("Pow", [rand(2, 3, low=0.1), np.float32(0.5)], opset=17)


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
def test_comparisons(op, opset):
    a = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    b = np.array([3, 2, 1], np.float32)
    check_op(op, [a, b], opset=opset, out=np.bool_)
    check_op(op, [a.astype(np.int64), b.astype(np.int64)], opset=opset, out=np.bool_)


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logical(op):
    a = np.array([[True, False], [True, True]])
    b = np.array([False, True])
    check_op(op, [a, b], opset=17)
    check_op(op, [a, b], opset=17, all_static=True)
    check_op("Not", [a], opset=17)


@pytest.mark.parametrize("opset", OPSETS)
def test_where_broadcasts_all_three(opset):
    c = rand(2, 1, 4, seed=1) > 0
    f32 = np.float32
    check_op("Where", [c, rand(3, 1, seed=2), rand(4, seed=3)], opset=opset, out=f32)
    check_op("Where", [c, rand(3, 1, seed=2), f32(-np.inf)], static=(0, 2), opset=opset, out=f32)


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("op", ["Max", "Min", "Sum", "Mean"])
def test_variadic(op, opset):
    check_op(op, [rand(2, 3, seed=1), rand(3, seed=2), rand(1, 3, seed=3)], opset=opset)
    check_op(op, [rand(2, 3, seed=1)], opset=opset)


@pytest.mark.parametrize("opset", OPSETS)
def test_clip_bounds_default_and_given(opset):
    x = rand(3, 4, seed=1)
    check_op("Clip", [x], opset=opset)
    check_op("Clip", [x, np.float32(-0.5), np.float32(0.5)], static=(1, 2), opset=opset)
    check_op("Clip", [x, None, np.float32(0.5)], static=(2,), opset=opset)
    check_op("Clip", [x, np.float32(-0.5)], opset=opset)  # a bound computed at run time
    check_op("Clip", [np.arange(-3, 3, dtype=np.int64), np.int64(-1), np.int64(1)], opset=opset)


def test_clip_attributes_before_opset_11():
    check_op("Clip", [rand(3, 4)], {"min": -0.5, "max": 0.25}, opset=10)


@pytest.mark.parametrize("opset", OPSETS)
def test_cast(opset):
    x = np.array([-2.7, -0.5, 0.0, 0.5, 2.7], np.float32)
    for to, dt in ((7, np.int64), (6, np.int32), (9, np.bool_), (11, np.float64)):
        check_op("Cast", [x], {"to": to}, opset=opset, out=dt)
        check_op("Cast", [x], {"to": to}, opset=opset, out=dt, all_static=True)
    like = [x, np.zeros(1, np.int64)]
    check_op("CastLike", like, opset=max(opset, 15), out=np.int64, static=(1,))


@pytest.mark.parametrize("op", ARITH + ["Pow", "Max", "Min"])
def test_float_ops_on_vulkan(vulkan, op):
    a, b = rand(2, 3, 4, seed=1, low=0.5), rand(4, seed=2, low=0.5)
    check_op(op, [a, b], opset=17, device="vulkan")
    check_op("Where", [a > 1, a, b], opset=17, device="vulkan", out=np.float32)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_float_mod_edge_cases_follow_numpy(dtype):
    # signed zeros, infinite divisors, infinite dividends and zero divisors (NaN)
    x = np.array([0, -0.0, 3, -1, 1, np.inf, 1, np.nan, 5.5, -5.5], dtype)
    y = np.array([-2, 2, np.inf, -np.inf, -np.inf, 2, 0, 2, -2, 2], dtype)
    m = model([helper.make_node("Mod", ["x", "y"], ["z"], fmod=0)], {"x": x, "y": y},
              {"z": dtype}, opset=17)  # fmt: skip
    (got,) = run_gpucore(m, {"x": x, "y": y})
    with np.errstate(all="ignore"):
        want = np.mod(x, y)
    np.testing.assert_array_equal(got, want)
    real = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[real]), np.signbit(want[real]))
