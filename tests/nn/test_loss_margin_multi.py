"""multi_margin_loss, multilabel_margin_loss, triplet_margin_with_distance_loss and their
modules: values and gradients against PyTorch and numpy float64 loops, Vulkan against the CPU,
and errors."""

import numpy as np
import pytest

import gpucore
import gpucore.nn as nn
import gpucore.nn.functional as F


def _t(a, dtype=gpucore.float64, grad=False, device="cpu"):
    return gpucore.tensor(np.asarray(a), dtype=dtype, device=device, requires_grad=grad)


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def np_multi_margin(x, y, p, margin, w):
    out = np.zeros(len(x))
    for b in range(len(x)):
        for i in range(x.shape[1]):
            if i != y[b]:
                v = max(0.0, margin - x[b, y[b]] + x[b, i]) ** p
                out[b] += v * (w[y[b]] if w is not None else 1.0)
    return out / x.shape[1]


def np_multilabel_margin(x, y):
    out = np.zeros(len(x))
    for b in range(len(x)):
        labels = []
        for k in y[b]:
            if k < 0:
                break
            labels.append(k)
        for j in labels:
            for i in range(x.shape[1]):
                if i not in labels:
                    out[b] += max(0.0, 1 - (x[b, j] - x[b, i]))
    return out / x.shape[1]


@pytest.mark.parametrize("p,margin,weighted", [(1, 1.0, False), (2, 0.5, True), (1, 2.0, True)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_multi_margin_loss(p, margin, weighted, reduction):
    x = _rand(5, 4, seed=p)
    y = np.array([0, 3, 1, 1, 2])
    w = np.abs(_rand(4, seed=7)) if weighted else None
    a = _t(x, grad=True)
    loss = F.multi_margin_loss(
        a, _t(y, gpucore.int64), p, margin, None if w is None else _t(w), reduction=reduction
    )
    ref = np_multi_margin(x, y, p, margin, w)
    ref = {"mean": ref.mean(), "sum": ref.sum(), "none": ref}[reduction]
    np.testing.assert_allclose(loss.detach().numpy(), ref, rtol=1e-12)
    torch = pytest.importorskip("torch")
    loss.sum().backward()
    ta = torch.tensor(x, requires_grad=True)
    tw = None if w is None else torch.tensor(w)
    tl = torch.nn.functional.multi_margin_loss(ta, torch.tensor(y), p, margin, tw,
                                               reduction=reduction)  # fmt: skip
    tl.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-10, atol=1e-12)
    m = nn.MultiMarginLoss(p, margin, None if w is None else _t(w), reduction=reduction)
    np.testing.assert_allclose(m(a, _t(y, gpucore.int64)).detach().numpy(), ref, rtol=1e-12)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_multilabel_margin_loss(reduction):
    x = _rand(4, 5, seed=3)
    y = np.array([[3, 0, -1, 1, 2], [0, 1, 2, 3, 4], [-1, 1, 2, 3, 0], [4, 4, -1, 0, 0]])
    a = _t(x, grad=True)
    loss = nn.MultiLabelMarginLoss(reduction=reduction)(a, _t(y, gpucore.int64))
    ref = np_multilabel_margin(x, y)
    ref = {"mean": ref.mean(), "sum": ref.sum(), "none": ref}[reduction]
    np.testing.assert_allclose(loss.detach().numpy(), ref, rtol=1e-12)
    torch = pytest.importorskip("torch")
    loss.sum().backward()
    ta = torch.tensor(x, requires_grad=True)
    tl = torch.nn.functional.multilabel_margin_loss(ta, torch.tensor(y), reduction=reduction)
    tl.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-10, atol=1e-12)
    one = F.multilabel_margin_loss(_t(x[0]), _t(y[0], gpucore.int64))
    assert one.shape == () and np.isclose(one.item(), np_multilabel_margin(x[:1], y[:1])[0])


@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("custom", [False, True])
def test_triplet_margin_with_distance_loss(swap, custom):
    torch = pytest.importorskip("torch")
    a, p, n = (_rand(4, 6, seed=s) for s in range(3))
    ts = [_t(v, grad=True) for v in (a, p, n)]
    tt = [torch.tensor(v, requires_grad=True) for v in (a, p, n)]
    dist = (lambda u, v: (u - v).abs().sum(-1)) if custom else None
    loss = nn.TripletMarginWithDistanceLoss(distance_function=dist, margin=2.0, swap=swap)(*ts)
    tloss = torch.nn.functional.triplet_margin_with_distance_loss(
        *tt, distance_function=dist, margin=2.0, swap=swap
    )
    loss.backward()
    tloss.backward()
    np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-10)
    for u, v in zip(ts, tt):
        np.testing.assert_allclose(u.grad.numpy(), v.grad.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(
    "call,exc,match",
    [
        (lambda x, y: F.multi_margin_loss(x, y, p=3), ValueError, "p == 1 and p == 2"),
        (lambda x, y: F.multi_margin_loss(x, y + 4), IndexError, "out of range"),
        (lambda x, y: F.multi_margin_loss(x, y[:2]), gpucore.ShapeError, "target size"),
        (
            lambda x, y: F.multi_margin_loss(x, y, weight=_t(np.ones(3))),
            gpucore.ShapeError,
            "weight size",
        ),  # fmt: skip
        (lambda x, y: F.multi_margin_loss(x, y.double()), gpucore.DTypeError, "int64"),
        (lambda x, y: F.multi_margin_loss(x[:0], y[:0]), ValueError, "empty batch"),
        (lambda x, y: F.multi_margin_loss(x.unsqueeze(2), y), gpucore.ShapeError, "vector"),
        (lambda x, y: F.multilabel_margin_loss(x, y), gpucore.ShapeError, "target size"),
        (
            lambda x, y: F.multilabel_margin_loss(x, x.to(gpucore.int64) * 0 + 7),
            IndexError,
            "out of range",
        ),  # fmt: skip
        (
            lambda x, y: F.triplet_margin_with_distance_loss(x, x, x, margin=0),
            ValueError,
            "margin",
        ),  # fmt: skip
        (
            lambda x, y: F.triplet_margin_with_distance_loss(x, x[0], x),
            gpucore.ShapeError,
            "same number of dimensions",
        ),  # fmt: skip
    ],
)
def test_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call(_t(_rand(3, 4)), _t(np.array([0, 3, 1]), gpucore.int64))


def test_on_vulkan_matches_cpu(vulkan):
    x = _rand(6, 5, seed=5).astype(np.float32)
    y = np.array([0, 4, 1, 1, 2, 3])
    ym = np.array([[3, 0, -1, 1, 2]] * 6)
    got, want = [], []
    for device, into in (("vulkan", got), ("cpu", want)):
        with gpucore.device_policy(device):
            a = _t(x, gpucore.float32, True, device)
            loss = F.multi_margin_loss(a, _t(y, gpucore.int64, device=device), p=2)
            loss = loss + F.multilabel_margin_loss(a, _t(ym, gpucore.int64, device=device))
            loss = loss + F.triplet_margin_with_distance_loss(a, a * 0.5, a.flip(0))
            assert loss.device.type == device
            loss.backward()
            into += [loss.detach().numpy(), a.grad.numpy()]
    for u, w in zip(got, want):
        np.testing.assert_allclose(u, w, rtol=1e-4, atol=1e-5)
