"""Where train.py's MLP steps spend their time, phase by phase, gpucore vs PyTorch (issue 19).

Run from the repository root::

    python benchmarks/train_phases.py                    # mlp64 and mlp256, 2 threads
    GPUCORE_NUM_THREADS=1 python benchmarks/train_phases.py --threads 1   # one thread each
    python benchmarks/train_phases.py --only mlp64 --rounds 6 --steps 40

A step is train.py's (zero_grad, forward + cross-entropy, backward, Adam step on one fixed batch),
timed phase by phase: wall time and the calling thread's CPU time (``time.thread_time``: what
this thread ran, whatever other processes on a shared machine did; work on the thread pools is
not counted there). PyTorch runs its default Adam and ``fused=True``. Libraries alternate in
blocks of steps (rounds); each cell is the median over all timed steps, and the last columns
are gpucore's wall median over each PyTorch variant's (below 1: gpucore is faster).

The second table splits a gpucore step by where this thread's CPU time goes: the C entry points
of the GEMM (``fast_linear``, ``fast_matmul``, ``gemm``, ``gemm_ex``) and of Adam
(``adam_step_multi``), timed by wrapping them (about 0.3 us per call added), and the rest:
Python, autograd, the small ops (relu, cross-entropy, the bias sums) and allocation; each part
the median over steps. CPU time, not wall time, so that other processes' load stays out of it:
with ``GPUCORE_NUM_THREADS=1`` it is the whole step; with more threads the pool workers' share
of the GEMM and Adam is not counted (the main thread's waits are not either). The GEMMs' FLOPs
at their time give the rate.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench_env, also under -m
from bench_env import CpuShare, clean_openblas_env, load_note  # noqa: E402

clean_openblas_env("train_phases.py")

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isdir(os.path.join(_ROOT, "gpucore")) and _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)  # benchmark the checkout this script lives in
os.environ["GPUCORE_DEVICE"] = "cpu"

import train  # noqa: E402  (make_case, the step builders, table)

import gpucore  # noqa: E402
import gpucore.nn.functional as GF  # noqa: E402
import gpucore.ops.linalg as _linalg  # noqa: E402
from gpucore import _cpu  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

CASES = {"mlp64": 64, "mlp256": 256}
PHASES = ("zero_grad", "forward + loss", "backward", "optimizer.step", "step")
LAYERS = ((784, 512), (512, 256), (256, 10))


def gflop_per_step(batch: int) -> float:
    """The MLP step's GEMM work: each layer's forward, its weight gradient and (but for the first
    layer, whose input needs none) its input gradient."""
    fwd = sum(2 * batch * i * o for i, o in LAYERS)
    grad_w = fwd
    grad_x = sum(2 * batch * i * o for i, o in LAYERS[1:])
    return (fwd + grad_w + grad_x) / 1e9


def phased(zero, forward, backward, step):
    """A step function returning per-phase (wall, cpu) seconds."""
    wall, cpu = time.perf_counter, time.thread_time

    def run():
        w0, c0 = wall(), cpu()
        zero()
        w1, c1 = wall(), cpu()
        loss = forward()
        w2, c2 = wall(), cpu()
        backward(loss)
        w3, c3 = wall(), cpu()
        step()
        w4, c4 = wall(), cpu()
        walls = (w1 - w0, w2 - w1, w3 - w2, w4 - w3, w4 - w0)
        return walls, (c1 - c0, c2 - c1, c3 - c2, c4 - c3, c4 - c0)

    return run


def gpucore_phases(batch: int):
    model, init, x, y = train.make_case("mlp", batch)
    opt = gpucore.optim.Adam(model.parameters(), lr=1e-3)
    xt, yt = gpucore.from_numpy(x), gpucore.from_numpy(y)
    run = phased(
        opt.zero_grad,
        lambda: GF.cross_entropy(model(xt), yt),
        lambda loss: loss.backward(),
        opt.step,
    )
    return run, init, x, y


def torch_phases(init, x, y, fused: bool):
    model = train.torch_model("mlp", init)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, fused=fused or None)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    f = torch.nn.functional.cross_entropy
    return phased(opt.zero_grad, lambda: f(model(xt), yt), lambda loss: loss.backward(), opt.step)


class CTimer:
    """Wraps the GEMM and Adam entry points of gpucore._cpu (and the modules' bound copies) to
    sum the calling thread's CPU time spent in them; ``restore()`` puts the originals back."""

    GEMM = ("fast_linear", "fast_matmul", "gemm", "gemm_ex")
    ADAM = ("adam_step_multi",)

    def __init__(self):
        self.acc = {"gemm": 0.0, "adam": 0.0}
        self.saved = []
        for names, key in ((self.GEMM, "gemm"), (self.ADAM, "adam")):
            for name in names:
                if hasattr(_cpu, name):  # (an older build may lack one)
                    self._set(_cpu, name, self._wrap(getattr(_cpu, name), key))
        # modules that bound an entry point at import (the package's ``linear`` is the function)
        if hasattr(_cpu, "fast_linear"):
            module = sys.modules["gpucore.nn.functional.linear"]
            self._set(module, "_fast_linear", _cpu.fast_linear)
        self._set(_linalg, "_fast_matmul", _cpu.fast_matmul)

    def _wrap(self, fn, key):
        acc, clock = self.acc, time.thread_time

        def timed(*args):
            t = clock()
            try:
                return fn(*args)
            finally:
                acc[key] += clock() - t

        return timed

    def _set(self, obj, name, value):
        if hasattr(obj, name):
            self.saved.append((obj, name, getattr(obj, name)))
            setattr(obj, name, value)

    def restore(self):
        for obj, name, value in reversed(self.saved):
            setattr(obj, name, value)


def run_case(name: str, args) -> tuple[list, list, list]:
    """The phase table's rows (each library's wall / CPU medians, then gpucore's wall over each
    PyTorch variant's), gpucore's step split and the libraries' names."""
    batch = CASES[name]
    g_run, init, x, y = gpucore_phases(batch)
    libs = {"gpucore": g_run}
    if torch is not None:
        libs["torch"] = torch_phases(init, x, y, fused=False)
        libs["torch fused"] = torch_phases(init, x, y, fused=True)
    for lib, run in libs.items():
        train.progress(f"{name}: warm-up {lib}")
        for _ in range(args.warmup):
            run()
    walls = {lib: [[] for _ in PHASES] for lib in libs}
    cpus = {lib: [[] for _ in PHASES] for lib in libs}
    for r in range(args.rounds):
        for lib, run in libs.items():
            train.settle()
            train.progress(f"{name}: round {r + 1}/{args.rounds} {lib}")
            for _ in range(args.steps):
                w, c = run()
                for i in range(len(PHASES)):
                    walls[lib][i].append(w[i])
                    cpus[lib][i].append(c[i])
    rows = []
    for i, phase in enumerate(PHASES):
        row = [phase]
        wall = {lib: statistics.median(walls[lib][i]) for lib in libs}
        for lib in libs:
            row.append(train.fmt_ms(wall[lib]))
            row.append(train.fmt_ms(statistics.median(cpus[lib][i])))
        for lib in libs:  # the ratios side by side: below 1 gpucore is faster
            if lib != "gpucore":
                row.append(f"{wall['gpucore'] / wall[lib]:.2f}" if wall[lib] > 0 else "—")
        rows.append(row)

    # gpucore's step split: GEMM entry points, Adam, the rest
    train.settle()
    timer = CTimer()
    parts = {"gemm": [], "adam": [], "rest": [], "step": []}
    try:
        for _ in range(args.rounds * args.steps):
            g0, a0 = timer.acc["gemm"], timer.acc["adam"]
            total = g_run()[1][-1]
            g, a = timer.acc["gemm"] - g0, timer.acc["adam"] - a0
            for k, v in zip(parts, (g, a, total - g - a, total)):
                parts[k].append(v * 1e3)
    finally:
        timer.restore()
    med = {k: statistics.median(v) for k, v in parts.items()}
    step_ms, gemm_ms = med["step"], med["gemm"]
    split = [
        [label, f"{med[k]:.3f}", f"{med[k] / step_ms:.0%}"]
        for label, k in (
            ("GEMM (C entry points)", "gemm"),
            ("Adam (adam_step_multi)", "adam"),
            ("the rest: Python, autograd, small ops", "rest"),
            ("step", "step"),
        )
    ]
    rate = gflop_per_step(batch) / (gemm_ms / 1e3) if gemm_ms > 0 else 0.0
    split.append(["GEMM rate (GFLOP/s)", f"{rate:.0f}", "—"])
    return rows, split, list(libs)


def main(argv=None) -> int:
    global torch
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", action="append", choices=list(CASES), help="run only this case")
    ap.add_argument("--no-torch", action="store_true", help="leave out the PyTorch columns")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    ap.add_argument("--warmup", type=int, default=10, help="untimed steps per library")
    ap.add_argument("--rounds", type=int, default=3, help="blocks per library")
    ap.add_argument("--steps", type=int, default=30, help="timed steps per block")
    args = ap.parse_args(argv)
    if args.no_torch:
        torch = None
    if torch is not None:
        torch.set_num_threads(args.threads)
    print("## The MLP training step phase by phase, gpucore vs PyTorch, CPU\n")
    print(
        f"- gpucore threads: {_cpu.info()['threads']}; torch threads: "
        f"{torch.get_num_threads() if torch is not None else '—'}; Adam lr 1e-3, cross-entropy; "
        f"median of {args.rounds} rounds x {args.steps} steps per library"
    )
    share = CpuShare()
    for name in args.only or list(CASES):
        rows, split, libs = run_case(name, args)
        print(f"\n### {name} (batch {CASES[name]}): ms per phase, wall / this thread's CPU\n")
        headers = ["phase"] + [f"{lib} {k}" for lib in libs for k in ("wall", "cpu")]
        headers += [f"gpucore/{lib} wall" for lib in libs if lib != "gpucore"]
        print(train.table(headers, rows))
        print(f"\n{name}: where a gpucore step's CPU time goes (this thread; medians over steps)\n")
        print(train.table(["part", "ms per step", "share"], split))
        sys.stdout.flush()
    print()
    print(load_note(share.others(), "during the run"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
