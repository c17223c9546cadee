"""gpucore.onnx.wire and the in-place weights of gpucore.onnx.proto: the initializers' raw_data
cut out of a model's bytes (protobuf parses the rest), read where they lie, the same arrays as
onnx's own reader gives; anything unexpected leaves the whole file to protobuf."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx_cases import model, onnx, rand

import gpucore.onnx
from gpucore.errors import SerializationError
from gpucore.onnx.proto import check, read
from gpucore.onnx.wire import split_raw_data
from gpucore.runtime.ir.packing import is_constant


def _model():
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Add", ["h", "b"], ["a"]),
        helper.make_node("Mul", ["a", "half"], ["m"]),
        helper.make_node("Reshape", ["m", "shape"], ["y"]),
    ]
    inits = {
        "w": rand(8, 6, seed=1),
        "b": rand(6, seed=2).astype(np.float64).astype(np.float32),
        "half": np.array(0.5, np.float16).astype(np.float32),
        "shape": np.array([-1, 3], np.int64),
    }
    m = model(nodes, {"x": rand(2, 8)}, {"y": np.float32}, inits, 17, {"x": ["N", 8]})
    # one initializer stored in float_data rather than raw_data: it has no span
    half = m.graph.initializer[2]
    half.ClearField("raw_data")
    half.float_data.append(0.5)
    return m


def test_the_stripped_model_and_the_spans_give_back_the_file():
    m = _model()
    data = m.SerializeToString()
    stripped, spans = split_raw_data(data)
    assert len(stripped) < len(data) - 8 * 6 * 4
    p = onnx.ModelProto()
    p.ParseFromString(stripped)
    assert [t.name for t in p.graph.initializer] == [t.name for t in m.graph.initializer]
    assert spans[2] is None
    for t, got, span in zip(m.graph.initializer, p.graph.initializer, spans):
        if span is not None:
            off, size = span
            assert data[off : off + size] == t.raw_data
            assert not got.HasField("raw_data")
        want = onnx.TensorProto()
        want.CopyFrom(t)
        want.ClearField("raw_data")
        assert got == want
    want = onnx.ModelProto()
    want.CopyFrom(m)
    for t in want.graph.initializer:
        t.ClearField("raw_data")
    assert p == want


def test_initializers_are_read_in_place_and_equal_onnxs_reader():
    m = _model()
    data = m.SerializeToString()
    proto, source, raw = read(data, split=True)
    assert source == "<bytes>" and raw is not None and raw.data is data
    info = check(proto, source, raw)
    for t in m.graph.initializer:
        arr = info.initializers[t.name]
        want = numpy_helper.to_array(t)
        np.testing.assert_array_equal(arr, want)
        assert arr.dtype == want.dtype and arr.shape == want.shape
        assert not arr.flags.writeable and arr.flags.aligned and is_constant(arr)


def test_a_files_weights_are_copied_out_once_into_one_sealed_host_block(tmp_path):
    """A path is mapped and its weights copied into one block of the caching host allocator
    (64-byte-aligned offsets), which a dropped model gives back for the next load: constants
    (is_constant), equal to onnx's reader, and no write can reach them."""
    m = _model()
    path = tmp_path / "m.onnx"
    path.write_bytes(m.SerializeToString())
    info = check(*read(str(path), split=True))
    roots = set()
    for t in m.graph.initializer:
        arr = info.initializers[t.name]
        np.testing.assert_array_equal(arr, numpy_helper.to_array(t))
        assert not arr.flags.writeable and is_constant(arr)
        if t.HasField("raw_data"):
            assert arr.ctypes.data % 64 == 0
            roots.add(id(_root(arr)))
            with pytest.raises(ValueError):
                arr.flags.writeable = True  # the block's array is read-only for good
    assert len(roots) == 1  # one block


def _root(arr):
    while isinstance(arr, np.ndarray):
        arr = arr.base
    return arr


def test_aligned_weights_are_views_of_the_bytes_misaligned_ones_aligned_copies():
    """raw_data starts wherever the protobuf puts it: names of every length shift it."""
    views = []
    for k in range(8):
        m = _model()
        m.graph.initializer[0].name = "w" + "x" * k
        m.graph.node[0].input[1] = "w" + "x" * k
        data = m.SerializeToString()
        info = check(*read(data, split=True))
        arr = info.initializers["w" + "x" * k]
        assert arr.flags.aligned and arr.ctypes.data % 4 == 0 and is_constant(arr)
        np.testing.assert_array_equal(arr, numpy_helper.to_array(m.graph.initializer[0]))
        views.append(_root(arr) is data)
    assert 0 < sum(views) < len(views)  # both cases met (each k moves the weight 2 bytes)


def _field(number: int, wire: int, payload: bytes) -> bytes:
    key = bytes([number << 3 | wire])
    return key + (bytes([len(payload)]) + payload if wire == 2 else payload)


def test_unexpected_layouts_are_left_to_protobuf():
    data = _model().SerializeToString()
    assert split_raw_data(data[:-3]) is None  # truncated
    assert split_raw_data(data + b"\x0f") is None  # wire type 7
    graph = _field(5, 2, _field(9, 2, b"abcd") + _field(9, 2, b"efgh"))  # raw_data twice
    assert split_raw_data(_field(7, 2, graph)) is None
    assert split_raw_data(_field(7, 2, b"") + _field(7, 2, b"")) is None  # two graph fields
    assert split_raw_data(b"\x00\x01") is None  # field number 0
    assert split_raw_data(b"\x0b\x0c") is None  # a group
    kept, spans = split_raw_data(_field(8, 0, b"\x11"))  # no graph: nothing cut
    assert kept == _field(8, 0, b"\x11") and spans == []


@pytest.mark.parametrize("source", ["path", "bytes"])
def test_a_weight_shorter_than_its_dims_is_refused_from_files_and_bytes(source, tmp_path):
    m = _model()
    m.graph.initializer[0].raw_data = m.graph.initializer[0].raw_data[:-4]
    data = m.SerializeToString()
    if source == "path":
        path = tmp_path / "short.onnx"
        path.write_bytes(data)
        data = path
    with pytest.raises(SerializationError, match="needs 192 bytes, holds 188"):
        gpucore.onnx.load(data, device="cpu")


def test_float16_and_int_initializers_from_a_file(tmp_path):
    nodes = [
        helper.make_node("Cast", ["h"], ["hf"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["x", "hf"], ["a"]),
        helper.make_node("Reshape", ["a", "shape"], ["y"]),
    ]
    h = np.array([1.5, -2.25, 3.0, 0.125], np.float16)
    m = model(nodes, {"x": rand(2, 4)}, {"y": np.float32},
              {"h": h, "shape": np.array([8], np.int64)})  # fmt: skip
    path = tmp_path / "m.onnx"
    path.write_bytes(m.SerializeToString())
    x = rand(2, 4, seed=3)
    got = gpucore.onnx.load(path, device="cpu").run_arrays([x])[0]
    np.testing.assert_array_equal(got, (x + h.astype(np.float32)).reshape(8))
