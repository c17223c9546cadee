"""Argument validation as PyTorch's: invalid parameters and values outside the support raise
ValueError with PyTorch's messages; validate_args=False and
Distribution.set_default_validate_args(False) turn the checks off."""

from __future__ import annotations

import pytest

import gpucore as gc

D = gc.distributions

# each builds something invalid with the library ``lib`` (gpucore or torch)
BAD = {
    "negative scale": lambda lib: lib.distributions.Normal(lib.tensor([0.0]), lib.tensor([-1.0])),
    "probs above one": lambda lib: lib.distributions.Bernoulli(probs=lib.tensor([1.5])),
    "probs and logits": lambda lib: lib.distributions.Bernoulli(probs=0.3, logits=0.1),
    "no probs": lambda lib: lib.distributions.Categorical(),
    "bad simplex": lambda lib: lib.distributions.Dirichlet(lib.tensor([1.0, -1.0])),
    "0-d concentration": lambda lib: lib.distributions.Dirichlet(lib.tensor(1.0)),
    "mvn no covariance": lambda lib: lib.distributions.MultivariateNormal(lib.zeros(2)),
    "mvn not pd": lambda lib: lib.distributions.MultivariateNormal(
        lib.zeros(2), lib.tensor([[1.0, 2.0], [2.0, 1.0]])
    ),
    "bernoulli value": lambda lib: lib.distributions.Bernoulli(probs=lib.tensor([0.5])).log_prob(
        lib.tensor([0.5])
    ),
    "categorical value": lambda lib: lib.distributions.Categorical(lib.tensor([0.5, 0.5])).log_prob(
        lib.tensor([2.0])
    ),
    "unbroadcastable value": lambda lib: lib.distributions.Normal(
        lib.zeros(3), lib.ones(3)
    ).log_prob(lib.zeros(4)),
    "value not a tensor": lambda lib: lib.distributions.Normal(0.0, 1.0).log_prob(1.0),
    "event shape": lambda lib: lib.distributions.Dirichlet(lib.ones(3)).log_prob(lib.ones(2) / 2),
    "uniform outside": lambda lib: lib.distributions.Uniform(0.0, 1.0).log_prob(lib.tensor(2.0)),
    "low above high": lambda lib: lib.distributions.Uniform(lib.tensor(1.0), lib.tensor(0.0)),
}


def _message(build, lib) -> str:
    with pytest.raises(ValueError) as info:
        build(lib)
    return str(info.value)


@pytest.mark.parametrize("case", sorted(BAD))
def test_invalid_arguments_raise_value_error(case):
    msg = _message(BAD[case], gc)
    assert msg
    try:
        import torch
    except ImportError:
        return
    want = _message(BAD[case], torch)
    # the same text up to the library's name for its types (torch.Size / gpucore.Size)
    assert msg.split("\n")[0].replace("gpucore", "torch") == want.split("\n")[0], (msg, want)


def test_validate_args_false_skips_the_checks():
    d = D.Normal(gc.tensor([0.0]), gc.tensor([-1.0]), validate_args=False)
    assert tuple(d.log_prob(gc.tensor([0.0])).shape) == (1,)
    b = D.Bernoulli(probs=gc.tensor([0.5]), validate_args=False)
    b.log_prob(gc.tensor([0.5]))  # outside the support, not checked


def test_set_default_validate_args():
    old = D.Distribution._validate_args
    try:
        D.Distribution.set_default_validate_args(False)
        D.Normal(gc.tensor([0.0]), gc.tensor([-1.0]))  # accepted
        D.Distribution.set_default_validate_args(True)
        with pytest.raises(ValueError):
            D.Normal(gc.tensor([0.0]), gc.tensor([-1.0]))
        with pytest.raises(ValueError):
            D.Distribution.set_default_validate_args("yes")
    finally:
        D.Distribution._validate_args = old


def test_validate_args_true_overrides_the_default():
    old = D.Distribution._validate_args
    try:
        D.Distribution.set_default_validate_args(False)
        with pytest.raises(ValueError):
            D.Normal(gc.tensor([0.0]), gc.tensor([-1.0]), validate_args=True)
    finally:
        D.Distribution._validate_args = old


def test_repr_and_sample_n():
    assert repr(D.Normal(0.0, 1.0)) == "Normal(loc: 0.0, scale: 1.0)"
    assert repr(D.Normal(gc.zeros(3), gc.ones(3))).startswith("Normal(loc: gpucore.Size([3])")
    with pytest.warns(FutureWarning):
        assert tuple(D.Normal(0.0, 1.0).sample_n(4).shape) == (4,)
