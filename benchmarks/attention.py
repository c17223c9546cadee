"""scaled_dot_product_attention forward + backward: gpucore (the fused C kernels) vs PyTorch,
side by side in one run.

Run from the repository root (after ``python setup.py build_ext --inplace``)::

    python benchmarks/attention.py              # the issue's shape, causal and not, 5 rounds
    python benchmarks/attention.py --quick      # fewer rounds: a smoke run
    python benchmarks/attention.py --threads 1  # gpucore's pool and torch on one thread

Cases: float32 q, k, v [batch 8, heads 8, seq 512, head dim 64] (issue 14's target shape),
is_causal False and True, plus one longer sequence (B 1, H 8, S 2048) where the S x S matrix
the composition would build is 128 MiB. A step is ``out = sdpa(q, k, v); out.backward(g)``
with the gradients cleared first; the forward alone runs under no_grad. PyTorch runs its own
CPU SDPA (``torch.nn.functional.scaled_dot_product_attention``: its flash kernel on the CPU).

Timing: each library runs blocks of calls in turn (rounds), with a pause between libraries so
one library's spinning worker threads do not slow the next; every call is timed on its own and
the table shows the median. ``check`` compares the outputs and the three gradients of one step
(same inputs) to 1e-4 relative. gpucore's threads: its pool (GPUCORE_NUM_THREADS, default the
CPUs); torch: ``torch.set_num_threads`` (``--threads``, default 2).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench_env, also under -m
from bench_env import CpuShare, clean_openblas_env, load_note  # noqa: E402

clean_openblas_env("attention.py")
_ARGS = sys.argv[1:]
if "--threads" in _ARGS:  # gpucore's pool reads it when the extension loads
    os.environ["GPUCORE_NUM_THREADS"] = _ARGS[_ARGS.index("--threads") + 1]
os.environ["GPUCORE_DEVICE"] = "cpu"

import argparse  # noqa: E402
import gc  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isdir(os.path.join(_ROOT, "gpucore")) and _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)  # benchmark the checkout this script lives in

from train import cpu_model, fmt_ms, table  # noqa: E402

import gpucore  # noqa: E402
import gpucore.nn.functional as GF  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

# (label, batch, heads, seq, head dim, causal)
CASES = [
    ("B8 H8 S512 D64", 8, 8, 512, 64, False),
    ("B8 H8 S512 D64 causal", 8, 8, 512, 64, True),
    ("B1 H8 S2048 D64 causal", 1, 8, 2048, 64, True),
]


def _inputs(b, h, s, d, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((b, h, s, d), dtype=np.float32) for _ in range(4)]


def gpucore_fns(arrays, causal):
    q, k, v = (gpucore.tensor(a, requires_grad=True) for a in arrays[:3])
    g = gpucore.tensor(arrays[3])

    def step():
        for t in (q, k, v):
            t.grad = None
        out = GF.scaled_dot_product_attention(q, k, v, is_causal=causal)
        out.backward(g)
        return out, q.grad, k.grad, v.grad

    def forward():
        with gpucore.no_grad():
            return GF.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return step, forward


def torch_fns(arrays, causal):
    q, k, v = (torch.tensor(a, requires_grad=True) for a in arrays[:3])
    g = torch.tensor(arrays[3])
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def step():
        for t in (q, k, v):
            t.grad = None
        out = sdpa(q, k, v, is_causal=causal)
        out.backward(g)
        return out, q.grad, k.grad, v.grad

    def forward():
        with torch.no_grad():
            return sdpa(q, k, v, is_causal=causal)

    return step, forward


def check(g_step, t_step) -> str:
    worst = 0.0
    for a, b in zip(g_step(), t_step()):
        a, b = a.detach().numpy(), b.detach().numpy()
        worst = max(worst, float(np.abs(a - b).max() / max(1e-6, np.abs(b).max())))
    return "ok" if worst <= 1e-4 else f"MISMATCH {worst:.2g}"


def settle() -> None:
    gc.collect()
    time.sleep(0.3)


def timed(fn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def run_case(case, args) -> list[str]:
    label, b, h, s, d, causal = case
    arrays = _inputs(b, h, s, d)
    fns = {"gpucore": gpucore_fns(arrays, causal)}
    chk = "—"
    if torch is not None:
        fns["torch"] = torch_fns(arrays, causal)
        chk = check(fns["gpucore"][0], fns["torch"][0])
    times = {(lib, part): [] for lib in fns for part in (0, 1)}
    for pair in fns.values():  # warm-up
        for f in pair:
            f()
    for r in range(args.rounds):
        for lib, pair in fns.items():
            settle()
            print(f"  ... {label}: round {r + 1}/{args.rounds} {lib}", file=sys.stderr, flush=True)
            for part, f in enumerate(pair):
                times[(lib, part)] += timed(f, args.calls)
    med = {key: statistics.median(v) for key, v in times.items()}

    def ratio(part):
        if torch is None:
            return "—"
        return f"{med[('gpucore', part)] / med[('torch', part)]:.2f}"

    return [
        label,
        fmt_ms(med[("gpucore", 0)]),
        fmt_ms(med.get(("torch", 0))),
        ratio(0),
        fmt_ms(med[("gpucore", 1)]),
        fmt_ms(med.get(("torch", 1))),
        ratio(1),
        chk,
    ]


def main(argv=None) -> int:
    global torch
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run)")
    ap.add_argument("--no-torch", action="store_true", help="leave out the PyTorch columns")
    ap.add_argument(
        "--threads",
        type=int,
        help="gpucore's pool and torch's threads (default: gpucore all CPUs, torch 2)",
    )
    ap.add_argument("--rounds", type=int, help="blocks per library (default 5, quick 2)")
    ap.add_argument("--calls", type=int, help="timed calls per block (default 3, quick 2)")
    args = ap.parse_args(argv)
    args.rounds = args.rounds or (2 if args.quick else 5)
    args.calls = args.calls or (2 if args.quick else 3)
    if args.no_torch:
        torch = None
    if torch is not None:
        torch.set_num_threads(args.threads or 2)
    print("## scaled_dot_product_attention forward + backward, gpucore vs PyTorch, CPU\n")
    print(
        f"- machine: {cpu_model()}, {os.cpu_count()} logical CPUs; gpucore ISA "
        f"{gpucore._cpu.info()['isa']}, {gpucore._cpu.info()['threads']} thread(s)"
    )
    if torch is not None:
        print(f"- torch {torch.__version__}, {torch.get_num_threads()} thread(s)")
    print(
        f"- float32; median of {args.rounds} rounds x {args.calls} calls per library, "
        "libraries alternating round by round"
    )
    share = CpuShare()
    rows = [run_case(c, args) for c in CASES]
    print("\n### ms per call (median; lower is better)\n")
    print(
        table(
            [
                "case",
                "gpucore fwd+bwd",
                "torch fwd+bwd",
                "ratio",
                "gpucore fwd",
                "torch fwd",
                "ratio",
                "check",
            ],
            rows,
        )
    )
    print(
        "\nratio: gpucore time / torch time (below 1: gpucore faster). check: outputs and "
        "gradients of one step agree with torch's to 1e-4 relative."
    )
    print(load_note(share.others(), "during the run"))
    return 1 if any(r[-1].startswith("MISMATCH") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
