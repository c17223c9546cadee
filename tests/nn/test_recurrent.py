"""nn.RNN / LSTM / GRU and the cells against PyTorch from the same weights (outputs, final states,
every parameter and input gradient) in every configuration; against a float64 numpy reference
(gpucore/ops/recurrent_ref.py stacked by layer) without PyTorch; gradcheck and double backward;
state_dict both ways; PyTorch's argument errors."""

import numpy as np
import pytest

import gpucore
import gpucore.nn as nn
from gpucore.autograd import gradcheck, gradgradcheck
from gpucore.nn.utils.rnn import pack_padded_sequence
from gpucore.ops import recurrent_ref as ref

T, B, I, H = 5, 3, 4, 6
DT = {"float32": (gpucore.float32, 2e-5), "float64": (gpucore.float64, 1e-10)}

# (class name, constructor keywords)
CONFIGS = [
    (cls, kw)
    for cls in ("LSTM", "GRU", "RNN", "RNN_relu")
    for kw in (
        {},
        {"num_layers": 2},
        {"bidirectional": True},
        {"num_layers": 2, "bidirectional": True, "batch_first": True},
        {"bias": False},
    )
] + [
    ("LSTM", {"proj_size": 3}),
    ("LSTM", {"proj_size": 2, "num_layers": 2, "bidirectional": True}),
]


def _ids(c):
    return f"{c[0]}-" + "-".join(f"{k}={v}" for k, v in c[1].items())


def _make(cls, kw, dtype):
    extra = {"nonlinearity": "relu"} if cls == "RNN_relu" else {}
    name = "RNN" if cls == "RNN_relu" else cls
    return getattr(nn, name)(I, H, dtype=dtype, **kw, **extra), name, extra


def _torch_twin(torch, g, name, kw, extra, tdtype):
    t = getattr(torch.nn, name)(I, H, dtype=tdtype, **kw, **extra)
    t.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in g.state_dict().items()})
    return t


def _states(cls, kw, rng, b=B):
    d = (2 if kw.get("bidirectional") else 1) * kw.get("num_layers", 1)
    hs = kw.get("proj_size") or H
    h0 = rng.uniform(-1, 1, (d, b, hs))
    return (h0, rng.uniform(-1, 1, (d, b, H))) if cls == "LSTM" else (h0,)


def _run_pair(torch, cls, kw, dtype_name, with_state=True, unbatched=False):
    dtype, tol = DT[dtype_name]
    tdtype = getattr(torch, dtype_name)
    rng = np.random.default_rng(0)
    g, name, extra = _make(cls, kw, dtype)
    t = _torch_twin(torch, g, name, kw, extra, tdtype)
    shape = (B, T, I) if kw.get("batch_first") else (T, B, I)
    x = rng.uniform(-1, 1, (T, I) if unbatched else shape)
    st = _states(name, kw, rng) if with_state else None
    if unbatched and st:
        st = tuple(s[:, 0] for s in st)

    def go(mod, lib, tensor):
        xt = tensor(x)
        sts = [tensor(s) for s in st] if st else None
        hx = None if sts is None else (tuple(sts) if name == "LSTM" else sts[0])
        out, hn = mod(xt, hx)
        finals = list(hn) if name == "LSTM" else [hn]
        loss = (out * lib.sin(lib.arange(out.numel(), dtype=out.dtype).reshape(out.shape))).sum()
        for k, f in enumerate(finals):
            loss = loss + (f * (k + 2)).sum()
        loss.backward()
        grads = [xt.grad] + ([s.grad for s in sts] if sts else [])
        return [out, *finals], grads, [p.grad for _, p in mod.named_parameters()]

    def gt(a):
        return gpucore.tensor(a, dtype=dtype, requires_grad=True)

    def tt(a):
        return torch.tensor(a, dtype=tdtype, requires_grad=True)

    got = go(g, gpucore, gt)
    want = go(t, torch, tt)
    for part, gl, wl in zip(("values", "input grads", "param grads"), got, want):
        assert len(gl) == len(wl), part
        for k, (a, b) in enumerate(zip(gl, wl)):
            assert tuple(a.shape) == tuple(b.shape), f"{part}[{k}]: {a.shape} vs {b.shape}"
            np.testing.assert_allclose(
                a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol, err_msg=f"{part}[{k}]"
            )


@pytest.mark.parametrize("dtype_name", ["float32", "float64"])
@pytest.mark.parametrize("config", CONFIGS, ids=_ids)
def test_layers_match_torch(config, dtype_name):
    torch = pytest.importorskip("torch")
    _run_pair(torch, *config, dtype_name)


@pytest.mark.parametrize("config", [c for c in CONFIGS if not c[1].get("batch_first")], ids=_ids)
def test_unbatched_and_default_states_match_torch(config):
    torch = pytest.importorskip("torch")
    _run_pair(torch, *config, "float64", with_state=False)
    _run_pair(torch, *config, "float64", unbatched=True)


