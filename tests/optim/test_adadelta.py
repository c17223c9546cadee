"""gpucore.optim.Adadelta: 20 steps against a float64 numpy reference and against torch (float64,
step by step, state included), a hand-computed step, float32, and PyTorch's argument errors."""

from __future__ import annotations

import numpy as np
import optim_harness as h
import pytest

import gpucore
from gpucore import optim

CASES = [
    dict(),
    dict(lr=0.5, rho=0.8),
    dict(lr=0.3, eps=1e-3, weight_decay=0.1),
    dict(lr=0.2, rho=0.95, maximize=True, weight_decay=0.05),
]


def make(kw):
    return lambda m, ps: m.Adadelta(ps, **kw)


@pytest.mark.parametrize("kw", CASES)
def test_matches_the_float64_reference(kw):
    h.assert_matches_reference(make(kw), h.adadelta, kw, keys=("acc_delta",), count=True)


@pytest.mark.skipif(h.torch is None, reason="torch is not installed")
@pytest.mark.parametrize("kw", CASES)
def test_matches_torch_step_by_step(kw):
    h.assert_matches_torch(make(kw))


def test_one_step_by_hand():
    # p = 1, g = 2, lr 1, rho 0.5, eps 1: v = 0.5 * 4 = 2, delta = sqrt(0 + 1) / sqrt(2 + 1) * 2,
    # u = 0.5 * delta**2, p = 1 - delta
    p = gpucore.nn.Parameter(gpucore.tensor([1.0], dtype=gpucore.float64))
    opt = optim.Adadelta([p], lr=1.0, rho=0.5, eps=1.0)
    p.grad = gpucore.tensor([2.0], dtype=gpucore.float64)
    opt.step()
    delta = 2 / np.sqrt(3)
    assert p.item() == pytest.approx(1 - delta, rel=1e-15)
    assert opt.state[p]["acc_delta"].item() == pytest.approx(0.5 * delta**2, rel=1e-15)


def test_float32_params_follow_the_reference():
    ours, _, ps = h.run_ours(make(CASES[1]), dtype=gpucore.float32)
    assert ps[0].dtype is gpucore.float32
    want, _ = h.run_reference(h.adadelta, CASES[1])
    h.assert_steps_close(ours, want, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(lr=-0.1), "Invalid learning rate: -0.1"),
        (dict(rho=1.5), "Invalid rho value: 1.5"),
        (dict(rho=-0.1), "Invalid rho value: -0.1"),
        (dict(eps=-1e-6), "Invalid epsilon value: -1e-06"),
        (dict(weight_decay=-1.0), "Invalid weight_decay value: -1.0"),
    ],
)
def test_bad_arguments(kw, message):
    h.assert_bad_argument(make(kw), message)
