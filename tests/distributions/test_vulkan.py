"""Distributions whose parameters live on the Vulkan device give the CPU's values: log_prob,
entropy, cdf, KL, rsample with its gradients (the same Philox stream on both), and the
composed samplers (gamma, Dirichlet, Poisson, binomial, categorical) run there."""

from __future__ import annotations

import numpy as np
import pytest
from dist_cases import CASES_ALL

import gpucore as gc

D = gc.distributions
RNG = np.random.default_rng(8)
LOC = RNG.normal(size=(4, 3)).astype(np.float32)
SCALE = RNG.uniform(0.5, 2.0, (4, 3)).astype(np.float32)
CONC = RNG.uniform(0.3, 5.0, (4, 3)).astype(np.float32)


def _on(device):
    return lambda a: gc.tensor(a, device=device)


@pytest.mark.parametrize(
    "build",
    [
        lambda t: D.Normal(t(LOC), t(SCALE)),
        lambda t: D.Gamma(t(CONC), t(SCALE)),
        lambda t: D.Beta(t(CONC), t(SCALE)),
        lambda t: D.Laplace(t(LOC), t(SCALE)),
        lambda t: D.Categorical(logits=t(LOC)),
        lambda t: D.Dirichlet(t(CONC)),
        lambda t: D.MultivariateNormal(t(LOC[0]), scale_tril=t(np.tril(SCALE[:3]))),
    ],
    ids=["normal", "gamma", "beta", "laplace", "categorical", "dirichlet", "mvn"],
)
def test_device_values_match_cpu(vulkan, build):
    cpu, dev = build(_on("cpu")), build(_on("vulkan"))
    gc.manual_seed(3)
    x = cpu.sample((5,))
    xd = x.to("vulkan")
    for f in (lambda d, v: d.log_prob(v), lambda d, v: d.entropy(), lambda d, v: d.mean):
        want, got = f(cpu, x), f(dev, xd)
        assert str(got.device) == "vulkan"
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-5, atol=2e-5)
    gc.manual_seed(4)
    s = dev.sample((64,))
    assert bool(dev.support.check(s).all())


def test_device_rsample_and_gradients_match_cpu(vulkan):
    grads = []
    for device in ("cpu", "vulkan"):
        loc = gc.tensor(LOC, device=device, requires_grad=True)
        scale = gc.tensor(SCALE, device=device, requires_grad=True)
        gc.manual_seed(9)
        x = D.Normal(loc, scale).rsample((6,))
        (x * x).sum().backward()
        grads.append((x.detach().numpy(), loc.grad.numpy(), scale.grad.numpy()))
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_device_kl_and_samplers(vulkan):
    p = D.Normal(gc.tensor(LOC, device="vulkan"), gc.tensor(SCALE, device="vulkan"))
    q = D.Normal(gc.zeros(4, 3, device="vulkan"), gc.ones(4, 3, device="vulkan"))
    want = D.kl_divergence(D.Normal(gc.tensor(LOC), gc.tensor(SCALE)), D.Normal(0.0, 1.0))
    np.testing.assert_allclose(D.kl_divergence(p, q).numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    conc = gc.tensor(CONC, device="vulkan", requires_grad=True)
    g = D.Gamma(conc, 1.0).rsample((200,))
    g.mean().backward()
    assert bool((g > 0).all()) and np.all(np.isfinite(conc.grad.numpy()))
    n = D.Poisson(gc.tensor([0.5, 30.0], device="vulkan")).sample((500,)).numpy()
    assert np.all(n == np.round(n)) and abs(n[:, 1].mean() - 30) < 2.0
    b = D.Binomial(gc.tensor([5.0, 40.0], device="vulkan"), gc.tensor([0.3, 0.6], device="vulkan"))
    k = b.sample((500,)).numpy()
    assert k.min() >= 0 and np.all(k <= [5, 40]) and abs(k[:, 1].mean() - 24) < 2.0


@pytest.mark.parametrize("name", sorted(CASES_ALL))
def test_every_case_on_the_device_matches_cpu(vulkan, name):
    """Each distribution of the shared table with float32 parameters on the device: log_prob,
    entropy, mean, variance and cdf on the device with the CPU's values, and samples of one
    seed on the device equal to the CPU's."""
    cls, params, extra = CASES_ALL[name]

    def build(device):
        ts = {
            k: gc.tensor(np.asarray(v), dtype=gc.float32, device=device)
            if isinstance(v, np.ndarray)
            else v
            for k, v in params.items()
        }
        return getattr(D, cls)(**ts, **extra)

    cpu, dev = build("cpu"), build("vulkan")
    on_device = any(isinstance(v, np.ndarray) for v in params.values())
    gc.manual_seed(1)
    x = cpu.sample((3,))
    for what in ("log_prob", "entropy", "mean", "variance", "cdf"):
        call = {
            "log_prob": lambda d, v: d.log_prob(v),
            "entropy": lambda d, v: d.entropy(),
            "cdf": lambda d, v: d.cdf(v),
        }.get(what, lambda d, v, w=what: getattr(d, w))
        try:
            want = call(cpu, x)
        except NotImplementedError:
            continue
        got = call(dev, x.to("vulkan"))
        if on_device:
            assert str(got.device) == "vulkan", f"{name}.{what} left the device"
        np.testing.assert_allclose(
            got.numpy(), want.numpy(), rtol=3e-5, atol=3e-5, equal_nan=True, err_msg=what
        )
    gc.manual_seed(1)
    s = dev.sample((3,))
    if on_device:
        assert str(s.device) == "vulkan", f"{name}.sample left the device"
    np.testing.assert_allclose(s.numpy(), x.numpy(), rtol=1e-4, atol=1e-5)