@pytest.mark.parametrize("cls", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_packed_unsorted_lengths_match_torch(cls, bidirectional):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    kw = {"num_layers": 2, "bidirectional": bidirectional}
    g, name, extra = _make(cls, kw, gpucore.float64)
    t = _torch_twin(torch, g, name, kw, extra, torch.float64)
    lengths = [3, 5, 1, 4]
    x = rng.uniform(-1, 1, (5, 4, I))
    st = _states(cls, kw, rng, b=4)

    def go(mod, lib, tensor, pack):
        xt = tensor(x)
        sts = [tensor(s) for s in st]
        hx = tuple(sts) if cls == "LSTM" else sts[0]
        out, hn = mod(pack(xt, lengths, enforce_sorted=False), hx)
        finals = list(hn) if cls == "LSTM" else [hn]
        w = lib.cos(lib.arange(out.data.numel(), dtype=out.data.dtype)).reshape(out.data.shape)
        loss = (out.data * w).sum() + sum(((k + 2) * f).sum() for k, f in enumerate(finals))
        loss.backward()
        return [out.data, *finals, xt.grad, *[s.grad for s in sts]] + [
            p.grad for _, p in mod.named_parameters()
        ]

    got = go(g, gpucore, lambda a: gpucore.tensor(a, requires_grad=True), pack_padded_sequence)
    want = go(
        t,
        torch,
        lambda a: torch.tensor(a, requires_grad=True),
        torch.nn.utils.rnn.pack_padded_sequence,
    )
    for k, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_allclose(
            a.detach().numpy(), b.detach().numpy(), rtol=1e-10, atol=1e-10, err_msg=k
        )


def test_dropout_between_layers_train_vs_eval():
    torch = pytest.importorskip("torch")
    # p = 1 drops everything between the layers: deterministic, so comparable with torch
    g = nn.LSTM(I, H, num_layers=2, dropout=1.0, dtype=gpucore.float64)
    t = _torch_twin(torch, g, "LSTM", {"num_layers": 2, "dropout": 1.0}, {}, torch.float64)
    x = np.random.default_rng(2).uniform(-1, 1, (T, B, I))
    for train in (True, False):
        g.train(train)
        t.train(train)
        a = g(gpucore.tensor(x))[0].detach().numpy()
        b = t(torch.tensor(x))[0].detach().numpy()
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    g.train()
    g.dropout = 0.5
    gpucore.manual_seed(0)
    a1 = g(gpucore.tensor(x))[0].detach().numpy()
    g.eval()
    a2 = g(gpucore.tensor(x))[0].detach().numpy()
    assert not np.allclose(a1, a2)  # dropout acted in training only


@pytest.mark.parametrize("cls", ["RNNCell", "LSTMCell", "GRUCell"])
@pytest.mark.parametrize("unbatched", [False, True])
def test_cells_match_torch(cls, unbatched):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    g = getattr(nn, cls)(I, H, dtype=gpucore.float64)
    t = getattr(torch.nn, cls)(I, H, dtype=torch.float64)
    t.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in g.state_dict().items()})
    xs = (I,) if unbatched else (B, I)
    hs = (H,) if unbatched else (B, H)
    x, h, c = rng.uniform(-1, 1, xs), rng.uniform(-1, 1, hs), rng.uniform(-1, 1, hs)

    def go(mod, tensor):
        ins = [tensor(x), tensor(h), tensor(c)]
        out = mod(ins[0], (ins[1], ins[2]) if cls == "LSTMCell" else ins[1])
        outs = list(out) if cls == "LSTMCell" else [out]
        sum(((k + 1) * o * o).sum() for k, o in enumerate(outs)).backward()
        return (
            outs
            + [i.grad for i in ins[: 3 if cls == "LSTMCell" else 2]]
            + [p.grad for _, p in mod.named_parameters()]
        )

    got = go(g, lambda a: gpucore.tensor(a, requires_grad=True))
    want = go(t, lambda a: torch.tensor(a, requires_grad=True))
    for k, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_allclose(
            a.detach().numpy(), b.detach().numpy(), rtol=1e-10, atol=1e-12, err_msg=k
        )
    # no state: zeros
    a = g(gpucore.tensor(x))
    b = t(torch.tensor(x))
    a, b = (a[0], b[0]) if cls == "LSTMCell" else (a, b)
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------------------- without torch
def _np_stack(mod, x, mode):
    """The module's forward in float64 numpy: recurrent_ref per layer and direction."""
    dirs = 2 if mod.bidirectional else 1
    hs, cs = [], []
    for layer in range(mod.num_layers):
        outs = []
        for d in range(dirs):
            w = [p.detach().numpy() for p in mod.all_weights[layer * dirs + d]]
            b_ih, b_hh = (w[2], w[3]) if mod.bias else (0.0, np.zeros(0))
            xg = x @ w[0].T + b_ih
            h0 = np.zeros((x.shape[1], mod.hidden_size))
            y, *_ = ref.sequence_forward(xg, w[1], b_hh, h0, h0, mode, d == 1)
            outs.append(y[: x.shape[0]])
            hs.append(y[x.shape[0]])
            cs.append(y[-1])
        x = np.concatenate(outs, axis=2)
    return x, np.stack(hs), np.stack(cs)


