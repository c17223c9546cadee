"""INT8 GEMM benchmark: gpucore's QGEMM (``_cpu.qgemm``, uint8 activations x int8 weights
pre-packed by ``qgemm_pack``) in GOP/s against gpucore's own float32 GEMM in GFLOP/s (an op is a
multiply or an add, so both count 2 * m * n * k), side by side in one run, on one thread and on
two.  Prints a markdown table.

Run from the repository root after building the extension::

    python benchmarks/quant.py             # squares 64..2048, the MLP / BERT shapes, GEMV
    python benchmarks/quant.py --quick     # fewer rounds
    python benchmarks/quant.py --threads 1 # one thread only
    python benchmarks/quant.py --threads 1 --cpu-time   # a shared machine: see below
    python benchmarks/quant.py --models    # models: FP32 vs INT8 static (quant_models.py)
    python benchmarks/quant.py --models --only "digits CNN" --libs "gpucore,gpucore Vulkan"
    python benchmarks/shaders.py --only qgemm  # the Vulkan int8 GEMM shader vs the float one
    python benchmarks/quant.py --onnx      # ONNX INT8 models: gpucore.onnx vs ONNX Runtime
    python benchmarks/quant.py --bert      # a BERT-base layer FP32 vs INT8 (quant_bert.py)

Columns: QGEMM with the float32 epilogue (dynamic quantization's Linear: zero point, per-channel
scales, bias) and with the requantized uint8 output (static quantization); SGEMM is
``_cpu.gemm`` with the weight as nn.Linear stores it ([n, k], trans_b = 1), the faster of the
plain call and the weight pre-packed by ``gemm_pack`` (what the runtime does for m > 16).  Each
shape is timed in alternating rounds (QGEMM, SGEMM, ...) and the median round is reported;
ratio = QGEMM GOP/s / SGEMM GFLOP/s.  GPUCORE_CPU_ISA picks the instruction set (the table names
the micro-kernels).  ``--cpu-time`` times one-thread rows by the thread's CPU time
(``time.thread_time``) instead of the wall clock: on a machine that other processes keep busy
this measures the kernels rather than the time slices they got (rows with more threads always
use the wall clock).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_env import CpuShare, clean_openblas_env, load_note  # noqa: E402

clean_openblas_env("quant.py")

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from gpucore import _cpu  # noqa: E402

SQUARES = [(s, s, s) for s in (64, 128, 256, 512, 1024, 2048)]
# (m, n, k): an MLP layer, BERT-base's attention projection, FFN up / down at 128 tokens, and
# batch-1 / batch-16 Linear layers (the GEMV form)
MODEL = [(64, 512, 784), (128, 768, 768), (128, 3072, 768), (128, 768, 3072), (1, 2048, 2048),
         (16, 2048, 2048)]  # fmt: skip


def _rate(fn, ops, min_time, clock):
    """GOP/s of fn over at least min_time seconds of clock (one warm-up call first)."""
    fn()
    reps, t = 0, 0.0
    t0 = clock()
    while t < min_time:
        fn()
        reps += 1
        t = clock() - t0
    return ops * reps / t / 1e9


def bench_shape(m, n, k, rounds, min_time, clock):
    r = np.random.default_rng(0)
    w8 = r.integers(-127, 128, (n, k), dtype=np.int8)
    a8 = r.integers(0, 256, (m, k), dtype=np.uint8)
    pq = _cpu.qgemm_pack(w8, k, n, 1)
    ws = (r.random(n) * 0.01 + 0.001).astype(np.float32)
    bias = r.standard_normal(n).astype(np.float32)
    of, ou = np.empty((m, n), np.float32), np.empty((m, n), np.uint8)
    af = r.standard_normal((m, k)).astype(np.float32)
    wf = r.standard_normal((n, k)).astype(np.float32)
    pf = _cpu.gemm_pack(wf, "b", k, n, 1, 0)
    cf = np.empty((m, n), np.float32)
    fns = {
        "q_f32": lambda: _cpu.qgemm(a8, pq, of, m, 0.02, 128, ws, bias, 0, 1.0, 0),
        "q_u8": lambda: _cpu.qgemm(a8, pq, ou, m, 0.02, 128, ws, bias, 1, 0.05, 3),
        "sgemm": lambda: _cpu.gemm(af, wf, cf, 1, m, n, k, 0, 1, 1.0, 0.0, 0, 0, 0),
        "sgemm_packed": lambda: _cpu.gemm(af, pf, cf, 1, m, n, k, 0, 1, 1.0, 0.0, 0, 0, 0),
    }
    return alternate(fns, 2.0 * m * n * k, rounds, min_time, clock)


def alternate(fns: dict, ops: float, rounds: int, min_time: float, clock) -> dict:
    """Median rate (G per second of ``ops`` per call) of each of ``fns``, the calls alternating
    round by round; "sgemm" keeps the faster of itself and "sgemm_packed"."""
    got = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            got[name].append(_rate(fn, ops, min_time, clock))
    med = {name: statistics.median(v) for name, v in got.items()}
    med["sgemm"] = max(med["sgemm"], med.pop("sgemm_packed"))
    return med


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="1 round of 0.1 s per shape")
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts (1,2)")
    ap.add_argument("--cpu-time", action="store_true", help="one-thread rows by CPU time")
    ap.add_argument(
        "--models", action="store_true", help="the model table instead (quant_models.py)"
    )
    ap.add_argument(
        "--onnx", action="store_true", help="ONNX INT8 models vs ONNX Runtime (quant_onnx.py)"
    )
    ap.add_argument("--libs", default="", help="--models: only these rows (comma-separated: "
                    "gpucore, gpucore Vulkan, PyTorch FX, ONNX Runtime)")  # fmt: skip
    ap.add_argument("--only", default="", help="--models: model names containing one of these "
                    "(comma-separated, e.g. 'digits CNN')")  # fmt: skip
    ap.add_argument(
        "--bert", action="store_true", help="a BERT-base layer FP32 vs INT8 (quant_bert.py)"
    )
    args = ap.parse_args()
    if args.bert:
        from quant_bert import table as bert_table  # noqa: PLC0415

        share = CpuShare()
        for t in (int(t) for t in args.threads.split(",")):
            bert_table(rounds=2 if args.quick else 5, min_time=0.1 if args.quick else 0.3,
                       threads=t)  # fmt: skip
            print()
        print(load_note(share.others(), "during the run"))
        return
    if args.onnx:
        from quant_onnx import dynamic_table  # noqa: PLC0415
        from quant_onnx import table as onnx_table  # noqa: PLC0415

        share = CpuShare()
        threads = [int(t) for t in args.threads.split(",")]
        rounds, min_time = (2, 0.1) if args.quick else (5, 0.2)
        onnx_table(rounds=rounds, min_time=min_time, threads=threads)
        print()
        dynamic_table(rounds=rounds, min_time=min_time)
        print()
        print(load_note(share.others(), "during the run"))
        return
    if args.models:
        from quant_models import table  # noqa: PLC0415

        share = CpuShare()
        table(rounds=2 if args.quick else 5, min_time=0.1 if args.quick else 0.2,
              libs=[x for x in args.libs.split(",") if x],
              models=[x for x in args.only.split(",") if x])  # fmt: skip
        print()
        print(load_note(share.others(), "during the run"))
        return
    rounds, min_time = (1, 0.1) if args.quick else (3, 0.2)
    threads = [int(t) for t in args.threads.split(",")]
    info = _cpu.info()
    kernel = _cpu.qgemm_pack(np.zeros(1, np.int8), 1, 1, 1).kernel
    share = CpuShare()
    print(f"- ISA {info['isa']}: int8 `{kernel}`, float32 `{info['gemm']['float32']['kernel']}`")
    print()
    print("| m x n x k | threads | QGEMM f32 out GOP/s | QGEMM u8 out GOP/s | SGEMM GFLOP/s "
          "| QGEMM / SGEMM |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    try:
        for nt in threads:
            _cpu.set_num_threads(nt)
            for m, n, k in SQUARES + MODEL:
                cpu = args.cpu_time and nt == 1
                r = bench_shape(
                    m, n, k, rounds, min_time, time.thread_time if cpu else time.perf_counter
                )
                ratio = r["q_f32"] / r["sgemm"]
                row = f"| {m}x{n}x{k} | {nt} | {r['q_f32']:.0f} | {r['q_u8']:.0f} | "
                print(row + f"{r['sgemm']:.1f} | {ratio:.2f}x |", flush=True)
    finally:
        _cpu.set_num_threads(info["threads"])
    print()
    print(load_note(share.others(), "during the run"))
    if args.cpu_time:
        print("- one-thread rows timed by the thread's CPU time (--cpu-time)")


if __name__ == "__main__":
    main()
