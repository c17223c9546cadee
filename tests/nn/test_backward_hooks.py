"""Module.register_full_backward_hook / register_full_backward_pre_hook (gpucore/nn/
backward_hooks.py): the gradients the hooks see (grad_input / grad_output against the graph's
own, float64), replacements, grad_input None when no input requires grad (with PyTorch's
warning), removal, no_grad forwards, forward hooks alongside; grad_input one entry per positional
argument, the wrapping after the forward pre-hooks and forward hooks whatever the registration
order, deep copies; against PyTorch where installed."""

import copy
import warnings

import numpy as np
import pytest

import gpucore
import gpucore.nn as nn


def _net(lib=gpucore, nn_mod=nn):
    m = nn_mod.Sequential(
        nn_mod.Conv2d(2, 3, 3, padding=1),
        nn_mod.ReLU(),
        nn_mod.Conv2d(3, 2, 1),
        nn_mod.Flatten(),
        nn_mod.Linear(32, 2),
    ).double()
    rng = np.random.default_rng(1)
    with lib.no_grad():
        for p in m.parameters():
            p.copy_(lib.tensor(rng.uniform(-1, 1, tuple(p.shape))))
    return m


def _x(lib=gpucore, requires_grad=False):
    x = lib.tensor(np.random.default_rng(0).standard_normal((2, 2, 4, 4)))
    return x.requires_grad_(requires_grad)


def test_hooks_see_the_layer_gradients():
    m = _net()
    seen = {}
    m[2].register_full_backward_hook(lambda mod, gi, go: seen.update(gi=gi, go=go))
    a = m[1](m[0](_x()))  # the layer's input, kept to compare with
    a.retain_grad()
    y = m[4](m[3](m[2](a)))
    y.retain_grad()
    (y**2).sum().backward()
    assert len(seen["gi"]) == 1 and len(seen["go"]) == 1
    np.testing.assert_allclose(seen["gi"][0].numpy(), a.grad.numpy(), rtol=1e-12)
    out = m[2](a.detach())
    assert seen["go"][0].shape == out.shape


def test_replacements_removal_and_no_input_grad():
    m = _net()
    calls = []
    h_half = m[1].register_full_backward_hook(lambda mod, gi, go: (gi[0] * 0.5,))
    m[4].register_full_backward_pre_hook(lambda mod, go: (go[0] * 2,))
    m[0].register_full_backward_hook(lambda mod, gi, go: calls.append(gi))
    x = _x()
    with pytest.warns(UserWarning, match="no inputs require gradients"):
        (m(x) ** 2).sum().backward()
    assert calls == [(None,)]
    g_hooked = m[0].weight.grad.numpy().copy()
    ref = _net()
    (ref(x) ** 2).sum().backward()
    # the pre-hook doubles and the ReLU hook halves the same linear chain of gradients
    np.testing.assert_allclose(g_hooked, ref[0].weight.grad.numpy(), rtol=1e-12)
    h_half.remove()
    m.zero_grad()
    with pytest.warns(UserWarning):
        (m(x) ** 2).sum().backward()
    np.testing.assert_allclose(m[0].weight.grad.numpy(), 2 * g_hooked, rtol=1e-12)
    with gpucore.no_grad():
        assert m(x).shape == (2, 2)


def test_bad_replacement():
    m = _net()
    m[2].register_full_backward_hook(lambda mod, gi, go: (gi[0], gi[0]))
    with pytest.raises(RuntimeError, match="invalid number of grad_input, got 2, but expected 1"):
        m(_x(requires_grad=True)).sum().backward()


def test_matches_torch():
    torch = pytest.importorskip("torch")

    def run(lib, nn_mod):
        m = _net(lib, nn_mod)
        log = []
        m[2].register_full_backward_hook(lambda mod, gi, go: log.append(gi[0].detach().numpy()))
        m[0].register_full_backward_hook(lambda mod, gi, go: log.append(go[0].detach().numpy()))
        x = _x(lib, requires_grad=True)
        (m(x) ** 2).sum().backward()
        return log + [x.grad.numpy()]

    for g, t in zip(run(gpucore, nn), run(torch, torch.nn)):
        np.testing.assert_allclose(g, t, rtol=1e-12)


def _two(lib=gpucore):
    class Two(lib.nn.Module):
        def forward(self, a, b):
            return a * 2 + b * 3, a * b

    return Two()


def _scaled(lib=gpucore):
    class Scaled(lib.nn.Module):
        def forward(self, s, a, b=None):
            return a * s if b is None else a * s * b

    return Scaled()


def _vals(gs):
    return [None if g is None else g.detach().numpy().tolist() for g in gs]


