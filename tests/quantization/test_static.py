"""gpucore.quantization.quantize_static end to end: an MLP and the digits CNN statically
quantized (outputs close to FP32, accuracy within 0.5 pt, int8 weights 4x smaller), compiled ==
interpreted bit for bit, the saved file's round trip and its refusal of tampering, the Vulkan
executor's bits (the CPU's), bad arguments."""

from __future__ import annotations

import json

import numpy as np
import pytest

import gpucore as gc
from gpucore import nn
from gpucore.errors import SerializationError
from gpucore.io import load as io_load
from gpucore.io import save as io_save
from gpucore.quantization import HistogramObserver, MinMaxObserver, quantize_static
from gpucore.runtime import InferenceSession, load

pytestmark = pytest.mark.skipif(not hasattr(gc._cpu, "qconv2d"), reason="no int8 kernels")


def _cos(a, b) -> float:
    a, b = a.reshape(-1).astype(np.float64), b.reshape(-1).astype(np.float64)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def _weight_bytes(model) -> int:
    g = model.graph
    return sum(t.data.nbytes for t in g.tensors.values() if t.data is not None)


@pytest.fixture(scope="module")
def mlp():
    gc.manual_seed(0)
    m = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                      nn.Linear(128, 10)).eval()  # fmt: skip
    rng = np.random.default_rng(0)
    batches = [rng.standard_normal((32, 64)).astype(np.float32) for _ in range(4)]
    fm = gc.compile(m, gc.tensor(batches[0]), device="cpu")
    return fm, quantize_static(fm, batches), rng.standard_normal((32, 64)).astype(np.float32)


def test_mlp_is_quantized_and_close(mlp):
    fm, qm, x = mlp
    counts = qm.graph.op_counts()
    assert counts == {"quantize_linear": 1, "qlinear": 3}, counts
    assert [n.attrs["out_scale"] is None for n in qm.graph.order() if n.op == "qlinear"] == [
        False,
        False,
        True,
    ]  # uint8 between the layers, float32 logits
    assert qm.executors()[0].python_steps == 0  # one C call
    want, got = fm(x).numpy(), qm(x).numpy()
    assert got.dtype == np.float32 and got.shape == want.shape
    assert _cos(got, want) > 0.999
    assert _weight_bytes(fm) / _weight_bytes(qm) > 3.7  # int8 weights; float32 scales and biases


def test_transformer_ffn_with_gelu_is_quantized():
    # the float pipeline fuses the FFN's GELU into its gemm; every Linear is still quantized
    gc.manual_seed(0)
    m = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, activation="gelu", batch_first=True)
    rng = np.random.default_rng(1)
    batches = [rng.standard_normal((2, 8, 32)).astype(np.float32) for _ in range(4)]
    fm = gc.compile(m.eval(), gc.tensor(batches[0]), device="cpu")
    assert any(n.op == "gemm" and n.attrs["act"] == "gelu" for n in fm.graph.nodes)
    qm = quantize_static(fm, batches)
    counts = qm.graph.op_counts()
    assert "gemm" not in counts and counts["gelu"] == 1, counts
    x = rng.standard_normal((2, 8, 32)).astype(np.float32)
    assert _cos(qm(x).numpy(), fm(x).numpy()) > 0.999


def test_saved_file_is_about_4x_smaller(mlp, tmp_path):
    fm, qm, _ = mlp
    fm.save(tmp_path / "f.gcm")
    qm.save(tmp_path / "q.gcm")
    # the tensors: int8 weights stored once (the C section's program reads them in place)
    sizes = [_tensor_bytes(tmp_path / n) for n in ("f.gcm", "q.gcm")]
    assert sizes[0] > 3.7 * sizes[1]
    # the whole file: the graph header and the C program (~2 KB each) are fixed costs
    assert (tmp_path / "f.gcm").stat().st_size > 3.3 * (tmp_path / "q.gcm").stat().st_size


def _tensor_bytes(path) -> int:
    """Bytes of the file's tensors but the C section's program and names."""
    data = path.read_bytes()
    head = json.loads(data[8 : 8 + int.from_bytes(data[:8], "little")])
    return sum(
        v["data_offsets"][1] - v["data_offsets"][0]
        for k, v in head.items()
        if k != "__metadata__" and not k.startswith("capi.")
    )


def test_compiled_equals_interpreted_bitwise(mlp):
    fm, qm, x = mlp
    qi = quantize_static(fm, [x], executor="interpreted")
    qc = quantize_static(fm, [x])
    assert qi.executor_kind == "interpreted"
    np.testing.assert_array_equal(qi(x).numpy(), qc(x).numpy())


def test_histogram_observer_and_per_tensor(mlp):
    fm, _, x = mlp
    for kw in ({"activation_observer": HistogramObserver}, {"per_channel": False},
               {"activation_observer": MinMaxObserver.with_args(eps=1e-6)}):  # fmt: skip
        qm = quantize_static(fm, [x, x * 0.5], **kw)
        assert _cos(qm(x).numpy(), fm(x).numpy()) > 0.995, kw


