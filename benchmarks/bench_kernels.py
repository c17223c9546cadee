"""GEMM kernel benchmark: gpucore._cpu.gemm vs numpy matmul (OpenBLAS), float32 GFLOP/s; then
the inference kernels (layer_norm, attention, GEMV) vs PyTorch / numpy, float32 microseconds.

Run from the repository root after ``python setup.py build_ext --inplace``::

    python benchmarks/bench_kernels.py                 # squares 64..2048, the MLP shapes, and
                                                       # the inference kernels
    python benchmarks/bench_kernels.py --quick         # fewer repeats
    python benchmarks/bench_kernels.py --trans         # also the transposed variants (gpucore)
    python benchmarks/bench_kernels.py --dtype float64
    python benchmarks/bench_kernels.py --only-infer    # just the inference kernels (--no-infer:
                                                       # just GEMM)
    python benchmarks/bench_kernels.py --model --threads 1   # the GEMMs of train.py's GPT and of
                                                       # infer.py's MLP / transformer block rows

The inference table: layer_norm (``_cpu.layer_norm``, weight and bias) vs
``torch.nn.functional.layer_norm``; attention (``_cpu.attention``, algo 0 = auto) vs
``torch.nn.functional.scaled_dot_product_attention`` (numpy's float32 matmul / softmax /
matmul when PyTorch is missing); GEMV, ``linear`` at batch 1 (``_cpu.gemm`` with m = 1 and the
weight [n, k] as nn.Linear stores it, trans_b = 1) vs numpy's ``x @ W.T``.  Same alternating
rounds as the GEMM table; ratio = reference time / gpucore time (> 1: gpucore is faster).

gpucore uses its thread pool (GPUCORE_NUM_THREADS, default all CPUs; GPUCORE_CPU_ISA forces an
instruction set); numpy uses OpenBLAS's default threads.  ``--threads N`` sets both (the pool
through ``_cpu.set_num_threads``, OpenBLAS through OPENBLAS_NUM_THREADS before it loads).
OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE halve numpy's speed on our machines and are read when
OpenBLAS loads, so if either is set the script re-executes itself without them before importing
numpy.  Every shape is timed in
alternating blocks (all shapes with gpucore, a 0.3 s pause, all shapes with numpy, a pause, ...:
a library's spinning worker threads would otherwise slow the other) and the median over the
rounds is reported, with the best round next to it (on a shared, busy machine the best round is
the closer estimate of an idle one).  Ratio = gpucore GFLOP/s / numpy GFLOP/s.
"""

from __future__ import annotations

import os
import sys

_BAD_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def _threads_arg(argv):
    """The value of --threads, read before numpy loads (OpenBLAS reads its thread count then)."""
    for i, arg in enumerate(argv):
        if arg == "--threads" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--threads="):
            return arg.split("=", 1)[1]
    return None


_THREADS = _threads_arg(sys.argv[1:])
_set_threads = _THREADS is not None and os.environ.get("OPENBLAS_NUM_THREADS") != _THREADS
if any(k in os.environ for k in _BAD_ENV) or _set_threads:
    if "numpy" in sys.modules:  # pragma: no cover - only when imported as a module
        sys.exit("bench_kernels: numpy was imported before OPENBLAS_* could be set")
    env = {k: v for k, v in os.environ.items() if k not in _BAD_ENV}
    if _set_threads:
        env["OPENBLAS_NUM_THREADS"] = _THREADS
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from gpucore import _cpu  # noqa: E402

SQUARES = [64, 128, 256, 512, 1024, 2048]
LAYER_NORM = [(64, 64), (512, 1024)]  # rows x n: a [4, 16, 64] activation, a [512, 1024] one
ATTENTION = [(4, 4, 16, 16), (4, 4, 128, 64), (1, 8, 1024, 64)]  # B, H, S, D (self-attention)
GEMV = [(2048, 2048), (512, 512)]  # n x k weights, m = 1
MLP = [(64, 784, 512), (256, 784, 512), (64, 512, 10)]  # M x K x N
# (M, K, N, ta, tb): train.py's GPT (batch 32 x context 64 = 2048 tokens, d 128, MLP 512, QKV
# 384, vocabulary 96): forward x @ W.T, dX = dY @ W, dW = dY.T @ X (the head's last); then
# infer.py's rows: the MLP at W512 / W2048 batch 32, transformer blocks B4 T64 d128 and B4 T128
# d256
MODEL = [
    (2048, 128, 384, 0, 1),
    (2048, 128, 128, 0, 1),
    (2048, 128, 512, 0, 1),
    (2048, 512, 128, 0, 1),
    (2048, 128, 96, 0, 1),
    (2048, 384, 128, 0, 0),
    (2048, 128, 128, 0, 0),
    (2048, 512, 128, 0, 0),
    (2048, 128, 512, 0, 0),
    (384, 2048, 128, 1, 0),
    (128, 2048, 128, 1, 0),
    (512, 2048, 128, 1, 0),
    (128, 2048, 512, 1, 0),
    (96, 2048, 128, 1, 0),
    (32, 512, 512, 0, 1),
    (32, 2048, 2048, 0, 1),
    (256, 128, 384, 0, 1),
    (256, 128, 512, 0, 1),
    (256, 512, 128, 0, 1),
    (512, 256, 768, 0, 1),
    (512, 256, 1024, 0, 1),
    (512, 1024, 256, 0, 1),
]


