"""gpucore.onnx.ops.nn: Conv and ConvTranspose (1-D to 3-D, groups, strides, dilations, pads,
auto_pad), BatchNormalization, LayerNormalization, InstanceNormalization, Softmax / LogSoftmax
(axis semantics before and since opset 13), at opset 13 and the newest."""

import numpy as np
import pytest
from onnx_cases import NEWEST, OPSETS, assert_close, check_op, model, rand, run_gpucore

helper = pytest.importorskip("onnx").helper

CONV = [
    {},
    {"pads": [1, 1, 1, 1]},
    {"strides": [2, 2], "pads": [1, 1, 1, 1]},
    {"dilations": [2, 2]},
    {"pads": [0, 1, 2, 1]},  # not the same on both sides
    {"auto_pad": "SAME_UPPER", "strides": [2, 2]},
    {"auto_pad": "SAME_LOWER"},
    {"auto_pad": "VALID"},
    {"group": 2, "pads": [1, 1, 1, 1]},
]


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("attrs", CONV)
@pytest.mark.parametrize("bias", [False, True])
def test_conv2d(attrs, bias, opset):
    x, w = rand(2, 4, 7, 8, seed=1), rand(6, 4 // attrs.get("group", 1), 3, 3, seed=2)
    args = [x, w] + ([rand(6, seed=3)] if bias else [])
    check_op("Conv", args, {**attrs, "kernel_shape": [3, 3]}, opset=opset, static=(1, 2))


@pytest.mark.parametrize("attrs", [{}, {"pads": [1, 2], "strides": [2]}, {"group": 3}])
def test_conv1d(attrs):
    x, w = rand(2, 3, 10, seed=1), rand(6, 3 // attrs.get("group", 1), 3, seed=2)
    check_op("Conv", [x, w, rand(6, seed=3)], attrs, opset=17, static=(1, 2))


@pytest.mark.parametrize("opset", OPSETS)
def test_batch_norm_inference(opset):
    x = rand(2, 3, 4, 4)
    params = [rand(3, seed=1), rand(3, seed=2), rand(3, seed=3), rand(3, seed=4, low=0.5)]
    check_op(
        "BatchNormalization", [x, *params], {"epsilon": 1e-3}, opset=opset, static=(1, 2, 3, 4)
    )
    check_op("BatchNormalization", [x, *params], opset=opset)  # statistics at run time
    check_op("BatchNormalization", [rand(5, 3), *params], opset=opset, static=(1, 2, 3, 4))


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (6, 3)])
def test_batch_norm_training_mode(shape):
    """training_mode=1: normalized with the batch's mean and population variance; the running
    statistics come out updated with momentum (ONNX's reference evaluator: ONNX Runtime's
    inference build has no training mode)."""
    from onnx.reference import ReferenceEvaluator  # noqa: PLC0415

    x = rand(*shape, seed=4)
    params = [rand(3, seed=5), rand(3, seed=6), rand(3, seed=7), rand(3, seed=8, low=0.5)]
    names = ["x", "s", "b", "m", "v"]
    node = helper.make_node("BatchNormalization", names, ["y", "rm", "rv"], training_mode=1,
                            momentum=0.7, epsilon=1e-3)  # fmt: skip
    outs = {"y": np.float32, "rm": np.float32, "rv": np.float32}
    m = model([node], {"x": x}, outs, dict(zip(names[1:], params)), opset=15)
    want = ReferenceEvaluator(m).run(None, {"x": x})
    assert_close(run_gpucore(m, {"x": x}), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("opset", [17, NEWEST])
@pytest.mark.parametrize("axis", [-1, -2, 1])
def test_layer_norm(axis, opset):
    x = rand(2, 3, 4, 5)
    shape = x.shape[axis:]
    args = [x, rand(*shape, seed=1), rand(*shape, seed=2)]
    check_op("LayerNormalization", args, {"axis": axis}, opset=opset, static=(1, 2))
    check_op("LayerNormalization", args[:2], {"epsilon": 1e-3, "axis": axis}, opset=opset)


def test_layer_norm_scale_broadcasts():
    x = rand(2, 3, 4)
    check_op("LayerNormalization", [x, rand(1, 4, seed=1)], {"axis": 1}, opset=17, static=(1,))


@pytest.mark.parametrize("opset", OPSETS)
def test_instance_norm(opset):
    x = rand(2, 3, 4, 5)
    args = [x, rand(3, seed=1), rand(3, seed=2)]
    check_op("InstanceNormalization", args, {"epsilon": 1e-3}, opset=opset, static=(1, 2))


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("opset", [11, 13, NEWEST])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_softmax_axis_semantics(op, axis, opset):
    attrs = {} if axis is None else {"axis": axis}
    check_op(op, [rand(2, 3, 4, low=-5.0, high=5.0)], attrs, opset=opset)


def test_rms_norm():
    if NEWEST < 23:
        pytest.skip("onnxruntime has no opset 23")
    x = rand(2, 3, 4)
    check_op("RMSNormalization", [x, rand(4, seed=1)], opset=23, static=(1,))


def test_nn_ops_on_vulkan(vulkan):
    x = rand(2, 4, 7, 8, seed=1)
    w, b = rand(6, 4, 3, 3, seed=2), rand(6, seed=3)
    conv = {"pads": [1, 1, 1, 1], "strides": [2, 2]}
    check_op("Conv", [x, w, b], conv, opset=17, static=(1, 2), device="vulkan")
    params = [rand(4, seed=i, low=0.5) for i in range(4)]
    check_op("BatchNormalization", [x, *params], opset=17, static=(1, 2, 3, 4), device="vulkan")
    ln = [x, rand(8, seed=5), rand(8, seed=6)]
    check_op("LayerNormalization", ln, opset=17, static=(1, 2), device="vulkan")
    check_op("Softmax", [x], opset=17, device="vulkan")
    check_op("LogSoftmax", [x], {"axis": 1}, opset=17, device="vulkan")


@pytest.mark.parametrize("axis", [1, -1])
def test_layer_norm_mean_and_inv_std_dev_outputs(axis):
    x = rand(2, 3, 4)
    scale, bias = rand(*x.shape[axis:], seed=1), rand(*x.shape[axis:], seed=2)
    check_op("LayerNormalization", [x, scale, bias], {"axis": axis}, opset=17, static=(1, 2),
             n_out=3)  # fmt: skip


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_hardmax(axis, opset):
    x = np.array([[[1, 3, 3], [0, 2, 1]], [[4, 4, 0], [1, 1, 1]]], np.float32)
    check_op("Hardmax", [x], {"axis": axis}, opset=opset)


def test_normalizations():
    x = rand(2, 4, 3, 5)
    for p in (1, 2):
        check_op("LpNormalization", [x], {"axis": 1, "p": p}, opset=17)
    check_op("MeanVarianceNormalization", [x], opset=13)
    check_op("MeanVarianceNormalization", [x], {"axes": [1, 2]}, opset=13)
    params = [rand(4, seed=1), rand(4, seed=2)]
    check_op("GroupNormalization", [x, *params], {"num_groups": 2}, opset=21, static=(1, 2))
    check_op("LRN", [x], {"size": 3, "alpha": 0.01, "beta": 0.6, "bias": 2.0}, opset=13)
    check_op("LRN", [x], {"size": 5}, opset=13)


CONV_T = [
    {},
    {"strides": [2, 2]},
    {"strides": [3, 2], "pads": [1, 0, 2, 1], "output_padding": [1, 1]},
    {"dilations": [2, 1], "strides": [2, 2]},
    {"strides": [2, 2], "output_shape": [8, 5]},
    {"strides": [2, 2], "auto_pad": "SAME_UPPER"},
    {"strides": [2, 2], "auto_pad": "SAME_LOWER"},
]


@pytest.mark.parametrize("attrs", CONV_T)
@pytest.mark.parametrize("group", [1, 2])
def test_conv_transpose(attrs, group):
    x, w = rand(2, 4, 4, 3), rand(4, 6 // group, 3, 2, seed=1)
    check_op("ConvTranspose", [x, w, rand(6, seed=2)], {**attrs, "group": group}, opset=17,
             static=(1, 2))  # fmt: skip


def test_conv_transpose_1d():
    x, w = rand(2, 3, 5), rand(3, 2, 3, seed=1)
    check_op("ConvTranspose", [x, w], {"strides": [2], "pads": [1, 0]}, opset=17, static=(1,))


@pytest.mark.parametrize(
    "attrs",
    [
        {},
        {"strides": [2, 1, 2], "pads": [1, 0, 1, 1, 1, 0]},  # not the same on both sides
        {"dilations": [2, 1, 1], "group": 2},
        {"auto_pad": "SAME_UPPER", "strides": [1, 2, 2]},
    ],
)
def test_conv3d(attrs):
    x, w = rand(2, 4, 6, 7, 5, seed=1), rand(6, 4 // attrs.get("group", 1), 2, 3, 2, seed=2)
    check_op("Conv", [x, w, rand(6, seed=3)], attrs, opset=17, static=(1, 2))


@pytest.mark.parametrize(
    "attrs",
    [
        {"strides": [2, 1, 2]},
        {"strides": [2, 2, 1], "pads": [1, 0, 0, 0, 1, 1], "output_padding": [1, 0, 0]},
        {"dilations": [1, 2, 1], "group": 2},
    ],
)
def test_conv_transpose_3d(attrs):
    x, w = rand(2, 4, 3, 4, 3), rand(4, 6 // attrs.get("group", 1), 2, 3, 2, seed=1)
    check_op("ConvTranspose", [x, w, rand(6, seed=2)], attrs, opset=17, static=(1, 2))


def test_conv3d_on_vulkan(vulkan):
    x, w = rand(2, 4, 5, 6, 5, seed=1), rand(6, 4, 2, 3, 2, seed=2)
    attrs = {"strides": [2, 1, 2], "pads": [1, 0, 1, 1, 1, 0]}
    check_op("Conv", [x, w, rand(6, seed=3)], attrs, opset=17, static=(1, 2), device="vulkan")
    check_op("ConvTranspose", [x, w.transpose(1, 0, 2, 3, 4)], {}, opset=17, static=(1,),
             device="vulkan")  # fmt: skip
