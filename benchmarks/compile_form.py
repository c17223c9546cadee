"""``gpucore.compile(model)`` (PyTorch's ``torch.compile`` form) in an evaluation loop.

Run from the repository root::

    python benchmarks/compile_form.py            # MLP and transformer-block rows
    python benchmarks/compile_form.py --quick    # fewer repeats

µs per forward call under ``no_grad`` / ``inference_mode``, float32, medians over repeats with
the modes alternating call by call: gpucore eager, the wrapper that ``gpucore.compile(model)``
returns (signature, weight-version checks, then the compiled graph), the ``CompiledModel`` that
``gpucore.compile(model, example_inputs)`` returns called directly, and PyTorch eager when
installed (torch.compile is left out: its inductor backend needs minutes of C++ builds per model
here). "wrapper - direct" is what the torch.compile form costs per call on top of the runtime;
the last column is the cost of one recompile after a weight update (what an evaluation after
each training epoch pays once).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench_env, models
from bench_env import CpuShare, clean_openblas_env, load_note  # noqa: E402

clean_openblas_env("compile_form.py")

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isdir(os.path.join(_ROOT, "gpucore")) and _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)  # benchmark the checkout this script lives in

import models  # noqa: E402

import gpucore  # noqa: E402

CONFIGS = [  # label, builder, input shape
    ("MLP W512 b1", lambda ns: models.mlp(ns, 512), (1, 512)),
    ("MLP W512 b32", lambda ns: models.mlp(ns, 512), (32, 512)),
    ("block B1 T16 d64", lambda ns: models.transformer_block(ns, 64), (1, 16, 64)),
    ("block B4 T64 d128", lambda ns: models.transformer_block(ns, 128), (4, 64, 128)),
]


def _time(fn, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    rounds, inner = (5, 20) if args.quick else (15, 50)
    try:
        import torch
    except ImportError:
        torch = None
    share = CpuShare()
    rows = []
    for label, build, shape in CONFIGS:
        gpucore.manual_seed(0)
        model = build(models.namespace(gpucore.nn)).eval()
        x = gpucore.randn(*shape)
        wrapper = gpucore.compile(model)
        direct = gpucore.compile(model, (x,), device="cpu")
        fns = {}
        with gpucore.no_grad():
            for _ in range(3):
                wrapper(x)  # the second call compiles
            np.testing.assert_allclose(wrapper(x).numpy(), model(x).numpy(), rtol=1e-4, atol=1e-5)
            fns["eager"] = lambda m=model, x=x: m(x)
            fns["wrapper"] = lambda w=wrapper, x=x: w(x)
            fns["direct"] = lambda d=direct, x=x: d(x)
            if torch is not None:
                tm = build(models.namespace(torch.nn)).eval()
                tx = torch.from_numpy(x.numpy())

                def run_torch(tm=tm, tx=tx):
                    with torch.inference_mode():
                        return tm(tx)

                fns["torch"] = run_torch
            times = {k: [] for k in fns}
            for _ in range(rounds):
                for k, fn in fns.items():
                    times[k].append(_time(fn, inner))
            # one recompile: a weight changes, the next call runs eagerly, the one after compiles
            recompile = []
            for _ in range(3):
                next(model.parameters()).add_(0.0)
                wrapper(x)
                t0 = time.perf_counter()
                wrapper(x)
                recompile.append((time.perf_counter() - t0) * 1e3)
        assert wrapper.stats()["fallbacks"] == {}
        med = {k: statistics.median(v) for k, v in times.items()}
        rows.append((label, med, statistics.median(recompile)))
    print(f"gpucore.compile(model) in an evaluation loop, {gpucore.get_num_threads()} threads\n")
    head = "| config | gc eager | gc compile(model) | CompiledModel | wrapper - direct "
    head += "| torch eager " if torch is not None else ""
    print(head + "| eager / wrapper | recompile (ms) |")
    print("|---|" + "--:|" * (6 + (torch is not None)))
    for label, med, rec in rows:
        cells = [med["eager"], med["wrapper"], med["direct"], med["wrapper"] - med["direct"]]
        if torch is not None:
            cells.append(med["torch"])
        line = " | ".join(f"{c:,.1f}" for c in cells)
        print(f"| {label} | {line} | {med['eager'] / med['wrapper']:.2f}x | {rec:.1f} |")
    print()
    print(load_note(share.others(), "during the run"))


if __name__ == "__main__":
    main()
