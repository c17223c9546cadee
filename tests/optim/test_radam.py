"""gpucore.optim.RAdam: 20 steps against a float64 numpy reference and against torch (float64,
step by step, state included) across the switch from the un-rectified to the rectified step,
with coupled and decoupled weight decay; float32; PyTorch's argument errors."""

from __future__ import annotations

import numpy as np
import optim_harness as h
import pytest

import gpucore
from gpucore import optim

CASES = [
    dict(),
    dict(lr=0.01, betas=(0.5, 0.9)),  # rho_t > 5 from step 6 on: both branches are used
    dict(lr=0.01, betas=(0.8, 0.8), weight_decay=0.1),
    dict(lr=0.01, betas=(0.8, 0.85), weight_decay=0.1, decoupled_weight_decay=True),
    dict(lr=0.02, betas=(0.9, 0.7), maximize=True, eps=1e-4, weight_decay=0.03),
]


def make(kw):
    return lambda m, ps: m.RAdam(ps, **kw)


def test_the_cases_use_both_branches():
    b2 = CASES[1]["betas"][1]
    rho_inf = 2 / (1 - b2) - 1
    rho = [rho_inf - 2 * t * b2**t / (1 - b2**t) for t in range(1, h.STEPS + 1)]
    assert min(rho) <= 5 < max(rho)


@pytest.mark.parametrize("kw", CASES)
def test_matches_the_float64_reference(kw):
    h.assert_matches_reference(make(kw), h.radam, kw, keys=("exp_avg",))


@pytest.mark.skipif(h.torch is None, reason="torch is not installed")
@pytest.mark.parametrize("kw", CASES)
def test_matches_torch_step_by_step(kw):
    h.assert_matches_torch(make(kw))


def test_first_step_is_sgd_with_momentum():
    # step 1: rho_1 = 1 < 5, so p -= lr * m_hat = lr * g
    p = gpucore.nn.Parameter(gpucore.tensor([1.0, 2.0], dtype=gpucore.float64))
    opt = optim.RAdam([p], lr=0.1)
    p.grad = gpucore.tensor([3.0, -1.0], dtype=gpucore.float64)
    opt.step()
    np.testing.assert_allclose(p.detach().numpy(), [0.7, 2.1], rtol=1e-14)


def test_float32_params_follow_the_reference():
    ours, _, _ = h.run_ours(make(CASES[1]), dtype=gpucore.float32)
    want, _ = h.run_reference(h.radam, CASES[1])
    h.assert_steps_close(ours, want, rtol=5e-5, atol=5e-6)


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(lr=-0.1), "Invalid learning rate: -0.1"),
        (dict(eps=-1.0), "Invalid epsilon value: -1.0"),
        (dict(betas=(1.5, 0.9)), "Invalid beta parameter at index 0: 1.5"),
        (dict(betas=(0.9, 1.0)), "Invalid beta parameter at index 1: 1.0"),
        (dict(weight_decay=-1.0), "Invalid weight_decay value: -1.0"),
    ],
)
def test_bad_arguments(kw, message):
    h.assert_bad_argument(make(kw), message)
