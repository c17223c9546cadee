"""ChainedScheduler (gpucore/optim/lr_scheduler/composite.py): factors of chained schedulers
multiply, bit for bit against torch over 50 steps, also inside SequentialLR; state dicts;
errors. SequentialLR itself: tests/optim/test_lr_scheduler.py."""

from __future__ import annotations

import optim_harness as h
import pytest

import gpucore
from gpucore.optim import lr_scheduler as L

SGD = lambda m, g: m.SGD(g, lr=0.1, momentum=0.9)  # noqa: E731

CASES = {
    "constant_then_exponential": lambda S, o: S.ChainedScheduler(
        [S.ConstantLR(o, factor=0.1, total_iters=2), S.ExponentialLR(o, gamma=0.9)]
    ),
    "three": lambda S, o: S.ChainedScheduler(
        [
            S.LinearLR(o, start_factor=0.2, total_iters=5),
            S.StepLR(o, step_size=7, gamma=0.5),
            S.PolynomialLR(o, total_iters=40, power=1.5),
        ],
        optimizer=o,
    ),
    "sequential_of_constant_and_polynomial": lambda S, o: S.SequentialLR(
        o, [S.ConstantLR(o, factor=0.1, total_iters=2), S.PolynomialLR(o, total_iters=30)], [5]
    ),
}


@pytest.mark.skipif(h.torch is None, reason="torch is not installed")
@pytest.mark.parametrize("name", CASES)
def test_sequences_match_torch_exactly(name):
    assert h.lr_sequence(gpucore, SGD, CASES[name]) == h.lr_sequence(h.torch, SGD, CASES[name])


def test_factors_multiply():
    out = h.lr_sequence(gpucore, SGD, CASES["constant_then_exponential"], n=4)
    want = [0.01, 0.009, 0.081, 0.0729, 0.06561]
    assert [row[0][0] for row in out] == pytest.approx(want, rel=1e-14)


def test_state_dict_holds_every_scheduler():
    opt = SGD(gpucore.optim, [gpucore.nn.Parameter(gpucore.zeros(1))])
    s = CASES["constant_then_exponential"](L, opt)
    for _ in range(3):
        opt.step()
        s.step()
    sd = s.state_dict()
    assert [d["last_epoch"] for d in sd["_schedulers"]] == [3, 3]
    opt2 = SGD(gpucore.optim, [gpucore.nn.Parameter(gpucore.zeros(1))])
    s2 = CASES["constant_then_exponential"](L, opt2)
    s2.load_state_dict(sd)
    opt2.param_groups[0]["lr"] = opt.param_groups[0]["lr"]
    opt.step(), s.step(), opt2.step(), s2.step()
    assert s2.get_last_lr() == s.get_last_lr()


def test_errors():
    opt = SGD(gpucore.optim, [gpucore.nn.Parameter(gpucore.zeros(1))])
    other = SGD(gpucore.optim, [gpucore.nn.Parameter(gpucore.zeros(1))])
    with pytest.raises(ValueError, match="at least one scheduler"):
        L.ChainedScheduler([])
    with pytest.raises(ValueError, match="same optimizer"):
        L.ChainedScheduler([L.ExponentialLR(opt, 0.9), L.ExponentialLR(other, 0.9)])
    with pytest.raises(ValueError, match="does not support `ReduceLROnPlateau`"):
        L.ChainedScheduler([L.ExponentialLR(opt, 0.9), L.ReduceLROnPlateau(opt)])
    with pytest.raises(TypeError, match="should have `optimizer`"):
        L.ChainedScheduler([L.ExponentialLR(opt, 0.9), object()])
