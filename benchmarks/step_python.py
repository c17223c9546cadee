"""The Python side of a training step: train.py's MLP step (Sequential of Linear / ReLU,
cross-entropy, Adam) at shapes so small that its C kernels cost next to nothing, so what is
timed is the interpreter, autograd's bookkeeping and allocation, phase by phase (issue 19).

    python benchmarks/step_python.py                       # this checkout
    python benchmarks/step_python.py --against ../main     # and another checkout, alternating

Each phase is timed on its own (the calling thread's CPU time, ``time.thread_time``: what other
processes on a shared machine do stays out of it), the garbage collector off, median over the
steps; the checkouts run in turns of fresh processes (``--rounds``), and each cell is the median
of the rounds' medians. The last column counts the Python-level calls per step (cProfile: every
function and C entry point called), the second table splits them by phase. At train.py's own
shapes (784-512-256-10, batch 64) the same code runs the same number of calls; there the GEMMs
evict the interpreter's working set between the ops, so each of these microseconds costs more.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import statistics
import subprocess
import sys
import time

PHASES = ("zero_grad", "forward", "loss", "backward", "opt.step")
SIZES = {"tiny": ((8, 8, 8, 10), 4), "mlp64": ((784, 512, 256, 10), 64)}


def _measure(case: str, steps: int) -> dict:
    """In this process (the checkout on sys.path): per-phase medians (us) and calls per step."""
    os.environ.setdefault("GPUCORE_DEVICE", "cpu")
    import numpy as np

    import gpucore
    import gpucore.nn as nn
    import gpucore.nn.functional as F

    sizes, batch = SIZES[case]
    gpucore.manual_seed(0)
    layers = []
    for a, b in zip(sizes[:-2], sizes[1:-1]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(sizes[-2], sizes[-1]))
    opt = gpucore.optim.Adam(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    x = gpucore.from_numpy(rng.standard_normal((batch, sizes[0]), dtype=np.float32))
    y = gpucore.from_numpy(rng.integers(0, sizes[-1], batch).astype(np.int64))
    clock = time.thread_time

    def phases():
        t0 = clock()
        opt.zero_grad()
        t1 = clock()
        out = model(x)
        t2 = clock()
        loss = F.cross_entropy(out, y)
        t3 = clock()
        loss.backward()
        t4 = clock()
        opt.step()
        t5 = clock()
        return t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4

    def profiled(p):  # the same step, each phase under its own profiler
        p[0].enable()
        opt.zero_grad()
        p[0].disable()
        p[1].enable()
        out = model(x)
        p[1].disable()
        p[2].enable()
        loss = F.cross_entropy(out, y)
        p[2].disable()
        p[3].enable()
        loss.backward()
        p[3].disable()
        p[4].enable()
        opt.step()
        p[4].disable()

    for _ in range(30):
        phases()
    gc.disable()
    try:
        times = [phases() for _ in range(steps)]
    finally:
        gc.enable()
    profs = [cProfile.Profile() for _ in PHASES]
    n = 20
    for _ in range(n):
        profiled(profs)
    calls = []
    for p in profs:
        p.create_stats()
        calls.append(sum(v[1] for v in p.stats.values()) / n - 1)  # (less the disable call)
    us = [statistics.median(col) * 1e6 for col in zip(*times)]
    return {"us": us, "calls": calls}


def _run(checkout: str, case: str, steps: int) -> dict:
    env = dict(os.environ, PYTHONPATH=checkout, GPUCORE_DEVICE="cpu")
    cmd = [sys.executable, os.path.abspath(__file__), "--child", case, "--steps", str(steps)]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, cwd=checkout)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--against", help="another checkout (its root) to run in turns with this one")
    ap.add_argument("--case", choices=list(SIZES), default="tiny")
    ap.add_argument("--rounds", type=int, default=3, help="fresh processes per checkout")
    ap.add_argument("--steps", type=int, default=300, help="timed steps per process")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(_measure(args.child, args.steps)))
        return 0
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trees = {"this checkout": here}
    if args.against:
        trees = {f"--against ({args.against})": os.path.abspath(args.against), **trees}
    runs: dict = {k: [] for k in trees}
    for _ in range(args.rounds):
        for name, root in trees.items():
            runs[name].append(_run(root, args.case, args.steps))
    head = [*(f"{p} us" for p in PHASES), "total us", "calls"]
    print(f"\nPython cost of a training step, case {args.case} ({os.cpu_count()} CPUs, load "
          f"{os.getloadavg()[0]:.1f})\n")  # fmt: skip
    print("| checkout | " + " | ".join(head) + " |")
    print("|---|" + "---:|" * len(head))
    first = None
    for name, rs in runs.items():
        us = [statistics.median(r["us"][i] for r in rs) for i in range(len(PHASES))]
        calls = rs[0]["calls"]
        total = sum(us)
        first = first or total
        cells = [f"{v:.1f}" for v in us] + [f"{total:.1f} ({total / first:.2f}x)"]
        print(f"| {name} | " + " | ".join(cells) + f" | {sum(calls):.0f} |")
    print("\nCalls per phase:\n")
    print("| checkout | " + " | ".join(PHASES) + " |")
    print("|---|" + "---:|" * len(PHASES))
    for name, rs in runs.items():
        print(f"| {name} | " + " | ".join(f"{c:.0f}" for c in rs[0]["calls"]) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
