"""Module.register_full_backward_hook / register_full_backward_pre_hook (gpucore/nn/
backward_hooks.py): the gradients the hooks see (grad_input / grad_output against the graph's
own, float64), replacements, grad_input None when no input requires grad (with PyTorch's
warning), removal, no_grad forwards, forward hooks alongside; against PyTorch where installed."""

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
    with pytest.raises(RuntimeError, match="one per input"):
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