@pytest.mark.parametrize("cls,mode", [("LSTM", "LSTM"), ("GRU", "GRU"), ("RNN", "RNN_TANH")])
def test_layers_match_the_numpy_reference(cls, mode):
    mod = getattr(nn, cls)(I, H, num_layers=2, bidirectional=True, dtype=gpucore.float64)
    x = np.random.default_rng(4).uniform(-1, 1, (T, B, I))
    out, hn = mod(gpucore.tensor(x))
    want_out, want_h, want_c = _np_stack(mod, x, mode)
    np.testing.assert_allclose(out.detach().numpy(), want_out, rtol=1e-12, atol=1e-12)
    h = hn[0] if cls == "LSTM" else hn
    np.testing.assert_allclose(h.detach().numpy(), want_h, rtol=1e-12, atol=1e-12)
    if cls == "LSTM":
        np.testing.assert_allclose(hn[1].detach().numpy(), want_c, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN_TANH"])
@pytest.mark.parametrize("packed", [False, True])
def test_fused_op_gradcheck_and_double_backward(mode, packed):
    """The fused op over every input (a reversed, packed sequence too), first and second order
    (the second through the composition the op falls back to under create_graph)."""
    from gpucore.ops.recurrent import run_direction

    rng = np.random.default_rng(5)
    g = ref.GATES[mode]
    shapes = [(3, 2, g * 2), (g * 2, 2), (g * 2,), (2, 2), (2, 2)]
    ins = [gpucore.tensor(rng.uniform(-1, 1, s), requires_grad=True) for s in shapes]
    if mode != "LSTM":
        ins = ins[:4]
    bs = (2, 2, 1) if packed else None

    def f(*a):
        return run_direction(mode, *a, *([None] * (5 - len(a))), reverse=packed, batch_sizes=bs)

    def f0(*a):
        return gpucore.cat([t.reshape(-1) for t in f(*a) if t is not None])

    assert gradcheck(f0, tuple(ins), atol=1e-6, rtol=1e-4)
    assert gradgradcheck(f0, tuple(ins), atol=1e-5, rtol=1e-3)


def test_layer_gradcheck():
    mod = nn.LSTM(2, 3, num_layers=2, bidirectional=True, dtype=gpucore.float64)
    x = gpucore.tensor(np.random.default_rng(7).uniform(-1, 1, (3, 2, 2)), requires_grad=True)
    h0 = gpucore.tensor(np.random.default_rng(8).uniform(-1, 1, (4, 2, 3)), requires_grad=True)
    c0 = gpucore.tensor(np.random.default_rng(9).uniform(-1, 1, (4, 2, 3)), requires_grad=True)
    assert gradcheck(lambda x, h, c: mod(x, (h, c))[0], (x, h0, c0), atol=1e-6, rtol=1e-4)


def test_fused_and_composed_paths_agree():
    from gpucore.ops.recurrent import run_direction, sequence_composed

    rng = np.random.default_rng(6)
    for mode, g in (("LSTM", 4), ("GRU", 3), ("RNN_TANH", 1), ("RNN_RELU", 1)):
        xg, w, b = (
            rng.uniform(-1, 1, (4, 3, g * 2)),
            rng.uniform(-1, 1, (g * 2, 2)),
            rng.uniform(-1, 1, g * 2),
        )
        h0, c0 = rng.uniform(-1, 1, (3, 2)), rng.uniform(-1, 1, (3, 2))
        args = [gpucore.tensor(a) for a in (xg, w, b, h0, c0)]
        for rev, bs in ((False, None), (True, (3, 2, 2, 1))):
            a = run_direction(mode, *args, reverse=rev, batch_sizes=bs)
            c = sequence_composed(*args, mode, rev, bs)
            for u, v in zip(a, c):
                if u is not None:
                    np.testing.assert_allclose(
                        u.detach().numpy(), v.detach().numpy(), rtol=1e-12, atol=1e-12
                    )


# ----------------------------------------------------------------------------- state_dict
@pytest.mark.parametrize("cls", ["LSTM", "GRU", "RNN"])
def test_state_dict_both_ways_and_init(cls):
    torch = pytest.importorskip("torch")
    kw = {"num_layers": 2, "bidirectional": True}
    if cls == "LSTM":
        kw["proj_size"] = 3
    gpucore.manual_seed(0)
    g = getattr(nn, cls)(I, H, **kw)
    t = getattr(torch.nn, cls)(I, H, **kw)
    assert list(g.state_dict()) == list(t.state_dict())
    bound, drawn = 1 / np.sqrt(H), []
    for k, v in t.state_dict().items():
        assert tuple(g.state_dict()[k].shape) == tuple(v.shape), k
        a = g.state_dict()[k].numpy()
        assert np.abs(a).max() <= bound, k
        drawn.append(a.reshape(-1))
    # uniform on [-bound, bound]: hundreds of draws together reach near the bound (a bias of a
    # few values alone may not)
    assert np.abs(np.concatenate(drawn)).max() > 0.9 * bound
    t.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in g.state_dict().items()})
    g2 = getattr(nn, cls)(I, H, **kw)
    g2.load_state_dict({k: gpucore.tensor(v.numpy()) for k, v in t.state_dict().items()})
    for k, v in g.state_dict().items():
        np.testing.assert_array_equal(g2.state_dict()[k].numpy(), v.numpy())
    assert repr(g) == repr(t)
    g.flatten_parameters()
    assert [tuple(p.shape) for p in g._flat_weights] == [tuple(p.shape) for p in t._flat_weights]


