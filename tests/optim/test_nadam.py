"""gpucore.optim.NAdam: 20 steps against a float64 numpy reference and against torch (float64,
step by step, state included), with coupled and decoupled weight decay and momentum_decay;
loading torch's state dict (mu_product a 0-d tensor); float32; PyTorch's argument errors."""

from __future__ import annotations

import optim_harness as h
import pytest

import gpucore

CASES = [
    dict(),
    dict(lr=0.01, betas=(0.8, 0.99), momentum_decay=0.01),
    dict(lr=0.01, weight_decay=0.1),
    dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True),
    dict(lr=0.02, maximize=True, momentum_decay=0.0, eps=1e-4, weight_decay=0.03),
]


def make(kw):
    return lambda m, ps: m.NAdam(ps, **kw)


@pytest.mark.parametrize("kw", CASES)
def test_matches_the_float64_reference(kw):
    opt, ps, states = h.assert_matches_reference(make(kw), h.nadam, kw, keys=("exp_avg_sq",))
    for p, st in zip(ps, states):
        assert opt.state[p]["mu_product"] == pytest.approx(st["mu_product"], rel=1e-14)


@pytest.mark.skipif(h.torch is None, reason="torch is not installed")
@pytest.mark.parametrize("kw", CASES)
def test_matches_torch_step_by_step(kw):
    h.assert_matches_torch(make(kw))


@pytest.mark.skipif(h.torch is None, reason="torch is not installed")
def test_resumes_from_torchs_state_dict():
    kw = CASES[3]
    first, second = h.GRADS[:8], h.GRADS[8:]
    _, topt, _ = h.run_torch(make(kw), grads=first)
    sd = topt.state_dict()
    converted = {
        "param_groups": sd["param_groups"],
        "state": {
            i: {k: gpucore.tensor(v.numpy()) if hasattr(v, "numpy") else v for k, v in st.items()}
            for i, st in sd["state"].items()
        },
    }
    p0 = [p.detach().numpy() for p in topt.param_groups[0]["params"]]
    theirs, _, _ = h.run_torch(lambda m, ps: _loaded(m.NAdam(ps, **kw), sd), p0=p0, grads=second)

    def ours_loaded(m, ps):
        opt = m.NAdam(ps, **kw)
        opt.load_state_dict(converted)
        assert isinstance(opt.state[ps[0]]["mu_product"], float)
        assert opt.state[ps[0]]["step"] == 8
        return opt

    ours, _, _ = h.run_ours(ours_loaded, p0=p0, grads=second)
    h.assert_steps_close(ours, theirs, rtol=1e-10)


def _loaded(opt, sd):
    opt.load_state_dict(sd)
    return opt


def test_float32_params_follow_the_reference():
    ours, _, _ = h.run_ours(make(CASES[1]), dtype=gpucore.float32)
    want, _ = h.run_reference(h.nadam, CASES[1])
    h.assert_steps_close(ours, want, rtol=5e-5, atol=5e-6)


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(lr=-0.1), "Invalid learning rate: -0.1"),
        (dict(eps=-1.0), "Invalid epsilon value: -1.0"),
        (dict(betas=(-0.5, 0.9)), "Invalid beta parameter at index 0: -0.5"),
        (dict(betas=(0.9, 1.0)), "Invalid beta parameter at index 1: 1.0"),
        (dict(weight_decay=-1.0), "Invalid weight_decay value: -1.0"),
        (dict(momentum_decay=-1.0), "Invalid momentum_decay value: -1.0"),
    ],
)
def test_bad_arguments(kw, message):
    h.assert_bad_argument(make(kw), message)
