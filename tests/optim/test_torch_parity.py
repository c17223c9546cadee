"""gpucore.optim against torch.optim (skipped without torch): 10 steps from identical
parameters on the same loss, float32 and float64; scheduler sequences bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import gpucore
from gpucore import optim
from gpucore.optim import lr_scheduler as L

torch = pytest.importorskip("torch")

SHAPES = [(5, 4), (4,), (3, 3, 2)]


def _init():
    rng = np.random.default_rng(21)
    return [rng.standard_normal(s) for s in SHAPES], [rng.standard_normal(s) for s in SHAPES]


def _run_gpucore(make, dtype, steps=10, groups=None):
    p0, tgt = _init()
    dt = gpucore.float32 if dtype == "float32" else gpucore.float64
    ps = [gpucore.nn.Parameter(gpucore.tensor(a, dtype=dt)) for a in p0]
    ts = [gpucore.tensor(t, dtype=dt) for t in tgt]
    opt = make(optim, ps if groups is None else groups(ps))
    for i in range(steps):
        opt.zero_grad()
        loss = sum(
            (((p - t) ** 2) * (1.0 + k + 0.1 * i)).sum() for k, (p, t) in enumerate(zip(ps, ts))
        )
        loss.backward()
        opt.step()
    return [p.detach().numpy() for p in ps]


def _run_torch(make, dtype, steps=10, groups=None):
    p0, tgt = _init()
    dt = torch.float32 if dtype == "float32" else torch.float64
    ps = [torch.nn.Parameter(torch.tensor(a, dtype=dt)) for a in p0]
    ts = [torch.tensor(t, dtype=dt) for t in tgt]
    opt = make(torch.optim, ps if groups is None else groups(ps))
    for i in range(steps):
        opt.zero_grad()
        loss = sum(
            (((p - t) ** 2) * (1.0 + k + 0.1 * i)).sum() for k, (p, t) in enumerate(zip(ps, ts))
        )
        loss.backward()
        opt.step()
    return [p.detach().numpy() for p in ps]


CASES = {
    "sgd": lambda m, ps: m.SGD(ps, lr=0.01),
    "sgd_momentum_dampening": lambda m, ps: m.SGD(ps, lr=0.01, momentum=0.9, dampening=0.2),
    "sgd_nesterov_wd": lambda m, ps: m.SGD(
        ps, lr=0.01, momentum=0.9, nesterov=True, weight_decay=0.05
    ),
    "sgd_maximize": lambda m, ps: m.SGD(ps, lr=0.001, momentum=0.5, maximize=True),
    "adam": lambda m, ps: m.Adam(ps, lr=0.01),
    "adam_wd_amsgrad": lambda m, ps: m.Adam(ps, lr=0.01, weight_decay=0.1, amsgrad=True),
    "adam_betas_maximize": lambda m, ps: m.Adam(
        ps, lr=0.001, betas=(0.4, 0.9), eps=1e-6, maximize=True
    ),
    "adamw": lambda m, ps: m.AdamW(ps, lr=0.01),
    "adamw_amsgrad": lambda m, ps: m.AdamW(ps, lr=0.01, weight_decay=0.3, amsgrad=True),
    "rmsprop": lambda m, ps: m.RMSprop(ps, lr=0.01),
    "rmsprop_centered_momentum": lambda m, ps: m.RMSprop(
        ps, lr=0.01, centered=True, momentum=0.9, weight_decay=0.01
    ),
    "rmsprop_alpha_maximize": lambda m, ps: m.RMSprop(
        ps, lr=0.001, alpha=0.8, momentum=0.3, maximize=True
    ),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", list(CASES))
def test_ten_steps_match_torch(name, dtype):
    ours = _run_gpucore(CASES[name], dtype)
    theirs = _run_torch(CASES[name], dtype)
    tol = dict(rtol=2e-5, atol=2e-6) if dtype == "float32" else dict(rtol=1e-11, atol=1e-13)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, **tol)


def test_param_groups_match_torch():
    def groups(ps):
        return [
            {"params": ps[:1], "lr": 0.05, "momentum": 0.0},
            {"params": ps[1:], "weight_decay": 0.1},
        ]

    def make(m, gs):
        return m.SGD(gs, lr=0.01, momentum=0.9)

    for a, b in zip(
        _run_gpucore(make, "float64", groups=groups), _run_torch(make, "float64", groups=groups)
    ):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_state_dict_layout_matches_torch():
    def make(m, ps):
        return m.Adam(ps, lr=0.01, amsgrad=True)

    p0, _ = _init()
    ours = make(optim, [gpucore.nn.Parameter(gpucore.tensor(a)) for a in p0])
    theirs = make(torch.optim, [torch.nn.Parameter(torch.tensor(a)) for a in p0])
    for opt, ps in (
        (ours, ours.param_groups[0]["params"]),
        (theirs, theirs.param_groups[0]["params"]),
    ):
        for p in ps:
            p.grad = p.detach() * 0 + 1
        opt.step()
    a, b = ours.state_dict(), theirs.state_dict()
    assert set(a["state"]) == set(b["state"])
    for i in a["state"]:
        assert set(a["state"][i]) == set(b["state"][i])
        assert a["state"][i]["step"] == int(b["state"][i]["step"])
    ga, gb = a["param_groups"][0], b["param_groups"][0]
    assert ga["params"] == gb["params"]
    for k, v in ga.items():
        assert gb[k] == v, k


def _torch_lrs(make, n):
    import warnings

    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = make(torch.optim.lr_scheduler, opt)
        out = [opt.param_groups[0]["lr"]]
        for _ in range(n):
            opt.step()
            s.step()
            out.append(opt.param_groups[0]["lr"])
    return out


def _our_lrs(make, n):
    p = gpucore.nn.Parameter(gpucore.zeros(1))
    opt = optim.SGD([p], lr=0.1)
    s = make(L, opt)
    out = [opt.param_groups[0]["lr"]]
    for _ in range(n):
        opt.step()
        s.step()
        out.append(opt.param_groups[0]["lr"])
    return out


SCHEDULERS = {
    "step": lambda m, o: m.StepLR(o, step_size=3, gamma=0.3),
    "multistep": lambda m, o: m.MultiStepLR(o, milestones=[2, 6, 6, 9], gamma=0.7),
    "exponential": lambda m, o: m.ExponentialLR(o, gamma=0.93),
    "cosine": lambda m, o: m.CosineAnnealingLR(o, T_max=7, eta_min=0.002),
    "linear": lambda m, o: m.LinearLR(o, start_factor=0.1, end_factor=0.9, total_iters=8),
    "lambda": lambda m, o: m.LambdaLR(o, lambda e: 1.0 / (1 + e) ** 0.5),
    "sequential": lambda m, o: m.SequentialLR(
        o,
        [m.LinearLR(o, 0.2, total_iters=4), m.CosineAnnealingLR(o, T_max=10, eta_min=1e-4)],
        milestones=[4],
    ),
    "sequential3": lambda m, o: m.SequentialLR(
        o,
        [m.ExponentialLR(o, 0.9), m.StepLR(o, 2, 0.5), m.MultiStepLR(o, [1, 3], 0.1)],
        milestones=[3, 7],
    ),
}


@pytest.mark.parametrize("name", list(SCHEDULERS))
def test_scheduler_sequences_match_torch_exactly(name):
    assert _our_lrs(SCHEDULERS[name], 25) == _torch_lrs(SCHEDULERS[name], 25)
