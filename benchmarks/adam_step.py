"""The Adam step of train.py's MLP (784-512-256-10: 535,818 float32 parameters in 6 tensors, lr
1e-3) alone: one ``_cpu.adam_step_multi`` call per step, 1 and 2 threads, thread CPU time of the
calling thread and wall time per call, medians (issue 19).

Run from the repository root::

    python benchmarks/adam_step.py                        # this tree
    python benchmarks/adam_step.py --tree /work/main      # and another checkout, alternating

Each tree runs in its own worker process (``PYTHONPATH`` set to the tree); the parent asks the
workers in turn for a block of calls, round after round, so a noisy stretch of a shared machine
hits every tree alike. The arrays (~15 MB touched per step: param, grad, exp_avg, exp_avg_sq read,
three written) stay in the L3 cache from call to call, as in a training loop. With PyTorch
importable, its fused Adam (``torch.optim.Adam(fused=True)``, the same tensors) runs in this
tree's worker as a reference row.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench_env, also under -m
from bench_env import CpuShare, clean_openblas_env, load_note  # noqa: E402

clean_openblas_env("adam_step.py")

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZES = (784 * 512, 512, 512 * 256, 256, 256 * 10, 10)  # the MLP's weights and biases


def worker(with_torch: bool) -> None:
    """Serve blocks of calls: each stdin line ``kind threads calls`` answers one JSON line with
    the per-call thread CPU and wall seconds."""
    import numpy as np

    from gpucore import _cpu

    rng = np.random.default_rng(0)
    p = [rng.standard_normal(n).astype(np.float32) * 0.05 for n in SIZES]
    g = [rng.standard_normal(n).astype(np.float32) * 1e-2 for n in SIZES]
    m = [np.zeros(n, np.float32) for n in SIZES]
    v = [np.zeros(n, np.float32) for n in SIZES]
    step = [0]

    def gpucore_call():
        step[0] += 1
        _cpu.adam_step_multi(p, g, m, v, None, [step[0]] * 6, 1e-3, 0.9, 0.999, 1e-8, 0.0, 0, 0)

    calls = {"gpucore": gpucore_call}
    if with_torch:
        try:
            import torch
        except ImportError:
            torch = None
        if torch is not None:
            tp = [torch.nn.Parameter(torch.from_numpy(a.copy())) for a in p]
            for t, a in zip(tp, g):
                t.grad = torch.from_numpy(a.copy())
            opt = torch.optim.Adam(tp, lr=1e-3, fused=True)
            calls["torch-fused"] = opt.step
    print(json.dumps(sorted(calls)), flush=True)
    for line in sys.stdin:
        kind, nt, n = line.split()
        _cpu.set_num_threads(int(nt))
        if kind != "gpucore":
            torch.set_num_threads(int(nt))
        f = calls[kind]
        f()  # the first call after a thread-count change wakes the pool
        cpu, wall = [], []
        for _ in range(int(n)):
            w0, t0 = time.perf_counter(), time.thread_time()
            f()
            cpu.append(time.thread_time() - t0)
            wall.append(time.perf_counter() - w0)
        print(json.dumps([cpu, wall]), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", action="append", default=[], help="another checkout to compare")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=40, help="calls per block")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--with-torch", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.with_torch)
        return
    trees = [("this tree", _ROOT)] + [
        (os.path.basename(os.path.normpath(t)), os.path.abspath(t)) for t in args.tree
    ]
    procs, rows = [], []
    for i, (name, tree) in enumerate(trees):
        env = dict(os.environ, PYTHONPATH=tree, GPUCORE_DEVICE="cpu")
        cmd = [sys.executable, os.path.abspath(__file__), "--worker"]
        if i == 0:
            cmd.append("--with-torch")
        pr = subprocess.Popen(
            cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        kinds = json.loads(pr.stdout.readline())
        procs.append(pr)
        for k in kinds:
            label = name if k == "gpucore" else "PyTorch fused Adam"
            rows.append((label, pr, k))
    rows.sort(key=lambda r: r[2] != "gpucore")  # the trees first, PyTorch last
    threads = [int(t) for t in args.threads.split(",")]
    times = {(r[0], nt): ([], []) for r in rows for nt in threads}
    share = CpuShare(children=True)
    for rnd in range(args.rounds):
        print(f"round {rnd + 1}/{args.rounds}", file=sys.stderr)
        for nt in threads:
            for label, pr, kind in rows:
                pr.stdin.write(f"{kind} {nt} {args.calls}\n")
                pr.stdin.flush()
                cpu, wall = json.loads(pr.stdout.readline())
                times[label, nt][0].extend(cpu)
                times[label, nt][1].extend(wall)
    for pr in procs:
        pr.stdin.close()
        pr.wait()
    others = share.others()  # the workers' CPU time counts as this run's once they have exited
    print(f"Adam step over {sum(SIZES):,} float32 parameters in {len(SIZES)} tensors, ms per call")
    print(f"(medians of {args.rounds} rounds x {args.calls} calls, trees alternating)\n")
    print("| threads | build | thread CPU ms | wall ms | wall vs this tree |")
    print("|---|---|---|---|---|")
    for nt in threads:
        base = statistics.median(times[rows[0][0], nt][1])
        for label, _, _ in rows:
            cpu, wall = (statistics.median(t) * 1e3 for t in times[label, nt])
            print(f"| {nt} | {label} | {cpu:.3f} | {wall:.3f} | {wall / (base * 1e3):.2f} |")
    print("\n" + load_note(others, "during the run"))


if __name__ == "__main__":
    main()
