"""gpucore.onnx.ops.pool: MaxPool, AveragePool (count_include_pad, ceil_mode, pads, auto_pad,
1-D and 2-D), GlobalAveragePool, GlobalMaxPool, at opset 13 and the newest."""

import pytest
from onnx_cases import OPSETS, check_op, rand

POOLS = [
    {"kernel_shape": [2, 2]},
    {"kernel_shape": [2, 2], "strides": [2, 2]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
    {"kernel_shape": [3, 2], "auto_pad": "SAME_UPPER"},
    {"kernel_shape": [2, 2], "auto_pad": "VALID", "strides": [1, 2]},
]


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("attrs", POOLS)
def test_max_pool(attrs, opset):
    check_op("MaxPool", [rand(2, 3, 7, 8)], attrs, opset=opset)


def test_max_pool_dilations_asymmetric_pads_and_1d():
    x = rand(2, 3, 9, 9)
    check_op("MaxPool", [x], {"kernel_shape": [2, 2], "dilations": [2, 2]}, opset=17)
    check_op("MaxPool", [x], {"kernel_shape": [3, 3], "pads": [0, 1, 2, 0]}, opset=17)
    check_op("MaxPool", [rand(2, 3, 10)], {"kernel_shape": [3], "strides": [2]}, opset=17)
    for include in (0, 1):
        attrs = {"kernel_shape": [3, 3], "pads": [0, 1, 2, 0], "count_include_pad": include}
        check_op("AveragePool", [x], attrs, opset=17)


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("attrs", POOLS)
@pytest.mark.parametrize("include", [0, 1])
def test_average_pool(attrs, include, opset):
    check_op(
        "AveragePool", [rand(2, 3, 7, 8)], {**attrs, "count_include_pad": include}, opset=opset
    )


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pools(op, opset):
    check_op(op, [rand(2, 3, 5, 4)], opset=opset)
    check_op(op, [rand(2, 3, 5)], opset=opset)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_pools_on_vulkan(vulkan, op):
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}
    check_op(op, [rand(2, 3, 7, 8)], attrs, opset=17, device="vulkan")
    check_op("GlobalAveragePool", [rand(2, 3, 7, 8)], opset=17, device="vulkan")
