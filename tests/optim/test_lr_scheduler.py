"""gpucore.optim.lr_scheduler: learning-rate sequences against closed forms and values recorded
from PyTorch 2.13 (torch.optim.lr_scheduler, same construction), chaining, SequentialLR,
state_dict round trips, warnings and errors."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import gpucore
from gpucore import optim
from gpucore.optim import lr_scheduler as L


def make_opt(lr=0.1, groups=1):
    ps = [gpucore.nn.Parameter(gpucore.zeros(2)) for _ in range(groups)]
    return optim.SGD([{"params": [p], "lr": lr * (i + 1)} for i, p in enumerate(ps)], lr=lr)


def lrs(make, n, lr=0.1, groups=1, group=0):
    """group['lr'] at construction and after each of n (optimizer.step, scheduler.step)."""
    opt = make_opt(lr, groups)
    s = make(opt)
    out = [opt.param_groups[group]["lr"]]
    for _ in range(n):
        opt.step()
        s.step()
        out.append(opt.param_groups[group]["lr"])
        assert s.get_last_lr() == [g["lr"] for g in opt.param_groups]
    return out


def approx(xs):
    return pytest.approx(xs, rel=1e-12, abs=1e-15)


def test_step_lr():
    assert lrs(lambda o: L.StepLR(o, step_size=2, gamma=0.1), 6) == approx(
        [0.1, 0.1, 0.01, 0.01, 1e-3, 1e-3, 1e-4]
    )


def test_multistep_lr():
    assert lrs(lambda o: L.MultiStepLR(o, milestones=[2, 5], gamma=0.5), 6) == approx(
        [0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025]
    )
    # a milestone listed twice multiplies by gamma**2
    assert lrs(lambda o: L.MultiStepLR(o, milestones=[3, 1, 3], gamma=0.5), 4) == approx(
        [0.1, 0.05, 0.05, 0.0125, 0.0125]
    )


def test_exponential_lr():
    assert lrs(lambda o: L.ExponentialLR(o, gamma=0.5), 4) == approx(
        [0.1, 0.05, 0.025, 0.0125, 0.00625]
    )


def test_cosine_annealing_lr_matches_the_closed_form():
    T, eta, base = 4, 0.01, 0.1
    got = lrs(lambda o: L.CosineAnnealingLR(o, T_max=T, eta_min=eta), 12)
    closed = [eta + (base - eta) * (1 + math.cos(math.pi * e / T)) / 2 for e in range(13)]
    assert got == pytest.approx(closed, rel=1e-13, abs=1e-16)  # past T_max too (period 2 T)
    # recorded from torch.optim.lr_scheduler.CosineAnnealingLR(T_max=4, eta_min=0.01)
    assert got == approx(
        [
            0.1,
            0.08681980515339464,
            0.05500000000000001,
            0.023180194846605363,
            0.01,
            0.023180194846605363,
            0.05500000000000002,
            0.08681980515339469,
            0.10000000000000006,
            0.0868198051533947,
            0.05500000000000005,
            0.023180194846605412,
            0.01,
        ]
    )


def test_linear_lr_warm_up():
    got = lrs(lambda o: L.LinearLR(o, start_factor=0.25, total_iters=4), 6)
    assert got == approx([0.025, 0.04375, 0.0625, 0.08125, 0.1, 0.1, 0.1])
    got = lrs(lambda o: L.LinearLR(o, start_factor=1.0, end_factor=0.5, total_iters=3), 5)
    assert got == approx([0.1, 0.1 * 5 / 6, 0.1 * 4 / 6, 0.05, 0.05, 0.05])
    with pytest.raises(ValueError, match="Starting multiplicative factor"):
        L.LinearLR(make_opt(), start_factor=0)
    with pytest.raises(ValueError, match="Ending multiplicative factor"):
        L.LinearLR(make_opt(), end_factor=1.5)


def test_lambda_lr_per_group():
    got0 = lrs(lambda o: L.LambdaLR(o, [lambda e: 0.5**e, lambda e: e + 1]), 3, groups=2)
    got1 = lrs(lambda o: L.LambdaLR(o, [lambda e: 0.5**e, lambda e: e + 1]), 3, groups=2, group=1)
    assert got0 == approx([0.1, 0.05, 0.025, 0.0125])
    assert got1 == approx([0.2, 0.4, 0.6, 0.8])
    with pytest.raises(ValueError, match="Expected 2 lr_lambdas"):
        L.LambdaLR(make_opt(groups=2), [lambda e: 1.0])


# Values recorded from PyTorch 2.13 with the same schedulers (SGD, lr 0.1).
def test_sequential_lr_warm_up_then_exponential():
    got = lrs(
        lambda o: L.SequentialLR(
            o,
            [L.LinearLR(o, start_factor=0.1, total_iters=3), L.ExponentialLR(o, gamma=0.9)],
            milestones=[3],
        ),
        8,
    )
    assert got == approx([0.01, 0.04, 0.07, 0.1, 0.09, 0.081, 0.0729, 0.06561, 0.059049])


def test_sequential_lr_warm_up_then_cosine():
    got = lrs(
        lambda o: L.SequentialLR(
            o,
            [L.LinearLR(o, start_factor=0.5, total_iters=2), L.CosineAnnealingLR(o, T_max=4)],
            milestones=[2],
        ),
        8,
    )
    assert got == pytest.approx(
        [
            0.05,
            0.07500000000000001,
            0.1,
            0.08535533905932738,
            0.05,
            0.014644660940672627,
            0.0,
            0.014644660940672622,
            0.05000000000000001,
        ],
        rel=1e-12,
        abs=1e-15,
    )


def test_sequential_lr_three_schedulers():
    got = lrs(
        lambda o: L.SequentialLR(
            o,
            [L.LambdaLR(o, lambda e: 0.5), L.StepLR(o, 2, 0.5), L.ExponentialLR(o, 0.5)],
            milestones=[2, 5],
        ),
        8,
    )
    assert got == approx([0.05, 0.05, 0.1, 0.1, 0.05, 0.1, 0.05, 0.025, 0.0125])


def test_sequential_lr_errors():
    o = make_opt()
    a = L.StepLR(o, 2)
    with pytest.raises(ValueError, match="one more"):
        L.SequentialLR(o, [a], milestones=[1])
    with pytest.raises(ValueError, match="same optimizer"):
        L.SequentialLR(o, [a, L.StepLR(make_opt(), 2)], milestones=[1])
    with pytest.raises(ValueError, match="at least one"):
        L.SequentialLR(o, [], milestones=[])


def test_chained_schedulers_compose():
    # Two schedulers on one optimizer: their factors multiply; each get_last_lr reports the
    # group lr right after its own step (recorded from PyTorch 2.13).
    opt = make_opt(lr=1.0)
    a = L.ExponentialLR(opt, 0.9)
    b = L.StepLR(opt, 2, 0.1)
    seen = [(opt.param_groups[0]["lr"], a.get_last_lr()[0], b.get_last_lr()[0])]
    for _ in range(6):
        opt.step()
        a.step()
        b.step()
        seen.append((opt.param_groups[0]["lr"], a.get_last_lr()[0], b.get_last_lr()[0]))
    want = [
        (1.0, 1.0, 1.0),
        (0.9, 0.9, 0.9),
        (0.081, 0.81, 0.081),
        (0.0729, 0.0729, 0.0729),
        (0.006561, 0.06561, 0.006561),
        (0.0059049, 0.0059049, 0.0059049),
        (0.00053144100, 0.0053144100, 0.00053144100),
    ]
    np.testing.assert_allclose(np.array(seen), np.array(want), rtol=1e-12)


def test_initial_lr_and_base_lrs():
    opt = make_opt(groups=2)
    s = L.StepLR(opt, 1, 0.5)
    assert [g["initial_lr"] for g in opt.param_groups] == [0.1, 0.2]
    assert s.base_lrs == [0.1, 0.2]
    assert s.last_epoch == 0
    with pytest.raises(KeyError, match="initial_lr"):
        L.StepLR(make_opt(), 1, last_epoch=3)


@pytest.mark.parametrize(
    "make",
    [
        lambda o: L.StepLR(o, 3, 0.5),
        lambda o: L.MultiStepLR(o, [2, 4, 4], 0.5),
        lambda o: L.ExponentialLR(o, 0.8),
        lambda o: L.CosineAnnealingLR(o, 5, 0.001),
        lambda o: L.LinearLR(o, 0.2, 1.0, 4),
        lambda o: L.LambdaLR(o, lambda e: 1 / (e + 1)),
        lambda o: L.SequentialLR(
            o, [L.LinearLR(o, 0.5, total_iters=2), L.ExponentialLR(o, 0.9)], [2]
        ),
    ],
)
def test_state_dict_round_trip(make, tmp_path):
    straight = lrs(make, 10)

    opt = make_opt()
    s = make(opt)
    for _ in range(4):
        opt.step()
        s.step()
    path = tmp_path / "sched.safetensors"
    gpucore.save({"sched": s.state_dict(), "opt": opt.state_dict()}, path)
    ck = gpucore.load(path)

    opt2 = make_opt()
    s2 = make(opt2)
    opt2.load_state_dict(ck["opt"])
    s2.load_state_dict(ck["sched"])
    assert s2.last_epoch == s.last_epoch
    got = [opt2.param_groups[0]["lr"]]
    for _ in range(6):
        opt2.step()
        s2.step()
        got.append(opt2.param_groups[0]["lr"])
    assert got == approx(straight[4:])


def test_lambda_state_dict_keeps_callable_object_state():
    class Decay:
        def __init__(self):
            self.rate = 0.5

        def __call__(self, e):
            return self.rate**e

    opt = make_opt()
    fn = Decay()
    fn.rate = 0.25
    sd = L.LambdaLR(opt, fn).state_dict()
    assert sd["lr_lambdas"] == [{"rate": 0.25}]
    assert L.LambdaLR(make_opt(), lambda e: 1.0).state_dict()["lr_lambdas"] == [None]
    other = Decay()
    L.LambdaLR(make_opt(), other).load_state_dict(sd)
    assert other.rate == 0.25


def test_step_with_epoch_uses_the_closed_form_and_warns():
    opt = make_opt()
    s = L.StepLR(opt, 2, 0.1)
    opt.step()
    with pytest.warns(UserWarning, match="deprecated"):
        s.step(5)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1 * 0.1**2)


def test_warnings():
    opt = make_opt()
    s = L.ExponentialLR(opt, 0.5)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        s.step()
    with pytest.warns(UserWarning, match="get_last_lr"):
        s.get_lr()
    opt = make_opt()
    s = L.ExponentialLR(opt, 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            opt.step()
            s.step()


def test_scheduler_drives_the_optimizer():
    p = gpucore.nn.Parameter(gpucore.tensor([1.0], dtype=gpucore.float64))
    opt = optim.SGD([p], lr=1.0)
    s = L.StepLR(opt, 1, gamma=0.5)
    for _ in range(3):
        p.grad = gpucore.tensor([1.0], dtype=gpucore.float64)
        opt.step()
        s.step()
    assert p.item() == pytest.approx(1.0 - 1.0 - 0.5 - 0.25)


def test_non_optimizer_is_rejected():
    with pytest.raises(TypeError, match="is not an Optimizer"):
        L.StepLR(object(), 1)
