"""gpucore.optim.swa_utils: AveragedModel (SWA and EMA averages), SWALR and update_bn, against
float64 numpy formulas (the running mean of the snapshots, the EMA recurrence, the anneal of
PyTorch's documentation, BatchNorm's cumulative statistics) and against torch.optim.swa_utils
when torch is installed."""

from __future__ import annotations

import math

import numpy as np
import optim_harness as h
import pytest

import gpucore
from gpucore import nn
from gpucore.optim import swa_utils

RNG = np.random.default_rng(7)
SNAPSHOTS = [RNG.standard_normal((3, 4)).astype(np.float32) for _ in range(5)]


def _linear_at(w: np.ndarray) -> nn.Linear:
    m = nn.Linear(4, 3, bias=False)
    with gpucore.no_grad():
        m.weight.copy_(gpucore.from_numpy(w))
    return m


def test_swa_average_is_the_mean_of_the_snapshots():
    model = _linear_at(SNAPSHOTS[0])
    avg = swa_utils.AveragedModel(model)
    for w in SNAPSHOTS:
        with gpucore.no_grad():
            model.weight.copy_(gpucore.from_numpy(w))
        avg.update_parameters(model)
    assert avg.n_averaged.item() == len(SNAPSHOTS)
    ref = np.mean(np.stack(SNAPSHOTS).astype(np.float64), axis=0)
    np.testing.assert_allclose(avg.module.weight.detach().numpy(), ref, rtol=1e-6, atol=1e-6)
    x = gpucore.ones(2, 4)
    assert gpucore.equal(avg(x), avg.module(x))
    assert list(avg.state_dict()) == ["n_averaged", "module.weight"]


@pytest.mark.parametrize("multi", [True, False])
def test_ema_follows_the_recurrence(multi):
    decay = 0.8
    model = _linear_at(SNAPSHOTS[0])
    if multi:
        avg = swa_utils.AveragedModel(model, multi_avg_fn=swa_utils.get_ema_multi_avg_fn(decay))
    else:
        avg = swa_utils.AveragedModel(model, avg_fn=swa_utils.get_ema_avg_fn(decay))
    ref = None
    for w in SNAPSHOTS:
        with gpucore.no_grad():
            model.weight.copy_(gpucore.from_numpy(w))
        avg.update_parameters(model)
        w64 = w.astype(np.float64)
        ref = w64 if ref is None else decay * ref + (1 - decay) * w64
    np.testing.assert_allclose(avg.module.weight.detach().numpy(), ref, rtol=1e-6, atol=1e-6)


def test_buffers_copied_or_averaged():
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    plain = swa_utils.AveragedModel(model)
    with_buffers = swa_utils.AveragedModel(model, use_buffers=True)
    for _ in range(3):
        model(gpucore.from_numpy(RNG.standard_normal((4, 2)).astype(np.float32)))
        plain.update_parameters(model)
        with_buffers.update_parameters(model)
    # copied from the model at each update without use_buffers
    assert gpucore.equal(plain.module[1].running_mean, model[1].running_mean)
    assert plain.module[1].num_batches_tracked.item() == 3
    # averaged with it: the integer counter 1, 2, 3 -> 1, trunc(1 + 1/2) = 1, trunc(1 + 2/3) = 1
    assert with_buffers.module[1].num_batches_tracked.item() == 1
    assert with_buffers.module[1].num_batches_tracked.dtype == gpucore.int64


