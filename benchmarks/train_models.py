"""The training benchmarks' MLP and CNN (train.py, replay.py, transfers.py), written once.

Each builder takes an nn namespace, ``gpucore.nn`` or ``torch.nn``: both libraries get the same
architecture with the same state-dict keys, so one library's initial weights load into the
other's model.

- ``mlp(nn, dropout=0.0)``: Linear(784, 512)-ReLU-Linear(512, 256)-ReLU-Linear(256, 10), with
  ``Dropout(dropout)`` after each ReLU when ``dropout`` is set (then the keys of the later
  Linears shift by the Dropout layers' indices);
- ``cnn(nn)``: conv16-ReLU-pool-conv32-ReLU-pool-Linear on 1x28x28 images, 10 classes.
"""

from __future__ import annotations


def mlp(nn, dropout: float = 0.0):
    """The MLP 784-512-256-10 in the given nn namespace."""
    layers = [nn.Linear(784, 512), nn.ReLU()]
    layers += [nn.Dropout(dropout)] if dropout else []
    layers += [nn.Linear(512, 256), nn.ReLU()]
    layers += [nn.Dropout(dropout)] if dropout else []
    return nn.Sequential(*layers, nn.Linear(256, 10))


def cnn(nn):
    """The digits-style CNN on 28x28 inputs in the given nn namespace."""
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 7 * 7, 10),
    )
