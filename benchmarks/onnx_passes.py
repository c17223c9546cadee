"""What runtime passes are worth on onnx_models.py's models: each model loaded twice by
``gpucore.onnx.load``, with the default pipeline and with it less the passes named by
``--without`` (default: ``batch_gemm_rows`` and ``fuse_gelu_erf``, the 3-D Linear fusion), beside
ONNX Runtime on the same file (``python benchmarks/onnx_passes.py [--only bert gpt] [--without
PASS ...] [--rounds N]``).

Per model: the compiled graph's node counts, and ms per call of the three, calls alternating in
rounds of >= 0.4 s each, medians of the wall time and of this thread's CPU time (one thread each:
the CPU time is what other processes on a shared machine disturb least). Needs torch, onnx and
onnxruntime.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_env import CpuShare, clean_openblas_env, load_note  # noqa: E402

clean_openblas_env("onnx_passes.py")

import argparse  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402


def _rounds(calls: dict, rounds: int) -> dict:
    """{name: (median wall ms, median thread CPU ms)} of ``calls`` alternating in rounds."""
    wall: dict = {k: [] for k in calls}
    cpu: dict = {k: [] for k in calls}
    for _ in range(rounds):
        for k, f in calls.items():
            n, w0, c0 = 0, time.perf_counter(), time.thread_time()
            while True:
                f()
                n += 1
                if time.perf_counter() - w0 >= 0.4:
                    break
            wall[k].append((time.perf_counter() - w0) / n * 1e3)
            cpu[k].append((time.thread_time() - c0) / n * 1e3)
    return {k: (statistics.median(wall[k]), statistics.median(cpu[k])) for k in calls}


def table(only, without, rounds: int) -> None:
    """Print the markdown table (module docstring)."""
    try:
        import onnxruntime as ort  # noqa: PLC0415
        import torch  # noqa: PLC0415
    except ImportError as e:
        print(f"- needs torch and onnxruntime ({e}): no table")
        return
    import onnx_models  # noqa: PLC0415

    import gpucore  # noqa: PLC0415
    import gpucore.onnx as gx  # noqa: PLC0415
    import gpucore.runtime.model as runtime_model  # noqa: PLC0415
    from gpucore import _cpu  # noqa: PLC0415
    from gpucore.runtime import passes  # noqa: PLC0415

    _cpu.set_num_threads(1)
    torch.set_num_threads(1)
    unknown = [p for p in without if not callable(getattr(passes, p, None))]
    if unknown:
        sys.exit(f"onnx_passes.py: no pass named {unknown} in gpucore.runtime.passes")
    dropped = {getattr(passes, p) for p in without}
    fewer = tuple(p for p in passes.PIPELINE if p not in dropped)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    print(f"- without: {', '.join(without)}; one thread each; ms per call (wall | thread CPU)")
    print()
    print("| model | nodes | nodes without | gc | gc without | ORT | gc CPU | gc without CPU "
          "| ORT CPU | CPU gc / without | max abs diff to ORT |")  # fmt: skip
    print("|---" * 11 + "|")
    for name, (model, x) in onnx_models._models(torch).items():
        if only and not any(o.lower() in name.lower() for o in only):
            continue
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.onnx")
            onnx_models._export(torch, model, x, path)
            full = gx.load(path, device="cpu")
            run = runtime_model.run_passes
            runtime_model.run_passes = lambda g, p=fewer, run=run: run(g, fewer)
            try:
                less = gx.load(path, device="cpu")
            finally:
                runtime_model.run_passes = run
            sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        xn = x.numpy()
        xt = gpucore.from_numpy(xn)
        ref = sess.run(None, {"x": xn})[0]
        diff = max(float(np.abs(m(xt).numpy() - ref).max()) for m in (full, less))
        nodes = [len(m.executors()[0].plan.graph.nodes) for m in (full, less)]
        t = _rounds({"gc": lambda: full(xt), "less": lambda: less(xt),  # noqa: B023
                     "ort": lambda: sess.run(None, {"x": xn})}, rounds)  # fmt: skip  # noqa: B023
        row = f"| {name} | {nodes[0]} | {nodes[1]} | "
        row += " | ".join(f"{t[k][0]:.2f}" for k in ("gc", "less", "ort")) + " | "
        row += " | ".join(f"{t[k][1]:.2f}" for k in ("gc", "less", "ort"))
        row += f" | {t['gc'][1] / t['less'][1]:.3f} | {diff:.1e} |"
        print(row, flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", nargs="+", metavar="NAME", default=["bert", "gpt"],
                   help="the models whose names contain one of these")  # fmt: skip
    p.add_argument("--without", nargs="+", metavar="PASS",
                   default=["batch_gemm_rows", "fuse_gelu_erf"])  # fmt: skip
    p.add_argument("--rounds", type=int, default=11)
    args = p.parse_args(argv)
    share = CpuShare()
    table(args.only, args.without, args.rounds)
    print()
    print(load_note(share.others(), "during the run"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
