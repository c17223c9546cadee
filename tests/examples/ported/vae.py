"""pytorch/examples' variational autoencoder, as written there (fc encoder/decoder,
reparameterisation, BCE + KL loss summed over the batch, Adam, a sampling step and saved samples),
on synthetic binary images. The reparameterisation noise comes from a numpy bank instead of
`randn_like`, so that two libraries' runs from the same weights can be compared step by step."""

import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn, optim
from torch.utils.data import DataLoader, TensorDataset

IMG = 196


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(IMG, 64)
        self.fc21 = nn.Linear(64, 8)
        self.fc22 = nn.Linear(64, 8)
        self.fc3 = nn.Linear(8, 64)
        self.fc4 = nn.Linear(64, IMG)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar, eps):
        std = torch.exp(0.5 * logvar)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x, eps):
        mu, logvar = self.encode(x.view(-1, IMG))
        z = self.reparameterize(mu, logvar, eps)
        return self.decode(z), mu, logvar


def loss_function(recon_x, x, mu, logvar):
    bce = F.binary_cross_entropy(recon_x, x.view(-1, IMG), reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld


def main(out_dir):
    torch.manual_seed(1)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    rng = np.random.default_rng(0)
    images = (rng.random((160, 1, 14, 14)) < 0.3).astype(np.float32)
    noise = rng.standard_normal((3, 5, 32, 8)).astype(np.float32)
    loader = DataLoader(TensorDataset(torch.from_numpy(images)), batch_size=32, shuffle=False)

    model = VAE().to(device)
    with torch.no_grad():
        for _, p in sorted(model.named_parameters()):
            p.copy_(torch.from_numpy(rng.uniform(-0.2, 0.2, tuple(p.shape)).astype(np.float32)))
    optimizer = optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(1, 4):
        model.train()
        train_loss = 0
        for batch_idx, (data,) in enumerate(loader):
            data = data.to(device)
            optimizer.zero_grad()
            eps = torch.from_numpy(noise[epoch - 1, batch_idx])
            recon_batch, mu, logvar = model(data, eps)
            loss = loss_function(recon_batch, data, mu, logvar)
            loss.backward()
            train_loss += loss.item()
            optimizer.step()
            print(f"LOSS train {epoch} {batch_idx} {loss.item() / len(data):.8g}")
        print(f"LOSS epoch {epoch} 0 {train_loss / len(loader.dataset):.8g}")
    with torch.no_grad():
        sample = torch.from_numpy(rng.standard_normal((16, 8)).astype(np.float32)).to(device)
        sample = model.decode(sample).cpu()
        grid = sample.view(16, 1, 14, 14)
        print(f"LOSS sample 0 0 {grid.mean().item():.8g}")
    torch.save(
        {"model": model.state_dict(), "optimizer": optimizer.state_dict()}, f"{out_dir}/vae.pt"
    )
    ckpt = torch.load(f"{out_dir}/vae.pt")
    model.load_state_dict(ckpt["model"])
    optimizer.load_state_dict(ckpt["optimizer"])


if __name__ == "__main__":
    main(sys.argv[1])
