"""bfloat16 GEMM benchmark: gpucore's bf16 GEMM (``_cpu.gemm_bf16``, AVX-512 BF16 ``vdpbf16ps``,
float32 sums, bf16 output) in GFLOP/s against gpucore's float32 GEMM, against the float32
fallback that bf16 products take without the instruction (both operands widened to float32,
SGEMM, the result rounded back: what gpucore did before), and against PyTorch's bf16 matmul, side
by side in one run, on one thread and on two. Prints a markdown table.

Run from the repository root after building the extension::

    python benchmarks/bf16.py              # squares 256..2048 and MLP / BERT shapes
    python benchmarks/bf16.py --quick      # fewer rounds
    python benchmarks/bf16.py --threads 1 --cpu-time   # a shared machine: see below

Every product is nn.Linear's form, ``x [m, k] @ W[n, k].T`` (trans_b = 1), with the operands
already in their dtype (the fallback column includes its two conversions and its rounding: they
are part of that path's cost). SGEMM is the faster of the plain call and the weight pre-packed
by ``gemm_pack``. Each shape is timed in alternating rounds and the median round reported.
``--cpu-time`` times one-thread rows by the thread's CPU time (``time.thread_time``): on a
machine that other processes keep busy this measures the kernels rather than the time slices
they got (PyTorch's one-thread row too: its matmul runs on the calling thread then).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_env import CpuShare, clean_openblas_env, load_note  # noqa: E402

clean_openblas_env("bf16.py")

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from quant import alternate  # noqa: E402 - the same alternating timer (run from benchmarks/)

from gpucore import _cpu  # noqa: E402
from gpucore import dtypes as D  # noqa: E402

SQUARES = [(s, s, s) for s in (256, 512, 1024, 2048)]
# (m, n, k): an MLP layer, BERT-base's attention projection and FFN up / down at 128 tokens, a
# batch-16, -8 and -1 Linear (the last two on the small-m form)
MODEL = [(64, 512, 784), (128, 768, 768), (128, 3072, 768), (128, 768, 3072), (16, 2048, 2048),
         (8, 2048, 2048), (1, 2048, 2048)]  # fmt: skip


def bench_shape(m, n, k, rounds, min_time, clock, torch):
    r = np.random.default_rng(0)
    af = r.standard_normal((m, k)).astype(np.float32)
    wf = r.standard_normal((n, k)).astype(np.float32)
    ab, wb = D.f32_to_bf16(af).reshape(m, k), D.f32_to_bf16(wf).reshape(n, k)
    cb, cf = np.empty((m, n), np.uint16), np.empty((m, n), np.float32)
    pf = _cpu.gemm_pack(wf, "b", k, n, 1, 0)

    def fallback():
        a32 = D.bf16_to_f32(ab).reshape(m, k)
        w32 = D.bf16_to_f32(wb).reshape(n, k)
        _cpu.gemm(a32, w32, cf, 1, m, n, k, 0, 1, 1.0, 0.0, 0, 0, 0)
        return D.f32_to_bf16(cf)

    fns = {
        "bf16": lambda: _cpu.gemm_bf16(ab, wb, cb, 1, m, n, k, 0, 1, 0, 0, 0, None, 0),
        "fallback": fallback,
        "sgemm": lambda: _cpu.gemm(af, wf, cf, 1, m, n, k, 0, 1, 1.0, 0.0, 0, 0, 0),
        "sgemm_packed": lambda: _cpu.gemm(af, pf, cf, 1, m, n, k, 0, 1, 1.0, 0.0, 0, 0, 0),
    }
    if torch is not None:
        ta = torch.from_numpy(af).to(torch.bfloat16)
        tw = torch.from_numpy(wf).to(torch.bfloat16)
        fns["torch"] = lambda: torch.matmul(ta, tw.T)
    return alternate(fns, 2.0 * m * n * k, rounds, min_time, clock)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="1 round of 0.1 s per shape")
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts (1,2)")
    ap.add_argument("--cpu-time", action="store_true", help="one-thread rows by CPU time")
    args = ap.parse_args()
    kernel = _cpu.gemm_bf16_kernel()
    if kernel is None:
        sys.exit("bf16.py: this CPU / ISA has no bfloat16 GEMM kernel (needs AVX-512 BF16)")
    try:
        import torch  # noqa: PLC0415
    except ImportError:
        torch = None
    rounds, min_time = (1, 0.1) if args.quick else (3, 0.2)
    threads = [int(t) for t in args.threads.split(",")]
    info = _cpu.info()
    share = CpuShare()
    lib = f", PyTorch {torch.__version__}" if torch is not None else ", no PyTorch"
    print(
        f"- ISA {info['isa']}: bf16 `{kernel}`, float32 `{info['gemm']['float32']['kernel']}`{lib}"
    )
    print()
    print("| m x n x k | threads | bf16 GEMM GFLOP/s | float32 fallback | SGEMM | PyTorch bf16 "
          "| bf16 / SGEMM | bf16 / fallback | bf16 / PyTorch |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    torch_threads = torch.get_num_threads() if torch is not None else 0
    try:
        for nt in threads:
            _cpu.set_num_threads(nt)
            if torch is not None:
                torch.set_num_threads(nt)
            for m, n, k in SQUARES + MODEL:
                cpu = args.cpu_time and nt == 1
                r = bench_shape(
                    m, n, k, rounds, min_time, time.thread_time if cpu else time.perf_counter,
                    torch,
                )  # fmt: skip
                t = r.get("torch")
                row = (
                    f"| {m}x{n}x{k} | {nt} | {r['bf16']:.0f} | {r['fallback']:.0f} | "
                    f"{r['sgemm']:.0f} | {t:.0f} | " if t else
                    f"| {m}x{n}x{k} | {nt} | {r['bf16']:.0f} | {r['fallback']:.0f} | "
                    f"{r['sgemm']:.0f} | - | "
                )  # fmt: skip
                row += f"{r['bf16'] / r['sgemm']:.2f}x | {r['bf16'] / r['fallback']:.2f}x | "
                row += f"{r['bf16'] / t:.2f}x |" if t else "- |"
                print(row, flush=True)
    finally:
        _cpu.set_num_threads(info["threads"])
        if torch is not None:
            torch.set_num_threads(torch_threads)
    print()
    print(load_note(share.others(), "during the run"))
    if args.cpu_time:
        print("- one-thread rows timed by the thread's CPU time (--cpu-time)")


if __name__ == "__main__":
    main()
