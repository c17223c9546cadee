"""gpucore.onnx.backend: the onnx.backend.base.Backend interface (prepare / run, run_model,
run_node, supports_device), inputs bound at run time, older opsets upgraded, Vulkan."""

import numpy as np
import pytest
from onnx_cases import helper, model, rand

from gpucore.errors import SerializationError
from gpucore.onnx import backend


def test_prepare_and_run_by_position_and_by_name():
    x, y = rand(2, 3), rand(2, 3, seed=1)
    m = model([helper.make_node("Add", ["x", "y"], ["z"])], {"x": x, "y": y}, {"z": np.float32})
    rep = backend.prepare(m, "CPU")
    out = rep.run([x, y])
    np.testing.assert_allclose(out[0], x + y)
    np.testing.assert_allclose(rep.run({"y": y, "x": x})["z"], x + y)
    np.testing.assert_allclose(backend.run_model(m, [x, y])[0], x + y)
    with pytest.raises(ValueError, match="takes 2 inputs"):
        rep.run([x])


def test_run_node_builds_a_one_node_model():
    x = rand(3, 4)
    (y,) = backend.run_node(helper.make_node("Relu", ["x"], ["y"]), [x])
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    node = helper.make_node("ReduceSum", ["x", "axes"], ["s"], keepdims=0)
    (s,) = backend.run_node(node, [x, np.array([1], np.int64)], opset_version=13)
    np.testing.assert_allclose(s, x.sum(1), rtol=1e-6)


def test_devices():
    assert backend.supports_device("CPU") and backend.supports_device("cpu:0")
    assert not backend.supports_device("CUDA")
    with pytest.raises(ValueError, match="unknown device"):
        backend.prepare(model([helper.make_node("Relu", ["x"], ["y"])], {"x": rand(2)},
                              {"y": np.float32}), "CUDA")  # fmt: skip


def test_shape_operands_fed_as_inputs_are_bound_at_run_time():
    x = rand(2, 6)
    m = model([helper.make_node("Reshape", ["x", "shape"], ["y"])],
              {"x": x, "shape": np.array([3, 4], np.int64)}, {"y": np.float32})  # fmt: skip
    rep = backend.prepare(m)
    assert rep.bound == ["shape"] and rep.model is None
    assert rep.run([x, np.array([3, 4], np.int64)])[0].shape == (3, 4)
    assert rep.run([x, np.array([12, 1], np.int64)])[0].shape == (12, 1)
    assert rep.run([x, np.array([3, 4], np.int64)])[0].shape == (3, 4)
    assert len(rep._compiled) == 2  # one compiled model per distinct value


def test_an_opset_older_than_the_importer_reads_is_upgraded():
    x = rand(2, 3)
    m = model([helper.make_node("Relu", ["x"], ["y"])], {"x": x}, {"y": np.float32}, opset=6)
    np.testing.assert_array_equal(backend.run_model(m, [x])[0], np.maximum(x, 0))


def test_vulkan(vulkan):
    x = rand(4, 5)
    m = model([helper.make_node("Sigmoid", ["x"], ["y"])], {"x": x}, {"y": np.float32})
    rep = backend.prepare(m, "VULKAN")
    assert rep.model.device == "vulkan"
    np.testing.assert_allclose(rep.run([x])[0], 1 / (1 + np.exp(-x)), rtol=1e-5, atol=1e-6)


def test_inputs_a_shape_operand_is_computed_from_are_bound_too():
    x = rand(2, 6)
    nodes = [helper.make_node("Cast", ["shape"], ["s64"], to=7),
             helper.make_node("Reshape", ["x", "s64"], ["y"]),
             helper.make_node("Shape", ["x"], ["sx"]),  # (reads only sizes: x stays an input)
             helper.make_node("Reshape", ["x", "sx"], ["z"])]  # fmt: skip
    m = model(nodes, {"x": x, "shape": np.array([4, 3], np.int32)},
              {"y": np.float32, "z": np.float32})  # fmt: skip
    rep = backend.prepare(m)
    assert rep.bound == ["shape"]
    y, z = rep.run([x, np.array([4, 3], np.int32)])
    assert y.shape == (4, 3) and z.shape == (2, 6)
    assert rep.model.input_names == ["x"]


def test_symbolic_dims_stay_dynamic():
    x = rand(2, 3)
    m = model([helper.make_node("Relu", ["x"], ["y"])], {"x": x}, {"y": np.float32},
              input_shapes={"x": ["batch", 3]})  # fmt: skip
    rep = backend.prepare(m)
    for n in (1, 2, 5):
        x = rand(n, 3, seed=n)
        np.testing.assert_array_equal(rep.run([x])[0], np.maximum(x, 0))


def test_bytes_and_a_truncated_file():
    x = rand(2, 3)
    data = model([helper.make_node("Relu", ["x"], ["y"])], {"x": x}, {"y": np.float32})
    data = data.SerializeToString()
    np.testing.assert_array_equal(backend.run_model(data, [x])[0], np.maximum(x, 0))
    with pytest.raises(SerializationError):
        backend.prepare(data[: len(data) // 2])
