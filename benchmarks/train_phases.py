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
of the GEMM (``fast_linear``, ``fast_matmul``, ``gemm``, ``gemm_ex``), of Adam
(``adam_step_multi``), of the ReLU mask with the bias gradient (``fast_relu_backward_bias``) and
of cross-entropy, timed by wrapping them wherever gpucore bound them (about 0.3 us per call
added), and the rest: Python, autograd, allocation and the other small ops; each part the median
over steps. CPU time, not wall time, so that other processes' load stays out of it: with
``GPUCORE_NUM_THREADS=1`` it is the whole step; with more threads the pool workers' share of the
GEMM and Adam is not counted (the main thread's waits are not either). The GEMMs' FLOPs at their
time give the rate. (Until 2026-11-29 the split missed the forward's fused linear + ReLU calls,
bound at import by relu_fusion.py, and counted those two GEMMs in the rest.)

The third table is each GEMM call of the step: its wall time in the step against the same call
repeated right after the step (twice, the second timed: operands in cache and the thread pool
awake, as in a loop of that call alone, mlp_gemms.py), interleaved step by step so that the
machine's load weighs on both alike. A ratio above 1 is what the step's context costs the call:
operands evicted by the ops between (an output block that the host cache hands out cold: the
256 x 10 x 256 dX writes 256 KiB, ~25 us more than into warm lines), pool threads gone to sleep
during the Python in between. The gap column is the wall time since the previous GEMM call of
the step returned (the first call's: since the step began): the forward's last GEMM
and the backward's first have the cross-entropy and autograd's set-up between them, here
0.2-0.35 ms with this script's wrappers (about 0.1-0.15 ms in a plain step); pool.c's workers spin
0.2 ms after a region, then sleep.  The awake column is the share of the calls that found the
pool's first worker awake (``_cpu.pool_awake``: spinning, so a two-thread region costs about a
microsecond, where waking a sleeping worker costs the caller ~7 us and it joins tens of us later).
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
    """Wraps the C entry points a step calls (gpucore._cpu's functions and every copy a gpucore
    module bound at import, found by identity: relu_fusion's ``_fast_linear``, linalg's
    ``_fast_matmul``, ...) to sum the calling thread's CPU time per part (``PARTS``), and the wall
    time of each GEMM call by shapes (``calls``: the in-step GEMM table); ``restore()`` puts the
    originals back. A wrapper adds about 0.3 us per call."""

    PARTS = {
        "gemm": ("fast_linear", "fast_matmul", "gemm", "gemm_ex"),
        "adam": ("adam_step_multi",),
        "relu": ("fast_relu_backward_bias",),
        "xent": ("cross_entropy_forward", "cross_entropy_backward"),
    }
    # calls that return a new tensor and write nothing else: safe to repeat alone
    REPEATABLE = ("fast_linear", "fast_matmul")

    def __init__(self):
        self.acc = dict.fromkeys(self.PARTS, 0.0)
        # (entry point, shapes) -> [in-step wall s], (fn, args), [gap s], [pool awake at entry]
        self.calls: dict = {}
        self.last_end = [0.0]  # when the previous GEMM call returned (perf_counter)
        self.saved = []
        wrapped = {}
        for key, names in self.PARTS.items():
            for name in names:
                fn = getattr(_cpu, name, None)  # (an older build may lack one)
                if fn is not None:
                    wrapped[id(fn)] = (fn, self._wrap(fn, key, name))
        for mod in [m for k, m in sys.modules.items() if k.startswith("gpucore") and m]:
            for attr, value in list(vars(mod).items()):
                hit = wrapped.get(id(value))
                if hit is not None and hit[0] is value:
                    self.saved.append((mod, attr, value))
                    setattr(mod, attr, hit[1])

    def _wrap(self, fn, key, name):
        acc, clock, wall = self.acc, time.thread_time, time.perf_counter
        calls = self.calls if name in self.REPEATABLE else None
        last_end = self.last_end
        awake = _cpu.pool_awake if hasattr(_cpu, "pool_awake") else bool  # (an older build)

        def timed(*args):
            up = awake() if calls is not None else False
            t, w = clock(), wall()
            try:
                return fn(*args)
            finally:
                acc[key] += clock() - t
                if calls is not None:
                    end = wall()
                    shapes = tuple(tuple(a.shape) if hasattr(a, "shape") else a for a in args)
                    entry = calls.setdefault((name, shapes), [[], None, [], []])
                    entry[0].append(end - w)
                    entry[1] = (fn, args)
                    entry[2].append(w - last_end[0])
                    entry[3].append(up)
                    last_end[0] = end

        return timed

    def repeat_alone(self, alone: dict) -> None:
        """Each GEMM call of the last step again, on its own: twice, timing the second (its
        operands then in cache, as in a loop of that call alone); wall seconds into alone."""
        for key, (_, (fn, args), _, _) in self.calls.items():
            fn(*args)
            t = time.perf_counter()
            fn(*args)
            alone.setdefault(key, []).append(time.perf_counter() - t)

    def restore(self):
        for obj, name, value in reversed(self.saved):
            setattr(obj, name, value)


def run_case(name: str, args) -> tuple[list, list, list, list]:
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

    # gpucore's step split by C entry point (this thread's CPU time), and its GEMM calls' wall
    # time in the step against the same call repeated alone right after it (interleaved, so
    # that the machine's load weighs on both alike)
    train.settle()
    timer = CTimer()
    labels = {
        "gemm": "GEMM (C entry points)",
        "adam": "Adam (adam_step_multi)",
        "relu": "ReLU mask + bias gradient (fast_relu_backward_bias)",
        "xent": "cross-entropy forward + backward (C)",
        "rest": "the rest: Python, autograd, allocation, other small ops",
        "step": "step",
    }
    parts: dict = {k: [] for k in labels}
    alone: dict = {}
    n_steps = args.rounds * args.steps
    try:
        for _ in range(n_steps):
            before = dict(timer.acc)
            timer.last_end[0] = time.perf_counter()
            total = g_run()[1][-1]
            done = {k: timer.acc[k] - before[k] for k in timer.acc}
            done["rest"] = total - sum(done.values())
            done["step"] = total
            for k, v in done.items():
                parts[k].append(v * 1e3)
            timer.repeat_alone(alone)
    finally:
        timer.restore()
    med = {k: statistics.median(v) for k, v in parts.items()}
    step_ms, gemm_ms = med["step"], med["gemm"]
    split = [[labels[k], f"{med[k]:.3f}", f"{med[k] / step_ms:.0%}"] for k in labels]
    rate = gflop_per_step(batch) / (gemm_ms / 1e3) if gemm_ms > 0 else 0.0
    split.append(["GEMM rate (GFLOP/s, this thread's CPU time)", f"{rate:.0f}", "—"])
    return rows, split, gemm_rows(timer.calls, alone, n_steps), list(libs)


def gemm_flop(name: str, shapes: tuple) -> float:
    """FLOPs of one fast-lane GEMM call from its operand shapes: fast_linear(x [m, k], w [n, k],
    ...), fast_matmul(a [m, k], b [k, n]) or, transposed first operand, (a [k, m], b [k, n])."""
    a, b = shapes[0], shapes[1]
    if name == "fast_linear":
        return 2.0 * a[0] * a[1] * b[0]
    if len(shapes) > 2 and shapes[2]:
        return 2.0 * a[1] * a[0] * b[1]
    return 2.0 * a[0] * a[1] * b[1]


def gemm_rows(calls: dict, alone: dict, n_steps: int) -> list:
    """The in-step GEMM table: per call (entry point, operand shapes) its median wall time in the
    step and repeated alone, their ratio and the in-step rate, the gap before it and the share of
    calls that found the pool awake; then the sums per step."""
    rows, tin, tal = [], 0.0, 0.0
    for key, (times, _, gaps, awake) in calls.items():
        per_step = len(times) / n_steps
        t_in, t_al = statistics.median(times), statistics.median(alone[key])
        tin += t_in * per_step
        tal += t_al * per_step
        shapes = ", ".join(
            "x".join(map(str, s)) if isinstance(s, tuple) else str(s) for s in key[1]
        )
        gf = gemm_flop(*key) / t_in / 1e9 if t_in > 0 else 0.0
        rows.append(
            [
                key[0],
                shapes,
                f"{per_step:g}",
                f"{statistics.median(gaps) * 1e3:.3f}",
                f"{sum(awake) / len(awake):.0%}",
                f"{t_in * 1e3:.3f}",
                f"{t_al * 1e3:.3f}",
                f"{t_in / t_al:.2f}",
                f"{gf:.0f}",
            ]
        )
    rows.append(
        [
            "sum per step",
            "",
            "",
            "",
            "",
            f"{tin * 1e3:.3f}",
            f"{tal * 1e3:.3f}",
            f"{tin / tal:.2f}" if tal > 0 else "—",
            "",
        ]
    )
    return rows


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
        rows, split, gemms, libs = run_case(name, args)
        print(f"\n### {name} (batch {CASES[name]}): ms per phase, wall / this thread's CPU\n")
        headers = ["phase"] + [f"{lib} {k}" for lib in libs for k in ("wall", "cpu")]
        headers += [f"gpucore/{lib} wall" for lib in libs if lib != "gpucore"]
        print(train.table(headers, rows))
        print(f"\n{name}: where a gpucore step's CPU time goes (this thread; medians over steps)\n")
        print(train.table(["part", "ms per step", "share"], split))
        print(f"\n{name}: the step's GEMM calls, wall ms in the step vs the same call alone\n")
        heads = ["entry", "operands", "calls/step", "gap before", "awake", "in step", "alone"]
        heads.append("in/alone")
        heads.append("GFLOP/s")
        print(train.table(heads, gemms, left=2))
        sys.stdout.flush()
    print()
    print(load_note(share.others(), "during the run"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
