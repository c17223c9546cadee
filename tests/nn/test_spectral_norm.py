"""nn.utils.spectral_norm / remove_spectral_norm (the pre-hook form): power iteration in training
mode converges to the largest singular value (numpy's SVD), u and v are buffers updated in place,
eval mode does not iterate, transposed convolutions normalize over dim 1; removal; errors;
against PyTorch from the same u and v where installed."""

import numpy as np
import pytest

import gpucore
import gpucore.nn as nn


def _layer(cls=nn.Linear, *args):
    m = cls(*args).double()
    rng = np.random.default_rng(1)
    with gpucore.no_grad():
        for p in m.parameters():
            p.copy_(gpucore.tensor(rng.uniform(-1, 1, tuple(p.shape))))
    return m


def test_power_iteration_converges_to_the_largest_singular_value():
    m = _layer(nn.Linear, 6, 4)
    w = m.weight.detach().numpy().copy()
    nn.utils.spectral_norm(m, n_power_iterations=50)
    assert sorted(n for n, _ in m.named_parameters()) == ["bias", "weight_orig"]
    assert sorted(n for n, _ in m.named_buffers()) == ["weight_u", "weight_v"]
    u_before = m.weight_u.clone()
    m(gpucore.zeros(1, 6, dtype=gpucore.float64))
    assert not gpucore.equal(u_before, m.weight_u)  # updated in place
    sigma = np.linalg.svd(w, compute_uv=False)[0]
    np.testing.assert_allclose(m.weight.detach().numpy(), w / sigma, rtol=1e-8)
    m.eval()
    u = m.weight_u.clone()
    m(gpucore.zeros(1, 6, dtype=gpucore.float64))
    assert gpucore.equal(u, m.weight_u)  # eval: no iteration


def test_transposed_dim_removal_and_errors():
    t = nn.utils.spectral_norm(_layer(nn.ConvTranspose2d, 3, 4, 3))
    assert tuple(t.weight_u.shape) == (4,) and tuple(t.weight_v.shape) == (27,)
    m = nn.utils.spectral_norm(_layer(nn.Linear, 6, 4))
    x = gpucore.ones(2, 6, dtype=gpucore.float64)
    m.eval()
    y = m(x)
    nn.utils.remove_spectral_norm(m)
    assert sorted(n for n, _ in m.named_parameters()) == ["bias", "weight"]
    assert not list(m.named_buffers())
    np.testing.assert_allclose(m(x).detach().numpy(), y.detach().numpy(), rtol=1e-12)
    with pytest.raises(ValueError, match="not found"):
        nn.utils.remove_spectral_norm(m)
    with pytest.raises(ValueError, match="n_power_iterations"):
        nn.utils.spectral_norm(m, n_power_iterations=0)


def test_matches_torch_from_the_same_u_v():
    torch = pytest.importorskip("torch")
    xs = np.random.default_rng(0).standard_normal((2, 3, 5, 5))
    ws = np.random.default_rng(1).uniform(-1, 1, (4, 3, 3, 3))
    us, vs = (
        np.random.default_rng(3).standard_normal(4),
        np.random.default_rng(4).standard_normal(27),
    )

    def run(lib, nn_mod):
        c = nn_mod.Conv2d(3, 4, 3, bias=False).double()
        with lib.no_grad():
            c.weight.copy_(lib.tensor(ws))
        c = nn_mod.utils.spectral_norm(c, n_power_iterations=2)
        with lib.no_grad():
            c.weight_u.copy_(lib.tensor(us))
            c.weight_v.copy_(lib.tensor(vs))
        for _ in range(3):
            y = c(lib.tensor(xs))
        (y**2).sum().backward()
        return [y.detach().numpy(), c.weight_orig.grad.numpy(), c.weight_u.numpy()]

    for g, t in zip(run(gpucore, nn), run(torch, torch.nn)):
        np.testing.assert_allclose(g, t, rtol=1e-10, atol=1e-12)
