"""quantize_dynamic for nn.LSTM / nn.GRU (gpucore/quantization/dynamic_rnn.py): outputs and final
states close to the float layer's and to torch's quantize_dynamic from the same weights; the
layer's state dict; what it refuses."""

import numpy as np
import pytest

import gpucore
import gpucore.nn as nn
from gpucore.quantization import dynamic_rnn, quantize_dynamic


def _cos(a, b):
    a, b = np.ravel(a), np.ravel(b)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _model(cls):
    gpucore.manual_seed(0)
    return getattr(nn, cls)(16, 32, num_layers=2, bidirectional=True)


@pytest.mark.parametrize("cls", ["LSTM", "GRU"])
def test_close_to_the_float_layer(cls):
    m = _model(cls)
    q = quantize_dynamic(m, {getattr(nn, cls)})
    assert isinstance(q, getattr(dynamic_rnn, cls)) and q is not m
    x = gpucore.tensor(np.random.default_rng(0).uniform(-1, 1, (7, 3, 16)).astype(np.float32))
    fo, fh = m(x)
    qo, qh = q(x)
    fo, qo = fo.detach().numpy(), qo.numpy()
    assert qo.shape == fo.shape
    assert _cos(qo, fo) > 0.999
    assert np.abs(qo - fo).max() < 0.05
    fh = fh[0] if cls == "LSTM" else fh
    qh = qh[0] if cls == "LSTM" else qh
    assert _cos(qh.numpy(), fh.detach().numpy()) > 0.999
    # unbatched input and given states (activation scales are per call: close, not equal)
    h = gpucore.zeros(4, 32)
    hx = (h, h) if cls == "LSTM" else h
    np.testing.assert_allclose(q(x[:, 0], hx)[0].numpy(), qo[:, 0], atol=5e-3)
    assert "ih_l1_reverse.weight" in q.state_dict()


@pytest.mark.parametrize("cls", ["LSTM", "GRU"])
def test_close_to_torch_quantize_dynamic(cls):
    torch = pytest.importorskip("torch")
    m = _model(cls)
    t = getattr(torch.nn, cls)(16, 32, num_layers=2, bidirectional=True)
    t.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in m.state_dict().items()})
    tq = torch.ao.quantization.quantize_dynamic(t, {getattr(torch.nn, cls)}, dtype=torch.qint8)
    q = quantize_dynamic(m, {getattr(nn, cls)})
    x = np.random.default_rng(1).uniform(-1, 1, (7, 3, 16)).astype(np.float32)
    want = tq(torch.from_numpy(x))[0].detach().numpy()
    got = q(gpucore.tensor(x))[0].numpy()
    assert _cos(got, want) > 0.999
    assert np.abs(got - want).max() < 0.05


def test_refusals():
    with pytest.raises(ValueError, match="proj_size is not supported"):
        dynamic_rnn.LSTM.from_float(nn.LSTM(4, 6, proj_size=2))
    with pytest.raises(TypeError, match="expects a gpucore.nn.GRU"):
        dynamic_rnn.GRU.from_float(nn.LSTM(4, 6))
    q = dynamic_rnn.GRU.from_float(nn.GRU(4, 6))
    with pytest.raises(ValueError, match="Expected 4, got 5"):
        q(gpucore.zeros(3, 2, 5))


# ---------------------------------------------------------------------------------- capture
@pytest.mark.parametrize("executor", ["compiled", "interpreted"])
@pytest.mark.parametrize("cls", ["LSTM", "GRU"])
def test_compiled_equals_eager_bitwise(cls, executor):
    """A capture records every time step as graph ops (it used to raise CaptureError at the
    layer's host reads); each int8 product becomes one fused qlinear_dynamic node and the
    compiled model gives the eager outputs and final states bit for bit on new inputs."""
    q = quantize_dynamic(_model(cls), {getattr(nn, cls)})
    r = np.random.default_rng(3)
    t, b = 5, 2

    def flat(x):  # (out, h_n[, c_n]): a capture returns a flat tuple
        out, h = q(x)
        return (out, *h) if cls == "LSTM" else (out, h)

    cm = gpucore.compile(flat, (gpucore.randn(t, b, 16),), device="cpu", executor=executor)
    ops = [n.op for n in cm.graph.order()]
    # 2 layers x 2 directions: the input projection and one product per step but the first
    # (without an initial state: its bias, no product)
    assert ops.count("qlinear_dynamic") == 4 * t, ops
    assert "amin" not in ops and "round" not in ops, sorted(set(ops))
    for scale in (1.0, 5.0):
        x = (r.standard_normal((t, b, 16)) * scale).astype(np.float32)
        got, want = cm(gpucore.tensor(x)), flat(gpucore.tensor(x))
        assert len(got) == len(want) == (3 if cls == "LSTM" else 2)
        for g, w in zip(got, want):
            assert g.numpy().tobytes() == w.numpy().tobytes()


