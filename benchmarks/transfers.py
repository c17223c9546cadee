"""Bytes moved between the host and the Vulkan device per training step under the 'auto' policy,
with residency off (before) and on (after), as a markdown table.

    python benchmarks/transfers.py               # train.py's cases, 6 steps each
    python benchmarks/transfers.py --only mlp64 --steps 10

Each setting runs in its own process with GPUCORE_DEVICE=auto, GPUCORE_VULKAN_ALLOW_CPU=1 (so
that a CPU-type device such as lavapipe counts as the device) and GPUCORE_VULKAN_RESIDENCY=0 or
1. The cases are train.py's (MLP 784-512-256-10 at batch 64 and 256, the 28x28 CNN at batch 64),
trained with Adam and cross-entropy on a fresh random host batch every step (in gpucore's memory,
as DataLoader collates: a tensor over a numpy array the caller keeps, from ``from_numpy``, is
uploaded for every op that reads it, since gpucore cannot see writes to it); each step is
measured with gpucore.vulkan.stats(since=gpucore.vulkan.mark()). The table gives the median over
the steps after the first (the first uploads the weights either way) beside the batch's own
bytes (inputs and int64 targets). Byte counts do not depend on the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CASES = {
    "mlp64": ("MLP 784-512-256-10, batch 64", "mlp", 64),
    "mlp256": ("MLP 784-512-256-10, batch 256", "mlp", 256),
    "cnn": ("CNN conv16-pool-conv32-pool-fc, 28x28, batch 64", "cnn", 64),
}

CHILD = """
import json, sys
import numpy as np
import gpucore as gc
import gpucore.nn as nn
import gpucore.nn.functional as F

from train_models import cnn, mlp

kind, batch, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
gc.manual_seed(0)
m = mlp(nn) if kind == "mlp" else cnn(nn)
opt = gc.optim.Adam(m.parameters(), lr=1e-3)
rng = np.random.default_rng(0)
shape = (batch, 784) if kind == "mlp" else (batch, 1, 28, 28)
rows = []
for _ in range(steps):
    x = gc.tensor(rng.standard_normal(shape, dtype=np.float32))  # gpucore memory, as
    y = gc.tensor(rng.integers(0, 10, batch).astype(np.int64))  # DataLoader's batches
    mark = gc.vulkan.mark()
    opt.zero_grad()
    loss = F.cross_entropy(m(x), y)
    loss.backward()
    opt.step()
    loss.item()
    s = gc.vulkan.stats(since=mark)
    rows.append([s["bytes_uploaded"], s["bytes_downloaded"], s["bytes_reused"]])
on_device = sum(p.device.type == "vulkan" for p in m.parameters())
print(json.dumps({"rows": rows, "batch": x.numel() * 4 + y.numel() * 8,
                  "migrated": on_device, "params": len(list(m.parameters())),
                  "policy": gc.get_device_policy(), "device": gc.vulkan.is_available()}))
"""


def run(kind: str, batch: int, steps: int, residency: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCORE_")}
    env.update(
        GPUCORE_DEVICE="auto", GPUCORE_VULKAN_ALLOW_CPU="1", GPUCORE_VULKAN_RESIDENCY=residency
    )
    bench = os.path.join(_ROOT, "benchmarks")  # train_models
    env["PYTHONPATH"] = os.pathsep.join((_ROOT, bench, env.get("PYTHONPATH", "")))
    res = subprocess.run(
        [sys.executable, "-c", CHILD, kind, str(batch), str(steps)],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
    )
    if res.returncode != 0:
        raise SystemExit(f"transfers: the {kind} child failed: {res.stderr[-2000:]}")
    out = json.loads(res.stdout.strip().splitlines()[-1])
    if not out["device"]:
        raise SystemExit("transfers: no Vulkan device under 'auto' (GPUCORE_VULKAN_ALLOW_CPU=1)")
    return out


def kb(n: float) -> str:
    return f"{n / 1024:,.1f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", choices=list(CASES), help="run only this case")
    ap.add_argument("--steps", type=int, default=6, help="training steps per case (default 6)")
    args = ap.parse_args(argv)
    lines = [
        "## Bytes per training step under 'auto' (KiB; median of steps 2..N)\n",
        "| case | batch (x + y) | before: up | before: down | after: up | after: down "
        "| after: reused | params on device after |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in args.only or list(CASES):
        title, kind, batch = CASES[name]
        print(f"{name}: residency off, then on", file=sys.stderr)
        off = run(kind, batch, args.steps, "0")
        on = run(kind, batch, args.steps, "1")

        def med(r, i):
            return statistics.median(row[i] for row in r["rows"][1:])

        lines.append(
            f"| {title} | {kb(on['batch'])} | {kb(med(off, 0))} | {kb(med(off, 1))} "
            f"| {kb(med(on, 0))} | {kb(med(on, 1))} | {kb(med(on, 2))} "
            f"| {on['migrated']} of {on['params']} |"
        )
    lines.append(
        "\nup / down: host -> device uploads and device -> host reads; reused: device copies of "
        "unchanged host tensors read again instead of uploaded. With residency the weights and "
        "Adam state live on the device after the first step; what a step still moves is its "
        "batch, and the logits and their gradient when the loss is small enough (below the "
        "size threshold) to run on the CPU."
    )
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
