"""The compiled CPU executor's direct input / output (executors/cpu.py, direct_io) against the
copies it replaces, A/B in one process: the same model compiled twice, once as before (no
``direct_io``, the planner writing over inputs in place), the two called alternately
(infer_workers.measure), medians.

    python benchmarks/direct_io.py                  # infer.py's MLP and transformer rows
    python benchmarks/direct_io.py --only mlp512_b32
    python benchmarks/direct_io.py --cpu-time       # process CPU time (all threads) per call

Prints a markdown table: µs per ``run_arrays([x])`` call, copy / direct, and the load average.
On a loaded machine (other processes on the cores) wall time mostly measures the waits;
``--cpu-time`` counts the work of every thread of this process instead (the pool's spinning
included).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from unittest import mock

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import infer_workers  # noqa: E402
import models  # noqa: E402
from infer_workers import CONFIGS, measure  # noqa: E402

import gpucore  # noqa: E402
from gpucore import runtime  # noqa: E402
from gpucore.runtime.executors import cpu as cpu_executors  # noqa: E402

ROWS = ("mlp512_b1", "mlp512_b32", "mlp512_b128", "mlp2048_b32")
ROWS += ("tb_1x16x64", "tb_4x16x64", "tb_4x64x128", "tb_4x128x256")


def _cpu_loop(fn, n: int) -> float:
    """Process CPU seconds (every thread) of n calls of fn."""
    t0 = time.process_time()
    for _ in range(n):
        fn()
    return time.process_time() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", choices=ROWS, help="rows (default all)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--target", type=float, default=0.05, help="seconds per sample")
    ap.add_argument("--cpu-time", action="store_true", help="process CPU time, not wall time")
    args = ap.parse_args(argv)
    if args.cpu_time:
        infer_workers._loop = _cpu_loop  # the sample loop of infer_workers.measure
    gpucore.set_num_threads(args.threads)
    ns = models.namespace(gpucore.nn)
    clock = "process CPU time" if args.cpu_time else "wall time"
    print(f"threads {args.threads}, {clock}; load average before: {os.getloadavg()[0]:.2f}\n")
    print("| model | shape | copy µs | direct µs | copy / direct | direct io (in, out) |")
    print("|---|---|---|---|---|---|")
    for name in args.only or ROWS:
        cfg = CONFIGS[name]
        gpucore.manual_seed(0)
        model = cfg.build(ns)
        model.eval()
        x = np.random.default_rng(0).standard_normal(cfg.shape).astype(np.float32)
        direct = runtime.compile(model, [x], device="cpu")
        with mock.patch.object(cpu_executors, "direct_io", lambda *a: ({}, {})):
            # as before: copies, and (no input read in place) the planner's writes over inputs
            copy = runtime.compile(model, [x], device="cpu")
        a, b = direct.run_arrays([x])[0], copy.run_arrays([x])[0]
        assert a.tobytes() == b.tobytes(), name
        out: dict = {}
        fns = {
            "copy": lambda c=copy, x=x: c.run_arrays([x]),
            "direct": lambda d=direct, x=x: d.run_arrays([x]),
        }
        measure(fns, repeats=args.repeats, target=args.target, out=out)
        med = {k: statistics.median(v["times"]) * 1e6 for k, v in out.items()}
        (ex,) = direct.executors()
        io = f"{len(ex.direct[0])}, {len(ex.direct[1])}"
        print(
            f"| {cfg.section} | {cfg.label} | {med['copy']:.1f} | {med['direct']:.1f} | "
            f"{med['copy'] / med['direct']:.3f} | {io} |",
            flush=True,
        )
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
