"""gpucore.onnx.ops.indexing: Gather (static and tensor indices, negative ones), GatherElements,
Slice (ONNX's clamping, negative steps), Trilu, at opset 13 and the newest."""

import numpy as np
import pytest
from onnx_cases import OPSETS, check_op, rand

I64 = np.int64


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize(
    "idx",
    [np.array(1, I64), np.array(-1, I64), np.array([0, 2], I64), np.array([[3, -4], [1, 1]], I64)],
)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather(idx, axis, opset):
    x = rand(4, 4, 4)
    check_op("Gather", [x, idx], {"axis": axis}, opset=opset, static=(1,))  # indices known
    check_op("Gather", [x, idx], {"axis": axis}, opset=opset)  # indices at run time
    check_op("Gather", [x, idx], {"axis": axis}, opset=opset, static=(0,))  # an embedding
    check_op("Gather", [x, idx], {"axis": axis}, opset=opset, all_static=True)


def test_gather_int32_indices_and_progressions():
    x = rand(6, 5)
    check_op("Gather", [x, np.array([1, 2, 3], np.int32)], opset=17)
    check_op("Gather", [x, np.array([0, 2, 4], I64)], {"axis": 1}, opset=17, static=(1,))


@pytest.mark.parametrize("opset", OPSETS)
def test_gather_elements(opset):
    x = rand(3, 4)
    idx = np.array([[0, 1, -1, 2], [2, 0, 1, 1]], I64)
    check_op("GatherElements", [x, idx], opset=opset, static=(1,))
    check_op("GatherElements", [x, idx[:, :3]], {"axis": 1}, opset=opset)


SLICES = [
    ([1], [3], [0], [1]),
    ([0], [-1], [1], [1]),
    ([-3], [1000], [2], [1]),
    ([0, 1], [4, 10], [0, 2], [2, 2]),
    ([3], [0], [0], [-1]),
    ([-1], [-1000], [1], [-2]),
    ([10], [20], [0], [1]),
]


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("starts, ends, axes, steps", SLICES)
def test_slice(starts, ends, axes, steps, opset):
    x = rand(4, 5, 6)
    args = [x] + [np.array(v, I64) for v in (starts, ends, axes, steps)]
    check_op("Slice", args, opset=opset, static=(1, 2, 3, 4))
    check_op("Slice", args, opset=opset, all_static=True)


def test_slice_optional_inputs_and_attributes_before_opset_10():
    x = rand(4, 5)
    check_op("Slice", [x, np.array([1], I64), np.array([3], I64)], opset=17, static=(1, 2))
    check_op("Slice", [x], {"starts": [1, 0], "ends": [3, -1]}, opset=9)


@pytest.mark.parametrize("opset", [14, OPSETS[-1]])
@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [None, 1, -1])
def test_trilu(upper, k, opset):
    x = rand(2, 4, 5)
    args = [x] if k is None else [x, np.array(k, I64)]
    check_op("Trilu", args, {"upper": upper}, opset=opset, static=(1,))
    check_op("Trilu", args, {"upper": upper}, opset=opset, all_static=True)


I64 = np.int64


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_elements(reduction):
    data = rand(3, 4)
    idx = np.array([[1, -1], [0, 2], [3, 0]], I64)  # no repeats along the axis
    check_op("ScatterElements", [data, idx, rand(3, 2, seed=1)],
             {"axis": 1, "reduction": reduction}, opset=18)  # fmt: skip


@pytest.mark.parametrize("reduction", ["none", "add", "max"])
def test_scatter_nd_and_gather_nd(reduction):
    data = rand(4, 3, 2)
    idx = np.array([[0, 1], [3, -1]], I64)
    check_op("ScatterND", [data, idx, rand(2, 2, seed=1)], {"reduction": reduction}, opset=18)
    check_op("ScatterND", [data, np.array([[2], [0]], I64), rand(2, 3, 2, seed=1)], opset=18)
    check_op("GatherND", [data, idx], opset=13)
    check_op("GatherND", [data, np.array([[[1]], [[-2]]], I64)], opset=13, static=(1,))


@pytest.mark.parametrize("static", [(), (1,)], ids=["traced", "static"])
def test_gather_nd_batch_dims(static):
    """batch_dims leading dims shared by data and indices: each batch index gathers from its
    own block (negative indices count from the end of their dim)."""
    data = rand(2, 3, 4, 5, seed=2)
    idx = np.array([[[1, -1], [0, 2]], [[2, 0], [-3, 3]]], I64)  # [2, 2, 2]: K = 2 after b = 1
    check_op("GatherND", [data, idx], {"batch_dims": 1}, opset=13, static=static)
    idx2 = np.array([[[3], [0]], [[-1], [2]], [[1], [1]]], I64)  # [3, 2, 1] after b = 2
    check_op("GatherND", [data.transpose(1, 0, 2, 3).copy(), idx2.transpose(0, 1, 2)[:, :2, :]],
             {"batch_dims": 2}, opset=13, static=static)  # fmt: skip


def test_one_hot():
    idx = np.array([[0, 2], [-1, 1]], I64)
    values = np.array([-1.0, 5.0], np.float32)
    for axis in (-1, 0, 1):
        check_op("OneHot", [idx, np.array(4, I64), values], {"axis": axis}, opset=11,
                 static=(1,), out=np.float32)  # fmt: skip
