"""Module, Parameter and the containers: registration, traversal, state_dict round trips and
their errors (missing, unexpected, mis-shaped keys), modes, zero_grad, to(), apply, hooks,
deepcopy and reprs; and every layer at once: no state where there are no parameters, gradcheck
with respect to the parameters, a small CNN on Vulkan."""

import copy
from collections import OrderedDict

import numpy as np
import pytest
from helpers import assert_close, rand, to_np
from nn_cases import CASES, ours
from nn_refs import W5

import gpucore
import gpucore.nn as nn
import gpucore.nn.functional as F


def f32(a):
    return gpucore.tensor(np.asarray(a), dtype=gpucore.float32)


def f64(a, grad=False):
    return gpucore.tensor(np.asarray(a, np.float64), dtype=gpucore.float64, requires_grad=grad)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3, padding=1)
        self.bn = nn.BatchNorm2d(2)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(2 * 4 * 4, 3))
        self.scale = nn.Parameter(gpucore.ones(1))
        self.register_buffer("steps", gpucore.tensor(0))
        self.register_buffer("cache", gpucore.zeros(2), persistent=False)

    def forward(self, x):
        return self.head(F.relu(self.bn(self.conv(x)))) * self.scale


KEYS = [
    "scale",
    "steps",
    "conv.weight",
    "conv.bias",
    "bn.weight",
    "bn.bias",
    "bn.running_mean",
    "bn.running_var",
    "bn.num_batches_tracked",
    "head.1.weight",
    "head.1.bias",
]


# ============================================================================= registration
def test_parameters_buffers_modules():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == [
        "scale",
        "conv.weight",
        "conv.bias",
        "bn.weight",
        "bn.bias",
        "head.1.weight",
        "head.1.bias",
    ]
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in net.parameters())
    assert [n for n, _ in net.named_buffers()] == [
        "steps",
        "cache",
        "bn.running_mean",
        "bn.running_var",
        "bn.num_batches_tracked",
    ]
    assert [n for n, _ in net.named_modules()] == ["", "conv", "bn", "head", "head.0", "head.1"]
    assert [n for n, _ in net.named_children()] == ["conv", "bn", "head"]
    assert list(net.parameters(recurse=False)) == [net.scale]
    assert net.get_submodule("head.1") is net.head[1]
    with pytest.raises(AttributeError, match="nope"):
        net.get_submodule("head.nope")
    assert list(net.state_dict()) == KEYS  # non-persistent buffers stay out


def test_setattr_rules():
    m = nn.Module()
    m.w = nn.Parameter(gpucore.zeros(2))
    m.sub = nn.Linear(2, 2)
    m.plain = gpucore.zeros(3)  # a plain tensor attribute is not state
    assert list(dict(m.named_parameters())) == ["w", "sub.weight", "sub.bias"]
    assert "plain" not in m.state_dict()
    with pytest.raises(TypeError, match="Parameter"):
        m.w = gpucore.zeros(2)
    m.w = None
    assert m.w is None and list(dict(m.named_parameters())) == ["sub.weight", "sub.bias"]
    del m.sub
    assert not hasattr(m, "sub") and list(m.parameters()) == []
    m.register_buffer("b", gpucore.zeros(1))
    with pytest.raises(TypeError, match="buffer"):
        m.b = 3
    with pytest.raises(KeyError, match="already exists"):
        m.register_buffer("plain", gpucore.zeros(1))
    with pytest.raises(KeyError, match=r"\."):
        m.register_parameter("a.b", None)
    with pytest.raises(TypeError, match="Tensor"):
        m.register_buffer("c", [1.0])

    class Bad(nn.Module):
        def __init__(self):
            self.x = nn.Linear(1, 1)

    with pytest.raises(AttributeError, match="__init__"):
        Bad()