@pytest.mark.parametrize("cls", ["LSTM", "GRU"])
def test_compiled_batch_first_with_states_equals_eager(cls):
    gpucore.manual_seed(2)
    m = getattr(nn, cls)(8, 12, batch_first=True)
    q = quantize_dynamic(m, {getattr(nn, cls)})
    r = np.random.default_rng(4)
    h = gpucore.tensor(r.standard_normal((1, 3, 12)).astype(np.float32))
    hx = (h, h * 0.5) if cls == "LSTM" else h
    cm = gpucore.compile(lambda x: q(x, hx)[0], (gpucore.randn(3, 4, 8),), device="cpu")
    for _ in range(2):
        x = gpucore.tensor(r.standard_normal((3, 4, 8)).astype(np.float32))
        assert cm(x).numpy().tobytes() == q(x, hx)[0].numpy().tobytes()


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("cls", ["LSTM", "GRU"])
def test_empty_sequence_as_the_float_layer(cls, batch_first):
    """Length 0: the float layer's empty output and unchanged states (it used to raise
    stack()'s "expected a non-empty list of tensors")."""
    gpucore.manual_seed(5)
    m = getattr(nn, cls)(6, 5, num_layers=2, bidirectional=True, batch_first=batch_first)
    q = quantize_dynamic(m, {getattr(nn, cls)})
    r = np.random.default_rng(6)
    h = gpucore.tensor(r.standard_normal((4, 3, 5)).astype(np.float32))
    x = gpucore.zeros(3, 0, 6) if batch_first else gpucore.zeros(0, 3, 6)
    for hx in (None, (h, h * 2.0) if cls == "LSTM" else h):
        want, got = m(x, hx), q(x, hx)
        assert tuple(got[0].shape) == tuple(want[0].shape)
        states = zip(got[1], want[1]) if cls == "LSTM" else [(got[1], want[1])]
        for g, w in states:
            np.testing.assert_array_equal(g.numpy(), w.detach().numpy())


@pytest.mark.parametrize("cls", ["LSTM", "GRU"])
def test_no_initial_state_is_zero_states_bit_for_bit(cls):
    """Without hx the first step's hidden product is its bias (zeros quantize to 0: the int8
    product of zeros is ``0 * scale + bias``); the same bits as zero states given, which run
    the product, a -0.0 bias (-> +0.0) included; also for the compiled graph at a dynamic
    batch (the zeros made from the input there)."""
    q = quantize_dynamic(_model(cls), {getattr(nn, cls)})
    q.hh_l0._bias.numpy()[:3] = -0.0
    x = np.random.default_rng(4).standard_normal((4, 3, 16)).astype(np.float32)
    h = gpucore.zeros(4, 3, 32)
    given = q(gpucore.tensor(x), (h, h) if cls == "LSTM" else h)
    for got, want in zip(_flat(q(gpucore.tensor(x))), _flat(given)):
        assert got.tobytes() == want.tobytes()
    cm = gpucore.compile(lambda v: tuple(q(v)), (gpucore.tensor(x),), device="cpu",
                         dynamic_axes={"v": {1: "b"}})  # fmt: skip
    for b in (1, 3, 5):
        xb = np.random.default_rng(b).standard_normal((4, b, 16)).astype(np.float32)
        for got, want in zip(_flat(cm(gpucore.tensor(xb))), _flat(q(gpucore.tensor(xb)))):
            assert got.tobytes() == want.tobytes()


def _flat(out) -> list:
    if isinstance(out, (tuple, list)):
        return [a for o in out for a in _flat(o)]
    return [out.numpy()]


@pytest.mark.parametrize("cls", ["LSTM", "GRU"])
def test_compiled_returns_the_eager_structure(cls):
    """``gc.compile(q, (x,))(x)`` returns ``(output, (h_n, c_n))`` / ``(output, h_n)`` as the
    layer does (the capture flattens them into three / two graph outputs; they used to come
    back flat), bit for bit, at a dynamic batch; the lazy ``gpucore.compile(q)`` runs it
    compiled (it used to fall back to eager: "the model returns tuple") with the same
    structure."""
    q = quantize_dynamic(_model(cls), {getattr(nn, cls)}).eval()
    cm = gpucore.compile(q, (gpucore.randn(3, 2, 16),), device="cpu",
                         dynamic_axes={"input": {1: "b"}})  # fmt: skip
    assert len(cm.output_names) == (3 if cls == "LSTM" else 2)
    lazy = gpucore.compile(q)
    r = np.random.default_rng(7)
    for b in (2, 4):
        x = gpucore.tensor(r.standard_normal((3, b, 16)).astype(np.float32))
        want = q(x)
        for got in (cm(x), lazy(x), lazy(x)):
            if cls == "LSTM":
                out, (h, c) = got
                assert isinstance(got[1], tuple) and len(got[1]) == 2
            else:
                out, h = got
                assert isinstance(h, gpucore.Tensor)
            assert isinstance(got, tuple) and len(got) == 2
            for g, w in zip(_flat(got), _flat(want)):
                assert g.tobytes() == w.tobytes()
    stats = lazy.stats()
    assert stats["compiled"] >= 2 and not stats["fallbacks"], stats


@pytest.mark.parametrize("cls", ["LSTM", "GRU"])
def test_vulkan_compiled_is_close_not_bitwise(vulkan, cls):
    """Compiled for Vulkan (the int8 products as shaders, the CPU's bits for the same input):
    the eager structure, and outputs within float32 rounding of eager, as the module docstring
    says (the sigmoid / tanh shaders differ from the C kernels by about one ulp)."""
    q = quantize_dynamic(_model(cls), {getattr(nn, cls)}).eval()
    x = gpucore.tensor(np.random.default_rng(9).standard_normal((5, 3, 16)).astype(np.float32))
    got, want = gpucore.compile(q, (x,), device="vulkan")(x), q(x)
    assert isinstance(got, tuple) and isinstance(got[1], tuple if cls == "LSTM" else gpucore.Tensor)
    for g, w in zip(_flat(got), _flat(want)):
        np.testing.assert_allclose(g, w, rtol=0, atol=2e-6)
