"""CyclicLR, OneCycleLR and CosineAnnealingWarmRestarts (gpucore/optim/lr_scheduler/cyclic.py):
learning rates and cycled momentum (SGD's momentum, Adam's beta1) bit for bit against torch over
50 steps, the closed forms without torch, fractional epochs, state dicts, errors."""

from __future__ import annotations

import math

import optim_harness as h
import pytest

import gpucore
from gpucore.optim import lr_scheduler as L

SGD = lambda m, g: m.SGD(g, lr=0.1, momentum=0.9)  # noqa: E731
ADAM = lambda m, g: m.Adam(g, lr=0.1)  # noqa: E731
PLAIN = lambda m, g: m.Adagrad(g, lr=0.1)  # noqa: E731


class Halving:
    """A callable object as scale_fn (its attributes are saved in the state dict)."""

    def __init__(self):
        self.base = 0.5

    def __call__(self, x):
        return self.base**x


CASES = {
    "onecycle_cos": (SGD, lambda S, o: S.OneCycleLR(o, max_lr=1.0, total_steps=50)),
    "onecycle_linear_three_phase_adam": (
        ADAM,
        lambda S, o: S.OneCycleLR(
            o, max_lr=[1.0, 0.5], total_steps=50, anneal_strategy="linear", three_phase=True
        ),
    ),
    "onecycle_epochs": (
        SGD,
        lambda S, o: S.OneCycleLR(
            o,
            1.0,
            epochs=5,
            steps_per_epoch=10,
            pct_start=0.25,
            div_factor=10.0,
            final_div_factor=100.0,
            base_momentum=0.7,
            max_momentum=[0.99, 0.9],
        ),
    ),
    "onecycle_no_momentum": (
        PLAIN,
        lambda S, o: S.OneCycleLR(o, max_lr=0.3, total_steps=60, cycle_momentum=False),
    ),
    "cyclic_triangular": (SGD, lambda S, o: S.CyclicLR(o, 0.01, 0.1, step_size_up=4)),
    "cyclic_triangular2": (
        SGD,
        lambda S, o: S.CyclicLR(
            o, [0.01, 0.02], 0.1, step_size_up=3, step_size_down=5, mode="triangular2"
        ),
    ),
    "cyclic_exp_range_adam": (
        ADAM,
        lambda S, o: S.CyclicLR(o, 0.01, 0.1, step_size_up=4, mode="exp_range", gamma=0.97),
    ),
    "cyclic_scale_fn": (
        SGD,
        lambda S, o: S.CyclicLR(
            o, 0.01, 0.1, step_size_up=4, scale_fn=lambda x: 0.5**x, scale_mode="iterations"
        ),
    ),
    "cyclic_no_momentum": (
        PLAIN,
        lambda S, o: S.CyclicLR(o, 0.001, 0.01, step_size_up=6, cycle_momentum=False),
    ),
    "warm_restarts": (SGD, lambda S, o: S.CosineAnnealingWarmRestarts(o, T_0=5)),
    "warm_restarts_mult": (
        SGD,
        lambda S, o: S.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=0.001),
    ),
}


@pytest.mark.skipif(h.torch is None, reason="torch is not installed")
@pytest.mark.parametrize("name", CASES)
def test_sequences_match_torch_exactly(name):
    opt, sched = CASES[name]
    assert h.lr_sequence(gpucore, opt, sched) == h.lr_sequence(h.torch, opt, sched)


def _lrs(name, n=50, group=0):
    opt, sched = CASES[name]
    return h.lr_sequence(gpucore, opt, sched, n)


def test_onecycle_closed_form_and_momentum():
    rows = _lrs("onecycle_cos", 49)
    up = 0.3 * 50 - 1  # the end of the warm-up phase

    def cos_anneal(a, b, pct):
        return b + (a - b) / 2 * (math.cos(math.pi * pct) + 1)

    for t, row in enumerate(rows):
        lr, momentum, _ = row[0]
        if t <= up:
            want, want_m = cos_anneal(0.04, 1.0, t / up), cos_anneal(0.95, 0.85, t / up)
        else:
            pct = (t - up) / (49 - up)
            want, want_m = cos_anneal(1.0, 0.04 / 1e4, pct), cos_anneal(0.85, 0.95, pct)
        assert lr == pytest.approx(want, rel=1e-12, abs=1e-15)
        assert momentum == pytest.approx(want_m, rel=1e-12)
    assert rows[0][0][0] == pytest.approx(1.0 / 25) and rows[-1][0][0] == pytest.approx(4e-6)


def test_onecycle_adam_cycles_beta1():
    rows = _lrs("onecycle_linear_three_phase_adam", 49)
    beta1 = [row[0][2][0] for row in rows]
    assert beta1[0] == pytest.approx(0.95) and min(beta1) == pytest.approx(0.85)
    assert all(row[0][2][1] == 0.999 for row in rows)  # beta2 is kept
    lr = [row[1][0] for row in rows]
    assert max(lr) == pytest.approx(0.5) and lr[0] == pytest.approx(0.02)


def test_onecycle_stepping_past_the_end_raises():
    opt = SGD(gpucore.optim, [gpucore.nn.Parameter(gpucore.zeros(1))])
    s = L.OneCycleLR(opt, max_lr=0.1, total_steps=3)
    for _ in range(3):
        opt.step()
        s.step()
    with pytest.raises(ValueError, match="Tried to step 4 times"):
        s.step()