def test_shared_parameters_appear_once():
    lin = nn.Linear(3, 3)
    seq = nn.Sequential(lin, nn.ReLU(), lin)
    assert len(list(seq.parameters())) == 2
    dup = [n for n, _ in seq.named_parameters(remove_duplicate=False)]
    assert dup == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert list(seq.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    tied = nn.Module()
    tied.a = nn.Linear(2, 2)
    tied.b = nn.Linear(2, 2)
    tied.b.weight = tied.a.weight
    assert len(list(tied.parameters())) == 3


# ============================================================================= state_dict
def test_state_dict_round_trip():
    gpucore.manual_seed(0)
    a, b = Net(), Net()
    a.train()
    a(gpucore.randn(2, 1, 4, 4))  # running stats move
    sd = a.state_dict()
    assert all(not v.requires_grad for v in sd.values())
    r = b.load_state_dict(sd)
    assert (
        r.missing_keys == []
        and r.unexpected_keys == []
        and repr(r) == ("<All keys matched successfully>")
    )
    for k, v in b.state_dict().items():
        np.testing.assert_array_equal(to_np(v), to_np(sd[k]))
    assert isinstance(b.conv.weight, nn.Parameter) and b.conv.weight.requires_grad
    x = gpucore.randn(2, 1, 4, 4)
    a.eval()
    b.eval()
    assert_close(b(x), to_np(a(x)))
    kv = a.state_dict(keep_vars=True)
    assert kv["conv.weight"] is a.conv.weight


def test_load_state_dict_errors():
    net = Net()
    sd = net.state_dict()
    missing = {k: v for k, v in sd.items() if k != "bn.bias"}
    with pytest.raises(gpucore.ShapeError, match="missing keys: bn.bias") as e:
        net.load_state_dict(missing)
    assert isinstance(e.value, RuntimeError)  # as PyTorch raises
    extra = dict(sd, **{"head.2.weight": gpucore.zeros(1)})
    with pytest.raises(RuntimeError, match=r"unexpected keys: head\.2\.weight"):
        net.load_state_dict(extra)
    r = net.load_state_dict(missing, strict=False)
    assert r.missing_keys == ["bn.bias"] and r.unexpected_keys == []
    r = net.load_state_dict(extra, strict=False)
    assert r.unexpected_keys == ["head.2.weight"]
    bad = dict(sd, **{"conv.weight": gpucore.zeros(3, 1, 3, 3)})
    for strict in (True, False):  # shapes must match even when not strict (as PyTorch)
        want = r"conv\.weight.*\(3, 1, 3, 3\).*\(2, 1, 3, 3\)"
        with pytest.raises(gpucore.ShapeError, match=want):
            net.load_state_dict(bad, strict=strict)
    # every problem is listed at once
    both = {k: v for k, v in bad.items() if k != "scale"}
    both["zzz"] = gpucore.zeros(1)
    with pytest.raises(gpucore.ShapeError) as e:
        net.load_state_dict(both)
    msg = str(e.value)
    assert "conv.weight" in msg and "scale" in msg and "zzz" in msg
    with pytest.raises(gpucore.ShapeError, match="Tensor"):
        net.load_state_dict(dict(sd, scale=[1.0]))


def test_load_state_dict_casts_and_assign():
    m = nn.Linear(2, 2)
    sd = {"weight": gpucore.ones(2, 2, dtype=gpucore.float64), "bias": gpucore.zeros(2)}
    w = m.weight
    m.load_state_dict(sd)
    assert m.weight is w and m.weight.dtype is gpucore.float32  # copied in place, cast
    assert to_np(m.weight).tolist() == [[1, 1], [1, 1]]
    m.load_state_dict(sd, assign=True)
    assert m.weight is not w and m.weight.dtype is gpucore.float64
    assert isinstance(m.weight, nn.Parameter) and m.weight.requires_grad


def test_state_dict_keys_match_torch():
    torch = pytest.importorskip("torch")
    tnn = torch.nn
    ours = nn.Sequential(
        nn.Conv2d(1, 4, 3),
        nn.BatchNorm2d(4),
        nn.ReLU(),
        nn.Flatten(),
        nn.LayerNorm(4 * 2 * 2),
        nn.Linear(16, 2),
        nn.Embedding(3, 2),
    )
    theirs = tnn.Sequential(
        tnn.Conv2d(1, 4, 3),
        tnn.BatchNorm2d(4),
        tnn.ReLU(),
        tnn.Flatten(),
        tnn.LayerNorm(4 * 2 * 2),
        tnn.Linear(16, 2),
        tnn.Embedding(3, 2),
    )
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert repr(ours) == repr(theirs)
    # a PyTorch checkpoint (as numpy) loads and gives the same outputs
    ours.load_state_dict({k: gpucore.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((2, 1, 4, 4)).astype(np.float32)
    ours.eval()
    theirs.eval()
    assert_close(
        ours[:6](gpucore.tensor(x)),
        theirs[:6](torch.tensor(x)).detach().numpy(),
        rtol=1e-5,
        atol=1e-6,
    )


# ============================================================================= modes, grads, to
def test_train_eval_zero_grad():
    net = Net()
    assert net.training and net.bn.training
    assert net.eval() is net and not net.bn.training and not net.head[1].training
    net.train()
    assert net.head[0].training
    with pytest.raises(ValueError, match="bool"):
        net.train("yes")
    out = net(gpucore.randn(2, 1, 4, 4)).sum()
    out.backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=False)
    assert all(to_np(p.grad).max() == 0 and to_np(p.grad).min() == 0 for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())


def test_to_dtype_keeps_integer_buffers():
    net = Net()
    w = net.conv.weight
    assert net.double() is net
    assert net.conv.weight is w and w.dtype is gpucore.float64  # same Parameter object
    assert net.bn.running_mean.dtype is gpucore.float64
    assert net.steps.dtype is gpucore.int64 and net.bn.num_batches_tracked.dtype is gpucore.int64
    assert net(gpucore.randn(2, 1, 4, 4, dtype=gpucore.float64)).dtype is gpucore.float64
    net.to(gpucore.float32)
    assert net.conv.weight.dtype is gpucore.float32
    net.float()
    with pytest.raises(TypeError, match="floating"):
        net.to(gpucore.int64)


def test_apply_and_hooks():
    net = Net()
    seen = []
    assert net.apply(lambda m: seen.append(type(m).__name__)) is net
    assert seen == ["Conv2d", "BatchNorm2d", "Flatten", "Linear", "Sequential", "Net"]
    net.apply(lambda m: nn.init.zeros_(m.bias) if isinstance(m, nn.Linear) else None)
    assert to_np(net.head[1].bias).max() == 0
    calls = []
    lin = nn.Linear(2, 2)
    h1 = lin.register_forward_pre_hook(lambda m, inp: (inp[0] * 0,))
    h2 = lin.register_forward_hook(lambda m, inp, out: calls.append(out.shape) or out + 1)
    y = lin(gpucore.ones(1, 2))
    assert_close(y, to_np(lin.bias)[None] + 1, rtol=1e-6)
    assert calls == [(1, 2)]
    h1.remove()
    h2.remove()
    assert_close(lin(gpucore.zeros(1, 2)), to_np(lin.bias)[None], rtol=1e-6)
    assert calls == [(1, 2)]


def test_deepcopy_and_parameter():
    net = Net()
    net(gpucore.randn(2, 1, 4, 4)).sum().backward()
    dup = copy.deepcopy(net)
    assert dup.conv.weight is not net.conv.weight
    assert isinstance(dup.conv.weight, nn.Parameter)
    np.testing.assert_array_equal(to_np(dup.conv.weight), to_np(net.conv.weight))
    np.testing.assert_array_equal(to_np(dup.conv.weight.grad), to_np(net.conv.weight.grad))
    with gpucore.no_grad():
        dup.conv.weight.zero_()
    assert to_np(net.conv.weight).any()
    t = gpucore.ones(3)
    p = nn.Parameter(t)
    assert p.requires_grad and p.is_leaf
    with gpucore.no_grad():
        p.mul_(2)
    assert t.tolist() == [2.0, 2.0, 2.0]  # shares storage, as PyTorch
    assert not nn.Parameter(gpucore.ones(1), requires_grad=False).requires_grad
    assert repr(p).startswith("Parameter containing:\ntensor(")
    assert type(p * 2) is gpucore.Tensor and type(p[0]) is gpucore.Tensor


# ============================================================================= containers
def test_sequential():
    a, b, c = nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)
    s = nn.Sequential(a, b, c)
    assert len(s) == 3 and s[0] is a and s[-1] is c and list(s) == [a, b, c]
    assert isinstance(s[1:], nn.Sequential) and list(s[1:]) == [b, c]
    x = gpucore.randn(4, 2)
    assert_close(s(x), to_np(c(b(a(x)))))
    named = nn.Sequential(OrderedDict([("fc", a), ("act", b)]))
    assert named.fc is a and list(named.state_dict()) == ["fc.weight", "fc.bias"]
    s.append(nn.Sigmoid())
    assert len(s) == 4 and isinstance(s[3], nn.Sigmoid)
    del s[1]
    assert [type(m).__name__ for m in s] == ["Linear", "Linear", "Sigmoid"]
    assert list(dict(s.named_children())) == ["0", "1", "2"]
    s[2] = nn.Tanh()
    assert isinstance(s[2], nn.Tanh)
    s.insert(0, nn.Identity())
    assert isinstance(s[0], nn.Identity) and len(s) == 4
    assert len(s + nn.Sequential(nn.ReLU())) == 5
    with pytest.raises(IndexError):
        s[10]
    assert repr(nn.Sequential(nn.ReLU())) == "Sequential(\n  (0): ReLU()\n)"


def test_module_list_and_dict():
    layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    assert len(layers) == 3 and len(list(layers.parameters())) == 6
    layers.append(nn.ReLU())
    layers.extend([nn.Tanh()])
    layers += [nn.Sigmoid()]
    assert len(layers) == 6 and isinstance(layers[-1], nn.Sigmoid)
    assert isinstance(layers[1:3], nn.ModuleList) and len(layers[1:3]) == 2
    del layers[0]
    assert list(dict(layers.named_children())) == ["0", "1", "2", "3", "4"]
    layers.insert(1, nn.Identity())
    assert isinstance(layers[1], nn.Identity)
    assert list(dict(layers.named_children())) == ["0", "1", "2", "3", "4", "5"]
    with pytest.raises(TypeError, match="not a Module"):
        layers.insert(0, 3)
    with pytest.raises(TypeError, match="not a Module"):
        nn.Sequential(nn.ReLU()).insert(0, "relu")
    assert len(layers) == 6
    assert isinstance(layers.pop(), nn.Sigmoid) and len(layers) == 5
    with pytest.raises(NotImplementedError):
        layers(gpucore.zeros(1))
    owner = nn.Module()
    owner.blocks = layers
    assert "blocks.0.weight" in owner.state_dict()

    d = nn.ModuleDict({"enc": nn.Linear(2, 2), "act": nn.ReLU()})
    assert list(d.keys()) == ["enc", "act"] and "enc" in d and len(d) == 2
    d["dec"] = nn.Linear(2, 1)
    assert list(d) == ["enc", "act", "dec"]
    assert list(dict(d.named_parameters())) == ["enc.weight", "enc.bias", "dec.weight", "dec.bias"]
    assert isinstance(d.pop("act"), nn.ReLU) and "act" not in d
    d.update([("x", nn.Tanh())])
    assert [k for k, _ in d.items()] == ["enc", "dec", "x"]
    with pytest.raises(TypeError, match="pair"):
        d.update([nn.Tanh()])
    d.clear()
    assert len(d) == 0


def test_repr_nested():
    net = Net()
    r = repr(net)
    assert r.startswith(
        "Net(\n  (conv): Conv2d(1, 2, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))\n"
    )
    assert "  (head): Sequential(\n    (0): Flatten(start_dim=1, end_dim=-1)\n" in r
    assert r.endswith("  )\n)")

    class Multi(nn.Module):
        def extra_repr(self):
            return "a=1\nb=2"

    assert repr(Multi()) == "Multi(\n  a=1\n  b=2\n)"
    assert repr(nn.Module()) == "Module()"


# ============================================================================= every layer
def test_parameter_free_modules_have_no_state():
    for case in CASES:
        if case.name not in ("PReLU", "GroupNorm", "InstanceNorm2d", "MultiLabelSoftMarginLoss"):
            m = ours(case)
            assert list(m.state_dict()) == [] and list(m.parameters()) == [], case
    m = nn.MultiLabelSoftMarginLoss(weight=gpucore.tensor(W5))  # class weights: a buffer
    assert list(m.state_dict()) == ["weight"] and list(m.parameters()) == []


def test_module_gradchecks():
    """Every layer with parameters, in float64, differentiated w.r.t. input and parameters."""
    gpucore.manual_seed(0)
    layers = [
        (nn.Linear(3, 2), (2, 3)),
        (nn.Conv2d(4, 2, 3, stride=2, padding=1, dilation=1, groups=2), (1, 4, 5, 5)),
        (nn.Conv2d(2, 2, (2, 3), padding="same", dilation=2), (1, 2, 4, 5)),
        (nn.LayerNorm((2, 3)), (2, 2, 3)),
        (nn.BatchNorm1d(3), (4, 3)),
        (
            nn.Sequential(
                nn.MaxPool2d(2, 1), nn.AvgPool2d(2, padding=1), nn.AdaptiveAvgPool2d((2, 1))
            ),
            (1, 2, 5, 4),
        ),
    ]
    for m, shape in layers:
        m.double()
        params = list(m.parameters())
        names = [n for n, _ in m.named_parameters()]

        def fn(x, *ps, m=m, names=names):
            for name, p in zip(names, ps):
                mod = m.get_submodule(name.rpartition(".")[0])
                mod._parameters[name.rpartition(".")[2]] = p
            return m(x)

        x = f64(rand(shape), grad=True)
        ps = [f64(to_np(p), grad=True) for p in params]
        assert gpucore.autograd.gradcheck(fn, [x, *ps], atol=1e-5, rtol=1e-3), type(m).__name__


def test_layers_on_vulkan(vulkan):
    """A small CNN: forward and gradients under the 'vulkan' policy equal the CPU's."""
    gpucore.manual_seed(0)
    m = nn.Sequential(
        nn.Conv2d(2, 4, 3, padding=1),
        nn.BatchNorm2d(4),
        nn.LeakyReLU(0.1),
        nn.MaxPool2d(2),
        nn.Conv2d(4, 4, 3, padding="same", groups=2),
        nn.AvgPool2d(2),
        nn.Flatten(),
        nn.LayerNorm(16),
        nn.Linear(16, 3),
    )
    x = f32(rand((3, 2, 8, 8)))
    t = gpucore.tensor([0, 2, 1])

    def run(policy):
        m.zero_grad()
        with gpucore.device_policy(policy):
            loss = F.cross_entropy(m(x), t, label_smoothing=0.1)
            loss.backward()
        return [to_np(loss)] + [to_np(p.grad) for p in m.parameters()]

    cpu = run("cpu")
    vk = run("vulkan")
    for a, b in zip(cpu, vk):
        np.testing.assert_allclose(b, a, rtol=1e-3, atol=1e-5)
    # parameters living on the device
    m.to("vulkan")
    assert all(p.device.type == "vulkan" for p in m.parameters())
    assert m[1].running_mean.device.type == "vulkan"
    out = m(x.to("vulkan"))
    out.sum().backward()
    assert m[0].weight.grad.device.type == "vulkan"
    m.cpu()
    assert all(p.device.type == "cpu" for p in m.parameters())