@pytest.fixture(scope="module")
def digits_model():
    """The digits CNN trained for 8 epochs and its data (x_train, y_train, x_test, y_test)."""
    pytest.importorskip("sklearn")
    from gpucore.examples import digits as demo

    result = demo.train("cnn", epochs=8, progress=False, device="cpu")
    return result.model.eval(), demo.load_data(0)


@pytest.fixture(scope="module")
def digits(digits_model):
    model, (x_train, _, x_test, y_test) = digits_model
    batch = 64
    fm = gc.compile(model, gc.tensor(x_test[:batch]), device="cpu")
    calib = [x_train[i : i + batch] for i in range(0, len(x_train) - batch + 1, batch)]
    qm = quantize_static(fm, calib)
    n = len(x_test) // batch * batch
    tests = [x_test[i : i + batch] for i in range(0, n, batch)]
    return fm, qm, tests, y_test[:n]


def test_digits_cnn_accuracy_and_size(digits, tmp_path):
    fm, qm, tests, y = digits
    counts = qm.graph.op_counts()
    assert counts.get("qconv2d") == 2 and counts.get("qlinear") == 1, counts
    assert counts.get("qmax_pool2d") == 1 and "dequantize_linear" not in counts, counts
    want = np.concatenate([fm(x).numpy() for x in tests])
    got = np.concatenate([qm(x).numpy() for x in tests])
    acc_f = (want.argmax(1) == y).mean()
    acc_q = (got.argmax(1) == y).mean()
    assert acc_f > 0.95
    assert acc_q >= acc_f - 0.005, (acc_f, acc_q)
    assert _cos(got, want) > 0.99
    assert _weight_bytes(fm) / _weight_bytes(qm) > 3.7
    fm.save(tmp_path / "f.gcm")
    qm.save(tmp_path / "q.gcm")
    # the file: ~6 KB of graph and header and ~3 KB of C program on top of 40 KB -> 10 KB of
    # weights
    assert _tensor_bytes(tmp_path / "f.gcm") > 3.5 * _tensor_bytes(tmp_path / "q.gcm")
    assert (tmp_path / "f.gcm").stat().st_size > 2.25 * (tmp_path / "q.gcm").stat().st_size


def test_save_load_round_trip(digits, tmp_path):
    _, qm, tests, _ = digits
    path = tmp_path / "q.gcm"
    qm.save(path)
    x = tests[0]
    want = qm(x).numpy()
    for executor in ("compiled", "interpreted"):
        lm = load(path, device="cpu", executor=executor)
        np.testing.assert_array_equal(lm(x).numpy(), want)
    sess = InferenceSession(str(path), providers=["cpu"])
    (out,) = sess.run(None, {sess.get_inputs()[0].name: x})
    np.testing.assert_array_equal(out, want)


def test_tampered_files_are_refused(digits, tmp_path):
    _, qm, _, _ = digits
    path = tmp_path / "q.gcm"
    qm.save(path)
    data = bytearray(path.read_bytes())
    data[-100] ^= 0x55  # inside the weights: the checksum catches it
    bad = tmp_path / "bad.gcm"
    bad.write_bytes(bytes(data))
    with pytest.raises(SerializationError):
        load(bad, device="cpu")
    # consistent files (valid checksums) whose graphs claim impossible quantization parameters
    obj = io_load(path)
    bad_attrs = [("a_zero_point", 300), ("a_scale", -1.0), ("a_scale", float("nan")),
                 ("out_zero_point", -1), ("padding", (9, 9)), ("relu", 2)]  # fmt: skip
    for key, value in bad_attrs:
        doc = json.loads(obj["graph"])
        node = next(n for n in doc["nodes"] if n["op"] == "qconv2d")
        pairs = node["attrs"]["$dict"]
        for pair in pairs:
            if pair[0] == key:
                pair[1] = {"$tuple": list(value)} if isinstance(value, tuple) else value
        io_save(dict(obj, graph=json.dumps(doc)), tmp_path / "hostile.gcm")
        with pytest.raises(SerializationError):
            load(tmp_path / "hostile.gcm", device="cpu", executor="interpreted")
    # an int8 weight swapped for a float one of the same shape
    doc = json.loads(obj["graph"])
    node = next(n for n in doc["nodes"] if n["op"] == "qlinear")
    doc["tensors"][node["inputs"][1]]["dtype"] = "float32"
    weights = dict(obj["weights"])
    weights[node["inputs"][1]] = gc.tensor(weights[node["inputs"][1]].numpy().astype(np.float32))
    io_save(dict(obj, graph=json.dumps(doc), weights=weights), tmp_path / "hostile.gcm")
    with pytest.raises(SerializationError):
        load(tmp_path / "hostile.gcm", device="cpu")


