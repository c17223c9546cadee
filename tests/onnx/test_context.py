"""gpucore.onnx.context: the interpreter's checks: UnsupportedOperator names the node, the op,
the opset and the attribute; attribute defaults come from the op's schema at the model's
opset; an attribute no handler reads must hold its default."""

import numpy as np
import pytest
from onnx_cases import check_op, helper, model, rand

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
    # one of a later opset: which, and what to do
    with pytest.raises(UnsupportedOperator, match="Gelu is not an operator of opset 17") as e:
        _load(_one(helper.make_node("Gelu", ["x"], ["y"], name="g")))
    assert "node g" in str(e.value) and "since opset 20: re-export" in str(e.value)
    # LayerNormalization came at 17; an opset-13 model: 17, not its newest version's opset
    with pytest.raises(UnsupportedOperator, match="since opset 17"):
        _load(_one(helper.make_node("LayerNormalization", ["x", "x"], ["y"]), opset=13))
    # none of ONNX's: a custom or misspelled op, and where the supported ones are listed
    with pytest.raises(UnsupportedOperator, match="FooBar .* nor of any ONNX opset") as e:
        _load(_one(helper.make_node("FooBar", ["x"], ["y"], name="foo")))
    assert "node foo" in str(e.value) and "supported_ops()" in str(e.value)
    # of a later opset but not read by gpucore there either: no advice to re-export
    with pytest.raises(
        UnsupportedOperator, match="since opset 11, but gpucore.onnx does not implement"
    ):
        _load(_one(helper.make_node("Det", ["x"], ["y"]), opset=10))
    # a com.microsoft op gpucore reads, written in the default domain: which domain to set
    node = helper.make_node("QLinearSigmoid", ["x", "x", "x", "x"], ["y"])
    with pytest.raises(UnsupportedOperator, match="set the node's domain to 'com.microsoft'"):
        _load(_one(node))


@pytest.mark.parametrize(
    "op, inputs, outputs, match",
    [
        ("Add", ["x"], ["y"], "node n .*1 input given; Add at opset 17 takes 2"),
        ("Relu", ["x", "x"], ["y"], "node n .*2 inputs given; Relu at opset 17 takes 1"),
        ("Clip", ["x", "", "", ""], ["y"], "4 inputs given; Clip at opset 17 takes 1 to 3"),
        ("Relu", ["x"], ["y", "z"], "2 outputs given; Relu at opset 17 has 1"),
        ("Sum", [], ["y"], "0 inputs given; Sum at opset 17 takes at least 1"),
        ("Add", ["", "x"], ["y"], "node n .*input 0 \\('A'\\) of Add at opset 17 is required"),
    ],
)
def test_inputs_or_outputs_the_ops_schema_does_not_take(op, inputs, outputs, match):
    """Named by node and op before the handler reads them (it would fail on an index)."""
    node = helper.make_node(op, inputs, outputs, name="n")
    with pytest.raises(SerializationError, match=match):
        _load(model([node], {"x": rand(2, 3)}, {o: np.float32 for o in outputs}))


def test_optional_inputs_left_empty_are_not_refused():
    check_op("Clip", [rand(2, 3), None, np.float32(0.5)], opset=17, static=(2,))


@pytest.mark.parametrize(
    "op, inputs, match",
    [
        ("QLinearAdd", ["x", "x"], "2 inputs given; com.microsoft QLinearAdd takes 7 to 8"),
        ("QLinearSigmoid", ["x"] * 6, "6 inputs given; com.microsoft QLinearSigmoid takes 4 to 5"),
        (
            "QLinearConcat",
            ["x"] * 4,
            "4 inputs given; com.microsoft QLinearConcat takes at least 5",
        ),
        ("QLinearSoftmax", ["x"] * 4, "4 inputs given; com.microsoft QLinearSoftmax takes 5"),
        ("QLinearGlobalAveragePool", ["x"] * 4, "4 inputs given; .*GlobalAveragePool takes 5"),
        ("QLinearAdd", ["x", "", "x"] + ["x"] * 4, "input 1 of com.microsoft QLinearAdd is req"),
        ("QGemm", ["x", "x", "", "x", "x", "x"], None),  # an empty a_zero_point: optional
    ],
)
def test_contrib_op_input_counts(op, inputs, match):
    """ONNX has no schema for the com.microsoft ops: their input counts and required inputs are
    MS_HANDLERS' own (ONNX Runtime's contrib schemas)."""
    m = _one(helper.make_node(op, inputs, ["y"], domain="com.microsoft", name="n"))
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    if match is None:  # past the count and emptiness checks: the handler's own (x is float)
        with pytest.raises(Exception) as e:
            _load(m)
        assert "required" not in str(e.value) and "given" not in str(e.value)
        return
    with pytest.raises(SerializationError, match="node n .*" + match):
        _load(m)


def test_another_domain():
    node = helper.make_node("FusedGemm", ["x"], ["y"], domain="com.microsoft")
    m = _one(node)
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    with pytest.raises(UnsupportedOperator, match="domain 'com.microsoft'"):
        _load(m)
    node = helper.make_node("Relu", ["x"], ["y"], domain="com.example", name="r")
    m = _one(node)
    m.opset_import.append(helper.make_opsetid("com.example", 1))
    with pytest.raises(UnsupportedOperator, match="node r .*'com.example' .* standard ONNX ops"):
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
