"""gpucore.onnx.export of a quantize_dynamic LSTM / GRU (gpucore/quantization/dynamic_rnn.py):
the capture unrolls the time steps, so the file holds ONNX Runtime's dynamic quantization of each
int8 product (export_ops.py's qlinear_dynamic: DynamicQuantizeLinear -> MatMulInteger with the
weights as uint8 w + 128 -> Cast -> Mul -> Add; one per layer and direction for the inputs, one
per step for the hidden state but the first without an initial state, which is the bias)
between the float gate ops; its size grows with the sequence length, which is fixed; the batch
may be a dynamic axis. The LSTM's nested ``(output, (h_n, c_n))`` is written as three outputs.
Checked: onnx.checker (full), ONNX Runtime against onnx.reference (float32 rounding apart: no
saturated int8 products), gpucore.onnx.load bringing it back onto qlinear_dynamic nodes, and all
three against the eager gpucore layer within a tolerance from the int8 rounding (ONNX's
DynamicQuantizeLinear picks the activations' parameters as ONNX does, not as PyTorch: a value
may land one quantization step apart)."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import gpucore as gc  # noqa: E402
import gpucore.onnx as gx  # noqa: E402
from gpucore import nn  # noqa: E402
from gpucore.quantization import quantize_dynamic  # noqa: E402

F32 = np.float32
T, B, I, H = 6, 3, 10, 16


def _models(cls, batch_first=False, layers=2, bidirectional=True, seed=0):
    gc.manual_seed(seed)
    m = getattr(nn, cls)(I, H, num_layers=layers, bidirectional=bidirectional,
                         batch_first=batch_first)  # fmt: skip
    return m, quantize_dynamic(m, {nn.LSTM, nn.GRU})


def _flat(out) -> list:
    if isinstance(out, (tuple, list)):
        return [a for o in out for a in _flat(o)]
    return [out.detach().numpy()]


def _eager(model, *args) -> list:
    with gc.no_grad():
        return _flat(model(*(gc.tensor(a) for a in args)))


def _int8_tolerance(models, x) -> float:
    """A quarter of the quantized layer's own int8 error against its float model on ``x``
    (every output): how far apart two faithful int8 computations of it may land when their
    activation quantizations round a value differently (a whole wrong product, a gate out of
    order or a saturated pair, is far beyond)."""
    fm, qm = models
    err = max(np.abs(a - b).max() for a, b in zip(_eager(qm, x), _eager(fm, x)))
    assert 1e-4 < err < 0.05, err  # int8 noise: present, and small
    return err / 4


def _ort(proto, feeds):
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, dict(zip([i.name for i in sess.get_inputs()], feeds)))


@pytest.mark.parametrize("cls", ["LSTM", "GRU"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_exported_as_onnx_runtime_dynamic_quantization(tmp_path, cls, batch_first):
    from onnx.reference import ReferenceEvaluator  # noqa: PLC0415

    models = _models(cls, batch_first)
    shape = (B, T, I) if batch_first else (T, B, I)
    path = str(tmp_path / "rnn.onnx")
    proto = gx.export(models[1], (gc.zeros(*shape),), path)
    onnx.checker.check_model(proto, full_check=True)
    ops = [n.op_type for n in proto.graph.node]
    # per layer and direction: one product for the inputs, one per step but the first (h0 = 0:
    # the bias)
    n_gemms = 2 * 2 * (1 + T - 1)
    for op in ("DynamicQuantizeLinear", "MatMulInteger"):
        assert ops.count(op) == n_gemms, ops
    assert not {"Round", "ReduceMin", "Clip", "LSTM", "GRU"} & set(ops), ops
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in proto.graph.initializer}
    for node in (n for n in proto.graph.node if n.op_type == "MatMulInteger"):
        assert inits[node.input[1]].dtype == np.uint8 and (inits[node.input[3]] == 128).all()
    n_out = 3 if cls == "LSTM" else 2
    assert [o.name for o in proto.graph.output] == [f"output_{i}" for i in range(n_out)]
    ref = ReferenceEvaluator(proto)
    cm = gx.load(path)
    graph_ops = {s.node.op for ex in cm.executors() for s in ex.plan.steps}
    assert "qlinear_dynamic" in graph_ops and "qmatmul_integer" not in graph_ops, graph_ops
    r = np.random.default_rng(1)
    for scale in (1.0, 4.0):
        x = (r.standard_normal(shape) * scale).astype(F32)
        eager = _eager(models[1], x)
        want = ref.run(None, {proto.graph.input[0].name: x})
        got_ort = _ort(proto, [x])
        got_gc = _flat(cm(gc.tensor(x)))
        tol = _int8_tolerance(models, x)
        for i, (e, w, o, g) in enumerate(zip(eager, want, got_ort, got_gc)):
            assert e.shape == w.shape == o.shape == g.shape, i
            # ONNX Runtime and gpucore run the file as onnx.reference does, up to float32
            # rounding (their sigmoid / tanh differ by ulps); a saturated int8 product would
            # be a whole quantization step off
            np.testing.assert_allclose(o, w, rtol=0, atol=1e-5, err_msg=f"ORT output {i}")
            np.testing.assert_allclose(g, w, rtol=0, atol=1e-5, err_msg=f"gpucore output {i}")
            np.testing.assert_allclose(w, e, rtol=0, atol=tol, err_msg=f"eager output {i}")


@pytest.mark.parametrize("cls", ["LSTM", "GRU"])
def test_initial_states_as_inputs_and_one_layer(cls):
    """A function of the input and initial states (the first step's product then stays in
    the graph): ORT against the eager layer; unidirectional, one layer."""
    models = _models(cls, layers=1, bidirectional=False, seed=3)
    q = models[1]
    r = np.random.default_rng(2)
    x = r.standard_normal((T, B, I)).astype(F32)
    states = [r.uniform(-1, 1, (1, B, H)).astype(F32) for _ in range(2 if cls == "LSTM" else 1)]

    def fn(x, *hx):
        return q(x, tuple(hx) if cls == "LSTM" else hx[0])

    names = ["x", "h0", "c0"][: 1 + len(states)]
    example = [gc.tensor(a) for a in [x, *states]]
    proto = gx.export(fn, tuple(example), input_names=names)
    ops = [n.op_type for n in proto.graph.node]
    assert ops.count("MatMulInteger") == 1 + T, ops
    assert [i.name for i in proto.graph.input] == names
    with gc.no_grad():
        eager = _flat(fn(*example))
    fm = models[0]
    with gc.no_grad():
        exact = _flat(fm(example[0], tuple(example[1:]) if cls == "LSTM" else example[1]))
    tol = max(np.abs(a - b).max() for a, b in zip(eager, exact)) / 4
    for e, o in zip(eager, _ort(proto, [x, *states])):
        np.testing.assert_allclose(o, e, rtol=0, atol=tol)


@pytest.mark.parametrize("cls", ["LSTM", "GRU"])
def test_dynamic_batch(cls):
    """``dynamic_axes`` on the batch: the zero initial state is computed from the input in the
    graph (dynamic_rnn.py's _batch_zeros), so one file serves every batch size; the sequence
    length is fixed (the steps are unrolled) and refused as a dynamic axis."""
    models = _models(cls, batch_first=True, seed=5)
    proto = gx.export(models[1], (gc.zeros(2, T, I),), dynamic_axes={"input": {0: "batch"}})
    onnx.checker.check_model(proto, full_check=True)
    dims = proto.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param == "batch" and dims[1].dim_value == T
    cm = gx.load(proto)
    for b in (1, 2, 5):
        x = np.random.default_rng(b).standard_normal((b, T, I)).astype(F32)
        eager, tol = _eager(models[1], x), _int8_tolerance(models, x)
        for e, o, g in zip(eager, _ort(proto, [x]), _flat(cm(gc.tensor(x)))):
            np.testing.assert_allclose(o, e, rtol=0, atol=tol)
            np.testing.assert_allclose(g, o, rtol=0, atol=1e-5)
    with pytest.raises(gc.runtime.capture.trace.CaptureError, match="different ops"):
        gx.export(models[1], (gc.zeros(2, T, I),), dynamic_axes={"input": {1: "steps"}})


@pytest.mark.parametrize("cls", ["LSTM", "GRU"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_initial_states_two_layers_bidirectional(tmp_path, cls, batch_first):
    """Initial states given to two bidirectional layers (each layer and direction then keeps
    its first step's product, reading its slice of h0 [4, B, H]), batch first or not: the
    file passes onnx.checker; ONNX Runtime and gpucore.onnx.load run it as onnx.reference
    does (float32 rounding apart), and all of them the eager layer within the int8 tolerance
    of the activation quantizations."""
    from onnx.reference import ReferenceEvaluator  # noqa: PLC0415

    fm, q = _models(cls, batch_first, seed=7)
    r = np.random.default_rng(8)
    shape = (B, T, I) if batch_first else (T, B, I)
    n_states = 2 if cls == "LSTM" else 1

    def fn(x, *hx):
        return q(x, tuple(hx) if cls == "LSTM" else hx[0])

    def states(scale):
        return [(r.uniform(-1, 1, (4, B, H)) * scale).astype(F32) for _ in range(n_states)]

    names = ["x", "h0", "c0"][: 1 + n_states]
    example = [gc.zeros(*shape)] + [gc.tensor(s) for s in states(1.0)]
    path = str(tmp_path / "rnn_states.onnx")
    proto = gx.export(fn, tuple(example), path, input_names=names)
    onnx.checker.check_model(proto, full_check=True)
    ops = [n.op_type for n in proto.graph.node]
    # per layer and direction: the input projection and one product per step, the first too
    assert ops.count("MatMulInteger") == ops.count("DynamicQuantizeLinear") == 2 * 2 * (1 + T)
    assert [i.name for i in proto.graph.input] == names
    assert len(proto.graph.output) == 1 + n_states
    ref = ReferenceEvaluator(proto)
    cm = gx.load(path)
    for scale in (1.0, 3.0):
        x = (r.standard_normal(shape) * scale).astype(F32)
        hx = states(scale)
        args = [gc.tensor(a) for a in (x, *hx)]
        with gc.no_grad():
            eager = _flat(fn(*args))
            exact = _flat(fm(args[0], tuple(args[1:]) if cls == "LSTM" else args[1]))
        err = max(np.abs(a - b).max() for a, b in zip(eager, exact))
        assert 1e-4 < err < 0.05, err  # int8 noise: present, and small
        want = ref.run(None, dict(zip(names, [x, *hx])))
        got_ort = _ort(proto, [x, *hx])
        got_gc = [o.numpy() for o in cm(*args)]
        assert len(want) == len(got_ort) == len(got_gc) == len(eager) == 1 + n_states
        for i, (e, w, o, g) in enumerate(zip(eager, want, got_ort, got_gc)):
            assert e.shape == w.shape == o.shape == g.shape, i
            np.testing.assert_allclose(o, w, rtol=0, atol=1e-5, err_msg=f"ORT output {i}")
            np.testing.assert_allclose(g, w, rtol=0, atol=1e-5, err_msg=f"gpucore output {i}")
            np.testing.assert_allclose(w, e, rtol=0, atol=err / 4, err_msg=f"eager output {i}")
