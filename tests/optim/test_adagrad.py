"""gpucore.optim.Adagrad: 20 steps against a float64 numpy reference and against torch (float64,
step by step, state included), the state made at construction, a hand-computed step, float32, and
PyTorch's argument errors."""

from __future__ import annotations

import numpy as np
import optim_harness as h
import pytest

import gpucore
from gpucore import optim

CASES = [
    dict(),
    dict(lr=0.1, lr_decay=0.05),
    dict(lr=0.1, initial_accumulator_value=0.3, eps=1e-3),
    dict(lr=0.05, weight_decay=0.1, maximize=True, lr_decay=0.01),
]


def make(kw):
    return lambda m, ps: m.Adagrad(ps, **kw)


@pytest.mark.parametrize("kw", CASES)
def test_matches_the_float64_reference(kw):
    h.assert_matches_reference(make(kw), h.adagrad, kw, keys=("sum",), count=True)


@pytest.mark.skipif(h.torch is None, reason="torch is not installed")
@pytest.mark.parametrize("kw", CASES)
def test_matches_torch_step_by_step(kw):
    h.assert_matches_torch(make(kw))


def test_state_is_made_at_construction():
    ps = [gpucore.nn.Parameter(gpucore.zeros(3)), gpucore.nn.Parameter(gpucore.zeros(2, 2))]
    opt = optim.Adagrad(ps, initial_accumulator_value=0.25)
    for p in ps:
        assert opt.state[p]["step"] == 0
        np.testing.assert_array_equal(opt.state[p]["sum"].numpy(), np.full(tuple(p.shape), 0.25))
    assert set(opt.state_dict()["state"]) == {0, 1}
    # a parameter added later gets its state at its first step
    q = gpucore.nn.Parameter(gpucore.ones(2))
    opt.add_param_group({"params": [q], "lr": 0.5})
    q.grad = gpucore.ones(2)
    opt.step()
    assert opt.state[q]["step"] == 1
    np.testing.assert_allclose(q.detach().numpy(), 1 - 0.5 / (np.sqrt(1.25) + 1e-10), rtol=1e-6)


def test_two_steps_by_hand():
    # p = 0, g = 3 then 4, lr 1, lr_decay 1: s = 9, p = -3 / 3 = -1; then clr = 1 / 2,
    # s = 25, p = -1 - 0.5 * 4 / 5 = -1.4
    p = gpucore.nn.Parameter(gpucore.tensor([0.0], dtype=gpucore.float64))
    opt = optim.Adagrad([p], lr=1.0, lr_decay=1.0, eps=0.0)
    for g, want in ((3.0, -1.0), (4.0, -1.4)):
        p.grad = gpucore.tensor([g], dtype=gpucore.float64)
        opt.step()
        assert p.item() == pytest.approx(want, rel=1e-15)


def test_float32_params_follow_the_reference():
    ours, _, _ = h.run_ours(make(CASES[2]), dtype=gpucore.float32)
    want, _ = h.run_reference(h.adagrad, CASES[2])
    h.assert_steps_close(ours, want, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(lr=-0.1), "Invalid learning rate: -0.1"),
        (dict(lr_decay=-1.0), "Invalid lr_decay value: -1.0"),
        (dict(weight_decay=-1.0), "Invalid weight_decay value: -1.0"),
        (dict(initial_accumulator_value=-1.0), "Invalid initial_accumulator_value value: -1.0"),
        (dict(eps=-1.0), "Invalid epsilon value: -1.0"),
    ],
)
def test_bad_arguments(kw, message):
    h.assert_bad_argument(make(kw), message)
