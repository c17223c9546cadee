"""gpucore.optim.Adamax: 20 steps against a float64 numpy reference and against torch (float64,
step by step, state included), a hand-computed step, float32, and PyTorch's argument errors."""

from __future__ import annotations

import numpy as np
import optim_harness as h
import pytest

import gpucore
from gpucore import optim

CASES = [
    dict(),
    dict(lr=0.01, betas=(0.6, 0.99)),
    dict(lr=0.02, weight_decay=0.1, eps=1e-4),
    dict(lr=0.01, betas=(0.3, 0.5), maximize=True, weight_decay=0.02),
]


def make(kw):
    return lambda m, ps: m.Adamax(ps, **kw)


@pytest.mark.parametrize("kw", CASES)
def test_matches_the_float64_reference(kw):
    h.assert_matches_reference(make(kw), h.adamax, kw, keys=("exp_inf",))


@pytest.mark.skipif(h.torch is None, reason="torch is not installed")
@pytest.mark.parametrize("kw", CASES)
def test_matches_torch_step_by_step(kw):
    h.assert_matches_torch(make(kw))


def test_first_step_is_lr_times_the_sign():
    # step 1: m = (1 - b1) g, u = |g| + eps, p -= lr / (1 - b1) * m / u = lr * g / (|g| + eps)
    p = gpucore.nn.Parameter(gpucore.tensor([1.0, 1.0], dtype=gpucore.float64))
    opt = optim.Adamax([p], lr=0.1, eps=0.0)
    p.grad = gpucore.tensor([5.0, -0.25], dtype=gpucore.float64)
    opt.step()
    np.testing.assert_allclose(p.detach().numpy(), [0.9, 1.1], rtol=1e-15)


def test_float32_params_follow_the_reference():
    ours, _, _ = h.run_ours(make(CASES[2]), dtype=gpucore.float32)
    want, _ = h.run_reference(h.adamax, CASES[2])
    h.assert_steps_close(ours, want, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(lr=-0.1), "Invalid learning rate: -0.1"),
        (dict(eps=-1.0), "Invalid epsilon value: -1.0"),
        (dict(betas=(1.0, 0.9)), "Invalid beta parameter at index 0: 1.0"),
        (dict(betas=(0.9, -0.1)), "Invalid beta parameter at index 1: -0.1"),
        (dict(weight_decay=-1.0), "Invalid weight_decay value: -1.0"),
    ],
)
def test_bad_arguments(kw, message):
    h.assert_bad_argument(make(kw), message)
