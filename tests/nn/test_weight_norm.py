"""nn.utils.weight_norm / remove_weight_norm: the g/v parameters, the weight recomputed before
each forward, gradients to g and v against finite-difference-free float64 formulas, dim=None,
removal, errors, and parity with torch.nn.utils.weight_norm when torch is installed."""

import warnings

import numpy as np
import pytest

import gpucore
import gpucore.nn as nn
from gpucore.nn.utils import remove_weight_norm, weight_norm

RNG = np.random.default_rng(3)


def _conv():
    m = nn.Conv1d(2, 3, 3, padding=2, dilation=1).to(gpucore.float64)
    with gpucore.no_grad():
        m.weight.copy_(gpucore.tensor(RNG.standard_normal((3, 2, 3))))
    return m


def test_weight_norm_splits_and_recomputes_the_weight():
    m = _conv()
    w0 = m.weight.detach().numpy().copy()
    weight_norm(m)
    assert [n for n, _ in m.named_parameters()] == ["bias", "weight_g", "weight_v"]
    norms = np.sqrt((w0**2).sum(axis=(1, 2), keepdims=True))
    np.testing.assert_allclose(m.weight_g.detach().numpy(), norms, rtol=1e-12)
    np.testing.assert_allclose(m.weight_v.detach().numpy(), w0, rtol=0)
    # a new g or v shows in the weight at the next forward
    with gpucore.no_grad():
        m.weight_g.mul_(2.0)
    x = gpucore.tensor(RNG.standard_normal((2, 2, 5)))
    m(x)
    np.testing.assert_allclose(m.weight.detach().numpy(), 2 * w0, rtol=1e-12)


def test_weight_norm_gradients_reach_g_and_v():
    m = weight_norm(nn.Linear(3, 2).to(gpucore.float64), dim=0)
    v = m.weight_v.detach().numpy().copy()
    g = m.weight_g.detach().numpy().copy()
    x = RNG.standard_normal((4, 3))
    m(gpucore.tensor(x)).sum().backward()
    # d/dW of sum(x W^T) is sum_rows(x) for every output row; then through W = g v / |v|
    gw = np.tile(x.sum(0), (2, 1))
    nv = np.sqrt((v**2).sum(1, keepdims=True))
    ref_g = (gw * v / nv).sum(1, keepdims=True)
    ref_v = g / nv * gw - g * (gw * v).sum(1, keepdims=True) * v / nv**3
    np.testing.assert_allclose(m.weight_g.grad.numpy(), ref_g, rtol=1e-10)
    np.testing.assert_allclose(m.weight_v.grad.numpy(), ref_v, rtol=1e-10)


def test_weight_norm_dim_none_remove_and_errors():
    m = _conv()
    w0 = m.weight.detach().numpy().copy()
    weight_norm(m, dim=None)
    assert tuple(m.weight_g.shape) == ()
    np.testing.assert_allclose(m.weight_g.item(), np.sqrt((w0**2).sum()), rtol=1e-12)
    with pytest.raises(RuntimeError, match="two weight_norm"):
        weight_norm(m)
    remove_weight_norm(m)
    assert [n for n, _ in m.named_parameters()] == ["bias", "weight"]
    np.testing.assert_allclose(m.weight.detach().numpy(), w0, rtol=1e-12)
    assert not m._forward_pre_hooks
    with pytest.raises(ValueError, match="not found"):
        remove_weight_norm(m)
    with pytest.raises(ValueError, match="no parameter"):
        weight_norm(m, name="scale")
    with pytest.raises(IndexError, match="out of range"):
        weight_norm(m, dim=3)


def test_weight_norm_negative_dim_counts_back():
    """As PyTorch: -1 is the whole tensor (as None), -2 on a 3-D weight is dim 1."""
    m = _conv()
    w0 = m.weight.detach().numpy().copy()
    weight_norm(m, dim=-2)
    np.testing.assert_allclose(
        m.weight_g.detach().numpy(), np.sqrt((w0**2).sum(axis=(0, 2), keepdims=True)), rtol=1e-12
    )
    with pytest.raises(IndexError, match="out of range"):
        weight_norm(_conv(), dim=-4)


@pytest.mark.parametrize("dim", [0, 1, None, -2])
def test_weight_norm_matches_torch(dim):
    torch = pytest.importorskip("torch")
    w = RNG.standard_normal((3, 2, 3))
    b = RNG.standard_normal(3)
    x = RNG.standard_normal((2, 2, 6))
    outs = []
    for lib in (gpucore, torch):
        m = lib.nn.Conv1d(2, 3, 3, padding=4, dilation=2).double()
        with lib.no_grad():
            m.weight.copy_(lib.tensor(w))
            m.bias.copy_(lib.tensor(b))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # torch's deprecation notice
            m = lib.nn.utils.weight_norm(m, dim=dim)
        y = m(lib.tensor(x))
        (y * y).sum().backward()
        outs.append([y, m.weight_g.grad, m.weight_v.grad, *m.state_dict().values()])
        outs[-1] = [t.detach().numpy() for t in outs[-1]]
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
