"""gpucore.onnx.context: the interpreter's checks: UnsupportedOperator names the node, the op,
the opset and the attribute; attribute defaults come from the op's schema at the model's
opset; an attribute no handler reads must hold its default."""

import numpy as np
import pytest
from onnx import helper
from onnx_cases import check_op, model, rand

import gpucore.onnx
from gpucore.errors import SerializationError
from gpucore.onnx import UnsupportedOperator


def _one(node, x=None, opset=17, out=np.float32):
    x = rand(2, 3, 4) if x is None else x
    return model([node], {"x": x}, {"y": out}, opset=opset)


def _load(m):
    return gpucore.onnx.load(m.SerializeToString(), device="cpu")


def test_an_unsupported_op_names_node_op_and_opset():
    m = _one(helper.make_node("Det", ["x"], ["y"], name="det_1"), opset=17)
    with pytest.raises(UnsupportedOperator) as e:
        _load(m)
    assert "det_1" in str(e.value) and "Det" in str(e.value) and "opset 17" in str(e.value)
    assert (e.value.node, e.value.op, e.value.opset) == ("det_1", "Det", 17)


def test_an_op_the_opset_does_not_have():
    with pytest.raises(UnsupportedOperator, match="Gelu is not an operator of opset 17"):
        _load(_one(helper.make_node("Gelu", ["x"], ["y"])))


def test_another_domain():
    node = helper.make_node("FusedGemm", ["x"], ["y"], domain="com.microsoft")
    m = _one(node)
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    with pytest.raises(UnsupportedOperator, match="domain 'com.microsoft'"):
        _load(m)


def test_an_attribute_value_no_handler_supports():
    node = helper.make_node("LpNormalization", ["x"], ["y"], p=3, name="lp")
    with pytest.raises(UnsupportedOperator) as e:
        _load(_one(node))
    assert e.value.attribute == "p" and "lp" in str(e.value)


def test_an_attribute_no_handler_reads_must_hold_its_default():
    # MaxPool's storage_order only shapes the Indices output, which is not asked for: read
    check_op("MaxPool", [rand(1, 1, 4, 4)], {"kernel_shape": [2, 2], "storage_order": 1}, opset=17)
    # an attribute the schema does not know is never honoured
    node = helper.make_node("Relu", ["x"], ["y"], bogus=3)
    with pytest.raises(UnsupportedOperator, match="attribute bogus=3") as e:
        _load(_one(node))
    assert e.value.attribute == "bogus"


def test_schema_defaults_follow_the_opset():
    # Softmax's axis defaults to 1 before opset 13 and to -1 since: both match onnxruntime
    x = rand(2, 3, 4)
    a = check_op("Softmax", [x], opset=11)[0]
    b = check_op("Softmax", [x], opset=13)[0]
    assert not np.allclose(a, b)


def test_a_required_attribute_missing():
    with pytest.raises(SerializationError, match="required attribute 'to'"):
        _load(_one(helper.make_node("Cast", ["x"], ["y"])))


def test_an_output_that_is_not_supported():
    # BatchNormalization's running statistics: outputs of its training mode
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm"])
    stats = {k: np.abs(rand(3, seed=i)) + 0.5 for i, k in enumerate("sbmv")}
    m = model([node], {"x": rand(2, 3, 4)}, {"y": np.float32, "rm": np.float32}, stats)
    with pytest.raises(UnsupportedOperator, match="output 1 \\('rm'\\)"):
        _load(m)


def test_a_bad_model_fails_naming_the_node():
    node = helper.make_node("Add", ["x", "w"], ["y"], name="bad_add")
    m = model([node], {"x": rand(2, 3)}, {"y": np.float32}, {"w": rand(4)})
    with pytest.raises(SerializationError, match="bad_add.*do not broadcast"):
        _load(m)
