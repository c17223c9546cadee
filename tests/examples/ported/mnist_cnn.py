"""pytorch/examples' MNIST classifier, as written there (Adadelta + StepLR, log_softmax + nll_loss,
a test loop, a saved state_dict), on synthetic 28x28 images. Dropout is 0 so that runs of two
libraries from the same weights can be compared step by step."""

import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset

DROPOUT = 0.0


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1)
        self.conv2 = nn.Conv2d(8, 16, 3, 1)
        self.dropout1 = nn.Dropout(DROPOUT)
        self.dropout2 = nn.Dropout(DROPOUT)
        self.fc1 = nn.Linear(2304, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(x)
        x = self.conv2(x)
        x = F.relu(x)
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = self.fc1(x)
        x = F.relu(x)
        x = self.dropout2(x)
        x = self.fc2(x)
        output = F.log_softmax(x, dim=1)
        return output


def numpy_init(model, seed):
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for _, p in sorted(model.named_parameters()):
            p.copy_(torch.from_numpy(rng.uniform(-0.1, 0.1, tuple(p.shape)).astype(np.float32)))


def train(model, device, train_loader, optimizer, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        print(f"LOSS train {epoch} {batch_idx} {loss.item():.8g}")


def test(model, device, test_loader):
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            pred = output.argmax(dim=1, keepdim=True)
            correct += pred.eq(target.view_as(pred)).sum().item()
    test_loss /= len(test_loader.dataset)
    print(f"LOSS test 0 0 {test_loss:.8g}")
    print(f"METRIC correct {correct}")


def main(out_dir):
    use_cuda = torch.cuda.is_available()
    torch.manual_seed(1)
    device = torch.device("cuda" if use_cuda else "cpu")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 1, 28, 28)).astype(np.float32)
    y = (x[:, 0, 10:18, 10:18].sum(axis=(1, 2)) > 0).astype(np.int64) * 3 + (x[:, 0, 0, 0] > 0)
    train_set = TensorDataset(torch.from_numpy(x[:192]), torch.from_numpy(y[:192]))
    test_set = TensorDataset(torch.from_numpy(x[192:]), torch.from_numpy(y[192:]))
    train_loader = DataLoader(train_set, batch_size=32, shuffle=False)
    test_loader = DataLoader(test_set, batch_size=64)

    model = Net().to(device)
    numpy_init(model, 0)
    optimizer = optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
    for epoch in range(1, 3):
        train(model, device, train_loader, optimizer, epoch)
        test(model, device, test_loader)
        scheduler.step()
    torch.save(model.state_dict(), os.path.join(out_dir, "mnist_cnn.pt"))
    again = Net()
    again.load_state_dict(torch.load(os.path.join(out_dir, "mnist_cnn.pt"), weights_only=True))
    again.eval()
    with torch.no_grad():
        same = torch.equal(again(test_set[:8][0]), model(test_set[:8][0]))
    print(f"METRIC reload_equal {int(same)}")


if __name__ == "__main__":
    main(sys.argv[1])