def test_cyclic_triangle_closed_form():
    rows = _lrs("cyclic_triangular", 16)
    want = [0.01 + 0.09 * (1 - abs(t % 8 - 4) / 4) for t in range(17)]
    assert [r[0][0] for r in rows] == pytest.approx(want, rel=1e-12)
    assert [r[0][1] for r in rows] == pytest.approx(
        [0.9 - 0.1 * (1 - abs(t % 8 - 4) / 4) for t in range(17)], rel=1e-12
    )
    # triangular2 halves the amplitude every cycle
    peaks = [r[0][0] for r in _lrs("cyclic_triangular2", 24)][3::8]
    assert peaks == pytest.approx([0.1, 0.01 + 0.09 / 2, 0.01 + 0.09 / 4], rel=1e-12)


def test_cyclic_sets_the_base_lr_and_saves_a_callable_scale_fn():
    opt = SGD(gpucore.optim, [gpucore.nn.Parameter(gpucore.zeros(1))])
    fn = Halving()
    s = L.CyclicLR(opt, 0.01, 0.1, step_size_up=2, scale_fn=fn)
    assert opt.param_groups[0]["lr"] == 0.01 and opt.param_groups[0]["momentum"] == 0.9
    sd = s.state_dict()
    assert sd["_scale_fn_custom"] == {"base": 0.5}
    fn2 = Halving()
    fn2.base = 0.1
    opt2 = SGD(gpucore.optim, [gpucore.nn.Parameter(gpucore.zeros(1))])
    s2 = L.CyclicLR(opt2, 0.01, 0.1, step_size_up=2, scale_fn=fn2)
    s2.load_state_dict(sd)
    assert fn2.base == 0.5
    plain = L.CyclicLR(opt2, 0.01, 0.1, mode="exp_range", gamma=0.9).state_dict()
    assert plain["_scale_fn_custom"] is None


def test_warm_restarts_closed_form_and_fractional_epochs():
    rows = _lrs("warm_restarts_mult", 21)
    starts = [0, 3, 9, 21]  # periods of 3, 6, 12
    for t, row in enumerate(rows):
        k = max(i for i, s in enumerate(starts) if s <= t)
        t_cur, t_i = t - starts[k], 3 * 2**k
        want = 0.001 + (0.1 - 0.001) * (1 + math.cos(math.pi * t_cur / t_i)) / 2
        assert row[0][0] == pytest.approx(want, rel=1e-12)
    opt = SGD(gpucore.optim, [gpucore.nn.Parameter(gpucore.zeros(1))])
    s = L.CosineAnnealingWarmRestarts(opt, T_0=4, T_mult=2)
    opt.step()
    s.step(5.5)  # in the second period (4 .. 12): T_cur = 1.5, T_i = 8
    assert s.T_i == 8 and s.T_cur == 1.5 and s.last_epoch == 5
    assert s.get_last_lr()[0] == pytest.approx(0.05 * (1 + math.cos(math.pi * 1.5 / 8)))


@pytest.mark.parametrize("name", ["onecycle_cos", "cyclic_exp_range_adam", "warm_restarts"])
def test_state_dict_round_trip(name, tmp_path):
    make_opt, make = CASES[name]
    opt = make_opt(gpucore.optim, [gpucore.nn.Parameter(gpucore.zeros(1))])
    s = make(L, opt)
    for _ in range(7):
        opt.step()
        s.step()
    path = tmp_path / "sched.safetensors"
    gpucore.save({"s": s.state_dict(), "o": opt.state_dict()}, path)
    opt2 = make_opt(gpucore.optim, [gpucore.nn.Parameter(gpucore.zeros(1))])
    s2 = make(L, opt2)
    ck = gpucore.load(path)
    opt2.load_state_dict(ck["o"])
    s2.load_state_dict(ck["s"])
    for _ in range(10):
        opt.step(), s.step(), opt2.step(), s2.step()
        assert s2.get_last_lr() == s.get_last_lr()
        assert opt2.param_groups[0].get("momentum") == opt.param_groups[0].get("momentum")


def test_errors():
    opt = SGD(gpucore.optim, [gpucore.nn.Parameter(gpucore.zeros(1))])
    plain = PLAIN(gpucore.optim, [gpucore.nn.Parameter(gpucore.zeros(1))])
    with pytest.raises(ValueError, match="either total_steps OR"):
        L.OneCycleLR(opt, max_lr=0.1)
    with pytest.raises(ValueError, match="Expected positive integer total_steps"):
        L.OneCycleLR(opt, max_lr=0.1, total_steps=0)
    with pytest.raises(ValueError, match="Expected float between 0 and 1 pct_start"):
        L.OneCycleLR(opt, max_lr=0.1, total_steps=10, pct_start=1.5)
    with pytest.raises(ValueError, match="anneal_strategy must be one of"):
        L.OneCycleLR(opt, max_lr=0.1, total_steps=10, anneal_strategy="exp")
    with pytest.raises(ValueError, match="max_lr must have the same length"):
        L.OneCycleLR(opt, max_lr=[0.1, 0.2], total_steps=10)
    with pytest.raises(ValueError, match="must support momentum or beta1"):
        L.OneCycleLR(plain, max_lr=0.1, total_steps=10)
    with pytest.raises(ValueError, match="must support momentum or beta1"):
        L.CyclicLR(plain, 0.01, 0.1)
    with pytest.raises(ValueError, match="mode is invalid and scale_fn is None"):
        L.CyclicLR(opt, 0.01, 0.1, mode="sawtooth")
    with pytest.raises(ValueError, match="Expected positive integer T_0"):
        L.CosineAnnealingWarmRestarts(opt, T_0=0)
    with pytest.raises(ValueError, match="Expected integer T_mult >= 1"):
        L.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=0)
    s = L.CosineAnnealingWarmRestarts(opt, T_0=2)
    with pytest.raises(ValueError, match="Expected non-negative epoch"):
        s.step(-1)
    with pytest.raises(TypeError, match="is not an Optimizer"):
        L.CyclicLR(object(), 0.01, 0.1)
