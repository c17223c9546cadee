"""The temporal convolutional network (TCN) of the widely copied "generic convolutional and
recurrent networks for sequence modeling" code, as written there: TemporalBlocks of two dilated
causal `nn.Conv1d` wrapped in `torch.nn.utils.weight_norm` (and, as newer forks write it, in
`torch.nn.utils.parametrizations.weight_norm`), a `Chomp1d` cutting the padding, a
1x1 downsample on the residual path, the last time step into a Linear head; trained on its
"adding problem" with Adam, MSELoss and gradient clipping, then, as vocoder-style code does before
export, `remove_weight_norm` / `parametrize.remove_parametrizations` on every convolution (the
outputs must not change). The data come
from numpy and dropout is 0, so that two libraries' runs can be compared step by step."""

import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import parametrize, remove_weight_norm, weight_norm
from torch.nn.utils.parametrizations import weight_norm as param_weight_norm


class Chomp1d(nn.Module):
    def __init__(self, chomp_size):
        super().__init__()
        self.chomp_size = chomp_size

    def forward(self, x):
        return x[:, :, : -self.chomp_size].contiguous()


class TemporalBlock(nn.Module):
    def __init__(
        self,
        n_inputs,
        n_outputs,
        kernel_size,
        stride,
        dilation,
        padding,
        dropout=0.2,
        wn=weight_norm,
    ):
        super().__init__()
        self.conv1 = wn(
            nn.Conv1d(
                n_inputs, n_outputs, kernel_size, stride=stride, padding=padding, dilation=dilation
            )
        )
        self.chomp1 = Chomp1d(padding)
        self.relu1 = nn.ReLU()
        self.dropout1 = nn.Dropout(dropout)

        self.conv2 = wn(
            nn.Conv1d(
                n_outputs, n_outputs, kernel_size, stride=stride, padding=padding, dilation=dilation
            )
        )
        self.chomp2 = Chomp1d(padding)
        self.relu2 = nn.ReLU()
        self.dropout2 = nn.Dropout(dropout)

        self.net = nn.Sequential(
            self.conv1,
            self.chomp1,
            self.relu1,
            self.dropout1,
            self.conv2,
            self.chomp2,
            self.relu2,
            self.dropout2,
        )
        self.downsample = nn.Conv1d(n_inputs, n_outputs, 1) if n_inputs != n_outputs else None
        self.relu = nn.ReLU()
        self.init_weights()

    def init_weights(self):
        self.conv1.weight.data.normal_(0, 0.01)
        self.conv2.weight.data.normal_(0, 0.01)
        if self.downsample is not None:
            self.downsample.weight.data.normal_(0, 0.01)

    def forward(self, x):
        out = self.net(x)
        res = x if self.downsample is None else self.downsample(x)
        return self.relu(out + res)


class TemporalConvNet(nn.Module):
    def __init__(self, num_inputs, num_channels, kernel_size=2, dropout=0.2, wn=weight_norm):
        super().__init__()
        layers = []
        num_levels = len(num_channels)
        for i in range(num_levels):
            dilation_size = 2**i
            in_channels = num_inputs if i == 0 else num_channels[i - 1]
            out_channels = num_channels[i]
            layers += [
                TemporalBlock(
                    in_channels,
                    out_channels,
                    kernel_size,
                    stride=1,
                    dilation=dilation_size,
                    padding=(kernel_size - 1) * dilation_size,
                    dropout=dropout,
                    wn=wn,
                )
            ]
        self.network = nn.Sequential(*layers)

    def forward(self, x):
        return self.network(x)


class TCN(nn.Module):
    def __init__(self, input_size, output_size, num_channels, kernel_size, dropout, wn=weight_norm):
        super().__init__()
        self.tcn = TemporalConvNet(
            input_size, num_channels, kernel_size=kernel_size, dropout=dropout, wn=wn
        )
        self.linear = nn.Linear(num_channels[-1], output_size)
        self.init_weights()

    def init_weights(self):
        self.linear.weight.data.normal_(0, 0.01)

    def forward(self, x):
        y1 = self.tcn(x)
        return self.linear(y1[:, :, -1])

    def remove_weight_norm(self):
        for block in self.tcn.network:
            for conv in (block.conv1, block.conv2):
                if parametrize.is_parametrized(conv):
                    parametrize.remove_parametrizations(conv, "weight")
                else:
                    remove_weight_norm(conv)


def data_generator(rng, N, seq_length):
    X_num = rng.random((N, 1, seq_length))
    X_mask = np.zeros((N, 1, seq_length))
    Y = np.zeros((N, 1))
    for i in range(N):
        positions = rng.choice(seq_length, size=2, replace=False)
        X_mask[i, 0, positions[0]] = 1
        X_mask[i, 0, positions[1]] = 1
        Y[i, 0] = X_num[i, 0, positions[0]] + X_num[i, 0, positions[1]]
    X = np.concatenate((X_num, X_mask), axis=1)
    return torch.from_numpy(X.astype(np.float32)), torch.from_numpy(Y.astype(np.float32))


def main(out_dir):
    torch.manual_seed(1111)
    rng = np.random.default_rng(0)
    seq_length, batch_size, clip = 32, 32, 1.0
    X_train, Y_train = data_generator(rng, 256, seq_length)
    X_test, Y_test = data_generator(rng, 64, seq_length)

    reload_equal = True
    for name, wn in (("legacy", weight_norm), ("parametrizations", param_weight_norm)):
        model = TCN(2, 1, [8, 8, 8, 8], kernel_size=3, dropout=0.0, wn=wn)
        with torch.no_grad():
            for _, p in sorted(model.named_parameters()):
                p.copy_(torch.from_numpy(rng.uniform(-0.3, 0.3, tuple(p.shape)).astype(np.float32)))
        n_params = sum(p.numel() for p in model.parameters())
        print(f"METRIC {name}_params {n_params}")
        optimizer = torch.optim.Adam(model.parameters(), lr=4e-3)

        for epoch in range(1, 4):
            model.train()
            for batch_idx, i in enumerate(range(0, X_train.size(0), batch_size)):
                x, y = X_train[i : i + batch_size], Y_train[i : i + batch_size]
                optimizer.zero_grad()
                output = model(x)
                loss = F.mse_loss(output, y)
                loss.backward()
                if clip > 0:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
                optimizer.step()
                print(f"LOSS {name} {epoch} {batch_idx} {loss.item():.8g}")
            model.eval()
            with torch.no_grad():
                test_loss = F.mse_loss(model(X_test), Y_test)
            print(f"LOSS {name}_test {epoch} 0 {test_loss.item():.8g}")

        torch.save(model.state_dict(), f"{out_dir}/tcn_{name}.pt")
        with torch.no_grad():
            before = model(X_test)
            model.remove_weight_norm()
            after = model(X_test)
        max_diff = (before - after).abs().max().item()
        print(f"METRIC {name}_remove_unchanged {int(max_diff < 1e-5)}")
        n_weights = sum(1 for n, _ in model.named_parameters() if n.endswith(".weight"))
        print(f"METRIC {name}_plain_weight_params {n_weights}")

        fresh = TCN(2, 1, [8, 8, 8, 8], kernel_size=3, dropout=0.0, wn=wn)
        fresh.load_state_dict(torch.load(f"{out_dir}/tcn_{name}.pt"))
        fresh.eval()
        with torch.no_grad():
            same = torch.equal(fresh(X_test), before)
        reload_equal = reload_equal and same

    print(f"METRIC reload_equal {int(reload_equal)}")


if __name__ == "__main__":
    main(sys.argv[1])
