"""3-D convolution and pooling (compositions of the 2-D ops) vs PyTorch, side by side in one run.

Run from the repository root (after ``python setup.py build_ext --inplace``)::

    python benchmarks/conv3d.py              # 9 rounds
    python benchmarks/conv3d.py --quick      # 3 rounds: a smoke run
    python benchmarks/conv3d.py --threads 1  # gpucore's pool and torch on one thread

Cases: a float32 input [4, 8, 16, 32, 32] through conv3d (8 -> 16 channels, 3x3x3, padding 1),
conv_transpose3d (8 -> 8, 2x2x2, stride 2), max_pool3d (2) and avg_pool3d (3, stride 2,
padding 1). ``fwd``: the call under no_grad; ``fwd+bwd``: the call and ``out.backward(g)``.
The libraries alternate call by call; each call is timed on its own and the table shows the
medians. ``check``: the outputs and input gradients agree to 1e-4 relative. Threads: gpucore's
pool (GPUCORE_NUM_THREADS, default the CPUs); torch ``set_num_threads`` (``--threads``, 2).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench_env, also under -m
from bench_env import CpuShare, clean_openblas_env, load_note  # noqa: E402

clean_openblas_env("conv3d.py")
_ARGS = sys.argv[1:]
if "--threads" in _ARGS:  # gpucore's pool reads it when the extension loads
    os.environ["GPUCORE_NUM_THREADS"] = _ARGS[_ARGS.index("--threads") + 1]
os.environ["GPUCORE_DEVICE"] = "cpu"

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isdir(os.path.join(_ROOT, "gpucore")) and _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)  # benchmark the checkout this script lives in

from train import table  # noqa: E402

import gpucore  # noqa: E402
import gpucore.nn.functional as GF  # noqa: E402

try:
    import torch
    import torch.nn.functional as TF
except ImportError:
    torch = TF = None

SHAPE = (4, 8, 16, 32, 32)
# (label, fn(F, x, w, wt) -> output)
CASES = [
    ("conv3d 8->16 k3 p1", lambda F, x, w, wt: F.conv3d(x, w, padding=1)),
    ("conv_transpose3d 8->8 k2 s2", lambda F, x, w, wt: F.conv_transpose3d(x, wt, stride=2)),
    ("max_pool3d k2", lambda F, x, w, wt: F.max_pool3d(x, 2)),
    ("avg_pool3d k3 s2 p1", lambda F, x, w, wt: F.avg_pool3d(x, 3, 2, 1)),
]


def _arrays():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(SHAPE, dtype=np.float32)
    w = rng.standard_normal((16, 8, 3, 3, 3), dtype=np.float32) * 0.1
    wt = rng.standard_normal((8, 8, 2, 2, 2), dtype=np.float32) * 0.1
    return x, w, wt


def _call(lib, fn, arrays, backward: bool):
    """(seconds, output, input gradient) of one call in ``lib`` ('gpucore' or 'torch')."""
    if lib == "gpucore":
        ts = [gpucore.tensor(a, requires_grad=backward) for a in arrays]
        F, grad_off = GF, gpucore.no_grad
    else:
        ts = [torch.tensor(a, requires_grad=backward) for a in arrays]
        F, grad_off = TF, torch.no_grad
    t0 = time.perf_counter()
    if backward:
        out = fn(F, *ts)
        out.sum().backward()
    else:
        with grad_off():
            out = fn(F, *ts)
    dt = time.perf_counter() - t0
    grad = ts[0].grad.numpy() if backward else None
    return dt, out.detach().numpy(), grad


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    if torch is None:
        sys.exit("conv3d.py compares with PyTorch: install torch")
    torch.set_num_threads(args.threads)
    rounds = 3 if args.quick else 9
    arrays = _arrays()
    share = CpuShare()
    rows = []
    for label, fn in CASES:
        for backward in (False, True):
            times = {"gpucore": [], "torch": []}
            results = {}
            for r in range(rounds + 1):  # the first round warms up
                for lib in ("gpucore", "torch"):
                    dt, out, grad = _call(lib, fn, arrays, backward)
                    if r:
                        times[lib].append(dt)
                    results[lib] = (out, grad)
            ok = all(
                a is None or np.allclose(a, b, rtol=1e-4, atol=1e-4)
                for a, b in zip(results["gpucore"], results["torch"])
            )
            ours, theirs = (statistics.median(times[k]) * 1e3 for k in ("gpucore", "torch"))
            rows.append(
                [label, "fwd+bwd" if backward else "fwd", f"{ours:.1f}", f"{theirs:.1f}",
                 f"{ours / theirs:.2f}", "ok" if ok else "MISMATCH"]
            )  # fmt: skip
    print(f"input {list(SHAPE)} float32; medians of {rounds} alternating calls, ms")
    print(table(["case", "pass", "gpucore", "torch", "ratio", "check"], rows, left=2))
    print(load_note(share.others(), "during the run"))


if __name__ == "__main__":
    main()
