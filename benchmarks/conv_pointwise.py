"""ResNet-50's 1x1 convolutions (batch 1, float32) through conv2d_forward: conv.c's GEMM path
against the pointwise path (cpu/conv_pw.c), one thread, by thread CPU time, the two calls
alternating round by round (``python benchmarks/conv_pointwise.py [--rounds R] [--threads N]``).

Each path gets the weight as the compiled executor packs it for that path: the GEMM path the
runtime's gemm operand (swapped where packing.py's rule says so), the pointwise path gemm_pack
side A, swap 0 (its pixels x channels tiles, for few pixels: swap 1); GPUCORE_CONV=im2col
selects the GEMM path, ``pointwise`` the other, ``pointwise_t`` its pixels x channels tiles (the
rule apart; "px x ch" column, where the ISA has them and the image has at most 112 pixels). The
epilogue is the model's: bias (batch norm folded) and relu, plus the residual for the blocks'
last convolutions. "rule" says which path ``auto`` takes; both give the same bits (the
"same bits" column checks it). With more than one thread the times are the calling thread's CPU
time only, so only one thread's rows compare.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_env import CpuShare, clean_openblas_env, load_note  # noqa: E402

clean_openblas_env("conv_pointwise.py")

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

# (input channels, input size, output channels, stride, residual): every 1x1 layer of ResNet-50
LAYERS = [
    (64, 56, 64, 1, 0), (64, 56, 256, 1, 1), (256, 56, 64, 1, 0), (256, 56, 128, 1, 0),
    (256, 56, 512, 2, 0), (128, 28, 512, 1, 1), (512, 28, 128, 1, 0), (512, 28, 256, 1, 0),
    (512, 28, 1024, 2, 0), (256, 14, 1024, 1, 1), (1024, 14, 256, 1, 0), (1024, 14, 512, 1, 0),
    (1024, 14, 2048, 2, 0), (512, 7, 2048, 1, 1), (2048, 7, 512, 1, 0),
]  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only-pixels", type=int, default=None, help="only layers of this many pixels")
    args = ap.parse_args()
    from gpucore import _cpu  # noqa: PLC0415
    from gpucore.runtime.ir import packing  # noqa: PLC0415

    _cpu.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    share = CpuShare()
    print(f"- {_cpu.info()['isa']}, {args.threads} thread(s), thread CPU ms, median of "
          f"{args.rounds} alternating rounds (min in brackets)")  # fmt: skip
    print()
    print("| layer | pixels | GEMM path ms | pointwise ms | GEMM / pointwise | px x ch ms | "
          "GEMM / px x ch | rule | same bits |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---|---|")
    tot = [0.0, 0.0, 0.0]  # GEMM path, pointwise, the rule's choice
    for c, h, o, s, r in LAYERS:
        oh = (h - 1) // s + 1
        if args.only_pixels and oh * oh != args.only_pixels:
            continue
        geo = (1, c, h, h, 1, 1, s, s, 0, 0, 1, 1, o)
        x = rng.standard_normal((1, c, h, h), dtype=np.float32)
        w = (rng.standard_normal((o, c, 1, 1)) / np.sqrt(c)).astype(np.float32)
        w.flags.writeable = False
        b = rng.standard_normal(o).astype(np.float32)
        res = rng.standard_normal((1, o, oh, oh)).astype(np.float32) if r else None
        os.environ["GPUCORE_CONV"] = "auto"
        rule = _cpu.conv2d_pointwise(*geo)
        weights = {
            "im2col": packing.gemm_operand(w, w.reshape(-1), "a", o, oh * oh, c, 0, 0, 0),
            "pointwise": _cpu.gemm_pack(w.reshape(-1), "a", o, c, 0, 0),
        }
        os.environ["GPUCORE_CONV"] = "pointwise_t"
        if _cpu.conv2d_pointwise(*geo) == 2:
            weights["pointwise_t"] = _cpu.gemm_pack(w.reshape(-1), "a", o, c, 0, 1)
        outs = {k: np.empty((1, o, oh, oh), np.float32) for k in weights}
        times: dict = {k: [] for k in weights}
        for i in range(args.rounds + 2):
            for mode, wp in weights.items():
                os.environ["GPUCORE_CONV"] = mode
                call = (x, wp, b, outs[mode], *geo, res, _cpu.UNARY_RELU)
                t0 = time.thread_time()
                _cpu.conv2d_forward(*call)
                if i >= 2:
                    times[mode].append(time.thread_time() - t0)
        os.environ["GPUCORE_CONV"] = "auto"
        med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        lo = {k: min(v) * 1e3 for k, v in times.items()}
        tot[0] += med["im2col"]
        tot[1] += med["pointwise"]
        tot[2] += med[{0: "im2col", 1: "pointwise", 2: "pointwise_t"}[rule]]
        same = all(np.array_equal(outs["im2col"].view(np.int32), v.view(np.int32))
                   for v in outs.values())  # fmt: skip
        t = "| "
        if "pointwise_t" in med:
            t = f"{med['pointwise_t']:.3f} ({lo['pointwise_t']:.3f}) | "
            t += f"{med['im2col'] / med['pointwise_t']:.2f}"
        name = f"{c} -> {o}, {h}x{h}" + (f", stride {s}" if s > 1 else "")
        name += ", + res" if r else ""
        print(f"| {name} | {oh * oh} | {med['im2col']:.3f} ({lo['im2col']:.3f}) | "
              f"{med['pointwise']:.3f} ({lo['pointwise']:.3f}) | "
              f"{med['im2col'] / med['pointwise']:.2f} | {t} | "
              f"{('GEMM', 'pointwise', 'px x ch')[rule]} | "
              f"{'yes' if same else 'NO'} |")  # fmt: skip
    print(f"| total | | {tot[0]:.3f} | {tot[1]:.3f} | {tot[0] / tot[1]:.2f} | | | | |")
    print(f"| the rule's choice | | {tot[0]:.3f} | {tot[2]:.3f} | {tot[0] / tot[2]:.2f} | | | | |")
    print()
    print(f"- load average {os.getloadavg()[0]:.2f}")
    print(load_note(share.others(), "during the run"))


if __name__ == "__main__":
    main()