def test_integer_buffer_average_rounds_toward_zero():
    class Counts(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("c", gpucore.tensor([10, -10, 7]))

    model = Counts()
    avg = swa_utils.AveragedModel(model, use_buffers=True)
    avg.update_parameters(model)
    model.c -= gpucore.tensor([5, 5, 0])
    avg.update_parameters(model)
    # (10 + 5) / 2 = 7.5 -> 7 and (-10 - 15) / 2 = -12.5 -> -12, as PyTorch
    assert avg.module.c.tolist() == [7, -12, 7]


def test_averaged_model_rejects_two_averaging_functions():
    with pytest.raises(ValueError, match="avg_fn and multi_avg_fn"):
        swa_utils.AveragedModel(
            nn.Linear(1, 1),
            avg_fn=swa_utils.get_swa_avg_fn(),
            multi_avg_fn=swa_utils.get_swa_multi_avg_fn(),
        )
    with pytest.raises(ValueError, match="decay"):
        swa_utils.get_ema_multi_avg_fn(1.5)


def _swalr_reference(lr0, swa_lr, anneal_epochs, strategy, steps):
    """PyTorch's documented schedule, unchained: alpha(t) of the way from lr0 to swa_lr."""
    f = (lambda t: (1 - math.cos(math.pi * t)) / 2) if strategy == "cos" else (lambda t: t)
    out = []
    for step in range(1, steps + 1):
        alpha = f(min(1, step / max(1, anneal_epochs)))
        out.append(swa_lr * alpha + lr0 * (1 - alpha))
    return out


@pytest.mark.parametrize("strategy,anneal_epochs", [("cos", 3), ("linear", 4), ("cos", 0)])
def test_swalr_anneals_to_swa_lr(strategy, anneal_epochs):
    opt = gpucore.optim.SGD([nn.Parameter(gpucore.ones(2))], lr=0.5)
    sched = swa_utils.SWALR(opt, swa_lr=0.05, anneal_epochs=anneal_epochs, anneal_strategy=strategy)
    lrs = []
    for _ in range(6):
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr()[0])
    ref = _swalr_reference(0.5, 0.05, anneal_epochs, strategy, 6)
    if anneal_epochs == 0:  # the initial step already lands on swa_lr
        ref = [0.05] * 6
    np.testing.assert_allclose(lrs, ref, rtol=1e-12)
    with pytest.raises(ValueError, match="anneal_strategy"):
        swa_utils.SWALR(opt, swa_lr=0.1, anneal_strategy="step")
    with pytest.raises(ValueError, match="anneal_epochs"):
        swa_utils.SWALR(opt, swa_lr=0.1, anneal_epochs=-1)


def test_update_bn_recomputes_cumulative_statistics():
    model = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3, momentum=0.3))
    batches = [RNG.standard_normal((8, 3)).astype(np.float32) for _ in range(4)]
    loader = [(gpucore.from_numpy(b), gpucore.zeros(8)) for b in batches]
    model.eval()
    swa_utils.update_bn(loader, model)
    assert not model.training and model[1].momentum == 0.3
    w = model[0].weight.detach().numpy().astype(np.float64)
    b = model[0].bias.detach().numpy().astype(np.float64)
    hs = [x.astype(np.float64) @ w.T + b for x in batches]
    np.testing.assert_allclose(
        model[1].running_mean.numpy(), np.mean([h.mean(0) for h in hs], 0), rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
        model[1].running_var.numpy(), np.mean([h.var(0, ddof=1) for h in hs], 0), rtol=1e-5
    )
    swa_utils.update_bn(loader, nn.Linear(2, 2))  # no BatchNorm: nothing to do


@pytest.mark.skipif(h.torch is None, reason="torch is not installed")
def test_matches_torch_swa_utils():
    torch = h.torch
    data = [RNG.standard_normal((6, 4)).astype(np.float32) for _ in range(6)]
    init = [RNG.uniform(-0.5, 0.5, s).astype(np.float32) for s in [(3, 4), (3,), (3,), (3,)]]

    def run(lib):
        model = lib.nn.Sequential(lib.nn.Linear(4, 3), lib.nn.BatchNorm1d(3))
        with lib.no_grad():
            for p, a in zip(model.parameters(), init):
                p.copy_(lib.from_numpy(a))
        opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        swa = lib.optim.swa_utils.AveragedModel(model)
        ema = lib.optim.swa_utils.AveragedModel(
            model, multi_avg_fn=lib.optim.swa_utils.get_ema_multi_avg_fn(0.9), use_buffers=True
        )
        sched = lib.optim.swa_utils.SWALR(opt, swa_lr=0.02, anneal_epochs=3)
        lrs = []
        for x in data:
            opt.zero_grad()
            model(lib.from_numpy(x)).pow(2).mean().backward()
            opt.step()
            sched.step()
            swa.update_parameters(model)
            ema.update_parameters(model)
            lrs.append(sched.get_last_lr()[0])
        lib.optim.swa_utils.update_bn([lib.from_numpy(x) for x in data], swa)
        out = [t.detach().numpy().copy() for t in swa.state_dict().values()]
        out += [t.detach().numpy().copy() for t in ema.state_dict().values()]
        return out, lrs

    ours, our_lrs = run(gpucore)
    ref, ref_lrs = run(torch)
    np.testing.assert_allclose(our_lrs, ref_lrs, rtol=1e-12)
    assert len(ours) == len(ref)
    for a, b in zip(ours, ref):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
