"""gpucore.onnx.ops.shape: Reshape Flatten Transpose Squeeze Unsqueeze Expand Identity Dropout,
on traced tensors and on load-time values, at opset 13 and the newest (axes as inputs) and
before 13 (axes as attributes)."""

import numpy as np
import pytest
from onnx_cases import OPSETS, assert_close, check_op, helper, model, rand, run_ort, tensor_type

import gpucore.onnx

I64 = np.int64


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize(
    "shape_in, target",
    [((2, 3, 4), (6, 4)), ((2, 3, 4), (0, -1)), ((2, 3, 4), (-1,)), ((2, 12), (2, 0, 3, 4))],
)
def test_reshape(shape_in, target, opset):
    if 0 in target and len(target) > len(shape_in):
        target = (2, 3, 4)
    x = rand(*shape_in)
    check_op("Reshape", [x, np.array(target, I64)], opset=opset, static=(1,))
    check_op("Reshape", [x, np.array(target, I64)], opset=opset, all_static=True)


def test_reshape_allowzero():
    x = np.zeros((0, 3), np.float32)
    check_op("Reshape", [x, np.array([3, 0], I64)], {"allowzero": 1}, opset=14, static=(1,))


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("axis", [None, 0, 2, -1])
def test_flatten(axis, opset):
    attrs = {} if axis is None else {"axis": axis}
    check_op("Flatten", [rand(2, 3, 4, 5)], attrs, opset=opset)


@pytest.mark.parametrize("opset", OPSETS)
def test_transpose_default_and_perm(opset):
    x = rand(2, 3, 4)
    check_op("Transpose", [x], opset=opset)
    check_op("Transpose", [x], {"perm": [1, 0, 2]}, opset=opset)
    check_op("Transpose", [x], {"perm": [2, 0, 1]}, opset=opset, all_static=True)


@pytest.mark.parametrize("opset", OPSETS)
def test_squeeze_unsqueeze(opset):
    x = rand(1, 3, 1, 4)
    check_op("Squeeze", [x], opset=opset)
    check_op("Squeeze", [x, np.array([0], I64)], opset=opset, static=(1,))
    check_op("Squeeze", [x, np.array([-2], I64)], opset=opset, all_static=True)
    check_op("Unsqueeze", [rand(3, 4), np.array([0, 3], I64)], opset=opset, static=(1,))
    check_op("Unsqueeze", [rand(3, 4), np.array([-1, 1], I64)], opset=opset, static=(1,))
    check_op("Unsqueeze", [np.array(5, I64), np.array([0], I64)], opset=opset, all_static=True)


def test_squeeze_unsqueeze_axes_attribute_before_opset_13():
    check_op("Squeeze", [rand(1, 3, 1)], {"axes": [2]}, opset=11)
    check_op("Unsqueeze", [rand(3, 4)], {"axes": [0, 2]}, opset=11)


@pytest.mark.parametrize("opset", OPSETS)
def test_expand_broadcasts_both_ways(opset):
    check_op("Expand", [rand(3, 1), np.array([2, 1, 4], I64)], opset=opset, static=(1,))
    check_op("Expand", [rand(1, 4), np.array([3, 1], I64)], opset=opset, static=(1,))
    check_op("Expand", [rand(3, 1), np.array([3, 4], I64)], opset=opset, all_static=True)


@pytest.mark.parametrize("opset", OPSETS)
def test_identity_and_dropout_at_inference(opset):
    x = rand(2, 3)
    check_op("Identity", [x], opset=opset)
    check_op("Dropout", [x], opset=opset)
    check_op("Dropout", [x, np.float32(0.5)], opset=opset, static=(1,))
    check_op("Dropout", [x], opset=opset, n_out=2, out=[np.float32, np.bool_])


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space_and_back(mode):
    x = rand(2, 8, 3, 2)
    check_op("DepthToSpace", [x], {"blocksize": 2, "mode": mode}, opset=13)
    check_op("DepthToSpace", [x], {"blocksize": 2, "mode": mode}, opset=13, all_static=True)
    check_op("SpaceToDepth", [rand(1, 2, 4, 6)], {"blocksize": 2}, opset=13)


