"""pytorch/examples' DCGAN, as written there (transposed-convolution generator, convolutional
discriminator with batch norm and LeakyReLU, `weights_init` applied with `model.apply`, BCELoss,
Adam with beta1 0.5, real/fake labels, fixed noise), at 16x16 on synthetic images. Noise comes
from a numpy bank and the initial weights from numpy (after `weights_init` has run), so that two
libraries' runs can be compared step by step."""

import sys

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
import torch.utils.data

nz, ngf, ndf, nc = 8, 8, 8, 1


def weights_init(m):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        torch.nn.init.normal_(m.weight, 0.0, 0.02)
    elif classname.find("BatchNorm") != -1:
        torch.nn.init.normal_(m.weight, 1.0, 0.02)
        torch.nn.init.zeros_(m.bias)


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 4, 4, 1, 0, bias=False),
            nn.BatchNorm2d(ngf * 4),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, nc, 4, 2, 1, bias=False),
            nn.Tanh(),
        )

    def forward(self, input):
        return self.main(input)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False),
            nn.Sigmoid(),
        )

    def forward(self, input):
        return self.main(input).view(-1, 1).squeeze(1)


def main(out_dir):
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    rng = np.random.default_rng(0)
    real_images = np.tanh(rng.standard_normal((96, nc, 16, 16))).astype(np.float32)
    dataset = torch.utils.data.TensorDataset(torch.from_numpy(real_images))
    dataloader = torch.utils.data.DataLoader(dataset, batch_size=16, shuffle=False)
    noise_bank = rng.standard_normal((2, 6, 16, nz, 1, 1)).astype(np.float32)

    netG = Generator().to(device)
    netG.apply(weights_init)
    netD = Discriminator().to(device)
    netD.apply(weights_init)
    with torch.no_grad():
        for net in (netG, netD):
            for name, p in sorted(net.named_parameters()):
                base = 1.0 if p.dim() == 1 and name.endswith("weight") else 0.0  # batch norm
                w = base + 0.05 * rng.standard_normal(tuple(p.shape))
                p.copy_(torch.from_numpy(w.astype(np.float32)))

    criterion = nn.BCELoss()
    fixed_noise = torch.from_numpy(rng.standard_normal((16, nz, 1, 1)).astype(np.float32))
    real_label, fake_label = 1.0, 0.0
    optimizerD = optim.Adam(netD.parameters(), lr=0.0002, betas=(0.5, 0.999))
    optimizerG = optim.Adam(netG.parameters(), lr=0.0002, betas=(0.5, 0.999))

    for epoch in range(2):
        for i, data in enumerate(dataloader, 0):
            netD.zero_grad()
            real_cpu = data[0].to(device)
            batch_size = real_cpu.size(0)
            label = torch.full((batch_size,), real_label, dtype=real_cpu.dtype, device=device)
            output = netD(real_cpu)
            errD_real = criterion(output, label)
            errD_real.backward()
            D_x = output.mean().item()

            noise = torch.from_numpy(noise_bank[epoch, i]).to(device)
            fake = netG(noise)
            label.fill_(fake_label)
            output = netD(fake.detach())
            errD_fake = criterion(output, label)
            errD_fake.backward()
            errD = errD_real + errD_fake
            optimizerD.step()

            netG.zero_grad()
            label.fill_(real_label)
            output = netD(fake)
            errG = criterion(output, label)
            errG.backward()
            optimizerG.step()
            print(f"LOSS D {epoch} {i} {errD.item():.8g}")
            print(f"LOSS G {epoch} {i} {errG.item():.8g}")
            print(f"LOSS Dx {epoch} {i} {D_x:.8g}")
        netG.eval()
        with torch.no_grad():
            fake = netG(fixed_noise).detach()
        netG.train()
        print(f"LOSS fixed {epoch} 0 {fake.abs().mean().item():.8g}")
        torch.save(netG.state_dict(), f"{out_dir}/netG_epoch_{epoch}.pth")
        torch.save(netD.state_dict(), f"{out_dir}/netD_epoch_{epoch}.pth")


if __name__ == "__main__":
    main(sys.argv[1])
