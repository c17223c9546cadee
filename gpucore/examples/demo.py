"""The main demo: a small MLP classifier trained for a few steps with plain gpucore tensors.

It builds a 2-layer network on a synthetic, linearly separable 3-class problem, runs forward and
backward, updates the weights with SGD, and prints the loss, the accuracy, and which backend ran
each op of one training step.

    python -m gpucore.examples.demo [--steps N] [--seed S]
"""

from __future__ import annotations

import argparse
import collections
import time

import gpucore as gc
import gpucore.nn.functional as F


def make_data(n: int, features: int, classes: int):
    """Points around ``classes`` random centres; labels are the centre index."""
    centres = gc.randn(classes, features) * 0.6
    labels = gc.randint(0, classes, (n,))
    x = centres[labels] + gc.randn(n, features)
    return x, labels


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=float, default=0.1)
    args = ap.parse_args(argv)

    gc.manual_seed(args.seed)
    features, hidden, classes = 16, 64, 3
    x, y = make_data(512, features, classes)

    w1 = (gc.randn(features, hidden) * (2 / features) ** 0.5).requires_grad_()
    b1 = gc.zeros(hidden, requires_grad=True)
    w2 = (gc.randn(hidden, classes) * (1 / hidden) ** 0.5).requires_grad_()
    b2 = gc.zeros(classes, requires_grad=True)
    params = [w1, b1, w2, b2]

    def forward(inp):
        return F.gelu(inp @ w1 + b1) @ w2 + b2

    print(
        f"gpucore {gc.__version__}: MLP {features}-{hidden}-{classes}, "
        f"{x.shape[0]} samples, SGD lr={args.lr}"
    )

    def train_step():
        loss = F.cross_entropy(forward(x), y)
        for p in params:
            p.grad = None
        loss.backward()
        with gc.no_grad():
            for p in params:
                p -= args.lr * p.grad
        return loss

    with gc.dispatch.trace_ops() as records:
        train_step()

    t0 = time.perf_counter()
    for step in range(1, args.steps + 1):
        loss = train_step()
        if step % 10 == 0 or step == 1:
            with gc.no_grad():
                acc = (forward(x).argmax(1) == y).float().mean().item()
            print(f"step {step:3d}  loss {loss.item():.4f}  accuracy {acc:.3f}")
    dt = (time.perf_counter() - t0) / args.steps
    print(f"{dt * 1e3:.2f} ms per training step")

    print("\nops of one training step (forward + backward + update):")
    print(f"  {'op':24s} {'backend':8s} {'calls':>5s} {'largest output':>15s}")
    calls = collections.Counter((op, backend) for op, backend, _ in records)
    largest: dict = {}
    for op, backend, shape in records:
        n = 1
        for s in shape:
            n *= s
        largest[(op, backend)] = max(largest.get((op, backend), 0), n)
    for (op, backend), n in sorted(calls.items()):
        print(f"  {op:24s} {backend:8s} {n:5d} {largest[(op, backend)]:>9d} elems")
    print(
        "(ops of >= 4096 elements go to a Vulkan GPU when one is usable; this build runs "
        "everything in the C extension)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
