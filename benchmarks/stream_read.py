"""What bounds a batch-1 MLP: gpucore's compiled W x 3 Linear MLP at batch 1 (three GEMVs that
stream every weight once per call) against a plain streaming read of the same number of bytes,
side by side in one run.

    python benchmarks/stream_read.py                 # width 2048 (48 MiB of float32 weights)
    python benchmarks/stream_read.py --width 1024 --threads 1

The streaming read is a few lines of C compiled here with the system compiler (``cc -O3
-march=native``, vector loads summed into 4 independent accumulators, no stores): ``threads``
POSIX threads each read their contiguous share of a buffer as large as the model's weights, a
barrier between repetitions, thread 0 timing each one. Its GB/s is what this machine's memory
system gives to that many cores; the MLP's GB/s (weight bytes / time per call) against it says
how close the GEMVs are to the bandwidth bound. Both run in this process, alternating
(gpucore's pool and the C threads take turns), medians over the repetitions; ONNX Runtime's
time is left to benchmarks/infer.py (its own process). The load of other processes is printed:
on a shared machine the bandwidth both get moves with it.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isdir(os.path.join(_ROOT, "gpucore")) and _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from bench_env import CpuShare, load_note  # noqa: E402

C_SOURCE = r"""
#include <pthread.h>
#include <stddef.h>
#include <time.h>

typedef float v8 __attribute__((vector_size(32), aligned(4)));

typedef struct {
    const float *p;
    size_t n, reps;
    int id, threads;
    pthread_barrier_t *bar;
    double *times;
    volatile float sink;
} job;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *reader(void *arg)
{
    job *j = arg;
    const size_t lo = j->n * (size_t)j->id / (size_t)j->threads / 32 * 32;
    const size_t hi = j->n * (size_t)(j->id + 1) / (size_t)j->threads / 32 * 32;
    for (size_t r = 0; r < j->reps; r++) {
        pthread_barrier_wait(j->bar);
        const double t0 = now();
        v8 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
        for (size_t i = lo; i < hi; i += 32) {
            s0 += *(const v8 *)(j->p + i);
            s1 += *(const v8 *)(j->p + i + 8);
            s2 += *(const v8 *)(j->p + i + 16);
            s3 += *(const v8 *)(j->p + i + 24);
        }
        const v8 s = s0 + s1 + s2 + s3;
        j->sink = s[0] + s[7];
        pthread_barrier_wait(j->bar);
        if (j->id == 0)
            j->times[r] = now() - t0;
    }
    return NULL;
}

/* times[r]: seconds for all threads to read p[0, n) once (rep r) */
int stream_read(const float *p, size_t n, int threads, size_t reps, double *times)
{
    pthread_barrier_t bar;
    pthread_t th[64];
    job jobs[64];
    if (threads < 1 || threads > 64 || pthread_barrier_init(&bar, NULL, (unsigned)threads))
        return -1;
    for (int t = 0; t < threads; t++) {
        jobs[t] = (job){.p = p, .n = n, .reps = reps, .id = t, .threads = threads, .bar = &bar,
                        .times = times};
        if (t && pthread_create(&th[t], NULL, reader, &jobs[t]))
            return -1;
    }
    reader(&jobs[0]);
    for (int t = 1; t < threads; t++)
        pthread_join(th[t], NULL);
    pthread_barrier_destroy(&bar);
    return 0;
}
"""


def build_reader(tmp: str):
    """The compiled streaming reader (ctypes), or None without a C compiler."""
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        return None
    src, lib = os.path.join(tmp, "stream.c"), os.path.join(tmp, "stream.so")
    with open(src, "w") as f:
        f.write(C_SOURCE)
    cmd = [cc, "-O3", "-march=native", "-shared", "-fPIC", "-pthread", src, "-o", lib]
    if subprocess.run(cmd, capture_output=True).returncode != 0:
        return None
    fn = ctypes.CDLL(lib).stream_read
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_size_t,
                   ctypes.c_void_p]  # fmt: skip
    return fn


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=60)
    args = ap.parse_args(argv)

    import gpucore
    import gpucore.nn as nn
    from gpucore import _cpu

    _cpu.set_num_threads(args.threads)
    w = args.width
    gpucore.manual_seed(0)
    model = nn.Sequential(nn.Linear(w, w), nn.ReLU(), nn.Linear(w, w), nn.ReLU(), nn.Linear(w, w))
    x = np.random.default_rng(0).standard_normal((1, w)).astype(np.float32)
    cm = gpucore.compile(model, [gpucore.tensor(x)], device="cpu")
    weight_bytes = sum(p.numel() * 4 for p in model.parameters())
    buf = np.random.default_rng(1).standard_normal(weight_bytes // 4).astype(np.float32)

    with tempfile.TemporaryDirectory() as tmp:
        reader = build_reader(tmp)
        if reader is None:
            print("no C compiler: the streaming read is left out")
            return 1
        share = CpuShare()
        reps = 4
        times = np.zeros(reps)
        mlp, stream = [], []
        for _ in range(3):
            cm.run_arrays([x])
        for _ in range(args.rounds):
            if reader(buf.ctypes.data, buf.size, args.threads, reps, times.ctypes.data):
                raise RuntimeError(f"stream_read: could not start {args.threads} threads")
            stream += list(times[1:])  # (the first: threads starting)
            for _ in range(reps):
                t0 = time.perf_counter()
                cm.run_arrays([x])
                mlp.append(time.perf_counter() - t0)
        note = load_note(share.others(), "during the run")
    mb = weight_bytes / 1e6

    def row(what: str, samples: list) -> str:
        med, p10 = statistics.median(samples), float(np.percentile(samples, 10))
        return (f"| {what} | {mb:.1f} MB | {med * 1e6:,.0f} | {p10 * 1e6:,.0f} | "
                f"{weight_bytes / med / 1e9:.1f} | {weight_bytes / p10 / 1e9:.1f} |")  # fmt: skip

    print(f"### Batch-1 MLP (W {w}, 3 Linear) against a streaming read, {args.threads} threads\n")
    print("| what | bytes per call | µs median | µs p10 | GB/s median | GB/s p10 |")
    print("|---|---:|---:|---:|---:|---:|")
    print(row(f"streaming read (C, {args.threads} threads)", stream))
    print(row("gpucore compiled MLP, batch 1 (the weights)", mlp))
    ratio = statistics.median(mlp) / statistics.median(stream)
    ratio10 = float(np.percentile(mlp, 10) / np.percentile(stream, 10))
    print(f"\nMLP / streaming read time: {ratio:.3f} (medians), {ratio10:.3f} (10th percentiles: "
          "the least disturbed calls; other tenants' memory traffic moves both)")  # fmt: skip
    print(note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
