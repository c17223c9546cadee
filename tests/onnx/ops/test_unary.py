"""gpucore.onnx.ops.unary: unary math and activations against onnxruntime, attribute defaults
and given values, at opset 13 and the newest."""

import numpy as np
import pytest
from onnx_cases import NEWEST, OPSETS, check_op, rand

MATH = ["Abs", "Neg", "Exp", "Sin", "Cos", "Tanh", "Sigmoid", "Relu", "Sign", "Erf"]
POSITIVE = ["Log", "Sqrt", "Reciprocal"]


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("op", MATH + POSITIVE)
def test_math(op, opset):
    x = rand(3, 5, low=0.1, high=3.0) if op in POSITIVE else rand(3, 5, low=-3.0, high=3.0)
    check_op(op, [x], opset=opset)
    check_op(op, [x], opset=opset, all_static=True)


def test_erf_is_accurate_over_its_range():
    x = np.linspace(-6, 6, 241, dtype=np.float32)
    check_op("Erf", [x], opset=17, atol=2e-7)


@pytest.mark.parametrize("op", ["Floor", "Ceil", "Round"])
def test_rounding_at_load_time(op):
    check_op(
        op, [np.array([-1.5, -0.5, 0.5, 1.5, 2.5, 2.2], np.float32)], opset=17, all_static=True
    )


def test_isnan_isinf():
    x = np.array([1.0, np.nan, np.inf, -np.inf, 0.0], np.float32)
    check_op("IsNaN", [x], opset=17, out=np.bool_)
    for pos, neg in ((1, 1), (1, 0), (0, 1)):
        attrs = {"detect_positive": pos, "detect_negative": neg}
        check_op("IsInf", [x], attrs, opset=17, out=np.bool_)


ACTIVATIONS = [
    ("LeakyRelu", {}),
    ("LeakyRelu", {"alpha": 0.2}),
    ("HardSigmoid", {}),
    ("HardSigmoid", {"alpha": 1 / 6, "beta": 0.5}),
    ("Elu", {}),
    ("Elu", {"alpha": 0.5}),
    ("Selu", {}),
    ("Celu", {"alpha": 2.0}),
    ("Softplus", {}),
    ("Softsign", {}),
]


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("op, attrs", ACTIVATIONS)
def test_activations(op, attrs, opset):
    check_op(op, [rand(4, 6, low=-4.0, high=4.0)], attrs, opset=opset)


def test_hard_swish_mish_gelu_at_their_opsets():
    x = rand(4, 6, low=-4.0, high=4.0)
    check_op("HardSwish", [x], opset=14)
    check_op("Mish", [x], opset=18)
    if NEWEST >= 20:
        check_op("Gelu", [x], opset=20)
        check_op("Gelu", [x], {"approximate": "tanh"}, opset=20)


def test_prelu_slope_broadcasts_per_channel():
    check_op("PRelu", [rand(2, 3, 4, 4), rand(3, 1, 1, seed=1)], static=(1,), opset=17)
    check_op("PRelu", [rand(2, 5), rand(5, seed=1)], opset=17)


@pytest.mark.parametrize("op", MATH + POSITIVE)
def test_math_on_vulkan(vulkan, op):
    x = rand(3, 5, low=0.1, high=3.0) if op in POSITIVE else rand(3, 5, low=-3.0, high=3.0)
    check_op(op, [x], opset=17, device="vulkan")


@pytest.mark.parametrize("op", ["Floor", "Ceil", "Round"])
def test_rounding_of_a_tensor(op):
    halves = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999997, -0.0, 1e9, np.inf, np.nan])
    check_op(op, [halves.astype(np.float32)], opset=17)
    check_op(op, [rand(4, 6, low=-9.0, high=9.0, dtype=np.float64)], opset=17)


TRIG = ["Tan", "Atan", "Sinh", "Cosh", "Asinh"]
UNIT = ["Asin", "Acos", "Atanh"]  # defined on (-1, 1)


@pytest.mark.parametrize("op", TRIG + UNIT + ["Acosh"])
def test_trig_compositions(op):
    if op in UNIT:
        x = rand(4, 6, low=-0.99, high=0.99)
    elif op == "Acosh":
        x = rand(4, 6, low=1.0, high=9.0)
    else:
        x = rand(4, 6, low=-1.5, high=1.5)
    check_op(op, [x], opset=17, rtol=1e-5, atol=1e-6)
    check_op(op, [x], opset=17, all_static=True)


def test_threshold_shrink_swish():
    x = rand(4, 6, low=-3.0, high=3.0)
    check_op("ThresholdedRelu", [x], {"alpha": 0.5}, opset=17)
    check_op("Shrink", [x], {"bias": 0.5, "lambd": 1.0}, opset=17)
    check_op("Shrink", [np.arange(-4, 5, dtype=np.int8)], {"bias": 1.0, "lambd": 2.0}, opset=17)
    if NEWEST >= 24:
        check_op("Swish", [x], {"alpha": 0.7}, opset=24)
