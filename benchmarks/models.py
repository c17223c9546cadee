"""The inference benchmark's models (benchmarks/infer.py), written once for gpucore and PyTorch.

Every builder takes an "nn namespace" (``namespace(torch.nn)`` or ``namespace(gpucore.nn)``):
the layer classes both libraries share, plus ``F`` (their ``nn.functional``). The same code then
builds the same architecture in either library, with the same parameter and buffer names, so a
PyTorch state dict loads into the gpucore model unchanged (``state_to_numpy`` /
``load_numpy_state``).

- ``mlp(ns, width)``: Linear-ReLU-Linear-ReLU-Linear, width ``width`` in, out and between;
- ``transformer_block(ns, d, heads)``: pre-LN block, x + proj(attn(LN1(x))) then
  x + fc2(GELU(fc1(LN2(x)))), one Linear(d, 3d) for q, k, v, MLP 4x with exact GELU;
- ``resnet18(ns)``: torchvision's ResNet-18 layout (BasicBlock, [2, 2, 2, 2], 1000 classes).
"""

from __future__ import annotations

import math
from types import SimpleNamespace

LAYERS = (
    "Module",
    "Sequential",
    "Linear",
    "ReLU",
    "LayerNorm",
    "Conv2d",
    "BatchNorm2d",
    "MaxPool2d",
    "AdaptiveAvgPool2d",
    "Flatten",
)


def namespace(nn) -> SimpleNamespace:
    """The layers the models use, from ``nn`` (``torch.nn`` or ``gpucore.nn``), and ``F``."""
    return SimpleNamespace(F=nn.functional, **{name: getattr(nn, name) for name in LAYERS})


def mlp(ns, width: int):
    return ns.Sequential(
        ns.Linear(width, width),
        ns.ReLU(),
        ns.Linear(width, width),
        ns.ReLU(),
        ns.Linear(width, width),
    )


def transformer_block(ns, d: int, heads: int = 4):
    class Block(ns.Module):
        def __init__(self):
            super().__init__()
            self.heads = heads
            self.scale = 1.0 / math.sqrt(d // heads)
            self.ln1 = ns.LayerNorm(d)
            self.qkv = ns.Linear(d, 3 * d)
            self.proj = ns.Linear(d, d)
            self.ln2 = ns.LayerNorm(d)
            self.fc1 = ns.Linear(d, 4 * d)
            self.fc2 = ns.Linear(4 * d, d)

        def attn(self, x):
            B, T, C = x.shape
            H = self.heads
            q, k, v = self.qkv(x).split(C, dim=-1)
            q = q.reshape(B, T, H, C // H).transpose(1, 2)
            k = k.reshape(B, T, H, C // H).transpose(1, 2)
            v = v.reshape(B, T, H, C // H).transpose(1, 2)
            att = ns.F.softmax(q @ k.transpose(-2, -1) * self.scale, dim=-1)
            return (att @ v).transpose(1, 2).reshape(B, T, C)

        def forward(self, x):
            x = x + self.proj(self.attn(self.ln1(x)))
            return x + self.fc2(ns.F.gelu(self.fc1(self.ln2(x))))

    return Block()


def resnet18(ns, num_classes: int = 1000):
    """torchvision.models.resnet18's layout and state-dict names (conv1, bn1, layer1..4 of
    BasicBlocks with downsample = Sequential(conv1x1, bn), fc)."""

    def conv3x3(cin, cout, stride=1):
        return ns.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)

    class BasicBlock(ns.Module):
        def __init__(self, cin, cout, stride=1):
            super().__init__()
            self.conv1 = conv3x3(cin, cout, stride)
            self.bn1 = ns.BatchNorm2d(cout)
            self.relu = ns.ReLU()
            self.conv2 = conv3x3(cout, cout)
            self.bn2 = ns.BatchNorm2d(cout)
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = ns.Sequential(
                    ns.Conv2d(cin, cout, 1, stride=stride, bias=False), ns.BatchNorm2d(cout)
                )

        def forward(self, x):
            identity = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return self.relu(out + identity)

    class ResNet(ns.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = ns.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
            self.bn1 = ns.BatchNorm2d(64)
            self.relu = ns.ReLU()
            self.maxpool = ns.MaxPool2d(3, stride=2, padding=1)
            self.layer1 = ns.Sequential(BasicBlock(64, 64), BasicBlock(64, 64))
            self.layer2 = ns.Sequential(BasicBlock(64, 128, 2), BasicBlock(128, 128))
            self.layer3 = ns.Sequential(BasicBlock(128, 256, 2), BasicBlock(256, 256))
            self.layer4 = ns.Sequential(BasicBlock(256, 512, 2), BasicBlock(512, 512))
            self.avgpool = ns.AdaptiveAvgPool2d((1, 1))
            self.flatten = ns.Flatten()
            self.fc = ns.Linear(512, num_classes)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(self.flatten(self.avgpool(x)))

    return ResNet()


# --------------------------------------------------------------------------------------------
# weights


def randomize_batchnorm(torch, model, calib_input) -> None:
    """Give every BatchNorm2d of a PyTorch ``model`` non-trivial eval-mode statistics and affine
    parameters, so that folding BN into the convolutions changes real numbers.

    The running statistics are the batch statistics of one training-mode pass over
    ``calib_input`` (random, but at the scale the layer really sees: the activations stay O(1)
    through the 20 layers), then jittered; gamma and beta are random.
    """
    bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # cumulative average: after one pass, the batch statistics
    model.train()
    with torch.no_grad():
        model(calib_input)
        for m in bns:
            c = m.num_features
            m.running_mean.add_(0.1 * torch.randn(c) * m.running_var.sqrt())
            m.running_var.mul_(torch.empty(c).uniform_(0.7, 1.4))
            m.weight.copy_(torch.empty(c).uniform_(0.5, 1.5))
            m.bias.copy_(0.1 * torch.randn(c))
            m.momentum = 0.1
    model.eval()


def state_to_numpy(state: dict) -> dict:
    """A PyTorch state dict as {name: numpy array} (e.g. for ``numpy.savez``)."""
    return {k: v.detach().cpu().numpy() for k, v in state.items()}


def load_numpy_state(gpucore, model, arrays) -> None:
    """Load {name: numpy array} (``state_to_numpy``'s output) into a gpucore ``model``; the names
    must match exactly (strict)."""
    own = model.state_dict()
    state = {}
    for k, v in arrays.items():
        t = gpucore.from_numpy(v.copy())
        if k in own and t.dtype != own[k].dtype:  # e.g. num_batches_tracked: int64 on both
            t = t.to(own[k].dtype)
        state[k] = t
    model.load_state_dict(state)
