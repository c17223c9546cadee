"""A small U-Net for binary segmentation as the public repositories write it (double-conv blocks
of Conv2d/BatchNorm2d/ReLU(inplace=True), MaxPool2d down, one ConvTranspose2d and one bilinear
F.interpolate up, torch.cat skip connections), trained per pixel with BCEWithLogitsLoss(pos_weight)
plus a soft Dice loss, random horizontal flips (torch.flip) and flip test-time augmentation, the
channels_last memory format, SGD with Nesterov momentum and weight decay, StepLR, and an IoU
metric in eval mode, on synthetic images whose masks are bright blobs. (A learning rate of 0.05
made these 8-image BatchNorm batches chaotic: float32 rounding differences grew past the test's
tolerance in 20 steps.)"""

import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class DoubleConv(nn.Module):
    def __init__(self, in_ch, out_ch):
        super().__init__()
        self.block = nn.Sequential(
            nn.Conv2d(in_ch, out_ch, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(out_ch),
            nn.ReLU(inplace=True),
            nn.Conv2d(out_ch, out_ch, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(out_ch),
            nn.ReLU(inplace=True),
        )

    def forward(self, x):
        return self.block(x)


class UNet(nn.Module):
    def __init__(self, in_channels=3, n_classes=1, base=8):
        super().__init__()
        self.inc = DoubleConv(in_channels, base)
        self.down1 = nn.Sequential(nn.MaxPool2d(2), DoubleConv(base, base * 2))
        self.down2 = nn.Sequential(nn.MaxPool2d(2), DoubleConv(base * 2, base * 4))
        self.up1 = nn.ConvTranspose2d(base * 4, base * 2, kernel_size=2, stride=2)
        self.conv1 = DoubleConv(base * 4, base * 2)
        self.reduce = nn.Conv2d(base * 2, base, kernel_size=1)
        self.conv2 = DoubleConv(base * 2, base)
        self.outc = nn.Conv2d(base, n_classes, kernel_size=1)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        u = self.up1(x3)
        u = self.conv1(torch.cat([x2, u], dim=1))
        u = F.interpolate(u, scale_factor=2, mode="bilinear", align_corners=False)
        u = self.reduce(u)
        u = self.conv2(torch.cat([x1, u], dim=1))
        return self.outc(u)


def dice_loss(logits, target, eps=1.0):
    probs = torch.sigmoid(logits)
    dims = (1, 2, 3)
    inter = (probs * target).sum(dim=dims)
    union = probs.sum(dim=dims) + target.sum(dim=dims)
    return 1 - ((2 * inter + eps) / (union + eps)).mean()


def make_data(rng, n, size=16):
    yy, xx = np.mgrid[:size, :size]
    images = rng.standard_normal((n, 3, size, size)).astype(np.float32) * 0.5
    masks = np.zeros((n, 1, size, size), np.float32)
    for i in range(n):
        cy, cx = rng.integers(3, size - 3, 2)
        r = rng.uniform(2, 4)
        blob = (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
        masks[i, 0] = blob
        images[i, :, blob] += 1.0
    return images, masks


def main(out_dir):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    rng = np.random.default_rng(0)
    images, masks = make_data(rng, 80)
    train_ds = TensorDataset(torch.from_numpy(images[:64]), torch.from_numpy(masks[:64]))
    val_ds = TensorDataset(torch.from_numpy(images[64:]), torch.from_numpy(masks[64:]))
    train_loader = DataLoader(train_ds, batch_size=8, shuffle=False)
    val_loader = DataLoader(val_ds, batch_size=8)

    model = UNet().to(device)
    with torch.no_grad():
        for m in model.modules():  # a Kaiming-uniform-like init drawn from numpy
            if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
                w = m.weight
                bound = 2.0 / np.sqrt(np.prod(w.shape[1:]))
                w.copy_(
                    torch.from_numpy(rng.uniform(-bound, bound, tuple(w.shape)).astype(np.float32))
                )
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    model = model.to(memory_format=torch.channels_last)  # NHWC: faster convolutions on GPUs

    pos_weight = torch.tensor([float((1 - masks.mean()) / masks.mean())]).to(device)
    bce = nn.BCEWithLogitsLoss(pos_weight=pos_weight)
    optimizer = torch.optim.SGD(
        model.parameters(), lr=0.02, momentum=0.9, nesterov=True, weight_decay=1e-4
    )
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)

    flips = rng.random((3, len(train_loader))) < 0.5
    for epoch in range(3):
        model.train()
        for step, (x, y) in enumerate(train_loader):
            x = x.to(device, memory_format=torch.channels_last)
            y = y.to(device)
            if flips[epoch, step]:  # random horizontal flip of the batch, image and mask alike
                x, y = torch.flip(x, dims=[3]), torch.flip(y, dims=[3])
            optimizer.zero_grad()
            logits = model(x)
            loss = bce(logits, y) + dice_loss(logits, y)
            loss.backward()
            optimizer.step()
            print(f"LOSS train {epoch} {step} {loss.item():.8g}")
        scheduler.step()

        model.eval()
        inter = union = 0
        val_loss = 0.0
        with torch.no_grad():
            for x, y in val_loader:
                x = x.to(device)
                # test-time augmentation: average with the prediction on the mirrored image
                logits = (model(x) + model(x.flip(dims=(3,))).flip(dims=(3,))) / 2
                val_loss += bce(logits, y).item() * x.size(0)
                pred = (torch.sigmoid(logits) > 0.5).float()
                inter += (pred * y).sum().item()
                union += ((pred + y) > 0).sum().item()
        print(f"LOSS val {epoch} 0 {val_loss / len(val_ds):.8g}")
        print(f"LOSS iou {epoch} 0 {inter / max(union, 1):.8g}")
        print(f"LOSS lr {epoch} 0 {scheduler.get_last_lr()[0]:.8g}")

    torch.save(model.state_dict(), f"{out_dir}/unet.pt")
    reloaded = UNet().to(device)
    reloaded.load_state_dict(torch.load(f"{out_dir}/unet.pt", map_location=device))
    reloaded.eval()
    with torch.no_grad():
        x = val_ds[0][0].unsqueeze(0).to(device)
        same = torch.allclose(model(x), reloaded(x), atol=1e-5)  # NHWC vs NCHW kernels
        # per-class map with argmax, as multi-class segmentation scripts compute it
        two_class = torch.cat([torch.zeros_like(model(x)), model(x)], dim=1)
        fg = two_class.argmax(dim=1).sum().item()
    print(f"METRIC reload_equal {int(same)}")
    print(f"METRIC argmax_fg_pixels {fg}")


if __name__ == "__main__":
    main(sys.argv[1])
