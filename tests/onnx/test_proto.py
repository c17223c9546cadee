"""gpucore.onnx.proto: hostile and broken files give SerializationError naming the file (or
UnsupportedOperator for what is valid but unsupported), never a crash or a huge allocation."""

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx_cases import model, onnx, rand

import gpucore.onnx
from gpucore.errors import GpucoreError, SerializationError
from gpucore.onnx import UnsupportedOperator

HUGE = 1_000_000  # 1e6 x 1e6 = 1e12 elements


def _good():
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("Reshape", ["r", "shape"], ["y"]),
    ]
    inits = {"w": rand(8, 6, seed=1), "shape": np.array([-1, 3], np.int64)}
    return model(nodes, {"x": rand(2, 8)}, {"y": np.float32}, inits, 17, {"x": ["N", 8]})


def _load(m_or_bytes):
    data = m_or_bytes if isinstance(m_or_bytes, bytes) else m_or_bytes.SerializeToString()
    return gpucore.onnx.load(data, device="cpu")


def test_the_good_model_loads():
    _load(_good())


@pytest.mark.parametrize("fraction", [0.0, 0.01, 0.2, 0.5, 0.9, 0.999])
def test_truncated_files(fraction, tmp_path):
    data = _good().SerializeToString()
    cut = data[: int(len(data) * fraction)]
    with pytest.raises(SerializationError, match="<bytes>"):
        _load(cut)
    path = tmp_path / "cut.onnx"
    path.write_bytes(cut)
    with pytest.raises(SerializationError, match="cut.onnx"):
        gpucore.onnx.load(path, device="cpu")


def test_random_bit_flips_give_a_model_or_a_clear_error():
    data = _good().SerializeToString()
    rng = np.random.default_rng(0)
    outcomes = set()
    for _ in range(300):
        b = bytearray(data)
        for _ in range(rng.integers(1, 6)):
            k = rng.integers(0, len(b))
            b[k] ^= 1 << int(rng.integers(0, 8))
        try:
            _load(bytes(b))
            outcomes.add("loaded")
        except GpucoreError as e:  # anything else (a crash, a bare KeyError) fails the test
            outcomes.add(type(e).__name__)
    assert "SerializationError" in outcomes


def test_not_a_protobuf_and_an_empty_file():
    with pytest.raises(SerializationError, match="not a valid ONNX protobuf"):
        _load(b"\xff\xff\xff\xff garbage")
    with pytest.raises(SerializationError, match="empty"):
        _load(b"")


def test_a_node_reading_an_undefined_name():
    m = _good()
    m.graph.node[1].input[0] = "nowhere"
    with pytest.raises(SerializationError, match="reads 'nowhere', which nothing.*initializer"):
        _load(m)


def test_a_cycle():
    m = _good()
    m.graph.node[0].input[0] = "r"  # MatMul reads Relu's output, Relu reads MatMul's
    with pytest.raises(SerializationError, match="cycle"):
        _load(m)


def test_a_name_defined_twice():
    m = _good()
    m.graph.node[1].output[0] = "h"
    with pytest.raises(SerializationError, match="defined before"):
        _load(m)


def test_nodes_out_of_order_are_sorted():
    m = _good()
    nodes = list(m.graph.node)[::-1]
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    _load(m)


def test_an_initializer_claiming_1e12_elements():
    m = _good()
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[HUGE, HUGE], raw_data=b"\0" * 16)
    m.graph.initializer[0].CopyFrom(t)
    with pytest.raises(SerializationError, match="claims 1e\\+12 elements"):
        _load(m)


def test_an_initializer_whose_data_does_not_match_its_dims():
    m = _good()
    m.graph.initializer[0].dims[0] = 9
    with pytest.raises(SerializationError, match="needs .* bytes"):
        _load(m)


def test_an_input_claiming_1e12_elements():
    m = _good()
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_value = HUGE
    m.graph.input[0].type.tensor_type.shape.dim[1].dim_value = HUGE
    with pytest.raises(SerializationError, match="input 'x' claims"):
        _load(m)


@pytest.mark.parametrize("op", ["ConstantOfShape", "Expand", "Tile"])
def test_values_computed_at_load_time_claiming_1e12_elements(op):
    x = rand(1, 1)
    if op == "ConstantOfShape":
        node = helper.make_node(op, ["s"], ["y"])
        inits = {"s": np.array([HUGE, HUGE], np.int64)}
    else:
        node = helper.make_node(op, ["x", "s"], ["y"])
        inits = {"s": np.array([HUGE, HUGE], np.int64)}
    m = model([node, helper.make_node("Identity", ["x"], ["z"])], {"x": x},
              {"y": np.float32, "z": np.float32}, inits)  # fmt: skip
    with pytest.raises(SerializationError, match="claims"):
        _load(m)


def test_model_level_problems():
    m = _good()
    del m.opset_import[:]
    with pytest.raises(SerializationError, match="imports no opset"):
        _load(m)
    m = _good()
    m.opset_import[0].version = 99
    with pytest.raises(UnsupportedOperator, match="opset 99"):
        _load(m)
    m = _good()
    del m.graph.output[:]
    with pytest.raises(SerializationError, match="no outputs"):
        _load(m)


def test_an_input_without_a_shape_or_of_an_unsupported_type():
    m = _good()
    m.graph.input[0].type.tensor_type.ClearField("shape")
    with pytest.raises(UnsupportedOperator, match="no shape"):
        _load(m)
    m = _good()
    m.graph.input[0].type.tensor_type.elem_type = TensorProto.STRING
    with pytest.raises(UnsupportedOperator, match="string"):
        _load(m)


def test_external_data_outside_the_models_folder_is_refused(tmp_path):
    m = _good()
    w = m.graph.initializer[0]
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    entry = w.external_data.add()
    entry.key, entry.value = "location", "../../etc/passwd"
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    with pytest.raises(SerializationError, match="m.onnx"):
        gpucore.onnx.load(path, device="cpu")