def test_digits_cnn_on_vulkan_equals_the_cpu(digits, digits_model, tmp_path):
    """The quantized digits CNN on the Vulkan executor (int8 shaders): the CPU's logits bit for
    bit on the whole test set (saved, then loaded for the device), and with a dynamic batch
    (quantize_static(device="vulkan")) at batch 1, 64 and sizes it was not built at."""
    _, qm, tests, _ = digits
    if gc.dispatch.vulkan_backend(required=False, allow_cpu=True) is None:
        pytest.skip("no Vulkan device")
    qm.save(tmp_path / "q.gcm")
    vm = load(tmp_path / "q.gcm", device="vulkan")
    assert vm.device == "vulkan"
    for x in tests:
        np.testing.assert_array_equal(vm(x).numpy(), qm(x).numpy())
    model, (x_train, _, x_test, _) = digits_model
    axes = {"input": {0: "batch"}}
    fm = gc.compile(model, gc.tensor(x_test[:8]), device="cpu", dynamic_axes=axes)
    calib = [x_train[:64], x_train[64:100], x_train[100:101]]
    qc = quantize_static(fm, calib)
    qv = quantize_static(fm, calib, device="vulkan")
    assert qc.device == "cpu" and qv.device == "vulkan"
    for n in (1, 3, 64, 100):
        np.testing.assert_array_equal(qv(x_test[:n]).numpy(), qc(x_test[:n]).numpy())


def test_bad_arguments(mlp):
    fm, _, x = mlp
    with pytest.raises(TypeError, match="CompiledModel"):
        quantize_static(nn.Linear(2, 2), [x])
    with pytest.raises(TypeError, match="iterable of batches"):
        quantize_static(fm, x)
    with pytest.raises(ValueError, match="no batch"):
        quantize_static(fm, [])
    with pytest.raises(TypeError, match="qint8"):
        quantize_static(fm, [x], weight_dtype=gc.quint8)
    with pytest.raises(TypeError, match="observer"):
        quantize_static(fm, [x], activation_observer=3)
    with pytest.raises(ValueError, match="shape"):
        quantize_static(fm, [x[:3]])


def test_conv_geometries_and_shared_tensors():
    """Strided / dilated convolutions with a folded batch norm, a float average pooling between
    quantized layers, and a quantized tensor that a float op reads too."""
    gc.manual_seed(1)
    body = nn.Sequential(
        nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
        nn.Conv2d(8, 8, 3, padding=2, dilation=2), nn.ReLU(), nn.AvgPool2d(2), nn.Flatten(),
        nn.Linear(8 * 2 * 2, 16), nn.ReLU(),
    ).eval()  # fmt: skip
    head = nn.Linear(16, 5).eval()

    def fn(x):
        h = body(x)
        return head(h), h.sum(dim=1)

    rng = np.random.default_rng(2)
    xs = [rng.standard_normal((4, 3, 9, 9)).astype(np.float32) for _ in range(3)]
    fm = gc.compile(fn, (gc.tensor(xs[0]),), device="cpu")
    qm = quantize_static(fm, xs)
    counts = qm.graph.op_counts()
    assert counts.get("qconv2d") == 2 and counts.get("qlinear") == 2, counts
    for x in xs:
        for got, want in zip(qm(x), fm(x)):
            assert _cos(got.numpy(), want.numpy()) > 0.995
    qi = quantize_static(fm, xs, executor="interpreted")
    for a, b in zip(qi(xs[0]), qm(xs[0])):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_concurrent_runs_share_the_packed_weights(mlp):
    """Runs from several threads at once (a runner each, the packed int8 weights shared) give
    the sequential results."""
    import threading

    _, qm, x = mlp
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal(x.shape).astype(np.float32) for _ in range(8)]
    want = [qm(v).numpy() for v in xs]
    got: dict = {}

    def work(i):
        for _ in range(5):
            got[i] = qm(xs[i]).numpy()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(8):
        np.testing.assert_array_equal(got[i], want[i])


def test_dynamic_axes(mlp, tmp_path):
    """A model with a dynamic batch: calibrated on batches of several sizes, one quantized graph
    for every size (equal to the model quantized at a fixed size with the same parameters)."""
    fm, _, x = mlp
    gc.manual_seed(0)
    m = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10)).eval()
    dyn = gc.compile(m, gc.tensor(x[:4]), device="cpu", dynamic_axes={"input": {0: "batch"}})
    qd = quantize_static(dyn, [x[:4], x[4:20], x[20:23]])
    assert qd.symbols == ["batch"] and qd.graph.op_counts().get("qlinear") == 2
    for n in (1, 5, 32):
        want = dyn(x[:n]).numpy()
        got = qd(x[:n]).numpy()
        assert got.shape == (n, 10) and _cos(got, want) > 0.999
    qd.save(tmp_path / "d.gcm")
    loaded = load(tmp_path / "d.gcm", device="cpu")
    np.testing.assert_array_equal(loaded(x[:7]).numpy(), qd(x[:7]).numpy())
