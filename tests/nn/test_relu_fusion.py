"""nn.Sequential's ReLU fusion (gpucore/nn/modules/relu_fusion.py): Linear-ReLU, Conv2d-ReLU and
Conv2d-ReLU-MaxPool2d run as one op with the plain path's bits, forward and backward; hooks,
patched forwards, traces, the profiler, autocast, device tensors and a fused output that could
be modified in place take the plain path.

The reference is the same modules called one by one (the plain path, the same parameters), so
the comparisons are bit for bit; tests/ops/test_every_op.py checks the fused ops themselves
against float64 numpy."""

import numpy as np
import pytest

import gpucore as gc
import gpucore.nn as nn

_NAMES = ("Linear_reluBackward", "Conv2d_reluBackward", "Conv2d_relu_max_pool2dBackward")


def _nodes(y):
    """The names of the autograd nodes behind y (a walk of grad_fn.next)."""
    seen, stack, names = set(), [y.grad_fn], []
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        names.append(n.name())
        stack.extend(getattr(n, "next", None) or ())
    return names


def _fused(y):
    """The fused nodes behind y."""
    return [n for n in _nodes(y) if n in _NAMES]


def _plain(seq, x):
    for m in seq:
        x = m(x)
    return x


def _same(a, b, what):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, what
    # bit for bit: NaN where NaN, the sign of zeros too
    assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), what


def _run(seq, x, fused):
    for p in seq.parameters():
        p.grad = None
    xi = x.detach().clone().requires_grad_(x.requires_grad)
    y = seq(xi) if fused else _plain(seq, xi)
    grads = []
    if y.requires_grad:
        g = gc.tensor(np.random.default_rng(5).standard_normal(y.shape)).to(y.dtype)
        y.backward(g)
        grads = [None if p.grad is None else p.grad.numpy().copy() for p in seq.parameters()]
        if xi.requires_grad:
            grads.append(xi.grad.numpy())
    return y, grads


def _check(seq, x, expect=None):
    """seq(x) and its gradients equal the modules called one by one; ``expect``: the grad_fn
    name of the fused output, or None when the plain path must run."""
    y1, g1 = _run(seq, x, True)
    y0, g0 = _run(seq, x, False)
    _same(y1.detach().numpy(), y0.detach().numpy(), "output")
    assert len(g1) == len(g0)
    for i, (a, b) in enumerate(zip(g1, g0)):
        assert (a is None) == (b is None), f"gradient {i}"
        if a is not None:
            _same(a, b, f"gradient {i}")
    return y1


def _mlp(dtype, bias=True, inplace=False):
    gc.manual_seed(0)
    return nn.Sequential(
        nn.Linear(13, 17, bias=bias),
        nn.ReLU(inplace=inplace),
        nn.Linear(17, 9),
        nn.ReLU(),
        nn.Linear(9, 3),
    ).to(dtype)


