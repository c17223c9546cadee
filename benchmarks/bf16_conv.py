"""bfloat16 conv2d forward: the bf16 GEMM's conv (``_cpu.conv2d_bf16``: column-matrix chunks,
``vdpbf16ps``) against the widened float32 conv (inputs widened, gpucore's float32 conv2d with its
Winograd / direct / im2col choice, the result rounded back once: the fallback), side by side in
one run on one thread, timed by the thread's CPU time (``time.thread_time``: a shared machine's
other processes do not count), alternating the two, best of N rounds. Prints a markdown table;
the rule in ``gpucore/backends/cpu/kernels/nn.py`` (``_bf16_conv_native``) is read off it.

Run from the repository root after building the extension::

    python benchmarks/bf16_conv.py            # 5 rounds
    python benchmarks/bf16_conv.py --rounds 9
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

import gpucore as gc
from gpucore import _cpu
from gpucore import dtypes as D
from gpucore.backends.cpu.kernels import nn as N

# (input, weight, stride, padding): ResNet-style 3x3, 1x1, the 7x7 stem, a small-channel 3x3
SHAPES = [
    ((8, 64, 56, 56), (64, 64, 3, 3), 1, 1),
    ((32, 256, 14, 14), (256, 256, 3, 3), 1, 1),
    ((8, 128, 28, 28), (128, 128, 3, 3), 1, 1),
    ((8, 128, 28, 28), (256, 128, 3, 3), 2, 1),
    ((16, 512, 7, 7), (512, 512, 3, 3), 1, 1),
    ((8, 3, 224, 224), (64, 3, 7, 7), 2, 3),
    ((64, 512, 7, 7), (512, 512, 1, 1), 1, 0),
    ((8, 256, 14, 14), (1024, 256, 1, 1), 1, 0),
    ((8, 16, 32, 32), (16, 16, 3, 3), 1, 1),
    ((8, 64, 28, 28), (64, 64, 3, 3), 1, 1),
    ((1, 64, 56, 56), (64, 64, 3, 3), 1, 1),
    ((4, 256, 14, 14), (256, 256, 3, 3), 1, 1),
    ((8, 32, 28, 28), (64, 32, 5, 5), 1, 2),
]


def measure(xs, ws, st, pd, rng, rounds) -> tuple[float, float]:
    """Best thread CPU seconds of the native and the widened conv, alternating."""
    x = D.f32_to_bf16(rng.standard_normal(xs, dtype=np.float32)).reshape(xs)
    w = D.f32_to_bf16(rng.standard_normal(ws, dtype=np.float32) * 0.1).reshape(ws)
    b = D.f32_to_bf16(rng.standard_normal(ws[0], dtype=np.float32))
    oh = (xs[2] + 2 * pd - ws[2]) // st + 1
    ow = (xs[3] + 2 * pd - ws[3]) // st + 1
    out = np.empty((xs[0], ws[0], oh, ow), np.uint16)
    geo = dict(stride=(st, st), padding=(pd, pd), dilation=(1, 1))
    bias = D.bf16_to_f32(b)

    def native():
        _cpu.conv2d_bf16(x, w, bias, out, *xs, *ws[2:], st, st, pd, pd, 1, 1, ws[0])

    def widened():
        f = [D.bf16_to_f32(t).reshape(t.shape) for t in (x, w, b)]
        y = np.empty(out.shape, np.float32)
        N._conv2d(y, *f, **geo)
        out[...] = D.f32_to_bf16(y).reshape(out.shape)

    best = [1e9, 1e9]
    native(), widened()
    for _ in range(rounds):
        for i, f in enumerate((native, widened)):
            t = time.thread_time()
            f()
            best[i] = min(best[i], time.thread_time() - t)
    return best[0], best[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    if _cpu.gemm_bf16_kernel() is None:
        sys.exit("bf16_conv.py: no AVX-512 BF16 kernel here: bf16 conv2d is the float32 one")
    gc.set_num_threads(1)
    rng = np.random.default_rng(0)
    print(f"load average {os.getloadavg()[0]:.2f}, thread CPU time, best of {args.rounds}\n")
    print(
        "| input | weight | stride | float32 path | bf16 GEMM conv ms | widened float32 ms "
        "| float32 / bf16 | rule picks |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for xs, ws, st, pd in SHAPES:
        nat, wid = measure(xs, ws, st, pd, rng, args.rounds)
        geo = (*xs, *ws[2:], st, st, pd, pd, 1, 1, ws[0])
        pick = "bf16" if N._bf16_conv_native(*geo) else "float32"
        f32 = (
            "winograd"
            if _cpu.conv2d_winograd(*geo)
            else "direct"
            if _cpu.conv2d_direct(*geo)
            else "im2col"
        )
        print(
            f"| {xs} | {ws} | {st} | {f32} | {nat * 1e3:.1f} | {wid * 1e3:.1f} "
            f"| {wid / nat:.2f} | {pick} |"
        )


if __name__ == "__main__":
    main()
