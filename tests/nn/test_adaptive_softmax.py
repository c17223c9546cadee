"""AdaptiveLogSoftmaxWithLoss against PyTorch's with the same weights: output, loss, gradients,
log_prob, predict, unbatched input, Vulkan against the CPU, and errors."""

import numpy as np
import pytest

import gpucore
import gpucore.nn as nn


def _pair(torch, **kw):
    kw = {"in_features": 16, "n_classes": 20, "cutoffs": [4, 10, 15], "div_value": 2.0} | kw
    g = nn.AdaptiveLogSoftmaxWithLoss(**kw)
    t = torch.nn.AdaptiveLogSoftmaxWithLoss(**kw).double()
    with torch.no_grad():
        for name, p in t.named_parameters():
            p.copy_(torch.tensor(dict(g.named_parameters())[name].detach().numpy()))
    return g.double(), t


def test_matches_torch():
    torch = pytest.importorskip("torch")
    g, t = _pair(torch, head_bias=True)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((12, 16))
    y = np.array([0, 3, 4, 9, 10, 14, 15, 19, 2, 12, 5, 17])
    gx = gpucore.tensor(x, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    out, loss = g(gx, gpucore.tensor(y))
    tout, tloss = t(tx, torch.tensor(y))
    loss.backward()
    tloss.backward()
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-10)
    np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-10)
    np.testing.assert_allclose(gx.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-12)
    for name, p in t.named_parameters():
        mine = dict(g.named_parameters())[name].grad.numpy()
        np.testing.assert_allclose(mine, p.grad.numpy(), rtol=1e-9, atol=1e-12)
    with gpucore.no_grad():
        lp = g.log_prob(gpucore.tensor(x)).numpy()
        np.testing.assert_allclose(lp, t.log_prob(torch.tensor(x)).detach().numpy(), rtol=1e-10)
        np.testing.assert_allclose(np.exp(lp).sum(1), 1.0, rtol=1e-12)
        xs = x * 20  # sharp scores: some rows land in the clusters
        np.testing.assert_array_equal(
            g.predict(gpucore.tensor(xs)).numpy(), t.predict(torch.tensor(xs)).numpy()
        )
        o1, l1 = g(gpucore.tensor(x[0]), gpucore.tensor(y[0]))
        assert o1.shape == () and np.isclose(o1.item(), tout[0].item())


@pytest.mark.parametrize(
    "kw,match",
    [
        ({"cutoffs": []}, "empty"),
        ({"cutoffs": [10, 4]}, "strictly increasing"),
        ({"cutoffs": [4, 20]}, r"\[1, n_classes - 1\] = \[1, 19\]"),
        ({"cutoffs": [0, 4]}, r"\[1, n_classes - 1\]"),
        ({"cutoffs": [4, 4]}, "strictly increasing"),
        ({"cutoffs": [4, 7.5]}, "integers"),
    ],
)
def test_bad_cutoffs(kw, match):
    with pytest.raises(ValueError, match="AdaptiveLogSoftmaxWithLoss.*cutoffs.*" + match):
        nn.AdaptiveLogSoftmaxWithLoss(8, 20, **kw)
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError):  # the same cutoffs PyTorch refuses
        torch.nn.AdaptiveLogSoftmaxWithLoss(8, 20, **kw)


def test_structure_and_initialisation_order_as_torch():
    torch = pytest.importorskip("torch")
    kw = {"in_features": 16, "n_classes": 20, "cutoffs": (4, 10, 15), "div_value": 2.0}
    g = nn.AdaptiveLogSoftmaxWithLoss(**kw, head_bias=True)
    t = torch.nn.AdaptiveLogSoftmaxWithLoss(**kw, head_bias=True)
    gs, ts = g.state_dict(), t.state_dict()
    assert list(gs) == list(ts)
    assert [tuple(v.shape) for v in gs.values()] == [tuple(v.shape) for v in ts.values()]
    for name in ("cutoffs", "shortlist_size", "n_clusters", "head_size"):
        assert getattr(g, name) == getattr(t, name)
    gpucore.manual_seed(5)
    fresh = nn.AdaptiveLogSoftmaxWithLoss(**kw, head_bias=True)
    gpucore.manual_seed(5)
    g.reset_parameters()  # the same draws in the same order as construction
    for (name, a), b in zip(g.named_parameters(), fresh.parameters()):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy(), err_msg=name)


def test_bad_targets():
    m = nn.AdaptiveLogSoftmaxWithLoss(8, 20, [4, 10], div_value=2.0)
    x = gpucore.randn(3, 8)
    with pytest.raises(IndexError, match="Target values"):
        m(x, gpucore.tensor([0, 1, 20]))
    with pytest.raises(gpucore.ShapeError, match="same size"):
        m(x, gpucore.tensor([0, 1]))
    with pytest.raises(gpucore.ShapeError, match="multi-target"):
        m(x, gpucore.tensor([[0, 1, 2]]))


def test_on_vulkan_matches_cpu(vulkan):
    m = nn.AdaptiveLogSoftmaxWithLoss(16, 20, [4, 10], div_value=2.0)
    x = np.random.default_rng(1).standard_normal((8, 16)).astype(np.float32)
    y = gpucore.tensor(np.array([0, 5, 11, 19, 3, 4, 10, 9]))
    got, want = [], []
    for device, into in (("vulkan", got), ("cpu", want)):
        with gpucore.device_policy(device):
            mm = m.to(device)
            a = gpucore.tensor(x, device=device, requires_grad=True)
            out, loss = mm(a, y.to(device))
            assert loss.device.type == device
            loss.backward()
            into += [out.detach().numpy(), a.grad.numpy()]
    for p, q in zip(got, want):
        np.testing.assert_allclose(p, q, rtol=1e-4, atol=1e-5)