def _cnn(dtype, pool=(2, 2, 0), ceil=False, stride=1, k=3, inplace=True):
    gc.manual_seed(1)
    pk, ps, pp = pool
    return nn.Sequential(
        nn.Conv2d(3, 5, k, stride=stride, padding=k // 2),
        nn.ReLU(inplace=inplace),
        nn.MaxPool2d(pk, ps, pp, ceil_mode=ceil),
        nn.Conv2d(5, 4, 1),
        nn.ReLU(),
        nn.Flatten(),
    ).to(dtype)


def _x(*shape, dtype=gc.float32, grad=True, nan=False, seed=3):
    a = np.random.default_rng(seed).standard_normal(shape)
    if nan:
        a.reshape(-1)[::7] = np.nan
    return gc.tensor(a).to(dtype).requires_grad_(grad)


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    old = gc.get_num_threads()
    gc.set_num_threads(request.param)
    yield request.param
    gc.set_num_threads(old)


@pytest.mark.parametrize("dtype", [gc.float32, gc.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("train", [True, False])
def test_linear_relu_matches_plain(dtype, bias, train, threads):
    seq = _mlp(dtype, bias, inplace=not bias)
    seq.train(train)
    for rows in (1, 7, 64):
        y = _check(seq, _x(rows, 13, dtype=dtype))
        assert y.grad_fn.name() == "LinearBackward"  # the last Linear has no ReLU
        assert _fused(y) == [_NAMES[0]] * 2
        # a block at the end: its output goes to the caller, who could modify it in place
        assert seq[:2](_x(rows, 13, dtype=dtype)).grad_fn.name() == "ReluBackward"


@pytest.mark.parametrize("dtype", [gc.float32, gc.float64], ids=["f32", "f64"])
@pytest.mark.parametrize(
    "geom",
    [
        {},
        {"pool": (3, 1, 1)},  # overlapping windows: gradients summed
        {"pool": (2, 2, 0), "ceil": True},
        {"stride": 2, "k": 5, "inplace": False},
        {"k": 1},
    ],
)
def test_conv_relu_pool_matches_plain(dtype, geom, threads):
    seq = _cnn(dtype, **geom)
    for shape in ((2, 3, 9, 11), (1, 3, 8, 8)):
        y = _check(seq, _x(*shape, dtype=dtype))
    # (the Flatten at the end: its output, a view of the second block's, goes to the caller)
    assert _fused(y) == [_NAMES[2]]
    assert seq[:4](_x(2, 3, 9, 11, dtype=dtype)).grad_fn.next[0].name() == _NAMES[2]
    y = _check(nn.Sequential(*seq[3:], nn.Tanh()), _x(2, 5, 4, 5, dtype=dtype))
    assert _fused(y) == [_NAMES[1]]


@pytest.mark.parametrize("dtype", [gc.float32, gc.float64], ids=["f32", "f64"])
def test_nan_and_no_grad(dtype):
    """NaN stays NaN through the fused ReLU and gets relu_backward's zero gradient; inputs that
    need no gradient, no_grad and eval give the same bits too."""
    for seq, shape in ((_mlp(dtype), (6, 13)), (_cnn(dtype), (2, 3, 8, 9))):
        _check(seq, _x(*shape, dtype=dtype, nan=True))
        _check(seq, _x(*shape, dtype=dtype, grad=False))
        x = _x(*shape, dtype=dtype, grad=False)
        with gc.no_grad():
            _same(seq(x).numpy(), _plain(seq, x).numpy(), "no_grad")
        seq.eval()
        _same(seq(x).detach().numpy(), _plain(seq, x).detach().numpy(), "eval")


def test_hooks_take_the_plain_path():
    """A hook on any module of the pattern, or on the module its output goes to, sees the
    tensors of the plain path (a hook could modify them in place)."""
    seq = _mlp(gc.float32)
    seen = []
    h = seq[0].register_forward_hook(lambda m, i, o: seen.append(o))
    y = _check(seq, _x(5, 13))
    assert _fused(y) == [_NAMES[0]] and seen and (seen[0].detach().numpy() < 0).any()
    h.remove()
    h = seq[1].register_forward_pre_hook(lambda m, i: None)
    assert _fused(_check(seq, _x(5, 13))) == [_NAMES[0]]
    h.remove()
    h = seq[2].register_forward_hook(lambda m, i, o: None)  # on the consumer
    assert _fused(_check(seq, _x(5, 13))) == []  # (it is also the second block's layer)
    h.remove()
    cnn = nn.Sequential(*_cnn(gc.float32)[:3], nn.Flatten(), nn.Linear(5 * 4 * 4, 2))
    assert _fused(_check(cnn, _x(2, 3, 8, 8))) == [_NAMES[2]]
    h = cnn[3].register_forward_hook(lambda m, i, o: None)
    # the Flatten after the pool has a hook: conv and relu still fuse, the pool runs alone
    y = _check(cnn, _x(2, 3, 8, 8))
    assert _fused(y) == [_NAMES[1]] and "Max_pool2dBackward" in _nodes(y)
    h.remove()
    h = cnn[2].register_forward_hook(lambda m, i, o: None)
    assert _fused(_check(cnn, _x(2, 3, 8, 8))) == []  # the pool, the consumer, has a hook
    h.remove()


def test_subclass_and_other_layers_not_fused():
    class MyLinear(nn.Linear):
        def forward(self, x):
            return super().forward(x) * 1.0

    gc.manual_seed(0)
    seq = nn.Sequential(MyLinear(4, 3), nn.ReLU(), nn.Tanh())
    assert _fused(_check(seq, _x(2, 4))) == []
    seq = nn.Sequential(nn.Conv2d(4, 4, 3, groups=2, padding=1), nn.ReLU(), nn.Tanh())
    assert _fused(_check(seq, _x(1, 4, 5, 5))) == []
    seq = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Tanh())
    assert _fused(_check(seq, _x(2, 5, 4))) == []  # 3-D input
    assert _fused(_check(seq, _x(2, 4))) == [_NAMES[0]]


def test_trace_and_autocast_take_the_plain_path(monkeypatch):
    from gpucore.nn.modules import relu_fusion

    seq, x = _mlp(gc.float32)[:3], _x(3, 13)
    assert _fused(_check(seq, x)) == [_NAMES[0]]
    monkeypatch.setattr(relu_fusion, "ENABLED", [False])  # switched off
    assert _fused(_check(seq, x)) == []
    monkeypatch.undo()
    with gc.dispatch.trace_ops() as ops:
        seq(x)
    assert [o[0] for o in ops] == ["linear", "relu", "linear"]
    with gc.autocast("cpu", dtype=gc.bfloat16):
        y = seq(_x(3, 13))
    assert _fused(y) == []


def test_errors_are_the_plain_paths():
    seq = _mlp(gc.float32)
    with pytest.raises(Exception) as fused:
        seq(_x(3, 12))
    with pytest.raises(type(fused.value)):
        _plain(seq, _x(3, 12))


def test_vulkan_device_takes_the_plain_path(vulkan):
    seq = _cnn(gc.float32)[:4]
    x = _x(2, 3, 8, 8)
    y0 = _plain(seq, x)
    y1 = seq(x)
    assert _fused(y1) == []
    np.testing.assert_array_equal(y1.detach().numpy(), y0.detach().numpy())


@pytest.mark.parametrize("dtype", [gc.float32, gc.float64], ids=["f32", "f64"])
def test_create_graph_and_frozen_parameters(dtype):
    """create_graph takes the fused ops' composed backward (the same first-order bits, and a
    differentiable graph); a frozen bias or weight leaves its gradient None as in the plain
    path."""
    for seq, shape in ((_mlp(dtype), (6, 13)), (_cnn(dtype), (2, 3, 8, 9))):
        params = list(seq.parameters())
        x = _x(*shape, dtype=dtype)
        g1 = gc.autograd.grad((seq(x) ** 2).sum(), params, create_graph=True)
        g0 = gc.autograd.grad((_plain(seq, x) ** 2).sum(), params, create_graph=True)
        for a, b in zip(g1, g0):
            _same(a.detach().numpy(), b.detach().numpy(), "create_graph")
        s1 = gc.autograd.grad(sum(g.sum() for g in g1), params[0])[0]
        s0 = gc.autograd.grad(sum(g.sum() for g in g0), params[0])[0]
        _same(s1.numpy(), s0.numpy(), "second order")
        seq[0].bias.requires_grad_(False)
        _check(seq, _x(*shape, dtype=dtype))
        assert seq[0].bias.grad is None
        seq[0].weight.requires_grad_(False)
        _check(seq, _x(*shape, dtype=dtype))
        assert seq[0].weight.grad is None


@pytest.mark.parametrize("dtype", [gc.float32, gc.float64], ids=["f32", "f64"])
def test_wide_linear_relu(dtype, threads, monkeypatch):
    """A hidden layer wider than the bias sum's column chunks (mask and sum in one pass:
    fast_relu_backward_bias, checked to run)."""
    from gpucore.ops import relu_fused

    calls = []
    fast = relu_fused._fast_relu_backward_bias
    monkeypatch.setattr(
        relu_fused, "_fast_relu_backward_bias", lambda g, s: calls.append(1) or fast(g, s)
    )
    gc.manual_seed(2)
    seq = nn.Sequential(nn.Linear(21, 601), nn.ReLU(), nn.Linear(601, 5)).to(dtype)
    for rows in (3, 130):
        _check(seq, _x(rows, 21, dtype=dtype, nan=rows == 3))
    assert calls


@pytest.mark.parametrize("dtype", [gc.float32, gc.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("shape", [(1, 1), (5, 3), (7, 300), (130, 257)])
def test_relu_backward_bias_kernel(dtype, shape):
    """The C pass behind linear_relu's backward against numpy: the mask exactly (NaN and -0
    gradients included), the column sums to float64's within one rounding."""
    from gpucore import _cpu

    rng = np.random.default_rng(7)
    g, s = rng.standard_normal(shape), rng.standard_normal(shape)
    g.reshape(-1)[::5] = np.nan
    g.reshape(-1)[1::5] = -0.0
    s.reshape(-1)[2::7] = 0.0
    gt, st = gc.tensor(g).to(dtype), gc.tensor(s).to(dtype)
    gc.relu(gt)  # (the fast lane opens with the first op)
    out = _cpu.fast_relu_backward_bias(gt, st)
    assert out is not None
    gm, bsum = (t.numpy() for t in out)
    want = np.where(st.numpy() > 0, gt.numpy(), 0)
    _same(gm, want.astype(gm.dtype), "mask")
    ref = want.astype(np.float64).sum(0)
    np.testing.assert_allclose(bsum, ref, rtol=1e-6 if dtype is gc.float32 else 1e-14)
    _same(bsum, gc.tensor(want).to(dtype).sum(0).numpy(), "the sum op's bits")


@pytest.mark.parametrize("dtype", [gc.float32, gc.float64], ids=["f32", "f64"])
def test_conv1d_relu_matches_plain(dtype, threads):
    gc.manual_seed(4)
    seq = nn.Sequential(
        nn.Conv1d(3, 6, 5, stride=2, padding=2, dilation=1),
        nn.ReLU(inplace=True),
        nn.Conv1d(6, 4, 3, dilation=2, bias=False),
        nn.ReLU(),
    ).to(dtype)
    for shape in ((2, 3, 17), (1, 3, 9)):
        y = _check(seq, _x(*shape, dtype=dtype, nan=shape[0] == 1))
        assert _fused(y) == [_NAMES[1]]  # the first block (the second is at the end)
    assert _fused(_check(seq, _x(3, 17, dtype=dtype))) == []  # unbatched


def _backward_same(make, x, after=None, seed=11):
    """make() -> a Sequential; seq(x), ``after`` applied to its output (an in-place op), then
    backward: the fused call gives the plain path's bits and raises nothing. Returns the fused
    output."""
    outs = []
    for fused in (True, False):
        seq = make()
        xi = x.detach().clone().requires_grad_(True)
        gc.manual_seed(seed)  # (a Dropout's mask)
        y = seq(xi) if fused else _plain(seq, xi)
        if after is not None:
            y = after(y)
        y.sum().backward()
        grads = [p.grad for p in seq.parameters()] + [xi.grad]
        outs.append((y, [g if g is None else g.numpy() for g in grads]))
    (y1, g1), (y0, g0) = outs
    _same(y1.detach().numpy(), y0.detach().numpy(), "output")
    for i, (a, b) in enumerate(zip(g1, g0)):
        assert (a is None) == (b is None), f"gradient {i}"
        if a is not None:
            _same(a, b, f"gradient {i}")
    return y1


def _add_(y):
    y.add_(1)
    return y


def _iadd(y):
    y += 1
    return y


def _seeded(mods):
    def make():
        gc.manual_seed(6)
        return nn.Sequential(*mods())

    return make


def test_output_that_could_be_modified_in_place_is_not_fused():
    """The fused ops save their output as the mask (the plain ReLU its input): a block whose
    output could meet an in-place op (an inplace module after it, the caller's y += 1) runs the
    plain path; what follows a view (Flatten) or Dropout (its input itself in eval) counts."""
    x2, x4 = _x(5, 4), _x(2, 2, 6, 6)
    lin = _seeded(lambda: (nn.Linear(4, 3), nn.ReLU()))
    for make, x, after in (
        (_seeded(lambda: (nn.Linear(4, 3), nn.ReLU(), nn.Dropout(0.5, inplace=True))), x2, None),
        (_seeded(lambda: (nn.Linear(4, 3), nn.ReLU(), nn.ReLU(inplace=True))), x2, None),
        (_seeded(lambda: (nn.Linear(4, 3), nn.ReLU(), nn.LeakyReLU(inplace=True))), x2, None),
        (lin, x2, _add_),
        (_seeded(lambda: (nn.Linear(4, 3), nn.ReLU(), nn.Flatten())), x2, _add_),
        (_seeded(lambda: (nn.Linear(4, 3), nn.ReLU(), nn.Dropout(0.5).eval())), x2, _add_),
        (_seeded(lambda: (nn.Conv2d(2, 3, 3), nn.ReLU())), x4, _iadd),
        (_seeded(lambda: (nn.Conv1d(6, 3, 3), nn.ReLU(), nn.Identity())), _x(2, 6, 7), _iadd),
    ):
        assert _fused(_backward_same(make, x, after)) == []
    # the pooled output goes to the caller: only the conv and ReLU fuse (the pool consumes)
    make = _seeded(lambda: (nn.Conv2d(2, 3, 3), nn.ReLU(), nn.MaxPool2d(2)))
    assert _fused(_backward_same(make, x4, _iadd)) == [_NAMES[1]]
    # a consumer after the block (through views and a Dropout in train mode): fused
    for make, x, names in (
        (_seeded(lambda: (nn.Linear(4, 3), nn.ReLU(), nn.Dropout(0.5), nn.Linear(3, 2))), x2, 1),
        (
            _seeded(
                lambda: (
                    nn.Conv2d(2, 3, 3),
                    nn.ReLU(),
                    nn.MaxPool2d(2),
                    nn.Flatten(),
                    nn.Unflatten(1, (3, 4)),
                    nn.Flatten(),
                    nn.Linear(12, 2),
                )
            ),
            x4,
            1,
        ),  # fmt: skip
    ):
        assert len(_fused(_backward_same(make, x, _add_))) == names


def test_consumers_return_new_tensors():
    """The rule's premise: each consumer module returns a tensor sharing no version counter
    (no memory) with its input."""
    from gpucore.nn.modules import relu_fusion

    acts = "Sigmoid Tanh GELU Softplus ReLU LeakyReLU ELU CELU Hardtanh ReLU6 SiLU Mish SELU"
    acts = [getattr(nn, a) for a in acts.split()] + [nn.Hardsigmoid, nn.Hardswish]
    mods = [(c(), (2, 6)) for c in acts] + [
        (nn.Linear(6, 2), (2, 6)),
        (nn.Conv1d(2, 2, 1), (2, 2, 6)),
        (nn.Conv2d(2, 2, 1), (1, 2, 6, 6)),
        (nn.Conv3d(2, 2, 1), (1, 2, 3, 3, 3)),
        (nn.MaxPool1d(1), (2, 2, 6)),
        (nn.MaxPool2d(1), (2, 2, 6, 6)),
        (nn.AvgPool1d(1), (2, 2, 6)),
        (nn.AvgPool2d(1), (2, 2, 6, 6)),
    ]
    covered = set()
    for m, shape in mods:
        rule = relu_fusion._NEXT[type(m).forward]
        assert rule[0], type(m).__name__
        covered.add(type(m).forward)
        for grad in (True, False):
            x = _x(*shape, grad=grad)
            y = m(x)
            assert y is not x and y._vbox is not x._vbox, type(m).__name__
    assert covered == {f for f, r in relu_fusion._NEXT.items() if r[0]}


def test_patched_forwards_take_the_plain_path(monkeypatch):
    """A forward patched on an instance (Module.__call__ calls self.forward) or on the class,
    of a block's module or of its consumer, is called as in the plain path."""

    def make():
        gc.manual_seed(0)
        return nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))

    seq = make()
    seq[0].forward = lambda i: i[:, :3] * 0 + 7.0
    seq[1].forward = lambda i: i * 2
    np.testing.assert_array_equal(
        seq(_x(2, 4)).detach().numpy(), seq[2](gc.full((2, 3), 14.0)).detach().numpy()
    )

    def make_add():
        seq = make()
        seq[2].forward = lambda i: i.add_(1)  # the consumer: in place on the ReLU's output
        return seq

    assert _fused(_backward_same(make_add, _x(2, 4))) == []
    seq = make()
    seq[1].forward = lambda i: gc.relu(i)  # the same values, but not the class's forward
    assert _fused(_check(seq, _x(2, 4))) == []
    monkeypatch.setattr(nn.ReLU, "forward", lambda self, i: i * 2)
    assert _fused(_check(make(), _x(2, 4))) == []
    monkeypatch.undo()
    assert _fused(_check(make(), _x(2, 4))) == [_NAMES[0]]

    class Fresh(nn.Linear):  # a class tuple the fusion's cache has not seen
        pass

    gc.manual_seed(0)
    fresh = nn.Sequential(Fresh(4, 3), nn.ReLU(), nn.Linear(3, 2))
    monkeypatch.setattr(nn.Linear, "forward", lambda self, i: i[:, :3] * 2)
    assert _fused(_check(fresh, _x(2, 4))) == []
    monkeypatch.undo()  # first seen while patched: fused once the patch is gone
    assert _fused(_check(fresh, _x(2, 4))) == [_NAMES[0]]


def test_profiler_sees_the_plain_ops():
    """Inside gc.profiler() the per-op events are the plain ops' (linear, relu), not the fused
    op's."""
    seq, x = _mlp(gc.float32), _x(4, 13)
    with gc.profiler() as p:
        y = seq(x)
    assert [e[0] for e in p.events] == ["linear", "relu"] * 2 + ["linear"]
    assert _fused(y) == []
    assert _fused(seq(x)) == [_NAMES[0]] * 2  # (after it, fused again)


def test_no_fusion_call_where_nothing_could_fuse(monkeypatch):
    """A Sequential with no Linear / conv class followed by a ReLU class makes no call into the
    fusion's decision (the common case costs a cached filter, not one call per module)."""
    from gpucore.nn.modules import relu_fusion

    calls = []
    for name in ("fuse_at", "fusion_open"):
        f = getattr(relu_fusion, name)
        monkeypatch.setattr(relu_fusion, name, lambda *a, f=f: calls.append(1) or f(*a))
    gc.manual_seed(0)
    seq = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(3, 3), nn.Tanh())])
    seq(_x(2, 3))
    seq = nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 3), nn.ReLU())  # (at the end)
    seq(_x(2, 3))
    assert calls == []
    seq.append(nn.Linear(3, 2))  # now the last block may fuse: the filter follows the change
    assert _fused(seq(_x(2, 3))) == [_NAMES[0]] and calls


def test_conv1d_checks_before_the_reshape(monkeypatch):
    """Conv1d blocks the fusion cannot take (groups, padding modes, dtypes) are refused before
    any view of the input is built."""
    from gpucore.nn.modules import relu_fusion

    views = []
    unsqueeze = gc.Tensor.unsqueeze
    monkeypatch.setattr(gc.Tensor, "unsqueeze", lambda t, d: views.append(d) or unsqueeze(t, d))
    gc.manual_seed(0)
    x = _x(2, 4, 9)
    for conv, xi in (
        (nn.Conv1d(4, 4, 3, groups=2), x),
        (nn.Conv1d(4, 4, 3, padding=1, padding_mode="reflect"), x),
        (nn.Conv1d(4, 4, 3, padding="same"), x),
        (nn.Conv1d(4, 4, 3).to(gc.bfloat16), x.to(gc.bfloat16)),
    ):
        assert relu_fusion.fuse_at((conv, nn.ReLU(), nn.Tanh()), 0, xi) is None
    assert views == []
    assert relu_fusion.fuse_at((nn.Conv1d(4, 4, 3), nn.ReLU(), nn.Tanh()), 0, x) is not None
    assert views == [2, 2]  # (the input and the weight)
