"""A variational autoencoder written with `torch.distributions`, as the probabilistic-modelling
tutorials write it: the encoder gives `Independent(Normal(mu, sigma), 1)`, the decoder
`Independent(Bernoulli(logits=...), 1)`, the loss is the negative ELBO through `log_prob` and
`kl_divergence` against a standard-normal prior, Adam, on synthetic binary images. The
reparameterised sample is `mu + sigma * eps` with eps from a numpy bank instead of
`q.rsample()`, so that two libraries' runs from the same weights can be compared step by step."""

import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn, optim
from torch.distributions import Bernoulli, Independent, Normal, kl_divergence
from torch.utils.data import DataLoader, TensorDataset

IMG, LATENT = 144, 6


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(IMG, 48)
        self.mu = nn.Linear(48, LATENT)
        self.log_sigma = nn.Linear(48, LATENT)
        self.dec1 = nn.Linear(LATENT, 48)
        self.dec2 = nn.Linear(48, IMG)

    def posterior(self, x):
        h = F.relu(self.enc(x))
        return Independent(Normal(self.mu(h), self.log_sigma(h).exp()), 1)

    def likelihood(self, z):
        return Independent(Bernoulli(logits=self.dec2(F.relu(self.dec1(z)))), 1)


def main(out_dir):
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    images = (rng.random((96, IMG)) < 0.25).astype(np.float32)
    noise = rng.standard_normal((3, 4, 24, LATENT)).astype(np.float32)
    loader = DataLoader(TensorDataset(torch.from_numpy(images)), batch_size=24, shuffle=False)
    model = VAE()
    with torch.no_grad():
        for _, p in sorted(model.named_parameters()):
            p.copy_(torch.from_numpy(rng.uniform(-0.2, 0.2, tuple(p.shape)).astype(np.float32)))
    optimizer = optim.Adam(model.parameters(), lr=2e-3)
    for epoch in range(1, 4):
        for batch_idx, (x,) in enumerate(loader):
            q = model.posterior(x)
            prior = Independent(Normal(torch.zeros_like(q.mean), torch.ones_like(q.mean)), 1)
            eps = torch.from_numpy(noise[epoch - 1, batch_idx])
            z = q.mean + q.stddev * eps  # q.rsample()
            elbo = model.likelihood(z).log_prob(x) - kl_divergence(q, prior)
            loss = -elbo.mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            print(f"LOSS train {epoch} {batch_idx} {loss.item():.8g}")
            print(f"LOSS entropy {epoch} {batch_idx} {q.entropy().mean().item():.8g}")
    with torch.no_grad():
        q = model.posterior(torch.from_numpy(images[:8]))
        lik = model.likelihood(q.mean)
        print(f"LOSS recon 0 0 {lik.log_prob(torch.from_numpy(images[:8])).mean().item():.8g}")
        print(f"METRIC pixel_mean {lik.mean.mean().item():.8g}")
    torch.save(model.state_dict(), f"{out_dir}/vae.pt")


if __name__ == "__main__":
    main(sys.argv[1])