# ----------------------------------------------------------------------------- errors
def test_bad_arguments_name_the_layer_and_shapes():
    lstm = nn.LSTM(I, H, num_layers=2)
    with pytest.raises(
        ValueError, match=r"LSTM: input.size\(-1\) must be equal to input_size. Expected 4, got 5"
    ):
        lstm(gpucore.zeros(T, B, 5))
    with pytest.raises(
        ValueError, match=r"LSTM: Expected hidden\[0\] size \(2, 3, 6\), got \[1, 3, 6\]"
    ):
        lstm(gpucore.zeros(T, B, I), (gpucore.zeros(1, B, H), gpucore.zeros(2, B, H)))
    with pytest.raises(
        TypeError, match="LSTM: input must have the type gpucore.float32, got type gpucore.float64"
    ):
        lstm(gpucore.zeros(T, B, I, dtype=gpucore.float64))
    with pytest.raises(ValueError, match="GRU: Expected input to be 2D or 3D, got 4D"):
        nn.GRU(I, H)(gpucore.zeros(1, T, B, I))
    with pytest.raises(ValueError, match="For batched 3-D input, hx should also be 3-D"):
        nn.GRU(I, H)(gpucore.zeros(T, B, I), gpucore.zeros(B, H))
    with pytest.raises(ValueError, match="Unknown nonlinearity 'sigmoid'"):
        nn.RNN(I, H, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="proj_size has to be smaller than hidden_size"):
        nn.LSTM(I, H, proj_size=H)
    with pytest.raises(ValueError, match="dropout should be a number in range"):
        nn.GRU(I, H, dropout=1.5)
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        nn.GRU(I, H, dropout=0.5)
    with pytest.raises(
        ValueError, match="GRUCell: input has inconsistent input_size: got 5 expected 4"
    ):
        nn.GRUCell(I, H)(gpucore.zeros(B, 5))
    with pytest.raises(ValueError, match="Input batch size 3 doesn't match hidden0 batch size 2"):
        nn.LSTMCell(I, H)(gpucore.zeros(B, I), (gpucore.zeros(2, H), gpucore.zeros(2, H)))


# ----------------------------------------------------------------------------- Vulkan
@pytest.mark.parametrize("cls", ["LSTM", "GRU", "RNN"])
def test_vulkan_tensors_match_the_cpu(cls, vulkan):
    """Parameters and input on the device run the composition (matmul, sigmoid, tanh, mul,
    add): outputs, final states and gradients equal the fused CPU op's."""
    gpucore.manual_seed(0)
    m = getattr(nn, cls)(3, 4, num_layers=2, bidirectional=True)
    x = np.random.default_rng(0).uniform(-1, 1, (4, 2, 3)).astype(np.float32)

    def run():
        m.zero_grad()
        dev = m.weight_ih_l0.device
        out, hn = m(gpucore.tensor(x).to(dev))
        finals = list(hn) if cls == "LSTM" else [hn]
        loss = (out * out).sum() + sum((f * (k + 2)).sum() for k, f in enumerate(finals))
        loss.backward()
        vals = [out, *finals] + [p.grad for p in m.parameters()]
        return [v.detach().cpu().numpy() for v in vals]

    with gpucore.device_policy("cpu"):
        cpu = run()
    m.to("vulkan")
    assert m.weight_hh_l1_reverse.device.type == "vulkan"
    vk = run()
    assert m.weight_hh_l0.grad.device.type == "vulkan"
    m.cpu()
    for k, (a, b) in enumerate(zip(cpu, vk)):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5, err_msg=k)
