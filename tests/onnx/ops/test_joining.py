"""gpucore.onnx.ops.joining: Concat, Split (sizes, equal parts, num_outputs), Tile, Pad (modes,
negative pads, axes), at opset 13 and the newest."""

import numpy as np
import pytest
from onnx_cases import NEWEST, OPSETS, check_op, rand

I64 = np.int64


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat(axis, opset):
    a, b = rand(2, 3, 4, seed=1), rand(2, 3, 4, seed=2)
    check_op("Concat", [a, b], {"axis": axis}, opset=opset)
    check_op("Concat", [a, b, a], {"axis": axis}, opset=opset, static=(1,))
    check_op("Concat", [a, b], {"axis": axis}, opset=opset, all_static=True)


@pytest.mark.parametrize("opset", OPSETS)
def test_split(opset):
    x = rand(6, 4)
    check_op("Split", [x, np.array([1, 2, 3], I64)], opset=opset, static=(1,), n_out=3)
    if opset < 18:  # equal parts, as many as outputs (18 asks for num_outputs)
        check_op("Split", [x], {"axis": 1}, opset=opset, n_out=2)
        check_op("Split", [x], opset=opset, n_out=3, all_static=True)


def test_split_attribute_before_13_and_num_outputs_since_18():
    check_op("Split", [rand(6, 4)], {"split": [4, 2]}, opset=11, n_out=2)
    if NEWEST >= 18:
        check_op("Split", [rand(7, 4)], {"num_outputs": 3}, opset=18, n_out=3)


@pytest.mark.parametrize("opset", OPSETS)
def test_tile(opset):
    x = rand(2, 3)
    check_op("Tile", [x, np.array([2, 3], I64)], opset=opset, static=(1,))
    check_op("Tile", [x, np.array([1, 1], I64)], opset=opset, static=(1,))
    check_op("Tile", [x, np.array([3, 1], I64)], opset=opset, all_static=True)


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_modes(mode, opset):
    x = rand(2, 3, 4, 5)
    pads = np.array([0, 0, 1, 2, 0, 0, 2, 1], I64)
    check_op("Pad", [x, pads], {"mode": mode}, opset=opset, static=(1,))
    check_op("Pad", [x, pads], {"mode": mode}, opset=opset, all_static=True)


@pytest.mark.parametrize("opset", OPSETS)
def test_pad_value_and_negative_pads(opset):
    x = rand(3, 4)
    check_op("Pad", [x, np.array([1, -1, 0, 2], I64), np.float32(1.5)], opset=opset, static=(1, 2))


def test_pad_wrap_axes_and_attributes_before_11():
    x = rand(3, 4)
    if NEWEST >= 19:
        pads = np.array([1, 2, 2, 1], I64)
        check_op("Pad", [x, pads], {"mode": "wrap"}, opset=19, static=(1,))
    if NEWEST >= 18:
        args = [x, np.array([1, 2], I64), np.float32(0), np.array([1], I64)]
        check_op("Pad", args, opset=18, static=(1, 2, 3))
    check_op("Pad", [x], {"pads": [0, 1, 0, 1], "value": 2.0}, opset=10)


@pytest.mark.parametrize("shape, axes", [([3, 6], None), ([5, 2], [0, 1]), ([4], [-1])])
def test_center_crop_pad(shape, axes):
    x = rand(4, 5)
    attrs = {} if axes is None else {"axes": axes}
    check_op("CenterCropPad", [x, np.array(shape, np.int64)], attrs, opset=18, static=(1,))