def test_grad_input_one_per_positional_argument():
    m = _scaled()
    seen = []
    m.register_full_backward_hook(lambda mod, gi, go: seen.append((_vals(gi), _vals(go))))
    a = gpucore.tensor([1.0, 2.0], requires_grad=True)
    m(3.0, a).sum().backward()  # s is no tensor: None in its place
    assert seen == [([None, [3.0, 3.0]], [[1.0, 1.0]])]
    seen.clear()
    b = gpucore.tensor([2.0, 5.0], requires_grad=True)
    m(3.0, a, b=b).sum().backward()  # keyword tensors are not seen, as PyTorch's
    assert seen == [([None, [6.0, 15.0]], [[1.0, 1.0]])]
    assert b.grad.numpy().tolist() == [3.0, 6.0]

    t = _two()
    seen.clear()
    t.register_full_backward_hook(lambda mod, gi, go: seen.append((_vals(gi), _vals(go))))
    a, b = gpucore.tensor([1.0, 2.0], requires_grad=True), gpucore.tensor([3.0, 4.0])
    x, _ = t(a, b)  # b needs no grad: zeros (PyTorch's); y unused: its grad_output None
    x.sum().backward()
    assert seen == [([[2.0, 2.0], [0.0, 0.0]], [[1.0, 1.0], None])]


def test_replacement_grad_input_by_position():
    m = _scaled()
    m.register_full_backward_hook(lambda mod, gi, go: (None, gi[1] * 10))
    a = gpucore.tensor([1.0, 2.0], requires_grad=True)
    m(3.0, a).sum().backward()
    assert a.grad.numpy().tolist() == [30.0, 30.0]
    bad = _scaled()
    bad.register_full_backward_hook(lambda mod, gi, go: (gi[1],))
    with pytest.raises(RuntimeError, match="got 1, but expected 2"):
        bad(3.0, a).sum().backward()
    pre = _two()
    pre.register_full_backward_pre_hook(lambda mod, go: (go[0],))
    with pytest.raises(RuntimeError, match="invalid number of grad_output, got 1, but expected 2"):
        pre(a, a)[0].sum().backward()


@pytest.mark.parametrize("backward_first", [True, False])
def test_wrapping_after_forward_hooks_any_order(backward_first):
    m = _scaled()
    seen = []

    def backward_hook():
        m.register_full_backward_hook(lambda mod, gi, go: seen.append((_vals(gi), _vals(go))))

    if backward_first:
        backward_hook()
    m.register_forward_pre_hook(lambda mod, args: (args[0], args[1] * 2, args[2]))
    m.register_forward_hook(lambda mod, args, out: out * 3)
    if not backward_first:
        backward_hook()
    a = gpucore.tensor([1.0, 2.0], requires_grad=True)
    b = gpucore.tensor([3.0, 4.0], requires_grad=True)
    m(1.0, a, b).sum().backward()  # out = 3 * (2a) * b: forward got a' = 2a
    # grad_input w.r.t. what forward received (3b, 3a'), grad_output w.r.t. what the caller got
    assert seen == [([None, [9.0, 12.0], [6.0, 12.0]], [[1.0, 1.0]])]
    assert a.grad.numpy().tolist() == [18.0, 24.0]
    assert len(m._forward_pre_hooks) == 1  # the user's: the wrapping is no pre-hook


def test_deepcopy_hooks_act_on_the_copy():
    m = nn.Linear(2, 2).double()
    log = []
    m.register_full_backward_hook(lambda mod, gi, go: log.append(("orig", mod)))
    c = copy.deepcopy(m)
    c.register_full_backward_hook(lambda mod, gi, go: log.append(("copy", mod)))
    with gpucore.no_grad():
        c.weight.mul_(2)
    x = gpucore.ones(1, 2, dtype=gpucore.float64, requires_grad=True)
    c(x).sum().backward()
    assert [(tag, mod is c) for tag, mod in log] == [("orig", True), ("copy", True)]
    assert m.weight.grad is None and c.weight.grad is not None
    np.testing.assert_allclose(x.grad.numpy(), c.weight.sum(0, keepdim=True).detach().numpy())
    log.clear()
    m(x).sum().backward()
    assert [(tag, mod is m) for tag, mod in log] == [("orig", True)]


def test_positions_order_deepcopy_match_torch():
    torch = pytest.importorskip("torch")

    def run(lib):
        log = []

        def rec(tag):
            return lambda mod, gi, go: log.append((tag, _vals(gi), _vals(go)))

        def t(v, rg=True):
            return lib.tensor(v, dtype=lib.float64, requires_grad=rg)

        m = _scaled(lib)
        m.register_full_backward_hook(rec("s"))
        m(3.0, t([1.0, 2.0]), b=t([2.0, 5.0])).sum().backward()
        two = _two(lib)
        two.register_full_backward_pre_hook(lambda mod, go: log.append(("p", _vals(go))))
        two.register_full_backward_hook(rec("two"))
        two(t([1.0, 2.0]), t([3.0, 4.0], False))[0].sum().backward()
        o = _scaled(lib)
        o.register_full_backward_hook(rec("o"))
        o.register_forward_pre_hook(lambda mod, args: (args[0], args[1] * 2, args[2]))
        o.register_forward_hook(lambda mod, args, out: out * 3)
        o(1.0, t([1.0, 2.0]), t([3.0, 4.0])).sum().backward()
        lin = lib.nn.Linear(2, 2).double()
        lin.register_full_backward_hook(lambda mod, gi, go: log.append(("orig", mod is lin)))
        c = copy.deepcopy(lin)
        c.register_full_backward_hook(lambda mod, gi, go: log.append(("copy", mod is c)))
        c(t([[1.0, 1.0]])).sum().backward()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            c(t([[1.0, 1.0]], False)).sum().backward()
        return log

    assert run(gpucore) == run(torch)
