"""What nn.Sequential.forward's ReLU-fusion decision costs, in one process, interleaved: the
plain loop over the modules (Sequential.forward before the fusion), this tree's forward, and
with ``--before REV`` the forward and relu_fusion.py of git revision REV (loaded from git).

    python benchmarks/sequential_overhead.py [--before REV] [--blocks 40] [--steps 50]

Cases: ``tanh20``, 20 x (Linear(8, 8), Tanh) at batch 1 under no_grad, where nothing fuses
(the decision is pure overhead); ``mlp64`` and ``cnn``, train.py's training steps, where the
fusion runs. Medians of thread CPU time per call (the work of this thread, robust to a shared
machine's load), with the ratio to the first column.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import train  # noqa: E402  (benchmarks/train.py: the models, batches and steps)

import gpucore  # noqa: E402
import gpucore.nn as nn  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOW = nn.Sequential.forward


def plain_forward(self, input):
    """Sequential.forward without the fusion."""
    for m in self._modules.values():
        input = m(input)
    return input


def forward_of(rev: str):
    """Sequential.forward as of git revision ``rev`` (its relu_fusion.py loaded beside this
    tree's, the fusion loop as that revision's container.py wrote it)."""
    src = subprocess.run(["git", "-C", ROOT, "show", f"{rev}:gpucore/nn/modules/relu_fusion.py"],
                         check=True, capture_output=True, text=True).stdout  # fmt: skip
    path = os.path.join(tempfile.mkdtemp(), "relu_fusion_before.py")
    with open(path, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location("gpucore.nn.modules._rf_before", path)
    rf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rf)

    def forward(self, input):
        mods = tuple(self._modules.values())
        n = len(mods)
        if n < 2 or not rf.fusion_open():
            for m in mods:
                input = m(input)
            return input
        i = 0
        while i < n:
            fused = rf.fuse_at(mods, i, input) if i + 1 < n else None
            if fused is None:
                input = mods[i](input)
                i += 1
            else:
                input, used = fused
                i += used
        return input

    return forward


def tanh20():
    gpucore.manual_seed(0)
    layers = []
    for _ in range(20):
        layers += [nn.Linear(8, 8), nn.Tanh()]
    model, x = nn.Sequential(*layers), gpucore.randn(1, 8)

    def call():
        with gpucore.no_grad():
            model(x)

    return call


def train_step(case: str):
    kind, batch = {"mlp64": ("mlp", 64), "cnn": ("cnn", 64)}[case]
    model, _, x, y = train.make_case(kind, batch)
    return train.gpucore_step_fn(model, x, y, kind)


def measure(call, forwards: list, blocks: int, steps: int) -> list[float]:
    """Median thread CPU µs per call for each forward, blocks interleaved (order rotated)."""
    times = [[] for _ in forwards]
    for f in forwards:
        nn.Sequential.forward = f
        for _ in range(5):
            call()
    for b in range(blocks):
        order = list(range(len(forwards)))
        order = order[b % len(order) :] + order[: b % len(order)]
        for k in order:
            nn.Sequential.forward = forwards[k]
            call()
            for _ in range(steps):
                c = time.thread_time()
                call()
                times[k].append(time.thread_time() - c)
    nn.Sequential.forward = NOW
    return [statistics.median(t) * 1e6 for t in times]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", help="a git revision whose Sequential.forward to compare")
    ap.add_argument("--blocks", type=int, default=40, help="interleaved blocks per variant")
    ap.add_argument("--steps", type=int, default=50, help="timed calls per block (tanh20)")
    ap.add_argument("--cases", default="tanh20,mlp64,cnn")
    args = ap.parse_args(argv)
    names, forwards = ["plain loop"], [plain_forward]
    if args.before:
        names.append(f"{args.before}")
        forwards.append(forward_of(args.before))
    names.append("this tree")
    forwards.append(NOW)
    threads = os.environ.get("GPUCORE_NUM_THREADS", "default")
    print(f"- load average before: {os.getloadavg()[0]:.2f}; threads: {threads}; µs per call")
    head = ["case"] + [f"{n} µs" for n in names] + [f"{n} / plain" for n in names[1:]]
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" if i == 0 else "---:" for i in range(len(head))) + "|")
    for case in args.cases.split(","):
        call = tanh20() if case == "tanh20" else train_step(case)
        steps = args.steps if case == "tanh20" else max(1, args.steps // 10)
        t = measure(call, forwards, args.blocks, steps)
        cells = [f"{v:.1f}" for v in t] + [f"{v / t[0]:.3f}" for v in t[1:]]
        print("| " + " | ".join([case, *cells]) + " |", flush=True)
    print(f"- load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
