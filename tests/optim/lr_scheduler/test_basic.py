"""ConstantLR, PolynomialLR and MultiplicativeLR (gpucore/optim/lr_scheduler/basic.py): 50 steps
bit for bit against torch, closed forms, the deprecated step(epoch), state dicts, errors."""

from __future__ import annotations

import math

import optim_harness as h
import pytest

import gpucore
from gpucore.optim import lr_scheduler as L

SGD = lambda m, g: m.SGD(g, lr=0.1, momentum=0.9)  # noqa: E731

CASES = {
    "constant": lambda S, o: S.ConstantLR(o, factor=0.5, total_iters=7),
    "constant_default": lambda S, o: S.ConstantLR(o),
    "polynomial": lambda S, o: S.PolynomialLR(o, total_iters=20, power=2.0),
    "polynomial_sqrt": lambda S, o: S.PolynomialLR(o, total_iters=30, power=0.5),
    "multiplicative": lambda S, o: S.MultiplicativeLR(o, lambda e: 0.95),
    "multiplicative_per_group": lambda S, o: S.MultiplicativeLR(
        o, [lambda e: 0.9, lambda e: 1.0 + 0.01 * e]
    ),
}


def lrs(make, n=50):
    return [row[0][0] for row in h.lr_sequence(gpucore, SGD, make, n)]


@pytest.mark.skipif(h.torch is None, reason="torch is not installed")
@pytest.mark.parametrize("name", CASES)
def test_sequences_match_torch_exactly(name):
    assert h.lr_sequence(gpucore, SGD, CASES[name]) == h.lr_sequence(h.torch, SGD, CASES[name])


def test_constant_lr():
    assert lrs(CASES["constant"], 10) == pytest.approx([0.05] * 7 + [0.1] * 4, rel=1e-15)


def test_polynomial_lr_follows_its_closed_form():
    want = [0.1 * (1 - min(e, 20) / 20) ** 2 for e in range(51)]
    assert lrs(CASES["polynomial"]) == pytest.approx(want, rel=1e-12, abs=1e-18)


def test_multiplicative_lr():
    assert lrs(CASES["multiplicative"], 5) == pytest.approx(
        [0.1 * 0.95**e for e in range(6)], rel=1e-14
    )


def test_step_with_epoch_uses_the_closed_form():
    opt = gpucore.optim.SGD([gpucore.nn.Parameter(gpucore.zeros(1))], lr=0.1)
    s = L.PolynomialLR(opt, total_iters=10, power=3.0)
    opt.step()
    with pytest.warns(UserWarning, match="epoch parameter"):
        s.step(4)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1 * 0.6**3, rel=1e-15)
    c = L.ConstantLR(opt, factor=0.25, total_iters=3)
    with pytest.warns(UserWarning):
        c.step(5)
    assert c.get_last_lr() == [pytest.approx(c.base_lrs[0])]


def test_state_dict_round_trip():
    opt = gpucore.optim.SGD([gpucore.nn.Parameter(gpucore.zeros(1))], lr=0.1)
    s = L.PolynomialLR(opt, total_iters=10, power=2.0)
    for _ in range(3):
        opt.step()
        s.step()
    sd = s.state_dict()
    assert "optimizer" not in sd and sd["last_epoch"] == 3
    opt2 = gpucore.optim.SGD([gpucore.nn.Parameter(gpucore.zeros(1))], lr=0.1)
    s2 = L.PolynomialLR(opt2, total_iters=1, power=1.0)
    s2.load_state_dict(sd)
    opt2.param_groups[0]["lr"] = opt.param_groups[0]["lr"]
    for _ in range(4):
        opt.step()
        s.step()
        opt2.step()
        s2.step()
        assert s.get_last_lr() == s2.get_last_lr()
    assert math.isclose(s.get_last_lr()[0], 0.1 * 0.3**2, rel_tol=1e-12)


def test_errors():
    opt = gpucore.optim.SGD([gpucore.nn.Parameter(gpucore.zeros(1))], lr=0.1)
    with pytest.raises(ValueError, match="between 0 and 1"):
        L.ConstantLR(opt, factor=1.5)
    with pytest.raises(TypeError, match="lr_lambda should be a function"):
        L.MultiplicativeLR(opt, 0.9)
    with pytest.raises(ValueError, match="Expected 1 lr_lambdas, but got 2"):
        L.MultiplicativeLR(opt, [lambda e: 1.0, lambda e: 1.0])
