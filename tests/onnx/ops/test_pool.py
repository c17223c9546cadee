"""gpucore.onnx.ops.pool: MaxPool, AveragePool (count_include_pad, ceil_mode, pads, auto_pad,
dilations, 1-D to 3-D), LpPool, GlobalAveragePool, GlobalMaxPool, at opset 13 and the newest."""

import numpy as np
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


@pytest.mark.parametrize("ceil", [0, 1])
@pytest.mark.parametrize("include", [0, 1])
def test_average_pool_dilations(include, ceil):
    """Dilated windows (opset 19; PyTorch's avg_pool2d has none), the pads counted or not."""
    attrs = {"kernel_shape": [3, 2], "strides": [2, 1], "dilations": [2, 3], "pads": [1, 1, 1, 1],
             "count_include_pad": include, "ceil_mode": ceil}  # fmt: skip
    check_op("AveragePool", [rand(2, 3, 9, 8, seed=5)], attrs, opset=19)
    check_op("AveragePool", [rand(2, 3, 11, seed=6)], {"kernel_shape": [3], "dilations": [2],
             "count_include_pad": include, "ceil_mode": ceil}, opset=19)  # fmt: skip


@pytest.mark.parametrize("order", [0, 1])
@pytest.mark.parametrize(
    "shape, attrs",
    [
        ((2, 3, 7, 6), {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 1]}),
        ((2, 3, 7, 6), {"kernel_shape": [2, 2], "pads": [1, 1, 1, 1], "dilations": [2, 1]}),
        ((2, 3, 9), {"kernel_shape": [3], "strides": [2], "pads": [2, 0]}),  # 1-D, asymmetric
    ],
)
def test_max_pool_indices_output(shape, attrs, order):
    """The Indices output: flat into the whole unpadded input, each plane's row-major
    (storage_order 0) or column-major (1) position of the first maximum."""
    x = rand(*shape, seed=3)
    x[0, 0, 1] = x[0, 0, 2]  # ties: the first maximum's index
    check_op("MaxPool", [x], {**attrs, "storage_order": order}, opset=12, n_out=2,
             out=[np.float32, np.int64])  # fmt: skip


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


@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize(
    "attrs",
    [{"kernel_shape": [3, 2]}, {"kernel_shape": [3, 3], "pads": [1, 0, 2, 1], "strides": [2, 1]}],
)
def test_lp_pool(p, attrs):
    check_op("LpPool", [rand(2, 3, 7, 6)], {**attrs, "p": p}, opset=18)
    check_op("LpPool", [rand(2, 3, 7)], {"kernel_shape": [2], "p": p}, opset=18)


def test_upsample_nearest_by_integer_scales():
    scales = np.array([1, 1, 2, 3], np.float32)
    check_op("Upsample", [rand(1, 2, 3, 2), scales], {"mode": "nearest"}, opset=9, static=(1,))


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_max_pool_of_8_bit_integers(dtype):
    x = np.random.default_rng(0).integers(-128 if dtype == np.int8 else 0, 100, (1, 2, 5, 5))
    attrs = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]}
    check_op("MaxPool", [x.astype(dtype)], attrs, opset=12)


POOLS_3D = [
    {"kernel_shape": [2, 2, 2]},
    {"kernel_shape": [3, 2, 3], "strides": [2, 1, 2], "pads": [1, 0, 1, 1, 1, 0]},
    {"kernel_shape": [3, 3, 2], "strides": [2, 2, 2], "ceil_mode": 1},
    {"kernel_shape": [2, 3, 2], "auto_pad": "SAME_LOWER"},
    {"kernel_shape": [2, 2, 3], "strides": [1, 2, 1], "dilations": [2, 1, 2]},
]


@pytest.mark.parametrize("attrs", POOLS_3D)
def test_pools_3d(attrs):
    """5-D MaxPool / AveragePool / LpPool through max_pool3d / avg_pool3d (pads that differ
    between the sides applied first; dilated averages by constant window matrices)."""
    x = rand(2, 3, 6, 7, 5)
    check_op("MaxPool", [x], attrs, opset=19)
    for include in (0, 1):
        check_op("AveragePool", [x], {**attrs, "count_include_pad": include}, opset=19)
    check_op("LpPool", [x], {**attrs, "p": 2}, opset=18)


def test_lp_pool_ceil_mode_sums_only_the_real_window():
    """ceil_mode's last windows reach past the input: their sums hold fewer elements."""
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1, "p": 2}
    check_op("LpPool", [rand(2, 3, 8, 7)], attrs, opset=18)


def test_dilated_average_and_lp_pools_2d():
    x = rand(2, 3, 9, 8)
    attrs = {"kernel_shape": [2, 3], "dilations": [2, 2], "pads": [1, 0, 0, 2], "strides": [2, 1]}
    for include in (0, 1):
        check_op("AveragePool", [x], {**attrs, "count_include_pad": include}, opset=19)
    check_op("LpPool", [x], {**attrs, "p": 3}, opset=18)


def test_pools_3d_on_vulkan(vulkan):
    attrs = {"kernel_shape": [3, 2, 3], "strides": [2, 1, 2], "pads": [1, 0, 1, 1, 1, 0]}
    for op in ("MaxPool", "AveragePool"):
        check_op(op, [rand(2, 3, 6, 7, 5)], attrs, opset=19, device="vulkan")