@pytest.mark.parametrize("ratio, seed", [(0.75, 0), (0.3, 7), (0.5, 123)])
@pytest.mark.parametrize("x_static", [False, True])
def test_dropout_in_training_mode_with_a_seed_is_the_reference_mask(ratio, seed, x_static):
    """Training mode with a seed: the mask of ONNX's reference implementation (numpy's
    RandomState(seed)), the same on every run, and x * mask / (1 - ratio), bit for bit."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    from onnx.reference import ReferenceEvaluator

    import gpucore.onnx

    x = rand(3, 4, 5)
    inits = [
        numpy_helper.from_array(np.float32(ratio), "r"),
        numpy_helper.from_array(np.bool_(True), "t"),
    ]
    inputs = []
    if x_static:
        inits.append(numpy_helper.from_array(x, "x"))
    else:
        inputs.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape)))
    node = helper.make_node("Dropout", ["x", "r", "t"], ["y", "z"], seed=seed)
    outputs = [
        helper.make_tensor_value_info("y", TensorProto.FLOAT, list(x.shape)),
        helper.make_tensor_value_info("z", TensorProto.BOOL, list(x.shape)),
    ]
    graph = helper.make_graph([node], "dropout", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    want_y, want_z = ReferenceEvaluator(model).run(None, {} if x_static else {"x": x})
    m = gpucore.onnx.load(model.SerializeToString())
    for _ in range(2):  # a fixed seed: the same mask on every run
        got_y, got_z = (np.asarray(o) for o in (m() if x_static else m(x)))
        assert np.array_equal(got_z, want_z) and 0 < got_z.sum() < got_z.size
        assert np.array_equal(got_y.view(np.uint32), want_y.astype(np.float32).view(np.uint32))


def test_dropout_in_training_mode_without_a_seed_or_with_dynamic_axes_is_refused_by_name():
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    import gpucore.onnx
    from gpucore.errors import GpucoreError

    node = helper.make_node("Dropout", ["x", "r", "t"], ["y"])
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in "xy"]
    r, t = np.float32(0.5), np.bool_(True)
    inits = [numpy_helper.from_array(r, "r"), numpy_helper.from_array(t, "t")]
    graph = helper.make_graph([node], "dropout", vi[:1], vi[1:], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(GpucoreError, match="Dropout.*no seed"):
        gpucore.onnx.load(model.SerializeToString())
    # with a seed but a dynamic batch axis: a mask per size, which a compiled model does not hold
    node = helper.make_node("Dropout", ["x", "r", "t"], ["y"], seed=1)
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", 3]) for n in "xy"]
    graph = helper.make_graph([node], "dropout", vi[:1], vi[1:], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(GpucoreError, match="Dropout in training mode on a model with dynamic"):
        gpucore.onnx.load(model.SerializeToString())


def _dropout_mask_model(opset: int, training: bool | None, consumed: bool):
    """Dropout(x[N, 3, 2]) -> y and its mask, the mask a graph output and (``consumed``) also
    fed to a Cast and a Mul; ``training``: the training_mode input (None: absent), ratio 0."""
    ins, inits = ["x"], {}
    if training is not None:
        ins += ["r", "t"]
        inits = {"r": np.float32(0.0), "t": np.bool_(training)}
    mask_type = np.bool_ if opset >= 10 else np.float32
    nodes = [helper.make_node("Dropout", ins, ["y", "mask"])]
    outputs = {"y": np.float32, "mask": mask_type}
    if consumed:
        nodes += [
            helper.make_node("Cast", ["mask"], ["m"], to=tensor_type(np.float32)),
            helper.make_node("Mul", ["y", "m"], ["ym"]),
        ]
        outputs["ym"] = np.float32
    example = {"x": rand(2, 3, 2)}
    return model(nodes, example, outputs, inits, opset=opset, input_shapes={"x": ["N", 3, 2]})


def _check_dropout_mask(cm, m, opset: int, consumed: bool):
    assert cm.symbols == ["N"]
    for n in (1, 2, 5):
        x = rand(n, 3, 2, seed=n)
        got = cm.run_arrays([x])
        mask = np.ones(x.shape, np.bool_ if opset >= 10 else np.float32)
        assert_close(got, [x, mask] + ([x] if consumed else []), rtol=0, atol=0)  # numpy
        want = run_ort(m, {"x": x})
        if opset < 10:  # onnxruntime leaves the float mask of Dropout-7 zero ("not filled" in
            # Dropout-6's words); ONNX's reference implementation and gpucore: all kept, ones
            want[1] = mask
            if consumed:
                want[2] = x
        assert_close(got, want, rtol=0, atol=0)


@pytest.mark.parametrize("executor", ["compiled", "interpreted"])
@pytest.mark.parametrize("consumed", [False, True])
@pytest.mark.parametrize(
    "opset, training", [(9, None), (13, None), (13, False), (13, True), (OPSETS[-1], None)]
)
def test_dropout_mask_at_inference_with_a_dynamic_axis(opset, training, consumed, executor):
    """The mask of an inference-mode Dropout (or training mode with ratio 0) on a model with a
    dynamic batch axis: all true (ones before opset 10), the input's shape at every size, one
    graph for all of them."""
    m = _dropout_mask_model(opset, training, consumed)
    cm = gpucore.onnx.load(m.SerializeToString(), device="cpu", executor=executor)
    _check_dropout_mask(cm, m, opset, consumed)


@pytest.mark.parametrize("executor", ["compiled", "interpreted"])
def test_dropout_mask_at_inference_with_a_dynamic_axis_on_vulkan(vulkan, executor):
    for opset, training in [(9, None), (13, False)]:
        m = _dropout_mask_model(opset, training, consumed=True)
        cm = gpucore.onnx.load(m.SerializeToString(), device="vulkan", executor=executor)
        assert cm.device == "vulkan"
        _check_dropout_mask(cm, m, opset, consumed=True)
