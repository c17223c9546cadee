"""nn.utils.weight_norm / remove_weight_norm (the pre-hook form): the weight is g * v / ||v|| per
output channel (dim 0), per any dim, or over the whole tensor (dim None), recomputed each forward
from the parameters weight_g / weight_v; gradients by gradcheck; removal; errors; against
PyTorch where installed."""

import numpy as np
import pytest

import gpucore
import gpucore.nn as nn
from gpucore.nn.utils.weight_norm import norm_except_dim


def _conv():
    c = nn.Conv2d(3, 4, 3).double()
    rng = np.random.default_rng(1)
    with gpucore.no_grad():
        for p in c.parameters():
            p.copy_(gpucore.tensor(rng.uniform(-1, 1, tuple(p.shape))))
    return c


@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_is_g_times_direction(dim):
    c = _conv()
    w0 = c.weight.detach().numpy().copy()
    nn.utils.weight_norm(c, dim=dim)
    assert sorted(n for n, _ in c.named_parameters()) == ["bias", "weight_g", "weight_v"]
    axes = None if dim is None else tuple(d for d in range(4) if d != dim)
    norm = np.sqrt((w0**2).sum(axis=axes, keepdims=dim is not None))
    np.testing.assert_allclose(c.weight_g.detach().numpy(), norm, rtol=1e-12)
    np.testing.assert_allclose(c.weight.detach().numpy(), w0, rtol=1e-12)  # unchanged at first
    with gpucore.no_grad():
        c.weight_g.mul_(2)
    c(gpucore.zeros(1, 3, 5, 5, dtype=gpucore.float64))  # the pre-hook recomputes the weight
    np.testing.assert_allclose(c.weight.detach().numpy(), 2 * w0, rtol=1e-12)


def test_gradients_removal_and_errors():
    c = nn.utils.weight_norm(_conv())
    x = gpucore.tensor(np.random.default_rng(0).standard_normal((2, 3, 5, 5)))
    g, v = c.weight_g.detach().clone(), c.weight_v.detach().clone()
    assert gpucore.autograd.gradcheck(
        lambda g_, v_: nn.functional.conv2d(x, v_ * (g_ / norm_except_dim(v_, 2, 0))),
        (g.requires_grad_(), v.requires_grad_()),
    )
    y = c(x)
    nn.utils.remove_weight_norm(c)
    assert sorted(n for n, _ in c.named_parameters()) == ["bias", "weight"]
    np.testing.assert_allclose(c(x).detach().numpy(), y.detach().numpy(), rtol=1e-12)
    with pytest.raises(ValueError, match="not found"):
        nn.utils.remove_weight_norm(c)
    nn.utils.weight_norm(c)
    with pytest.raises(RuntimeError, match="two weight_norm hooks"):
        nn.utils.weight_norm(c)


def test_matches_torch():
    torch = pytest.importorskip("torch")
    xs = np.random.default_rng(0).standard_normal((2, 3, 5, 5))
    ws = np.random.default_rng(1).uniform(-1, 1, (4, 3, 3, 3))

    def run(lib, nn_mod):
        c = nn_mod.Conv2d(3, 4, 3, bias=False).double()
        with lib.no_grad():
            c.weight.copy_(lib.tensor(ws))
        c = nn_mod.utils.weight_norm(c)
        (c(lib.tensor(xs)) ** 2).sum().backward()
        return [c.weight_g.grad.numpy(), c.weight_v.grad.numpy()]

    for g, t in zip(run(gpucore, nn), run(torch, torch.nn)):
        np.testing.assert_allclose(g, t, rtol=1e-10)
