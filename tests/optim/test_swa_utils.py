"""gpucore.optim.swa_utils: AveragedModel (SWA running mean, EMA by avg_fn and multi_avg_fn,
buffers copied or averaged), SWALR's annealing, update_bn's recomputed statistics, against
numpy float64 formulas, and one weight-averaged training loop against PyTorch where installed."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gpucore
import gpucore.nn as nn
from gpucore import optim
from gpucore.optim import swa_utils


def _model(seed=0):
    rng = np.random.default_rng(seed)
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
    with gpucore.no_grad():
        for p in m.parameters():
            p.copy_(gpucore.tensor(rng.uniform(-1, 1, tuple(p.shape)).astype(np.float32)))
    return m


def _snapshots(m, k, seed=1):
    """k successive parameter states of m (random walks), each as float64 arrays."""
    rng = np.random.default_rng(seed)
    for _ in range(k):
        with gpucore.no_grad():
            for p in m.parameters():
                p.add_(gpucore.tensor(rng.normal(0, 0.5, tuple(p.shape)).astype(np.float32)))
        m(gpucore.tensor(rng.normal(size=(5, 3)).astype(np.float32)))  # moves the BN statistics
        yield [p.detach().numpy().astype(np.float64) for p in m.parameters()]


def test_averaged_model_swa_is_the_running_mean():
    m = _model()
    swa = swa_utils.AveragedModel(m)
    states = []
    for state in _snapshots(m, 4):
        swa.update_parameters(m)
        states.append(state)
    assert int(swa.n_averaged) == 4
    for i, p in enumerate(swa.parameters()):
        np.testing.assert_allclose(
            p.detach().numpy(), np.mean([s[i] for s in states], 0), rtol=1e-5
        )
    # without use_buffers the statistics are the model's, copied
    np.testing.assert_array_equal(swa.module[1].running_mean.numpy(), m[1].running_mean.numpy())
    x = gpucore.ones(2, 3)
    swa.eval()
    m.eval()
    assert swa(x).shape == m(x).shape


@pytest.mark.parametrize("form", ["avg_fn", "multi_avg_fn"])
def test_averaged_model_ema(form):
    decay = 0.8
    m = _model()
    kw = (
        {"avg_fn": swa_utils.get_ema_avg_fn(decay)}
        if form == "avg_fn"
        else {"multi_avg_fn": swa_utils.get_ema_multi_avg_fn(decay)}
    )
    ema = swa_utils.AveragedModel(m, use_buffers=True, **kw)
    expected = None
    for state in _snapshots(m, 3):
        ema.update_parameters(m)
        if expected is None:
            expected = state
        else:
            expected = [decay * e + (1 - decay) * s for e, s in zip(expected, state)]
    for p, e in zip(ema.module.parameters(), expected):
        np.testing.assert_allclose(p.detach().numpy(), e, rtol=1e-5, atol=1e-6)
    # use_buffers: the running statistics are averaged too, not the model's
    assert not np.array_equal(ema.module[1].running_mean.numpy(), m[1].running_mean.numpy())


def test_swa_multi_avg_fn_matches_the_default():
    m = _model()
    a = swa_utils.AveragedModel(m)
    b = swa_utils.AveragedModel(m, multi_avg_fn=swa_utils.get_swa_multi_avg_fn())
    for _ in _snapshots(m, 3):
        a.update_parameters(m)
        b.update_parameters(m)
    for p, q in zip(a.parameters(), b.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError, match="only one of avg_fn and multi_avg_fn"):
        swa_utils.AveragedModel(m, avg_fn=swa_utils.get_swa_avg_fn(), multi_avg_fn=lambda *a: 0)


def _swalr(lr, swa_lr, epochs, strategy, n):
    p = nn.Parameter(gpucore.zeros(2))
    opt = optim.SGD([p], lr=lr)
    s = swa_utils.SWALR(opt, swa_lr=swa_lr, anneal_epochs=epochs, anneal_strategy=strategy)
    out = [opt.param_groups[0]["lr"]]
    for _ in range(n):
        opt.step()
        s.step()
        out.append(s.get_last_lr()[0])
    return out


@pytest.mark.parametrize("strategy", ["cos", "linear"])
def test_swalr_anneals_to_the_swa_rate(strategy):
    lr, swa_lr, epochs = 0.1, 0.02, 4
    got = _swalr(lr, swa_lr, epochs, strategy, 6)

    def frac(t):
        return (1 - math.cos(math.pi * t)) / 2 if strategy == "cos" else t

    want = [
        swa_lr * frac(min(1, k / epochs)) + lr * (1 - frac(min(1, k / epochs))) for k in range(7)
    ]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert _swalr(0.1, 0.05, 0, "cos", 2) == [0.05, 0.05, 0.05]  # no annealing: at once


def test_swalr_errors():
    opt = optim.SGD([nn.Parameter(gpucore.zeros(1))], lr=0.1)
    with pytest.raises(ValueError, match="anneal_strategy"):
        swa_utils.SWALR(opt, 0.05, anneal_strategy="step")
    with pytest.raises(ValueError, match="anneal_epochs"):
        swa_utils.SWALR(opt, 0.05, anneal_epochs=-1)
    with pytest.raises(ValueError, match="anneal_epochs"):
        swa_utils.SWALR(opt, 0.05, anneal_epochs=2.5)


def test_update_bn_recomputes_the_statistics():
    rng = np.random.default_rng(3)
    data = rng.normal(2.0, 3.0, (4, 8, 3)).astype(np.float32)  # 4 batches of 8
    m = nn.Sequential(nn.BatchNorm1d(3, momentum=0.3))
    m.eval()
    loader = [(gpucore.tensor(b), gpucore.zeros(8)) for b in data]
    swa_utils.update_bn(loader, m)
    flat = data.reshape(-1, 3).astype(np.float64)
    bn = m[0]
    np.testing.assert_allclose(bn.running_mean.numpy(), flat.mean(0), rtol=1e-5)
    # the mean of the batches' unbiased variances (a cumulative average over equal batches)
    want_var = np.mean([b.astype(np.float64).var(0, ddof=1) for b in data], 0)
    np.testing.assert_allclose(bn.running_var.numpy(), want_var, rtol=1e-5)
    assert bn.momentum == 0.3 and not m.training
    swa_utils.update_bn(loader, nn.Linear(3, 3))  # no BatchNorm: nothing to do


def test_weight_averaged_training_matches_torch():
    torch = pytest.importorskip("torch")

    def run(lib, nn_mod, swa_mod):
        rng = np.random.default_rng(0)
        m = nn_mod.Sequential(nn_mod.Linear(3, 8), nn_mod.BatchNorm1d(8), nn_mod.Linear(8, 1))
        with lib.no_grad():
            for p in m.parameters():
                p.copy_(lib.tensor(rng.uniform(-0.5, 0.5, tuple(p.shape)).astype(np.float32)))
        x = rng.normal(size=(6, 16, 3)).astype(np.float32)
        y = x.sum(-1, keepdims=True)
        opt = lib.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
        swa, ema = (
            swa_mod.AveragedModel(m),
            swa_mod.AveragedModel(m, multi_avg_fn=swa_mod.get_ema_multi_avg_fn(0.9)),
        )
        sched = swa_mod.SWALR(opt, swa_lr=0.01, anneal_epochs=2)
        for _epoch in range(3):
            for xb, yb in zip(x, y):
                opt.zero_grad()
                loss = ((m(lib.tensor(xb)) - lib.tensor(yb)) ** 2).mean()
                loss.backward()
                opt.step()
                ema.update_parameters(m)
            swa.update_parameters(m)
            sched.step()
        swa_mod.update_bn([lib.tensor(b) for b in x], swa)
        out = [p.detach().numpy() for model in (swa, ema) for p in model.parameters()]
        return out + [swa.module[1].running_var.numpy(), np.array(sched.get_last_lr())]

    got = run(gpucore, nn, swa_utils)
    want = run(torch, torch.nn, torch.optim.swa_utils)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("make", ["get_ema_multi_avg_fn", "get_ema_avg_fn"])
def test_ema_decay_outside_0_1_raises(make):
    for decay in (-0.1, 1.5):
        with pytest.raises(ValueError, match=r"Invalid decay value .* \[0,1\] range"):
            getattr(swa_utils, make)(decay)
    getattr(swa_utils, make)(1.0)  # the bounds themselves are valid
