"""gpucore.distributed, measured: all_reduce bandwidth of gpucore tensors against raw mpi4py on
numpy arrays, and data-parallel training throughput (MLP 784-512-256-10 batch 256, the CNN of
benchmarks/train.py batch 64) on 1 and 2 ranks with the gradient all-reduce overlapping backward
(DDP's buckets) and after backward (one all-reduce of every gradient). Every rank gets one
thread, so 2 ranks use the machine's 2 cores. Prints markdown tables.

    python benchmarks/distributed.py [--np 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run(np_: int) -> list[dict]:
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        sys.exit("distributed.py: mpirun not found (apt-get install openmpi-bin)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENBLAS_")}
    env["GPUCORE_NUM_THREADS"] = "1"
    cmd = [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(np_), sys.executable]
    cmd.append(os.path.join(HERE, "distributed_worker.py"))
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit(out.stdout + out.stderr)
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--np", type=int, default=2, help="ranks for the multi-rank runs (default 2)")
    args = ap.parse_args(argv)
    one, many = run(1), run(args.np)
    print(f"## all_reduce, {args.np} ranks, float32, median (gpucore's includes its shape check)\n")
    print(
        "| size | mpi4py Allreduce (numpy) | gpucore all_reduce | GB/s gpucore | "
        "gpucore/mpi4py bandwidth (median of paired runs) |"
    )
    print("|---:|---:|---:|---:|---:|")
    for r in many:
        if r["kind"] != "all_reduce":
            continue
        size = r["nbytes"]
        label = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"
        print(
            f"| {label} | {r['raw'] * 1e6:.1f} µs | {r['gpucore'] * 1e6:.1f} µs | "
            f"{size / r['gpucore'] / 1e9:.2f} | {r['ratio']:.2f} |"
        )
    print("\n## Training step (global batch), ms, median; 1 thread per rank\n")
    n = args.np
    print(
        f"| model | 1 process | {n} ranks, overlap | {n} ranks, after backward | {n} ranks, no "
        "communication (bound) | speed-up (overlap) |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    base = {(r["model"], r["batch"]): r["step"] for r in one if r["kind"] == "train"}
    rows: dict = {}
    for r in many:
        if r["kind"] == "train":
            rows.setdefault((r["model"], r["batch"]), {})[r["mode"]] = r["step"]
    for key, modes in rows.items():
        t1, to, ta = base[key], modes["overlap"], modes["after backward"]
        tn = modes["no communication"]
        print(
            f"| {key[0].upper()} batch {key[1]} | {t1 * 1e3:.2f} | {to * 1e3:.2f} | "
            f"{ta * 1e3:.2f} | {tn * 1e3:.2f} | {t1 / to:.2f}x (efficiency {t1 / (n * to):.0%}) |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
