"""gpucore.onnx.ops.reduce: the Reduce* ops (axes as input and attribute, keepdims,
noop_with_empty_axes), ArgMax / ArgMin, CumSum, at opset 13 and the newest."""

import numpy as np
import pytest
from onnx_cases import NEWEST, check_op, rand

I64 = np.int64
REDUCE = [
    "ReduceSum",
    "ReduceMean",
    "ReduceMax",
    "ReduceMin",
    "ReduceL1",
    "ReduceL2",
    "ReduceSumSquare",
    "ReduceLogSumExp",
]


def _axes_as_input(op: str, opset: int) -> bool:
    return opset >= 18 or (op == "ReduceSum" and opset >= 13)


@pytest.mark.parametrize("opset", [13, NEWEST])
@pytest.mark.parametrize("op", REDUCE)
@pytest.mark.parametrize("axes, keep", [([1], 1), ([0, 2], 0), ([-1], 1), (None, 0)])
def test_reduce(op, axes, keep, opset):
    x = rand(2, 3, 4, low=0.1)
    attrs = {"keepdims": keep}
    if axes is None:
        args = [x]
    elif _axes_as_input(op, opset):
        args = [x, np.array(axes, I64)]
    else:
        args, attrs = [x], {**attrs, "axes": axes}
    check_op(op, args, attrs, opset=opset, static=(1,))
    check_op(op, args, attrs, opset=opset, all_static=True)


def test_reduce_prod_and_log_sum_at_load_time():
    x = rand(2, 3, low=0.5)
    check_op("ReduceProd", [x], {"axes": [1]}, opset=13, all_static=True)
    check_op("ReduceLogSum", [x], {"axes": [1]}, opset=13)


def test_noop_with_empty_axes():
    x = rand(2, 3)
    check_op("ReduceSum", [x, np.zeros(0, I64)], {"noop_with_empty_axes": 1}, opset=13, static=(1,))
    check_op("ReduceSum", [x, np.zeros(0, I64)], opset=13, static=(1,))


@pytest.mark.parametrize("opset", [13, NEWEST])
@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_arg_extremes(op, opset):
    x = rand(3, 4, 5)
    check_op(op, [x], opset=opset, out=I64)
    check_op(op, [x], {"axis": -1, "keepdims": 0}, opset=opset, out=I64)
    ties = np.array([[1, 3, 3], [2, 2, 0]], np.float32)
    check_op(op, [ties], {"axis": 1, "select_last_index": 1}, opset=opset, out=I64, all_static=True)


@pytest.mark.parametrize("opset", [14, NEWEST])
@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
def test_cumsum(exclusive, reverse, opset):
    attrs = {"exclusive": exclusive, "reverse": reverse}
    for axis in (0, -1):
        check_op("CumSum", [rand(3, 4), np.array(axis, I64)], attrs, opset=opset, static=(1,))
    ints = np.arange(12, dtype=I64).reshape(3, 4)
    check_op("CumSum", [ints, np.array(1, I64)], attrs, opset=opset, static=(1,))
    check_op("CumSum", [ints, np.array(1, I64)], attrs, opset=opset, all_static=True)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_select_last_index_of_a_tensor(op):
    x = np.array([[1, 3, 3, 0], [2, 2, 0, 0]], np.float32)
    for axis in (0, 1, -1):
        check_op(op, [x], {"axis": axis, "select_last_index": 1}, opset=13, out=I64)
        check_op(op, [x], {"axis": axis, "keepdims": 0, "select_last_index": 1}, opset=13,
                 out=I64)  # fmt: skip


@pytest.mark.parametrize("axes", [[1], [0, 2], [-1]])
def test_reduce_prod_of_a_tensor(axes):
    x = rand(2, 3, 4, low=0.5, high=1.5)
    check_op("ReduceProd", [x, np.array(axes, I64)], {"keepdims": 1}, opset=18, static=(1,))
    check_op("ReduceProd", [x, np.array(axes, I64)], {"keepdims": 0}, opset=18, static=(1,))


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin", "ReduceSum", "ReduceLogSumExp"])
def test_reducing_an_empty_set_gives_the_identity(op):
    x = np.zeros((2, 0, 4), np.float32)
    check_op(op, [x, np.array([1], I64)], {"keepdims": 1}, opset=18, static=(1,))


def test_cumprod_and_topk():
    x = rand(3, 5, low=0.5, high=1.5)
    for attrs in ({}, {"exclusive": 1}, {"reverse": 1}, {"exclusive": 1, "reverse": 1}):
        check_op("CumProd", [x, np.array(1, I64)], attrs, opset=26, static=(1,))
    ties = np.array([[3, 1, 3, 2, 1]], np.float32)
    for largest in (0, 1):
        check_op("TopK", [ties, np.array([3], I64)], {"largest": largest}, opset=13,
                 static=(1,), out=[np.float32, I64])  # fmt: skip
    check_op("TopK", [x, np.array([2], I64)], {"axis": 0}, opset=13, static=(1,),
             out=[np.float32, I64])  # fmt: skip
