"""The few-taps weight gradient's rule (cpu/conv_wtaps.c, gc_conv2d_wtaps_use) on the shapes
that set its edges: the weight + bias gradient of one stride-1 conv2d (conv2d_backward, no
input gradient), one thread's CPU time (``time.thread_time``), medians over rounds in which the
paths alternate call block by call block, per GPUCORE_CONV value:

    auto       the rule
    im2col     conv.c's GEMM path
    direct     conv_wtaps.c wherever its scratch cap allows (the rule's pixel minimum and 1x1
               refusal off): the path the rule weighs against im2col
    direct_gw  conv_direct_backward.c's tile kernel, conv_wtaps.c off

    python benchmarks/conv_wtaps_rule.py            # the shapes below, 9 rounds
    python benchmarks/conv_wtaps_rule.py --reps 15 --sweep   # also pixel counts 2x2 .. 16x16
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("GPUCORE_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from gpucore import _cpu  # noqa: E402

MODES = ("auto", "im2col", "direct", "direct_gw")
# (n, c, h, o, k, padding): square images and kernels, stride 1
SHAPES = [
    (64, 16, 4, 128, 1, 0),
    (64, 16, 8, 128, 1, 0),
    (1, 16, 8, 128, 1, 0),
    (16, 16, 2, 256, 1, 0),
    (64, 1, 4, 128, 3, 1),
    (1, 16, 4, 128, 1, 0),
    (1, 4, 4, 128, 2, 0),
    (1, 1, 4, 128, 3, 1),
    (64, 1, 28, 16, 3, 1),  # train.py's conv1
    (64, 3, 32, 16, 3, 1),  # 27 taps
    (64, 1, 28, 16, 5, 2),  # 25 taps
    (16, 1, 28, 64, 3, 1),
]
SWEEP = [(64, 16, h, 128, 1, 0) for h in (6, 8, 10, 12, 16)]
SWEEP += [(64, 1, h, 128, 3, 1) for h in (6, 8, 10, 12, 16)]
SWEEP += [(64, 4, h, 64, 2, 0) for h in (7, 9, 11, 13, 17)]


def _per_call(fn, n):
    t = time.thread_time()
    for _ in range(n):
        fn()
    return (time.thread_time() - t) / n


def _row(shape, reps, r):
    n, c, h, o, k, p = shape
    oh = h + 2 * p - k + 1
    x = r.standard_normal((n, c, h, h), dtype=np.float32)
    w = r.standard_normal((o, c, k, k), dtype=np.float32)
    g = r.standard_normal((n, o, oh, oh), dtype=np.float32)
    gw, gb = np.empty_like(w), np.empty(o, np.float32)
    geo = (n, c, h, h, k, k, 1, 1, p, p, 1, 1, o)

    def call():
        _cpu.conv2d_backward(x, w, g, None, gw, gb, *geo)

    calls = {}
    for m in MODES:
        os.environ["GPUCORE_CONV"] = m
        call()
        calls[m] = max(1, int(0.01 / max(_per_call(call, 1), 1e-7)))
    times = {m: [] for m in MODES}
    for _ in range(reps):
        for m in MODES:
            os.environ["GPUCORE_CONV"] = m
            times[m].append(_per_call(call, calls[m]))
    med = {m: statistics.median(v) * 1e3 for m, v in times.items()}
    cells = " | ".join(f"{med[m]:.3f}" for m in MODES)
    name = f"n{n} c{c} {h}x{h} o{o} {k}x{k} p{p}"
    print(f"| {name} | {oh * oh} | {c * k * k} | {cells} | {med['auto'] / med['direct']:.2f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=9, help="rounds (default 9)")
    ap.add_argument("--sweep", action="store_true", help="also the pixel-count sweep")
    args = ap.parse_args()
    print(f"\n{_cpu.info()['isa']}, one thread, weight + bias gradient, CPU ms (medians), load")
    print(f"{os.getloadavg()[0]:.1f}; ratio: auto / direct (the new rule / the old one's path)\n")
    print("| shape | pixels | taps | " + " | ".join(MODES) + " | auto / direct |")
    print("|---|---:|---:|" + "---:|" * (len(MODES) + 1))
    r = np.random.default_rng(0)
    for shape in SHAPES + (SWEEP if args.sweep else []):
        _row(shape, args.reps, r)
    os.environ.pop("GPUCORE_CONV", None)
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