def _time(fn, min_time):
    """Seconds per call: the loop count grows until one batch of calls takes >= min_time."""
    fn()
    n = 1
    while True:
        t = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t
        if dt >= min_time:
            return dt / n
        n = max(2 * n, int(n * min_time / max(dt, 1e-9) * 1.2))


class Case:
    """One GEMM shape: gpucore and numpy callables over the same operands."""

    def __init__(self, m, k, n, dtype, ta, tb):
        r = np.random.default_rng(0)
        self.m, self.k, self.n, self.ta, self.tb = m, k, n, ta, tb
        self.a = r.standard_normal((k, m) if ta else (m, k)).astype(dtype)
        self.b = r.standard_normal((n, k) if tb else (k, n)).astype(dtype)
        self.c = np.empty((m, n), dtype)
        self.ref = np.empty((m, n), dtype)
        self.oa = self.a.T if ta else self.a
        self.ob = self.b.T if tb else self.b
        self.times = {"gpucore": [], "numpy": []}

    def ours(self):
        _cpu.gemm(
            self.a, self.b, self.c, 1, self.m, self.n, self.k, self.ta, self.tb, 1.0, 0.0, 0, 0, 0
        )

    def theirs(self):
        np.matmul(self.oa, self.ob, out=self.ref)

    def error(self):
        self.ours()
        self.theirs()
        d = np.abs(self.c.astype(np.float64) - self.ref)
        return float(d.max() / max(np.abs(self.ref).max(), 1e-30))

    def gflops(self, lib, stat):
        t = min(self.times[lib]) if stat == "best" else statistics.median(self.times[lib])
        return 2.0 * self.m * self.n * self.k / t / 1e9


class InferCase:
    """One inference-kernel call: gpucore and a reference callable (PyTorch, else numpy) over the
    same float32 operands; ``ours`` writes self.out, ``theirs`` returns its result."""

    def __init__(self, kind, shape, torch):
        r = np.random.default_rng(0)
        f32 = np.float32
        self.kind, self.shape = kind, shape
        self.times = {"gpucore": [], "numpy": []}
        if kind == "layer_norm":
            rows, n = shape
            self.label = f"{rows // 16}x16x{n}" if rows == 64 else f"{rows}x{n}"
            x, w, b = (r.standard_normal(s).astype(f32) for s in ((rows, n), n, n))
            self.out = np.empty_like(x)
            self.ours = lambda: _cpu.layer_norm(x, w, b, self.out, rows, n, 1e-5)
            if torch is not None:
                tx, tw, tb = (torch.from_numpy(a) for a in (x, w, b))
                F = torch.nn.functional
                self.theirs = lambda: F.layer_norm(tx, (n,), tw, tb, 1e-5).numpy()
                self.ref = "torch"
            else:

                def np_ln():
                    m = x.mean(1, keepdims=True)
                    d = x - m
                    return d / np.sqrt((d * d).mean(1, keepdims=True) + 1e-5) * w + b

                self.theirs, self.ref = np_ln, "numpy"
        elif kind == "attention":
            bb, h, s, d = shape
            self.label = f"B{bb} H{h} S{s} D{d}"
            q, k, v = (r.standard_normal((bb, h, s, d)).astype(f32) for _ in range(3))
            self.out = np.empty_like(q)
            scale = 1.0 / np.sqrt(d)
            self.ours = lambda: _cpu.attention(q, k, v, None, self.out, scale, 0, 0)
            if torch is not None:
                tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
                sdpa = torch.nn.functional.scaled_dot_product_attention
                self.theirs = lambda: sdpa(tq, tk, tv).numpy()
                self.ref = "torch SDPA"
            else:

                def np_att():
                    sc = np.matmul(q, np.swapaxes(k, -1, -2)) * f32(scale)
                    e = np.exp(sc - sc.max(-1, keepdims=True))
                    return np.matmul(e / e.sum(-1, keepdims=True), v)

                self.theirs, self.ref = np_att, "numpy"
        else:  # gemv
            n, k = shape
            self.label = f"{n}x{k}, m=1"
            x = r.standard_normal((1, k)).astype(f32)
            w = r.standard_normal((n, k)).astype(f32)
            self.out = np.empty((1, n), f32)
            ref = np.empty((1, n), f32)
            self.ours = lambda: _cpu.gemm(x, w, self.out, 1, 1, n, k, 0, 1, 1.0, 0.0, 0, 0, 0)
            self.theirs = lambda: np.matmul(x, w.T, out=ref)
            self.ref = "numpy x @ W.T"

    def error(self):
        self.ours()
        want = np.asarray(self.theirs(), np.float64)
        d = np.abs(self.out.astype(np.float64) - want)
        return float(d.max() / max(np.abs(want).max(), 1e-30))

    def us(self, lib, stat):
        t = min(self.times[lib]) if stat == "best" else statistics.median(self.times[lib])
        return t * 1e6


