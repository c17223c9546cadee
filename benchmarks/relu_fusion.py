"""nn.Sequential's ReLU fusion (gpucore/nn/modules/relu_fusion.py) on and off in one process:
train.py's CNN and MLP steps, the same model and batch, blocks of steps alternating between the
plain path (fusion off) and the fused ops, medians of wall and thread CPU time per step.

    python benchmarks/relu_fusion.py [--blocks 30] [--steps 10] [--cases cnn,mlp64,mlp256]

With GPUCORE_NUM_THREADS=1 the thread CPU time is the whole step's work, robust to a shared
machine's load; the wall time is what a user waits.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import train  # noqa: E402  (benchmarks/train.py: the models, batches and steps)

from gpucore.nn.modules import relu_fusion  # noqa: E402

CASES = {"cnn": ("cnn", 64), "mlp64": ("mlp", 64), "mlp256": ("mlp", 256)}


def measure(case: str, blocks: int, steps: int) -> list[str]:
    kind, batch = CASES[case]
    model, _, x, y = train.make_case(kind, batch)
    step = train.gpucore_step_fn(model, x, y, kind)
    times = {False: ([], []), True: ([], [])}
    for _ in range(10):
        step()
    for b in range(blocks):
        for fused in (False, True) if b % 2 == 0 else (True, False):
            relu_fusion.ENABLED[0] = fused
            step()  # (the first step after a switch re-warms the allocator's blocks)
            for _ in range(steps):
                w, c = time.perf_counter(), time.thread_time()
                step()
                times[fused][1].append(time.thread_time() - c)
                times[fused][0].append(time.perf_counter() - w)
    relu_fusion.ENABLED[0] = True
    ow, oc = (statistics.median(v) * 1e3 for v in times[False])
    nw, nc = (statistics.median(v) * 1e3 for v in times[True])
    return [
        case,
        f"{ow:.2f}",
        f"{nw:.2f}",
        f"{nw / ow:.2f}",
        f"{oc:.2f}",
        f"{nc:.2f}",
        f"{nc / oc:.2f}",
    ]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--blocks", type=int, default=30, help="alternating blocks per mode")
    ap.add_argument("--steps", type=int, default=10, help="timed steps per block")
    ap.add_argument("--cases", default="cnn,mlp64,mlp256")
    args = ap.parse_args(argv)
    print(f"- load average before: {os.getloadavg()[0]:.2f}; threads: "
          f"{os.environ.get('GPUCORE_NUM_THREADS', 'default')}")  # fmt: skip
    head = ["case", "plain wall ms", "fused wall ms", "fused/plain", "plain CPU ms", "fused CPU ms",
            "fused/plain"]  # fmt: skip
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" if i == 0 else "---:" for i in range(len(head))) + "|")
    for case in args.cases.split(","):
        print("| " + " | ".join(measure(case, args.blocks, args.steps)) + " |", flush=True)
    print(f"- load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
