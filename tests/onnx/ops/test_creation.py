"""gpucore.onnx.ops.creation: Constant, ConstantOfShape, Range, Shape, Size, EyeLike, computed at
load time (and Shape of a traced tensor)."""

import numpy as np
import pytest
from onnx import helper, numpy_helper
from onnx_cases import OPSETS, check_op, model, rand, run_gpucore, run_ort

import gpucore.onnx


@pytest.mark.parametrize("opset", OPSETS)
def test_constant_forms(opset):
    forms = {
        "value": numpy_helper.from_array(rand(2, 3)),
        "value_float": 1.5,
        "value_floats": [1.0, 2.0],
        "value_int": 3,
        "value_ints": [4, 5],
    }
    for attr, value in forms.items():
        node = helper.make_node("Constant", [], ["c"], **{attr: value})
        add = helper.make_node("Identity", ["c"], ["y"])
        dt = np.int64 if "int" in attr else np.float32
        m = model([node, add], {}, {"y": dt}, opset=opset)
        np.testing.assert_array_equal(run_gpucore(m, {})[0], run_ort(m, {})[0])


@pytest.mark.parametrize("opset", OPSETS)
def test_shape_size_constant_of_shape(opset):
    x = rand(2, 3, 4)
    check_op("Shape", [x], opset=opset, out=np.int64)
    check_op("Size", [x], opset=opset, out=np.int64)
    shape = np.array([2, 3], np.int64)
    check_op("ConstantOfShape", [shape], opset=opset, out=np.float32, static=(0,))
    value = numpy_helper.from_array(np.array([7], np.int64))
    check_op(
        "ConstantOfShape", [np.array([3], np.int64)], {"value": value}, opset=opset, static=(0,)
    )


def test_shape_start_end():
    for attrs in ({"start": 1}, {"end": -1}, {"start": -2, "end": 3}):
        check_op("Shape", [rand(2, 3, 4, 5)], attrs, opset=15, out=np.int64)


@pytest.mark.parametrize("opset", OPSETS)
def test_range(opset):
    check_op("Range", [np.int64(1), np.int64(10), np.int64(3)], opset=opset, all_static=True)
    check_op(
        "Range", [np.float32(0.5), np.float32(-2), np.float32(-0.75)], opset=opset, all_static=True
    )


def test_eye_like():
    check_op("EyeLike", [rand(3, 4)], {"k": 1}, opset=17, static=(0,))


def test_a_shape_that_depends_on_input_values_is_refused_at_load():
    with pytest.raises(gpucore.onnx.UnsupportedOperator, match="ConstantOfShape.*load time"):
        check_op("ConstantOfShape", [np.array([2, 3], np.int64)], opset=17, out=np.float32)


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
def test_windows(op, periodic):
    check_op(op, [np.array(10, np.int64)], {"periodic": periodic}, opset=17, all_static=True,
             out=np.float32, rtol=1e-6, atol=1e-6)  # fmt: skip
