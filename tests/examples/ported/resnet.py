"""A small CIFAR-style ResNet as the public training scripts write it (BasicBlock with a
shortcut projection, BatchNorm, AdaptiveAvgPool2d, SGD with momentum, nesterov and weight decay,
CosineAnnealingLR, label-smoothed cross-entropy, gradient accumulation over two steps, accuracy
in eval mode, a checkpoint dict), on synthetic 3x16x16 images."""

import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes)
            )

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += self.shortcut(x)
        return F.relu(out)


class ResNet(nn.Module):
    def __init__(self, num_blocks=(1, 1), num_classes=4):
        super().__init__()
        self.in_planes = 8
        self.conv1 = nn.Conv2d(3, 8, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.layer1 = self._make_layer(8, num_blocks[0], 1)
        self.layer2 = self._make_layer(16, num_blocks[1], 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.linear = nn.Linear(16, num_classes)

    def _make_layer(self, planes, num_blocks, stride):
        layers = []
        for s in [stride] + [1] * (num_blocks - 1):
            layers.append(BasicBlock(self.in_planes, planes, s))
            self.in_planes = planes
        return nn.Sequential(*layers)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer2(self.layer1(out))
        out = torch.flatten(self.avgpool(out), 1)
        return self.linear(out)


def main(out_dir):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 3, 16, 16)).astype(np.float32)
    y = (x[:, 0].mean(axis=(1, 2)) > 0).astype(np.int64) * 2 + (x[:, 1, :8].mean(axis=(1, 2)) > 0)
    train = DataLoader(
        TensorDataset(torch.from_numpy(x[:96]), torch.from_numpy(y[:96])), batch_size=16
    )
    test = DataLoader(
        TensorDataset(torch.from_numpy(x[96:]), torch.from_numpy(y[96:])), batch_size=32
    )

    net = ResNet().to(device)
    with torch.no_grad():
        for name, p in sorted(net.named_parameters()):
            if "bn" in name or "shortcut.1" in name:
                continue  # BatchNorm keeps its ones/zeros
            p.copy_(torch.from_numpy(rng.uniform(-0.15, 0.15, tuple(p.shape)).astype(np.float32)))
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    optimizer = optim.SGD(net.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4, nesterov=True)
    scheduler = optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=3)
    accum = 2
    for epoch in range(3):
        net.train()
        for batch_idx, (inputs, targets) in enumerate(train):
            inputs, targets = inputs.to(device), targets.to(device)
            outputs = net(inputs)
            loss = criterion(outputs, targets) / accum
            loss.backward()
            if (batch_idx + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            print(f"LOSS train {epoch} {batch_idx} {loss.item():.8g}")
        scheduler.step()
        net.eval()
        correct = total = 0
        with torch.no_grad():
            for inputs, targets in test:
                _, predicted = net(inputs).max(1)
                total += targets.size(0)
                correct += predicted.eq(targets).sum().item()
        print(f"LOSS acc {epoch} 0 {correct / total:.8g}")
    state = {"net": net.state_dict(), "acc": correct / total, "epoch": epoch}
    torch.save(state, f"{out_dir}/ckpt.pth")
    print(f"METRIC saved_epoch {torch.load(f'{out_dir}/ckpt.pth')['epoch']}")


if __name__ == "__main__":
    main(sys.argv[1])
