"""gpucore.distributions vs torch.distributions, ms per call, medians of 15 calls alternating
between the libraries call by call; float32, PyTorch on one thread (small ops: gpucore's run
single-threaded in its C extension too). The rows are what the training scripts call per step:
a VAE's Normal rsample + log_prob + KL, a policy's Categorical sample + log_prob + entropy,
and the samplers PyTorch has in C++ (gamma / Dirichlet, compositions of gpucore ops here; Poisson,
gpucore's registry op). Run: ``python benchmarks/distributions.py``.
"""

from __future__ import annotations

import sys

import numpy as np
from bench_env import ratio_row

import gpucore

try:
    import torch
except ImportError:
    torch = None


def _cases(lib, rng):
    D = lib.distributions
    t = lambda a: lib.tensor(a.astype(np.float32))  # noqa: E731
    mu, ls = t(rng.normal(size=(64, 16))), t(rng.normal(size=(64, 16)) * 0.1)
    logits = t(rng.normal(size=(256, 6)))
    conc = t(rng.uniform(0.5, 3, (64, 16)))
    rate = t(rng.uniform(0.5, 40, (4096,)))
    mu.requires_grad_(True)

    def vae():
        q = D.Normal(mu, ls.exp())
        z = q.rsample()
        (q.log_prob(z).sum() + D.kl_divergence(q, D.Normal(0.0, 1.0)).sum()).backward()

    def policy():
        m = D.Categorical(logits=logits)
        a = m.sample()
        return m.log_prob(a).sum() + m.entropy().sum()

    return [
        ("Normal rsample + log_prob + KL + backward (64 x 16)", vae),
        ("Categorical sample + log_prob + entropy (256 x 6)", policy),
        ("Gamma(64 x 16).rsample()", lambda: D.Gamma(conc, 1.0).rsample()),
        ("Dirichlet(64 x 16).sample()", lambda: D.Dirichlet(conc).sample()),
        ("Poisson(4096 rates in 0.5..40).sample()", lambda: D.Poisson(rate).sample()),
        (
            "Normal(64 x 16).log_prob",
            lambda: D.Normal(mu.detach(), 1.0).log_prob(mu.detach()),
        ),
    ]


def main() -> None:
    if torch is not None:
        torch.set_num_threads(1)
    ours = _cases(gpucore, np.random.default_rng(0))
    refs = _cases(torch, np.random.default_rng(0)) if torch else [(None, None)] * len(ours)
    print("| call | gpucore ms | torch ms | ratio |\n|---|---|---|---|")
    for (label, g), (_, t) in zip(ours, refs):
        print(label, file=sys.stderr)
        print(ratio_row(label, g, t, 15))


if __name__ == "__main__":
    main()