def infer_table(rounds, min_time):
    """Times the inference kernels in alternating blocks and prints their table."""
    try:
        import torch
    except ImportError:
        torch = None
    cases = [InferCase("layer_norm", s, torch) for s in LAYER_NORM]
    cases += [InferCase("attention", s, torch) for s in ATTENTION]
    cases += [InferCase("gemv", s, torch) for s in GEMV]
    errors = [c.error() for c in cases]
    time.sleep(0.3)
    for _ in range(rounds):
        for lib in ("gpucore", "numpy"):
            for c in cases:
                c.times[lib].append(_time(c.ours if lib == "gpucore" else c.theirs, min_time))
            time.sleep(0.3)
    tv = f"torch {torch.__version__} ({torch.get_num_threads()} threads)" if torch else "no torch"
    print()
    print(f"Inference kernels, float32; references: {tv}, numpy {np.__version__}")
    print()
    print(
        "| kernel | shape | gpucore us median / best | reference | reference us median / best "
        "| ratio median / best | max rel err |"
    )
    print("|---|---|---:|---|---:|---:|---:|")
    for c, err in zip(cases, errors):
        g = [c.us("gpucore", st) for st in ("median", "best")]
        t = [c.us("numpy", st) for st in ("median", "best")]
        print(
            f"| {c.kind} | {c.label} | {g[0]:.1f} / {g[1]:.1f} | {c.ref} | {t[0]:.1f} / {t[1]:.1f} "
            f"| {t[0] / g[0]:.2f} / {t[1] / g[1]:.2f} | {err:.1e} |"
        )


def run_block(cases, lib, min_time):
    """Times every case with one library, then pauses so its spinning threads go to sleep."""
    for c in cases:
        c.times[lib].append(_time(c.ours if lib == "gpucore" else c.theirs, min_time))
    time.sleep(0.3)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer, shorter rounds")
    p.add_argument("--trans", action="store_true", help="also time the transposed variants")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--sizes", type=int, nargs="*", help="square sizes (default 64..2048)")
    p.add_argument("--no-mlp", action="store_true", help="skip the MLP shapes")
    p.add_argument("--rounds", type=int, help="alternating rounds (default 7, 3 with --quick)")
    p.add_argument("--no-infer", action="store_true", help="skip the inference kernels")
    p.add_argument("--only-infer", action="store_true", help="only the inference kernels")
    p.add_argument("--model", action="store_true", help="only the GPT / inference model shapes")
    p.add_argument("--threads", type=int, help="threads for gpucore and numpy (OpenBLAS)")
    args = p.parse_args(argv)
    if args.threads:
        _cpu.set_num_threads(args.threads)
    dtype = np.dtype(args.dtype).type
    rounds, min_time = (3, 0.02) if args.quick else (7, 0.05)
    rounds = args.rounds or rounds

    info = _cpu.info()
    g = info["gemm"][args.dtype]
    print(
        f"gpucore isa={info['isa']} threads={info['threads']} kernel={g['kernel']} "
        f"MC={g['mc']} KC={g['kc']} NC={g['nc']}; caches L1d={info['caches']['l1d'] // 1024}K "
        f"L2={info['caches']['l2'] // 1024}K L3={info['caches']['l3'] // 1024}K; "
        f"numpy {np.__version__}; {args.dtype}; {rounds} rounds"
    )
    if args.only_infer:
        infer_table(rounds, min_time)
        return
    shapes = [(s, s, s) for s in (args.sizes or SQUARES)]
    if not args.no_mlp:
        shapes += MLP
    trans = [(0, 0)] + ([(0, 1), (1, 0), (1, 1)] if args.trans else [])
    cases = [Case(m, k, n, dtype, ta, tb) for m, k, n in shapes for ta, tb in trans]
    if args.model:
        cases = [Case(m, k, n, dtype, ta, tb) for m, k, n, ta, tb in MODEL]
    errors = [c.error() for c in cases]
    time.sleep(0.3)
    for _ in range(rounds):  # alternating blocks: gpucore, pause, numpy, pause
        run_block(cases, "gpucore", min_time)
        run_block(cases, "numpy", min_time)
    print()
    print(
        "| M x K x N | ta tb | gpucore GFLOP/s median / best | numpy GFLOP/s median / best "
        "| ratio median / best | max rel err |"
    )
    print("|---|---|---:|---:|---:|---:|")
    for c, err in zip(cases, errors):
        g = [c.gflops("gpucore", st) for st in ("median", "best")]
        t = [c.gflops("numpy", st) for st in ("median", "best")]
        print(
            f"| {c.m}x{c.k}x{c.n} | {c.ta} {c.tb} | {g[0]:.0f} / {g[1]:.0f} "
            f"| {t[0]:.0f} / {t[1]:.0f} | {g[0] / t[0]:.2f} / {g[1] / t[1]:.2f} | {err:.1e} |"
        )
    if not args.no_infer:
        infer_table(rounds, min_time)


if __name__ == "__main__":
    main()
